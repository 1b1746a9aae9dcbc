"""The requantizing epilogue on the accelerator: the instructions one accumulator entry costs.

``epilogue_plan`` covers each of the epilogue's stages (``ops.epilogue.Epilogue.stages``) with
the hardware's instructions by instruction selection (``accel.select``, the same the ALU
lowering uses); ``epilogue_cycles_per_entry`` prices them at their definitions' issue cycles,
for the schedule model and the machine bound.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from vta.compiler.accel.cost import reset_instruction
from vta.compiler.accel.select import candidates, cover
from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import ComputeOp, Tensor, TensorRead, placeholder
from vta.compiler.ops.epilogue import Epilogue, epilogue_compute
from vta.errors import CompileError
from vta.isa.builtins import GEMM
from vta.isa.defs import instance

if TYPE_CHECKING:
    from vta.compiler.accel.select import Selected
    from vta.config import HwConfig


def epilogue_plan(epi: Epilogue, hw: HwConfig) -> tuple[Selected, ...]:
    """The instructions ``hw`` runs for ``epi`` on each accumulator entry, in order: instruction
    selection (``vta.compiler.accel.select.cover``, the same the ALU lowering does) over the
    epilogue's stages. The cost model and the machine bound read their cycles from here."""
    return _plan(epi, (hw.gemm, hw.alu, hw.intrinsics), hw)


@lru_cache(maxsize=128)
def _plan(epi: Epilogue, key: tuple[Any, ...], hw: HwConfig) -> tuple[Selected, ...]:
    g = hw.gemm
    shape = (1, 1, g.batch, g.block_out)
    acc = placeholder(shape, g.acc_dtype, "acc")
    bias = placeholder((1, g.batch, g.block_out), g.acc_dtype, "bias") if epi.bias else None
    stages, _ = epilogue_compute(acc, bias, epi, channel_axis=1)
    cands = candidates(hw)
    out: list[Selected] = []
    prev = acc
    for st in stages:
        op = st.op
        assert isinstance(op, ComputeOp)
        axes = tuple(a.var for a in op.axes)
        me = prev[axes]

        def register(e: E.Expr, prev: Tensor = prev, lanes: tuple[E.Expr, ...] = axes[-2:]
                     ) -> bool:
            return isinstance(e, TensorRead) and e.tensor is not prev \
                and tuple(e.indices[-2:]) == lanes

        why: list[str] = []
        chosen = cover(op.body, me, register, hw, cands, why)
        if chosen is None:
            detail = f"; {why[0]}" if why else ""
            raise CompileError(f"epilogue stage {op.name} ({op.body}): no instruction of "
                               f"{hw.name} computes it (alu.ops: {', '.join(hw.alu.ops)})"
                               f"{detail}")
        out += chosen
        prev = st
    return tuple(out)


def epilogue_cycles_per_entry(epi: Epilogue, hw: HwConfig) -> int:
    """Cycles per accumulator entry outside the GEMMs: the accumulator reset
    (``cost.reset_instruction``: a GEMM reset micro-op, or an ALU one where the ALU is a
    separate pipeline) and the epilogue's instructions (``issue`` cycles of each, from their
    definitions). On VTA the compute module spends them serially with its GEMMs; a separate
    ALU spends them beside."""
    reset, fields = reset_instruction(hw, GEMM)
    assert reset.issue is not None
    total = reset.issue(instance(reset, reset=True, **dict(fields)), hw)
    for sel in epilogue_plan(epi, hw):
        d = sel.intrin.instruction
        assert d is not None and d.issue is not None
        total += d.issue(instance(d, **sel.fields), hw)
    return total
