"""A float32 scale applied to integers as ONNX Runtime applies it, computed in integers.

ONNX Runtime requantizes int32 accumulators with ``float32(acc) * scale`` in float32, rounded
half to even to an integer (MLAS ``MlasRequantizeOutput``; docs/graph.md). ``scale`` is a
float32, so it is ``m / 2**s`` exactly with a 24-bit integer mantissa ``m``; the conversion of
``acc`` to float32 and the float32 product each round to 24 significant bits, half to even.
``scale_mul`` computes that in integers: ``rne(round24(round24(acc) * m) / 2**s)``, saturated
to int32. A *scale word* packs the scale as ``m | s << MANTISSA_BITS``.

One definition for every layer that computes it: the accelerator's ``ALU.REQUANT_F32``
(``vta.isa.requant``: its numpy semantics), the graph interpreter, the importer, and the GPU
back end (``vta.gpu.requant``: the emulator's rule, and the scale word's layout its CUDA
decodes). A base module (it imports only numpy) so that ``vta.isa`` and ``vta.gpu``, which may
not import each other, both read it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MANTISSA_BITS", "SHIFT_BITS", "scale_word", "unpack_scale", "scale_mul",
           "round_to_float32", "rne_shift"]

#: a scale word: the mantissa's bits (a float32's 24) and the shift's above them
MANTISSA_BITS, SHIFT_BITS = 24, 8
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


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
