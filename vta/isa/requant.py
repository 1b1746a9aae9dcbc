"""``ALU.REQUANT_F32``: multiply accumulators by a float32 scale as ONNX Runtime does, exactly.

ONNX Runtime requantizes the int32 accumulators of QLinearConv, QLinearMatMul and QGemm with
MLAS ``MlasRequantizeOutput``: ``float32(acc) * scale`` in float32, rounded half to even to an
integer, plus the zero point, clamped (docs/graph.md). ``scale`` is a float32, so it is
``m / 2**s`` exactly with a 24-bit integer mantissa ``m``; the conversion of ``acc`` to
float32 and the float32 product each round to 24 significant bits, half to even. In integers
(``scale_mul``): ``rne(round24(round24(acc) * m) / 2**s)``: two 24-bit roundings of a 64-bit
product (``round24(acc)`` is at most 24 significant bits, so the product has at most 48) and
a rounding shift half to even. The arithmetic is ``vta.float_scale``'s (re-exported here), the
one definition the graph interpreter and the GPU back end read as well.

The instruction is a function of the ALU (``op`` = ``FUNCTION``) that reads its scale from a
register operand (an accumulator entry, one 32-bit scale word per lane: per-channel scales
are a channel operand like a bias, a per-tensor scale the same word in every lane): the word
packs the scale as ``m | s << 24`` (``scale_word``; ``m`` the low 24 bits, ``s`` the high 8:
every word means a scale, so the machine never meets an undefined one). The result saturates
to int32 (a float-to-int conversion's saturation); the zero point and the clip are the ALU's
own ADD, MAX and MIN after it. Its fields are the ALU's with the immediate's 17 bits unused:
the zero point and two clip bounds (24 bits) do not fit beside the register operand's
factors in the 64-bit half word, so they stay separate instructions.

It is an optional intrinsic (``requant_f32``, ``vta.resources.REQUANT_F32``): a config lists
it under ``intrinsics:`` (``hwconfigs/pynq_requant.yaml``) with its ``ii`` (cycles per
micro-op per issue: 2, the ALU's with a register operand on a single accumulator read port)
and ``extra_depth`` (pipeline stages beyond the ALU's: the multiplier and the two
normalize-and-round stages). Its resources are ``vta.resources``' rows for it. The graph
compiler emits it for requantizes imported with ORT's arithmetic (``vta.graph.onnx_import``
``requant="ort"``); the tensor IR states it as the call ``REQUANT_F32(x, word)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.config import HwConfig, declare_intrinsic
from vta.errors import DefinitionError
from vta.float_scale import (
    MANTISSA_BITS,
    SHIFT_BITS,
    rne_shift,
    round_to_float32,
    scale_mul,
    scale_word,
    unpack_scale,
)
from vta.isa.asm import microop_syntax
from vta.isa.builtins import elementwise_patterns, loop_head
from vta.isa.defs import Field, InstructionDef, Operand, register
from vta.isa.insn import NO_DEPS, Deps, Opcode, Unit
from vta.isa.timing import alu_issues, loop_cycles
from vta.resources import REQUANT_F32

__all__ = ["REQUANT_F32", "RequantF32", "INSTRUCTION", "FUNCTION", "MANTISSA_BITS",
           "SHIFT_BITS", "scale_word", "unpack_scale", "scale_mul", "round_to_float32",
           "rne_shift", "PARAMS"]

#: the ALU function value (``op``) of REQUANT_F32 (VTA's ALU takes 0..3, MUL 4; the fused requantize
#: example takes 5)
FUNCTION = 6
#: the intrinsic's parameters and their defaults (module docstring)
PARAMS: dict[str, int] = {"ii": 2, "extra_depth": 3}


# ------------------------------------------------------------------------ the instruction


@dataclass(frozen=True, slots=True)
class RequantF32:
    """``acc[dst] = scale_mul(acc[dst], acc[src])`` over the micro-op loop (``MicroOpLoop``'s
    fields and the register operand's factors, as an ALU instruction with a register
    operand)."""

    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    deps: Deps = field(default=NO_DEPS)


def _layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    """The ALU's word with the register operand; ``op`` where the ALU has it; the
    immediate's bits (and ``use_imm``) unused."""
    w = hw.isa
    return loop_head(w), (
        Field("dst_factor_out", w.acc_idx), Field("dst_factor_in", w.acc_idx),
        Field("src_factor_out", w.acc_idx), Field("src_factor_in", w.acc_idx),
        Field("op", w.alu_opcode), Field("_unused", 64 - 4 * w.acc_idx - w.alu_opcode))


def _semantics(insn: RequantF32, dst: np.ndarray, operands: dict[str, np.ndarray],
               hw: HwConfig) -> np.ndarray:
    return scale_mul(dst, operands["src"])


def _param(hw: HwConfig, name: str) -> int:
    intrinsic = hw.intrinsic(REQUANT_F32)
    if intrinsic is None:
        raise DefinitionError(f"ALU.REQUANT_F32 on {hw.name}: the config does not list "
                              f"intrinsic {REQUANT_F32}")
    return int(intrinsic.param(name))


def _issue(insn: RequantF32, hw: HwConfig) -> int:
    """Cycles per micro-op: the vector's ALU issues at the intrinsic's ``ii``."""
    return alu_issues(hw) * _param(hw, "ii")


def _depth(hw: HwConfig) -> int:
    """The ALU's pipeline plus the intrinsic's ``extra_depth`` stages."""
    return hw.alu.pipeline_depth + _param(hw, "extra_depth")


def _check(insn: RequantF32, hw: HwConfig) -> str | None:
    return None if insn.uop_end >= insn.uop_bgn else "uop_end is before uop_bgn"


def _pattern(t: Any, x: Any, y: Any) -> Any:
    """The tensor-IR form: the call ``REQUANT_F32(acc, scale word)``."""
    return t.call(REQUANT_F32, x, y)


INSTRUCTION = register(InstructionDef(
    name="ALU.REQUANT_F32", cls=RequantF32, opcode=Opcode.ALU, function=("op", FUNCTION),
    layout=_layout, unit=Unit.COMPUTE,
    duration=lambda i, hw: loop_cycles(i, hw, _issue(i, hw), _depth(hw),
                                       flat=hw.alu.flat_loop),
    asm=microop_syntax("ALU.REQUANT_F32"), check=_check,
    operands=(Operand("dst", "acc", writes=True, factors=("dst_factor_out", "dst_factor_in")),
              Operand("src", "acc", factors=("src_factor_out", "src_factor_in"))),
    kind="update", semantics=_semantics, issue=_issue, pipeline_depth=_depth,
    pattern=elementwise_patterns(_pattern, "requant_f32",
                                 immediates=(), selector=None),
    requires=REQUANT_F32,
    doc="acc[dst] = acc[dst] * float32 scale of acc[src], rounded half to even (ORT's)"))
declare_intrinsic(REQUANT_F32, PARAMS)
