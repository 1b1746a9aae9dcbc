"""The compiler: one target-neutral tensor IR, its frontends and its two back ends.

The packages below it, in the order they may import each other:

* ``vta.compiler.ir``: the tensor IR (placeholders, computes, reductions), schedules, lowering
  to the loop-nest IR, polyhedral analysis (isl), region inference, the loop-nest interpreter
  and tensor-intrinsic matching. Target-neutral: it imports nothing above ``vta.config``.
* ``vta.compiler.ops``: what each operator computes, for every target: shapes (``Conv2dSpec``,
  ``MatmulSpec``, ...), numpy references, the requantizing epilogue and fused element-wise
  chains, and the named workloads (ResNet-18's layers, matmul, dense).
* ``vta.compiler.tc``: the Tensor Comprehensions frontend (parse, check, infer ranges, lower to
  the tensor IR; an independent interpreter). Imports ``ir`` only.
* ``vta.compiler.accel``: the accelerator back end: packed operators, schedule spaces and the
  default schedule, the pass pipeline from the loop-nest IR to an ``isa.Program``, the cost
  model, instruction selection, the layout of a logical compute (``pack``) and the mapping of
  TC definitions onto GEMM and ALU.

The GPU back end is ``vta.gpu`` (beside this package: it reads ``ir`` and ``ops``).

For writing and scheduling an operator, the common names are re-exported here
(docs/python_api.md has worked examples on both targets)::

    from vta.compiler import placeholder, compute, reduce_axis, sum_, create_schedule, lower

    A = placeholder((64, 64), "int8", "A")
    B = placeholder((64, 64), "int8", "B")
    k = reduce_axis(64, "k")
    C = compute((64, 64), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"), k),
                "C")
    s = create_schedule(C)
    ...                                  # split / tile / cache_read / tensorize / bind / ...
    func = lower(s, [A, B, C])           # the loop-nest IR both targets compile

They load on first use (PEP 562), so importing one subpackage never loads another.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vta.compiler.accel.driver import compile_workload
    from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
    from vta.compiler.accel.ops.packing import (
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
    from vta.compiler.accel.pack import Layout, Packed, pack
    from vta.compiler.accel.pipeline import compile_func
    from vta.compiler.accel.schedules.packed import schedule_packed
    from vta.compiler.ir.expr import const, max_, min_, select
    from vta.compiler.ir.interp import run_func
    from vta.compiler.ir.intrin import TensorIntrinsic, register
    from vta.compiler.ir.lower import lower
    from vta.compiler.ir.schedule import Schedule, Stage, create_schedule
    from vta.compiler.ir.tensor import Tensor, cast, compute, placeholder, reduce_axis, sum_
    from vta.errors import LayoutError, ScheduleError, TensorIRError

#: public name -> the module defining it
_HOMES = {
    **dict.fromkeys(("Tensor", "TensorIRError", "placeholder", "compute", "reduce_axis", "sum_",
                     "cast"), "vta.compiler.ir.tensor"),
    **dict.fromkeys(("const", "max_", "min_", "select"), "vta.compiler.ir.expr"),
    **dict.fromkeys(("Schedule", "ScheduleError", "Stage", "create_schedule"),
                    "vta.compiler.ir.schedule"),
    "lower": "vta.compiler.ir.lower",
    "run_func": "vta.compiler.ir.interp",
    **dict.fromkeys(("TensorIntrinsic", "register"), "vta.compiler.ir.intrin"),
    "vta_gemm_intrinsic": "vta.compiler.accel.insn_intrin",
    **dict.fromkeys(("pack", "Packed", "Layout", "LayoutError"), "vta.compiler.accel.pack"),
    "schedule_packed": "vta.compiler.accel.schedules.packed",
    "compile_func": "vta.compiler.accel.pipeline",
    "compile_workload": "vta.compiler.accel.driver",
    **dict.fromkeys(("pack_data", "pack_kernel", "pack_bias", "pack_matrix", "unpack_result",
                     "unpack_matrix", "to_entries", "fold_data", "fold_kernel"),
                    "vta.compiler.accel.ops.packing"),
}

__all__ = [
    # the tensor IR and its schedules (vta.compiler.ir)
    "Tensor", "TensorIRError", "placeholder", "compute", "reduce_axis", "sum_", "cast", "const",
    "max_", "min_", "select", "Schedule", "ScheduleError", "Stage", "create_schedule", "lower",
    "run_func", "TensorIntrinsic", "register",
    # the accelerator (vta.compiler.accel)
    "vta_gemm_intrinsic", "pack", "Packed", "Layout", "LayoutError", "schedule_packed",
    "compile_func", "compile_workload", "pack_data", "pack_kernel", "pack_bias", "pack_matrix",
    "unpack_result", "unpack_matrix", "to_entries", "fold_data", "fold_kernel",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'vta.compiler' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
