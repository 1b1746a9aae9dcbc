"""Requantization parameters: ``mult / 2**shift`` approximating a ratio of scales.

A quantized operator rescales an integer ``x`` of scale ``s_in`` to scale ``s_out`` by
``x * mult`` and a rounding shift right by ``shift`` in 32-bit arithmetic, with ``mult /
2**shift ~ s_in / s_out`` (the TFLite form, without its 64-bit intermediate: the
accelerator's ALU is 32-bit). ``fixed_point`` picks the most precise pair whose products
cannot overflow int32 for any input of magnitude up to ``bound`` and whose multiplier fits a
signed immediate of ``MULT_BITS`` bits (the ALU's ``imm_bits`` on every shipped config).

Two ways a graph requantizes (``SCALE_MODES``):

* ``"shift"``: every ratio of scales is a power of two, so every multiplier is a power of two
  (1 for a requantize: a rounding shift alone; ``2**j`` for one branch of an add: a left shift)
  and the requantization is ADD and SHR (the rounding shift) and MIN/MAX (the clip): what VTA's
  ALU has. TVM's VTA flow quantizes so (``qconfig(round_for_shift=True)``: power-of-two scales,
  realized as a rounding add and a right shift). ``shift_scale`` picks such an output scale.
* ``"fixed"``: any ratio, a fixed-point multiplier (``fixed_point``); a multiplier that is not a
  power of two needs ALU MUL, which VTA's hardware does not have (``needs_mul``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from vta.errors import GraphError
from vta.graph.ir import Add, Fused, GlobalAvgPool, Graph, Node, Requantize, split_shift
from vta.isa.requant import rne_shift, round_to_float32, scale_mul, scale_word

__all__ = ["quantize_linear", "even_shift", "round_to_float32", "float32_parts",
           "ort_requantize", "ort_scale_word", "EVEN_SHIFT_ALU_OPS", "MULT_BITS", "SCALE_MODES",
           "fixed_point", "fixed_point_pair", "effective_ratio", "shift_scale", "is_pow2",
           "needs_mul", "multipliers", "fixed_point_channels", "exact_requantizes",
           "SHIFT_ADD", "shift_add_multipliers"]

#: how a graph's requantizations scale (module docstring)
SCALE_MODES: tuple[str, ...] = ("shift", "fixed")

#: multipliers are signed 16-bit immediates (``alu.imm_bits`` of the shipped configs)
MULT_BITS = 16
_MULT_MAX = (1 << (MULT_BITS - 1)) - 1
_INT32_MAX = (1 << 31) - 1


def fixed_point(ratio: float, bound: int, what: str = "requantize") -> tuple[int, int]:
    """``(mult, shift)`` with ``mult / 2**shift ~ ratio`` (``1 <= shift <= 31``, ``0 < mult
    <= 32767``) and ``bound * mult`` plus the rounding constant below ``2**31``: the largest
    shift (most precise) for which both hold, then in lowest terms (a power-of-two ratio is
    ``mult = 1``: a shift alone, no multiplication; ``x * 2**k`` rounding-shifted by ``s + k``
    equals ``x`` rounding-shifted by ``s``). A ratio that cannot be represented is a
    ``GraphError``."""
    mults, shift = _pairs([ratio], [bound], what)
    return mults[0], shift


def fixed_point_pair(ratios: tuple[float, float], bounds: tuple[int, int],
                     what: str = "add") -> tuple[int, int, int]:
    """``(mult_a, mult_b, shift)``: two multipliers sharing one shift, for ``a * mult_a + b *
    mult_b`` with ``|a| <= bounds[0]``, ``|b| <= bounds[1]`` (the sum cannot overflow)."""
    (ma, mb), shift = _pairs(list(ratios), list(bounds), what)
    return ma, mb, shift


def _pairs(ratios: list[float], bounds: list[int], what: str) -> tuple[list[int], int]:
    for r in ratios:
        if not (math.isfinite(r) and r > 0):
            raise GraphError(f"{what}: the ratio of scales must be a positive finite number, "
                             f"got {r}")
    for shift in range(31, 0, -1):
        mults = [round(r * (1 << shift)) for r in ratios]
        if max(mults) > _MULT_MAX:
            continue
        post = split_shift(shift)[1]
        worst = sum(b * m for b, m in zip(bounds, mults, strict=True)) + (1 << (post - 1))
        if worst > _INT32_MAX:
            continue
        if min(mults) < 1:
            break  # too small at the most precise shift that fits: not representable
        while shift > 1 and all(m % 2 == 0 for m in mults):  # lowest terms: the same value
            mults, shift = [m // 2 for m in mults], shift - 1
        return mults, shift
    raise GraphError(f"{what}: scale ratio{'s' if len(ratios) > 1 else ''} "
                     f"{', '.join(f'{r:.4g}' for r in ratios)} cannot be represented as "
                     f"mult / 2**shift with a {MULT_BITS}-bit multiplier, a shift in 1..31 "
                     f"and no int32 overflow for inputs up to {max(bounds)}")


def quantize_linear(x: np.ndarray, scale: float, zero: int = 0) -> np.ndarray:
    """ONNX ``QuantizeLinear`` of float ``x`` to int8, as ONNX Runtime's MLAS computes it
    (``onnxruntime/core/mlas/lib/quantize.cpp``: a float32 division by the scale, round half
    to even, plus the zero point, saturated): how the host quantizes a float input."""
    q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)).astype(np.int64) + zero
    return np.clip(q, -128, 127).astype(np.int8)


#: ALU instructions per accumulator entry of round half to even on VTA's ALU (the copy's ADD;
#: ADD, SHR, SHR on the copy; ADD, MAX, SHR on the value: ``ops.chain.even_rounding``, which
#: also costs the copy tile's reset), against 2 for the rounding shift ``(t + 2**(s-1)) >> s``
#: (ADD, SHR); ``tests/compiler/test_epilogue_even.py`` holds the selected instructions to it
EVEN_SHIFT_ALU_OPS = 7


def even_shift(t: np.ndarray, shift: int) -> np.ndarray:
    """``t / 2**shift`` rounded half to even (ONNX Runtime's rounding, for a power-of-two
    scale ratio), written with the operations VTA's ALU has (ADD, SHR, where SHR by a negative
    amount shifts left, MAX; no AND, no subtraction, no multiply): ``max((t + 2**(s-1) - 1) >>
    s, ((t + 2**(s-1)) >> (s+1)) << 1)`` (``vta.isa.requant.rne_shift``). The first term
    rounds ties down, the second is the even number at or below the tie-up result: they differ
    only at a tie, where the larger is the even neighbour; off a tie the first is the answer
    and the second is not larger. The accelerator computes it as ``ops.chain.even_rounding``
    (the MAX before the last shift; ``EVEN_SHIFT_ALU_OPS`` instructions and a reset per
    entry) against 2 for rounding half up. ``t`` is int64 here (no int32 wrap); ``shift >=
    1``."""
    if shift < 1:
        raise GraphError(f"even_shift: the shift must be at least 1, got {shift}")
    return rne_shift(np.asarray(t, dtype=np.int64), shift)


def float32_parts(x: float) -> tuple[int, int]:
    """``(m, s)`` with ``float32(x) == m / 2**s`` exactly, ``m`` a 24-bit integer (0 for 0)."""
    f = float(np.float32(x))
    if f == 0.0:
        return 0, 0
    mant, ex = math.frexp(f)
    return int(mant * (1 << 24)), 24 - ex


def ort_scale_word(ratio: float, what: str = "requantize") -> int:
    """The scale word of ORT's float32 ``ratio`` (``vta.isa.requant.scale_word``: what
    ``ALU.REQUANT_F32`` reads), or a ``GraphError`` naming ``what`` when no word holds it."""
    try:
        return scale_word(ratio, what)
    except ValueError as e:
        raise GraphError(str(e)) from None


def ort_requantize(acc: np.ndarray, ratio: float | np.ndarray, zero: int = 0, lo: int = -128,
                   hi: int = 127) -> np.ndarray:
    """ONNX Runtime's requantization of int32 accumulators (MLAS ``MlasRequantizeOutput``,
    used by QLinearConv, QLinearMatMul and QGemm: ``float(acc) * scale``, rounded half to even,
    plus the zero point, clamped), reproduced in integers (``vta.isa.requant.scale_mul``: the
    conversion to float32 and the float32 product each round to 24 significant bits, half to
    even, then the result rounds half to even to an integer). ``ratio`` is ORT's float32
    ``x_scale * w_scale / y_scale``, or one per channel of axis 1 (per-channel weights). A
    single rounding of ``acc * m / 2**s`` (a 24-bit multiplier, a 64-bit product) differs from
    this only when the float32 product lands on a tie (bench/onnx_models.py counts it)."""
    acc = np.asarray(acc, dtype=np.int64)
    ratios = np.atleast_1d(np.asarray(ratio, dtype=np.float64))
    words = np.array([ort_scale_word(float(r)) for r in ratios], dtype=np.int64)
    if np.ndim(ratio) > 0:  # one per channel of axis 1
        words = words.reshape((1, -1) + (1,) * (acc.ndim - 2))
    else:
        words = words.reshape(())
    return np.clip(scale_mul(acc, words) + zero, lo, hi).astype(np.int64)


def effective_ratio(mult: int, shift: int) -> float:
    """The ratio ``mult / 2**shift`` actually applied."""
    return mult / (1 << shift)


def shift_scale(base: float, want: float, least: int = 1) -> tuple[float, int]:
    """``(base * 2**k, k)`` for the smallest ``k >= least`` with ``base * 2**k >= want``: the
    output scale of a shift-only requantization of a value of scale ``base`` (a scale rounded
    up to the next power-of-two multiple: the calibrated range never clips more)."""
    if not (math.isfinite(base) and base > 0 and math.isfinite(want) and want > 0):
        raise GraphError(f"scales must be positive finite numbers, got {base} and {want}")
    k = max(least, math.ceil(math.log2(want / base)))
    while base * 2.0 ** k < want:  # log2's rounding
        k += 1
    while k > least and base * 2.0 ** (k - 1) >= want:
        k -= 1
    return base * 2.0 ** k, k


def is_pow2(mult: int) -> bool:
    """Whether ``mult`` is a positive power of two (``x * mult`` is a left shift)."""
    return mult > 0 and mult & (mult - 1) == 0


def multipliers(node: Node) -> tuple[tuple[str, int, int], ...]:
    """The requantization multipliers ``node`` applies, ``(what, mult, shift)``: ``mult /
    2**shift`` is the ratio of scales it stands for (none for other operators)."""
    if isinstance(node, (Requantize, GlobalAvgPool)) and node.exact:
        return ()  # scale words (ORT's float32 ratios), not fixed-point multipliers
    if isinstance(node, Requantize) and node.mults is not None:
        data = node.mults.data if node.mults.data is not None else np.zeros(0, np.int32)
        return tuple((f"multiplier of channel {c}", int(m), node.shift)
                     for c, m in enumerate(data))
    if isinstance(node, (Requantize, GlobalAvgPool)):
        return (("multiplier", node.mult, node.shift),)
    if isinstance(node, Add):
        return (("multiplier of a", node.mult_a, node.shift),
                ("multiplier of b", node.mult_b, node.shift))
    return ()


#: the named approximation of ORT's scales on an ALU without MUL (``shift_add_multipliers``)
SHIFT_ADD = "shift-add"


def shift_add_multipliers(graph: Graph) -> Graph:
    """``graph`` with every requantization multiplier that is not a power of two, and every
    per-channel one (requantize, add, global average pool: ``needs_mul``), marked
    ``shift_add``: computed by shifts and adds of a scratch tile (``ops.chain.mac``) instead of
    ALU MUL. The graph's arithmetic (and so its bits) is unchanged: the fixed-point multiplier
    (``fixed_point``, what ``pynq_mul`` runs), itself the approximation of ONNX Runtime's
    float32 scales (``SHIFT_ADD``, ``vta run --approx shift-add``). Per-channel multipliers
    are shifts by channel operands (``ops.chain.shift_add_channel_stage``)."""
    marked = {id(node) for node, _, _, _ in needs_mul(graph)}
    if not marked:
        return graph

    def mark(n: Node) -> Node:
        if isinstance(n, Fused):
            return replace(n, anchor=mark(n.anchor), chain=tuple(mark(m) for m in n.chain))
        return replace(n, shift_add=True) if id(n) in marked else n  # type: ignore[call-arg]

    return Graph(graph.name, graph.inputs, graph.outputs, tuple(mark(n) for n in graph.nodes))


def needs_mul(graph: Graph | Node) -> list[tuple[Node, str, int, int]]:
    """Every requantization of ``graph`` (a fused group's nodes included; or of one node)
    whose multiplier is not a power of two (it needs an ALU MUL: a power of two is a shift),
    as ``(node, what, mult, shift)``; a per-channel requantize always (its multipliers are a
    channel operand: a vector multiply, even where each is a power of two)."""
    out = []
    for n in (graph.nodes if isinstance(graph, Graph) else (graph,)):
        for node in (n.nodes if isinstance(n, Fused) else (n,)):
            if getattr(node, "shift_add", False):
                continue  # by shifts and adds (shift_add_multipliers)
            per_channel = isinstance(node, Requantize) and node.mults is not None
            for what, mult, shift in multipliers(node):
                if per_channel or not is_pow2(mult):
                    out.append((node, what, mult, shift))
                    if per_channel:
                        break
    return out


def exact_requantizes(graph: Graph) -> list[Requantize | GlobalAvgPool]:
    """Every requantize and global average pool of ``graph`` (a fused group's included) with
    ONNX Runtime's arithmetic (``Requantize.exact``, ``GlobalAvgPool.exact``): each needs the
    ``requant_f32`` intrinsic (``ALU.REQUANT_F32``)."""
    return [node for n in graph.nodes for node in (n.nodes if isinstance(n, Fused) else (n,))
            if isinstance(node, (Requantize, GlobalAvgPool)) and node.exact]


def fixed_point_channels(ratios: Sequence[float], bounds: Sequence[int],
                         what: str = "requantize") -> tuple[list[int], int]:
    """``(mults, shift)``: one multiplier per channel sharing one shift, ``mults[c] / 2**shift
    ~ ratios[c]``, each ``bounds[c] * mults[c]`` plus the rounding constant below ``2**31``
    (the product of an accumulator of magnitude up to ``bounds[c]``): the largest such shift
    (most precise). The multipliers are an int32 channel operand (not immediates): no
    ``MULT_BITS`` limit."""
    for r in ratios:
        if not (math.isfinite(r) and r > 0):
            raise GraphError(f"{what}: the ratio of scales must be a positive finite number, "
                             f"got {r}")
    for shift in range(31, 0, -1):
        mults = [round(r * (1 << shift)) for r in ratios]
        post = split_shift(shift)[1]
        worst = max(b * m for b, m in zip(bounds, mults, strict=True)) + (1 << (post - 1))
        if worst > _INT32_MAX or max(mults) > _INT32_MAX:
            continue
        if min(mults) < 1:
            break
        return mults, shift
    raise GraphError(f"{what}: per-channel scale ratios {min(ratios):.4g}..{max(ratios):.4g} "
                     f"cannot share a shift in 1..31 with int32 multipliers and no int32 "
                     f"overflow for accumulators up to {max(bounds)}")
