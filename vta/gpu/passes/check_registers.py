"""Pass: check register tiles (``local`` buffers) against the per-thread register file.

Before: ``bind_threads`` ran. After: unchanged, or a ``GpuLoweringError`` naming the buffers
when the thread's local arrays alone need more than ``target_of(func).max_registers`` 32-bit
registers (they would spill to local memory, which the schedule did not ask for). Fragment
buffers count one warp_size-th each (a warp shares them).

The tiles are a lower bound: ptxas also keeps addresses, loop counters and indices in
registers. ``func.attr(REGISTERS)`` records the *calibrated* estimate, tiles plus
``REGISTER_OVERHEAD``, the mean of ptxas's count minus the tiles over the shipped kernels
(``python bench/gpu_registers.py``, nvcc 13.0, sm_80, -O3): task-mapping GEMM fp16/int8 4096
(tiles 193/194, ptxas 241/242), WMMA GEMM fp16/int8 4096 (88/76; 122/106), task-mapping conv2d
int8 C2/C9 with requantization (28/28; 79/75), WMMA conv2d int8 C2 (40; 156), SIMT GEMM int8
1024 (18; 64): ptxas minus tiles is 30 to 116, mean 52.5. ptxas minus the calibrated
estimate is -22..-1 registers on seven of the eight and +64 on the WMMA convolution (its index
arithmetic). Where nvcc is present, ptxas's own count (``vta.gpu.nvcc.kernel_resources``
with ``check_resources``) is the authority; this estimate is the fast first check.
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.errors import GpuLoweringError
from vta.gpu.dialect import REGISTERS, WMMA_FRAGMENT
from vta.gpu.target import target_of

__all__ = ["check_registers", "REGISTER_OVERHEAD"]

#: registers ptxas uses beyond a kernel's register tiles, calibrated (module docstring)
REGISTER_OVERHEAD = 52


def check_registers(func: S.PrimFunc) -> S.PrimFunc:
    """Refuse register tiles that cannot fit; record the calibrated register estimate."""
    frags = {n.body.buffer for n in E.walk(func.body)
             if isinstance(n, S.AttrStmt) and n.key is WMMA_FRAGMENT
             and isinstance(n.body, S.Allocate)}
    target = target_of(func)
    words = 0
    names = []
    for n in E.walk(func.body):
        if isinstance(n, S.Allocate) and n.buffer.scope == "local":
            b = n.buffer
            bits = DTYPES[b.dtype]
            w = -(-b.size * bits // 32)
            if b in frags:
                w = -(-w // target.warp_size)
            words += w
            names.append(f"{b.name}[{b.size}]")
    if words > target.max_registers:
        raise GpuLoweringError(f"{func.name}: register tiles {', '.join(names)} need {words} "
                               f"registers per thread (limit {target.max_registers} on {target}); "
                               f"use smaller "
                               f"split factors for the cache_write/cache_read local stages")
    return func.with_attr(REGISTERS, words + REGISTER_OVERHEAD)
