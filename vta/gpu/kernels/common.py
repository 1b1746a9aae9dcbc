"""Pieces shared by the hand-mapped kernels: the kernel frame, shared-memory layouts, copies.

``finish(name, params, body, grid, block)`` turns a body written with thread indices into a
lowered ``PrimFunc`` (launch configuration, shared bytes, verified, registers checked): the
form ``render_cuda`` and the emulator take. The hand-mapped kernels place their own barriers
(the multi-stage pipeline's are part of its design) and the emulator's race checker verifies
them, so the schedule pipeline's barrier pass does not run on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ir.verify import verify
from vta.errors import GpuLoweringError
from vta.gpu.dialect import LAUNCH, LaunchConfig, ThreadIndex
from vta.gpu.passes.bind_threads import MAX_THREADS
from vta.gpu.passes.check_registers import check_registers

__all__ = ["MAX_DYNAMIC_SHARED", "finish", "shared_bytes", "threads", "alloc"]

#: dynamic shared memory one block may use on the GPUs these kernels target (sm_90: 227 KiB;
#: sm_80 allows 163 KiB, the kernels' defaults stay below that)
MAX_DYNAMIC_SHARED = 227 * 1024


def shared_bytes(body: S.Stmt) -> int:
    """Shared memory of one block: every shared allocation, each 128-byte aligned (as the
    renderer carves dynamic shared memory)."""
    total = 0
    for n in E.walk(body):
        if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            total = -(-total // 128) * 128 + n.buffer.size * DTYPES[n.buffer.dtype] // 8
    return total


def threads() -> tuple[E.Var, E.Var, E.Var]:
    """Fresh variables for (threadIdx.x, blockIdx.x, blockIdx.y)."""
    return E.Var("tid"), E.Var("bx"), E.Var("by")


def alloc(bufs: list[S.Buffer], body: S.Stmt) -> S.Stmt:
    """``body`` inside allocations of ``bufs`` (first outermost)."""
    for b in reversed(bufs):
        body = S.Allocate(b, body)
    return body


def finish(name: str, params: tuple[S.Buffer, ...], body: Callable[..., S.Stmt],
           grid: tuple[int, int], nthreads: int,
           attrs: tuple[tuple[S.AttrKey[Any], object], ...] = ()
           ) -> S.PrimFunc:
    """The lowered kernel: ``body(tid, bx, by)`` under lets binding them to threadIdx.x,
    blockIdx.x and blockIdx.y; launch ``grid`` x ``nthreads`` threads."""
    if nthreads > MAX_THREADS or nthreads % 32:
        raise GpuLoweringError(f"{name}: {nthreads} threads per block (whole warps, at most "
                               f"{MAX_THREADS})")
    tid, bx, by = threads()
    inner = body(tid, bx, by)
    stmt = S.LetStmt(tid, ThreadIndex("threadIdx.x"),
                     S.LetStmt(bx, ThreadIndex("blockIdx.x"),
                               S.LetStmt(by, ThreadIndex("blockIdx.y"), inner)))
    smem = shared_bytes(stmt)
    if smem > MAX_DYNAMIC_SHARED:
        raise GpuLoweringError(f"{name}: {smem} B of shared memory per block exceed "
                               f"{MAX_DYNAMIC_SHARED} B; use smaller tiles or fewer stages")
    launch = LaunchConfig((grid[0], grid[1], 1), (nthreads, 1, 1), smem)
    func = S.PrimFunc(name, params, stmt, ((S.TARGET, "cuda"), *attrs, (LAUNCH, launch)))
    return check_registers(verify(func))
