"""The GPU pipeline: ordered pure passes from a scheduled ``PrimFunc`` to a kernel.

``lower_for_gpu(func)`` verifies its input (docs/ir.md), then runs, in order, each pass followed
by the verifier (``vta.compiler.ir.verify``: every pass keeps the IR well formed; each pass
documents its contract in its module):

1. ``lower_warp_buffers`` - ``warp``-scope stages become per-warp slices of shared memory.
2. ``lower_tensorize`` (vta.gpu.wmma) - ``AttrStmt(TENSORIZE, <cuda intrinsic>)``
   regions become WMMA fragment statements. First, because it still sees loops and buffers
   as the schedule wrote them (the fragment tile structure is in the loop nest).
3. ``bind_threads`` - thread-bound loops become ``threadIdx``/``blockIdx`` lets with guards;
   the launch shape is recorded. Before barriers: barrier placement needs to know which values
   are thread-dependent, and that is what the thread-index builtins say.
4. ``insert_barriers`` - ``__syncthreads`` for shared-memory staging (RAW and WAR, loop-carried
   included; double-buffered stages get one per iteration).
5. ``share_values`` - each value a statement computes more than once (a fused epilogue's
   running value) is bound to a local once: the renderer prints it once, the emulator
   evaluates it once. After the passes that match statements on whole expressions.
6. ``check_registers`` - register tiles fit in the register file.

``build(func)`` = ``render_cuda(lower_for_gpu(func))``. ``dump`` prints the IR after each pass.
"""

from __future__ import annotations

from collections.abc import Callable

from vta.compiler.ir import stmt as S
from vta.compiler.ir.verify import verify, verify_after
from vta.errors import GpuLoweringError
from vta.gpu.cuda import CudaKernel, render_cuda
from vta.gpu.passes.bind_threads import bind_threads
from vta.gpu.passes.check_registers import check_registers
from vta.gpu.passes.insert_barriers import insert_barriers
from vta.gpu.passes.share_values import share_values
from vta.gpu.passes.warp_buffers import lower_warp_buffers
from vta.gpu.target import GPU_TARGET, GpuTarget, gpu_target
from vta.gpu.wmma import lower_tensorize

__all__ = ["PIPELINE", "lower_for_gpu", "build", "GpuLoweringError"]


def _lower_tensorize(func: S.PrimFunc) -> S.PrimFunc:
    return lower_tensorize(func)


#: (name, pass, why it sits here)
PIPELINE: list[tuple[str, Callable[[S.PrimFunc], S.PrimFunc], str]] = [
    ("lower_warp_buffers", lower_warp_buffers, "warp tiles become shared memory before WMMA "
     "stores to them are matched; needs the thread loops"),
    ("lower_tensorize", _lower_tensorize, "needs the loop structure the schedule produced"),
    ("bind_threads", bind_threads, "barrier placement needs thread-dependence explicit"),
    ("insert_barriers", insert_barriers, "after binding: one SPMD program per block"),
    ("share_values", share_values, "last rewrite: the passes before match statements on whole "
     "expressions; every consumer after it meets each shared value once"),
    ("check_registers", check_registers, "register tiles are final after all rewrites"),
]


def lower_for_gpu(func: S.PrimFunc, dump: Callable[[str, S.PrimFunc], None] | None = None,
                  target: GpuTarget | str | None = None) -> S.PrimFunc:
    """Run the GPU pipeline for ``target`` (default ``DEFAULT_TARGET``; recorded as
    ``func.attr(GPU_TARGET)``, which the passes read), verifying the input and the IR after
    every pass (a pass that breaks the IR is named by the error); ``dump(name, func)`` is
    called after every pass when given."""
    verify(func)
    if target is not None or func.attr(GPU_TARGET) is None:
        func = func.with_attr(GPU_TARGET, gpu_target(target))
    for name, fn, _why in PIPELINE:
        new = fn(func)
        if new is not func:
            verify_after(name, new)
        if dump is not None:
            dump(name if new is not func else f"{name} (unchanged)", new)
        func = new
    return func


def build(func: S.PrimFunc, target: GpuTarget | str | None = None) -> CudaKernel:
    """Lower a scheduled function for the GPU ``target`` and render it as CUDA."""
    return render_cuda(lower_for_gpu(func, target=target))
