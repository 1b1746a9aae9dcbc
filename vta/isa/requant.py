"""``ALU.REQUANT_F32``: multiply accumulators by a float32 scale as ONNX Runtime does, exactly.

ONNX Runtime requantizes the int32 accumulators of QLinearConv, QLinearMatMul and QGemm with
MLAS ``MlasRequantizeOutput``: ``float32(acc) * scale`` in float32, rounded half to even to an
integer, plus the zero point, clamped (docs/graph.md). ``scale`` is a float32, so it is
``m / 2**s`` exactly with a 24-bit integer mantissa ``m``; the conversion of ``acc`` to
float32 and the float32 product each round to 24 significant bits, half to even. In integers
(``scale_mul``): ``rne(round24(round24(acc) * m) / 2**s)``: two 24-bit roundings of a 64-bit
product (``round24(acc)`` is at most 24 significant bits, so the product has at most 48) and
a rounding shift half to even.

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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.config import HwConfig, declare_intrinsic
from vta.errors import DefinitionError
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
#: a scale word: the mantissa's bits (a float32's 24) and the shift's above them
MANTISSA_BITS, SHIFT_BITS = 24, 8
#: the intrinsic's parameters and their defaults (module docstring)
PARAMS: dict[str, int] = {"ii": 2, "extra_depth": 3}
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


# ------------------------------------------------------------------------ the arithmetic


def rne_shift(t: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """``t / 2**s`` rounded half to even, elementwise ``s >= 0`` (int64; ``s == 0`` is
    ``t``): ``max((t + 2**(s-1) - 1) >> s, ((t + 2**(s-1)) >> (s+1)) << 1)``: the first term
    rounds ties down, the second is the even number at or below the tie-up result; they
    differ only at a tie, where the larger is the even neighbour. ``|t| < 2**62``."""
    t = np.asarray(t, dtype=np.int64)
    s = np.broadcast_to(np.asarray(s, dtype=np.int64), t.shape)
    one = np.clip(s, 1, 62)
    half = np.left_shift(np.int64(1), one - 1)
    down = (t + (half - 1)) >> one
    even_up = ((t + half) >> (one + 1)) << 1
    return np.where(s > 0, np.maximum(down, even_up), t)


def _bit_length(t: np.ndarray) -> np.ndarray:
    """The bit length of ``|t|`` (int64 array, ``|t| < 2**62``)."""
    a = np.abs(t)
    e = np.frexp(a.astype(np.float64))[1].astype(np.int64)  # float64 may round up a power
    e = np.where((e > 0) & ((a >> np.maximum(e - 1, 0)) == 0), e - 1, e)
    return np.where(a == 0, 0, e)


def round_to_float32(t: np.ndarray) -> np.ndarray:
    """Integers ``t`` (int64, ``|t| < 2**62``) rounded to 24 significant bits, half to even:
    the value ``float32(t)`` has, in integers."""
    t = np.asarray(t, dtype=np.int64)
    d = np.maximum(_bit_length(t) - MANTISSA_BITS, 0)
    return rne_shift(t, d) << d


def scale_word(ratio: float, what: str = "requantize") -> int:
    """The scale word (module docstring) of ``float32(ratio)``: ``m | s << 24`` with
    ``float32(ratio) == m / 2**s`` exactly. A ratio that is not a positive normal float32
    below ``2**24`` (``s`` would be negative) or above ``2**-231`` (``s`` over 8 bits) is a
    ``ValueError`` naming ``what``."""
    f = float(np.float32(ratio))
    if not (math.isfinite(f) and f > 0):
        raise ValueError(f"{what}: the scale must be a positive finite float32, got {ratio}")
    mant, ex = math.frexp(f)
    m, s = int(mant * (1 << MANTISSA_BITS)), MANTISSA_BITS - ex
    while s > 0 and m % 2 == 0:  # lowest terms: the same value
        m, s = m // 2, s - 1
    if not 0 <= s < 1 << SHIFT_BITS:
        raise ValueError(f"{what}: the float32 scale {f!r} is outside what a scale word holds "
                         f"(2**-{(1 << SHIFT_BITS) - 1 - MANTISSA_BITS} .. 2**24)")
    return m | s << MANTISSA_BITS


def unpack_scale(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(m, s)`` of scale words (their low 32 bits: a register holds them as int32)."""
    w = np.asarray(words, dtype=np.int64) & np.int64(0xFFFFFFFF)
    return w & np.int64((1 << MANTISSA_BITS) - 1), w >> MANTISSA_BITS


def scale_mul(acc: np.ndarray, words: np.ndarray | int) -> np.ndarray:
    """``acc * scale`` as ONNX Runtime computes ``float32(acc) * float32 scale`` rounded half
    to even to an integer (module docstring), saturated to int32; ``acc`` int32 values (as
    int64), ``words`` scale words broadcast against it."""
    acc = np.asarray(acc, dtype=np.int64)
    m, s = unpack_scale(np.broadcast_to(np.asarray(words, dtype=np.int64), acc.shape))
    p = round_to_float32(round_to_float32(acc) * m)  # |p| < 2**55
    return np.clip(rne_shift(p, np.minimum(s, 60)), _I32_MIN, _I32_MAX)


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
