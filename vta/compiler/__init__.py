"""The compiler: tensor IR, schedules, the loop-nest IR, passes and target pipelines.

The public surface, for writing and scheduling an operator::

    from vta.compiler import placeholder, compute, reduce_axis, sum_, create_schedule, lower

    A = placeholder((64, 64), "int8", "A")
    B = placeholder((64, 64), "int8", "B")
    k = reduce_axis(64, "k")
    C = compute((64, 64), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"), k),
                "C")
    s = create_schedule(C)
    ...                                  # split / tile / cache_read / tensorize / bind / ...
    func = lower(s, [A, B, C])           # the loop-nest IR both targets compile

``compile_func`` runs the accelerator pipeline on a lowered function; ``compile_workload``
compiles a named workload (``vta.runner`` runs one end to end: what ``vta run`` calls).
"""

from vta.compiler.driver import compile_workload
from vta.compiler.interp import run_func
from vta.compiler.intrin import TensorIntrinsic, register, vta_gemm_intrinsic
from vta.compiler.lower import lower
from vta.compiler.pipeline import compile_func
from vta.compiler.schedule import Schedule, ScheduleError, Stage, create_schedule
from vta.compiler.tensor import Tensor, compute, placeholder, reduce_axis, sum_

__all__ = [
    "Schedule", "ScheduleError", "Stage", "Tensor", "TensorIntrinsic", "compile_func",
    "compile_workload", "compute", "create_schedule", "lower", "placeholder", "reduce_axis",
    "register", "run_func", "sum_", "vta_gemm_intrinsic",
]
