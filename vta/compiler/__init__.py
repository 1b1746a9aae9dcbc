"""The compiler: tensor IR, schedules, the loop-nest IR, passes and target pipelines.

The public surface, for writing and scheduling an operator (docs/python_api.md has worked
examples on both targets)::

    from vta.compiler import placeholder, compute, reduce_axis, sum_, create_schedule, lower

    A = placeholder((64, 64), "int8", "A")
    B = placeholder((64, 64), "int8", "B")
    k = reduce_axis(64, "k")
    C = compute((64, 64), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"), k),
                "C")
    s = create_schedule(C)
    ...                                  # split / tile / cache_read / tensorize / bind / ...
    func = lower(s, [A, B, C])           # the loop-nest IR both targets compile

Element-wise building blocks: ``max_``, ``min_``, ``select``, ``cast`` (or ``x.astype``),
``const``. ``pack`` gives the accelerator's blocked layout of a logical compute and
``schedule_packed`` its default schedule; ``vta.build`` compiles and runs either target.
``compile_func`` runs the accelerator pipeline on a lowered function; ``compile_workload``
compiles a named workload (``vta.runner`` runs one end to end: what ``vta run`` calls). The
runtime's packing helpers for the built-in ops' layouts are re-exported from
``vta.compiler.ops.packing``.
"""

from vta.compiler.driver import compile_workload
from vta.compiler.expr import const, max_, min_, select
from vta.compiler.interp import run_func
from vta.compiler.intrin import TensorIntrinsic, register, vta_gemm_intrinsic
from vta.compiler.layout import Layout, LayoutError, Packed, pack
from vta.compiler.lower import lower
from vta.compiler.ops.packing import (
    fold_data,
    fold_kernel,
    pack_bias,
    pack_data,
    pack_kernel,
    pack_matrix,
    to_entries,
    unpack_matrix,
    unpack_result,
)
from vta.compiler.pipeline import compile_func
from vta.compiler.schedule import Schedule, ScheduleError, Stage, create_schedule
from vta.compiler.schedules.packed import schedule_packed
from vta.compiler.tensor import (
    Tensor,
    TensorIRError,
    cast,
    compute,
    placeholder,
    reduce_axis,
    sum_,
)

__all__ = [
    # tensor IR
    "Tensor", "TensorIRError", "placeholder", "compute", "reduce_axis", "sum_", "max_", "min_",
    "select", "cast", "const",
    # schedules and lowering
    "Schedule", "ScheduleError", "Stage", "create_schedule", "lower", "TensorIntrinsic",
    "register", "vta_gemm_intrinsic", "run_func",
    # the accelerator
    "pack", "Packed", "Layout", "LayoutError", "schedule_packed", "compile_func",
    "compile_workload",
    # the runtime's packing of the built-in ops' layouts
    "pack_data", "pack_kernel", "pack_bias", "pack_matrix", "unpack_result", "unpack_matrix",
    "to_entries", "fold_data", "fold_kernel",
]
