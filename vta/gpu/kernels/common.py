"""Pieces shared by the hand-mapped kernels: the kernel frame, shared-memory layouts, copies.

``finish(name, params, body, grid, block)`` turns a body written with thread indices into a
lowered ``PrimFunc`` (shared values bound to locals, ``passes.share_values``; launch
configuration, shared bytes, verified, registers checked): the
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
from vta.gpu.passes.check_registers import check_registers
from vta.gpu.passes.share_values import share_stmt
from vta.gpu.target import GPU_TARGET, GpuTarget, gpu_target

__all__ = ["finish", "shared_bytes", "threads", "alloc"]


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
           attrs: tuple[tuple[S.AttrKey[Any], object], ...] = (),
           target: GpuTarget | str | None = None) -> S.PrimFunc:
    """The lowered kernel: ``body(tid, bx, by)`` under lets binding them to threadIdx.x,
    blockIdx.x and blockIdx.y; launch ``grid`` x ``nthreads`` threads. The block's threads and
    shared memory are checked against ``target`` (default ``DEFAULT_TARGET``), which the
    function records (``GPU_TARGET``)."""
    tgt = gpu_target(target)
    if not tgt.whole_warps(nthreads):
        raise GpuLoweringError(f"{name}: {nthreads} threads per block (whole "
                               f"{tgt.warp_size}-lane warps, at most {tgt.max_threads} on "
                               f"{tgt})")
    tid, bx, by = threads()
    inner = body(tid, bx, by)
    # each value a fused epilogue computes more than once is bound to a local first
    # (passes.share_values), so nothing below walks its paths
    stmt = S.LetStmt(tid, ThreadIndex("threadIdx.x"),
                     S.LetStmt(bx, ThreadIndex("blockIdx.x"),
                               S.LetStmt(by, ThreadIndex("blockIdx.y"), share_stmt(inner))))
    smem = shared_bytes(stmt)
    if smem > tgt.max_shared:
        raise GpuLoweringError(f"{name}: {smem} B of shared memory per block exceed the "
                               f"{tgt} limit of {tgt.max_shared} B; use smaller tiles or fewer "
                               f"stages")
    launch = LaunchConfig((grid[0], grid[1], 1), (nthreads, 1, 1), smem)
    func = S.PrimFunc(name, params, stmt, ((S.TARGET, "cuda"), (GPU_TARGET, tgt), *attrs,
                                           (LAUNCH, launch)))
    return check_registers(verify(func))
