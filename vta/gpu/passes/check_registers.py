"""Pass: check register tiles (``local`` buffers) against the per-thread register file.

Before: ``bind_threads`` ran. After: unchanged, or a ``GpuLoweringError`` naming the buffers
when the thread's local arrays need more than ``MAX_REGISTERS`` 32-bit registers (they would
spill to local memory, which the schedule did not ask for). The estimate is recorded in
``func.attr(REGISTERS)``. Fragment buffers are excluded (a warp shares them, so each thread
holds 1/32 of each fragment).
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.errors import GpuLoweringError
from vta.gpu.dialect import REGISTERS, WMMA_FRAGMENT

__all__ = ["check_registers", "MAX_REGISTERS"]

#: 32-bit registers one thread may use (the CUDA limit is 255)
MAX_REGISTERS = 255


def check_registers(func: S.PrimFunc) -> S.PrimFunc:
    """Estimate per-thread registers for local arrays; refuse tiles that cannot fit."""
    frags = {n.body.buffer for n in E.walk(func.body)
             if isinstance(n, S.AttrStmt) and n.key is WMMA_FRAGMENT
             and isinstance(n.body, S.Allocate)}
    words = 0
    names = []
    for n in E.walk(func.body):
        if isinstance(n, S.Allocate) and n.buffer.scope == "local":
            b = n.buffer
            bits = DTYPES[b.dtype]
            w = -(-b.size * bits // 32)
            if b in frags:
                w = -(-w // 32)
            words += w
            names.append(f"{b.name}[{b.size}]")
    if words > MAX_REGISTERS:
        raise GpuLoweringError(f"{func.name}: register tiles {', '.join(names)} need {words} "
                               f"registers per thread (limit {MAX_REGISTERS}); use smaller "
                               f"split factors for the cache_write/cache_read local stages")
    return func.with_attr(REGISTERS, words)
