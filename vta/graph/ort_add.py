"""ONNX Runtime's element-wise int8 arithmetic, exactly, and the integer forms that give its bits.

An element-wise operator of two int8 (or uint8) tensors has at most 256 x 256 distinct input
pairs, so its meaning is a finite table: ``qlinear_add_table`` (the QOperator form's
``QLinearAdd``), ``qdq_add_table`` (the QDQ form's ``DequantizeLinear -> Add ->
QuantizeLinear``) and ``rescale_table`` (``DequantizeLinear -> Clip | Relu ->
QuantizeLinear``, the island ORT leaves around a ReLU6 when the quantized ranges differ)
compute ORT's table with its float32 arithmetic reproduced operation by operation.

``fit_add`` then looks for the graph IR's integer add (``clip(((a - z_a) * m_a + (b - z_b) *
m_b + 2**(s-1) + offset) >> s) + z``: ALU MUL, ADD, SHR, MIN, MAX) that reproduces the table on
**every** input pair; a form found is exact by exhaustion (no input the model can see is left
unchecked), which is how the importer proves each add it emits (``load_onnx(requant="ort")``).
Where the real sum has exact ties ``k + 1/2`` of both parities (ORT rounds them half to even;
one rounding offset cannot), no form exists and the importer emits the table itself
(``ir.Lut2``, a host lookup).

ORT's kernels (onnxruntime ``core/mlas/lib``):

* ``QLinearAdd`` on x86-64 with AVX2 (``qladd_avx2.cpp``, ``MlasQLinearAddKernelAvx2Helper``;
  the SSE2 and the portable helpers of ``qladd.cpp`` compute the same expression without
  fusing): ``r_ac = float32(s_a / s_c)``, ``r_bc = float32(s_b / s_c)``, ``fixed =
  float32(z_c) - fma(z_a, r_ac, float32(r_bc * z_b))`` (the C++ ``r_ac * z_a + r_bc * z_b``
  contracted into one FMA by the compiler: the unfused sum disagrees with onnxruntime 1.32.0
  on 9 of 3.9 M outputs over 60 random scale / zero-point sets, the contracted one on none),
  then per element ``fma(a, r_ac, fma(b, r_bc, fixed))``, converted rounding half to even
  (``cvtps_epi32``) and saturated (``packs``); ``a``, ``b`` and the zero points are the stored
  integers (a uint8 tensor's 0..255). (On ARM, MLAS's NEON kernel adds in integers with its
  own multipliers, ``MlasCalcQLinearAddParameters``: a different table, not modelled here;
  the reference is ORT on this x86-64 machine.)
* ``DequantizeLinear`` is ``float32(x - z) * s`` (one float32 product), ``Add`` a float32 sum,
  ``QuantizeLinear`` a float32 division, round half to even, plus the zero point, saturated
  (``quantize.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["fma32", "stored_grid", "qlinear_add_table", "qdq_add_table", "rescale_table", "AddForm",
           "fit_add", "apply_form", "factor_mult", "IMM_MAX", "MAX_SHIFT", "ChannelForm",
           "fit_channel_add", "apply_channel_form"]

_F32 = np.float32
_F64 = np.float64

#: an ALU immediate's range (16-bit signed): each factor of a multiplier and the offset fit it
IMM_MAX = (1 << 15) - 1
#: the largest shift ``fit_add`` tries (a rounding shift by more is split: ``ir.split_shift``)
MAX_SHIFT = 24


def factor_mult(m: int) -> tuple[int, int] | None:
    """``(m1, m2)`` with ``m1 * m2 == m``, each at most ``IMM_MAX`` (two ALU MULs by an
    immediate), ``m1`` the smallest such; ``(m, 1)`` when ``m`` fits alone; None when no such
    pair exists."""
    if 0 <= m <= IMM_MAX:
        return (m, 1)
    for m1 in range(-(-m // IMM_MAX), IMM_MAX + 1):
        if m % m1 == 0:
            return (m1, m // m1)
    return None


def fma32(x: np.ndarray, y: float | np.ndarray, z: np.ndarray) -> np.ndarray:
    """``fma(x, y, z)`` in float32 (one rounding of the exact ``x * y + z``, half to even),
    elementwise with broadcasting, for ``x`` integers (|x| < 2**16) or float32 values, ``y``
    and ``z`` float32: what ``_mm256_fmadd_ps`` computes. ``x * y`` is exact in float64 (at
    most 48 significant bits); the float64 sum's error is recovered exactly (Knuth's TwoSum),
    and a sum that lands on a float32 midpoint with a non-zero error is rounded towards the
    error (no double rounding)."""
    p = np.asarray(x, dtype=_F64) * np.asarray(y, dtype=_F32).astype(_F64)
    z64 = np.asarray(z, dtype=_F32).astype(_F64)
    p, z64 = np.broadcast_arrays(p, z64)
    s = p + z64
    bp = s - z64
    err = (p - bp) + (z64 - (s - bp))
    r = s.astype(_F32)
    r64 = r.astype(_F64)
    toward = np.where(s > r64, np.inf, -np.inf).astype(_F32)
    other = np.nextafter(r, toward)
    mid = (r64 + other.astype(_F64)) / 2
    fix = (s != r64) & (s == mid) & (err != 0)
    # at a midpoint the float64 sum is off by ``err``: the exact value lies on err's side
    pick_other = fix & (np.sign(err) == np.sign(other.astype(_F64) - r64))
    return np.where(pick_other, other, r)


def _saturate(q: np.ndarray, unsigned: bool) -> np.ndarray:
    lo, hi = (0, 255) if unsigned else (-128, 127)
    return np.clip(q, lo, hi).astype(np.int64)


def stored_grid(unsigned: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every stored value of a (u)int8 tensor, as ``a[:, None]`` and ``b[None, :]``."""
    v = np.arange(0, 256) if unsigned else np.arange(-128, 128)
    return v[:, None].astype(np.int64), v[None, :].astype(np.int64)


def qlinear_add_table(sa: float, za: int, sb: float, zb: int, sc: float, zc: int,
                      unsigned: bool = False) -> np.ndarray:
    """ORT's ``QLinearAdd`` (AVX2 kernel, module docstring) of every stored pair: a (256, 256)
    table of stored outputs indexed by ``(a - lo, b - lo)`` (``lo`` -128, or 0 for uint8);
    zero points in the stored type."""
    r_ac = _F32(_F32(sa) / _F32(sc))
    r_bc = _F32(_F32(sb) / _F32(sc))
    # the compiler contracts ``r_ac * z_a + r_bc * z_b`` into one FMA (module docstring)
    zb_term = np.array(_F32(r_bc * _F32(zb)), ndmin=1)
    fixed = _F32(_F32(zc) - fma32(np.array([za]), float(r_ac), zb_term)[0])
    a, b = stored_grid(unsigned)
    inner = fma32(b, float(r_bc), np.full(b.shape, fixed, _F32))
    val = fma32(a, float(r_ac), inner)
    return _saturate(np.rint(val.astype(_F64)).astype(np.int64), unsigned)


def _dequantize(x: np.ndarray, s: float, z: int) -> np.ndarray:
    return (x - z).astype(_F32) * _F32(s)


def _quantize(v: np.ndarray, s: float, z: int, unsigned: bool) -> np.ndarray:
    q = np.rint((np.asarray(v, _F32) / _F32(s)).astype(_F64)).astype(np.int64) + z
    return _saturate(q, unsigned)


def qdq_add_table(sa: float, za: int, sb: float, zb: int, sc: float, zc: int,
                  unsigned: bool = False) -> np.ndarray:
    """ORT's ``QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)))`` in float32
    (the QDQ form run with ``ORT_DISABLE_ALL``), as ``qlinear_add_table`` lays it out."""
    a, b = stored_grid(unsigned)
    return _quantize(_dequantize(a, sa, za) + _dequantize(b, sb, zb), sc, zc, unsigned)


def rescale_table(s1: float, z1: int, s2: float, z2: int, lo: float | None, hi: float | None,
                  unsigned: bool = False) -> np.ndarray:
    """ORT's ``QuantizeLinear(Clip(DequantizeLinear(x), lo, hi))`` for every stored ``x``
    (``lo`` / ``hi`` None: that side unbounded; a ReLU is ``lo`` 0): 256 stored outputs."""
    x = stored_grid(unsigned)[0][:, 0]
    v = _dequantize(x, s1, z1)
    if lo is not None:
        v = np.maximum(v, _F32(lo))
    if hi is not None:
        v = np.minimum(v, _F32(hi))
    return _quantize(v, s2, z2, unsigned)


@dataclass(frozen=True)
class AddForm:
    """The graph IR's integer add ``clip(((a - z_a) * mult_a + (b - z_b) * mult_b + 2**(shift
    - 1) + offset) >> shift) + zero, lo, hi)`` (int8 forms of the operands and output)."""

    mult_a: int
    mult_b: int
    shift: int
    offset: int
    lo: int
    hi: int


def apply_form(f: AddForm, a: np.ndarray, za: int, b: np.ndarray, zb: int, zero: int
               ) -> np.ndarray:
    """``f`` on int8-form operands (int64 arithmetic; the bounds keep it inside int32)."""
    t = (a - za) * f.mult_a + (b - zb) * f.mult_b + (1 << (f.shift - 1)) + f.offset
    return np.clip((t >> f.shift) + zero, f.lo, f.hi)


def _offsets(t: np.ndarray, want: np.ndarray, lo: int, hi: int, shift: int
             ) -> tuple[int, int]:
    """The range of ``c`` with ``clip(((t + c) >> shift), lo, hi) == want`` everywhere (empty
    when the first exceeds the second): an interior value pins ``c`` to a window of
    ``2**shift``; a clipped one bounds it on one side."""
    step = 1 << shift
    inner = (want > lo) & (want < hi)
    c_lo = [int((want[inner] * step - t[inner]).max(initial=-(1 << 62)))]
    c_hi = [int(((want[inner] + 1) * step - 1 - t[inner]).min(initial=1 << 62))]
    at_lo, at_hi = want <= lo, want >= hi
    if at_lo.any():  # (t + c) >> s <= lo
        c_hi.append(int(((lo + 1) * step - 1 - t[at_lo]).min()))
    if at_hi.any():  # (t + c) >> s >= hi
        c_lo.append(int((hi * step - t[at_hi]).max()))
    return max(c_lo), min(c_hi)


def fit_add(table: np.ndarray, za: int, zb: int, zc: int, ratios: tuple[float, float],
            unsigned: bool = False, search: int = 8) -> AddForm | None:
    """The integer add (``AddForm``, int8 forms: a uint8 value ``u`` is ``u - 128``) equal to
    ``table`` (``qlinear_add_table``'s layout, stored outputs) on every input pair, with the
    smallest shift, or None. ``za``, ``zb``, ``zc`` are the int8 forms' zero points,
    ``ratios`` the real ``s_a / s_c`` and ``s_b / s_c``. For each shift up to ``MAX_SHIFT``
    the multipliers within ``search`` of ``ratio * 2**shift`` that are a product of two ALU
    immediates (``factor_mult``) are tried, nearest first; the offset must be an immediate
    too, and every sum must stay inside int32. A ratio of 0 (``mult_b`` 0) makes it a rescale
    of ``a`` alone (the table's rows then do not depend on ``b``)."""
    off = 128 if unsigned else 0
    a, b = stored_grid(unsigned)
    want = (table - off - zc).reshape(-1)  # stored output minus the zero point, int8 form
    lo, hi = int(want.min()), int(want.max())  # saturation, or a Clip's bound
    da = np.broadcast_to(a - off - za, table.shape).reshape(-1).astype(np.int64)
    db = np.broadcast_to(b - off - zb, table.shape).reshape(-1).astype(np.int64)
    span = int(max(np.abs(da).max(), np.abs(db).max()))
    witness = np.zeros(0, dtype=np.int64)  # pairs that refuted an earlier candidate
    for shift in range(1, MAX_SHIFT + 1):
        half = 1 << (shift - 1)
        cands = [_near(r, shift, search) for r in ratios]
        for ma in cands[0]:
            for mb in cands[1]:
                if span * (ma + mb) + (1 << shift) + IMM_MAX + 1 >= 1 << 31:  # int32 sums
                    continue
                w = witness
                if w.size and not _feasible(da[w] * ma + db[w] * mb, want[w], lo, hi, shift,
                                            half):
                    continue
                t = da * ma + db * mb
                c_lo, c_hi = _offsets(t, want, lo, hi, shift)
                c_lo, c_hi = max(c_lo, half - IMM_MAX - 1), min(c_hi, half + IMM_MAX)
                if c_lo > c_hi:
                    witness = np.union1d(witness, _binding(t, want, lo, hi, shift))
                    continue
                if factor_mult(ma) is None or factor_mult(mb) is None:
                    continue
                c = min(max(half, c_lo), c_hi)  # the plain rounding constant where it fits
                return AddForm(ma, mb, shift, c - half, lo + zc, hi + zc)
    return None


@dataclass(frozen=True)
class ChannelForm:
    """An add of a constant that varies along the channels only (a broadcast bias), as the
    graph IR's ``Add`` of ``x`` with itself (``mult_b`` 0) plus an offset per channel:
    ``clip(((x - z_x) * mult + 2**(shift - 1) + offsets[c]) >> shift) + zero, lo, hi)``, with
    ``offsets`` keyed by the constant's int8 value in that channel."""

    mult: int
    shift: int
    offsets: dict[int, int]
    lo: int
    hi: int


def apply_channel_form(f: ChannelForm, x: np.ndarray, zx: int, c: int, zero: int
                       ) -> np.ndarray:
    """``f`` on int8-form values ``x`` of a channel whose constant is ``c`` (int64)."""
    t = (x - zx) * f.mult + (1 << (f.shift - 1)) + f.offsets[c]
    return np.clip((t >> f.shift) + zero, f.lo, f.hi)


def fit_channel_add(table: np.ndarray, zx: int, zc: int, ratio: float, values: np.ndarray,
                    unsigned: bool = False, search: int = 8) -> ChannelForm | None:
    """The ``ChannelForm`` equal to ``table`` (int8 forms, ``table[x + 128, c + 128]``: rows
    the activation's value, columns the constant's) on all 256 inputs of every column in
    ``values`` (the constant's distinct int8 values), with the smallest shift, or None:
    exact by exhaustion like ``fit_add``. One multiplier and shift for every channel (within
    ``search`` of ``ratio * 2**shift``, a product of two ALU immediates: ``factor_mult``), an
    offset of its own for each (an int32 channel operand, no immediate: any value in the window
    every input of that channel allows). The saturation bounds are the int8 range; every sum
    stays inside int32. ``zx``, ``zc``: the int8 forms' zero points; ``unsigned`` only names
    the stored type (the table is already in int8 form)."""
    del unsigned  # the int8 forms are the same arithmetic for both stored types
    x = np.arange(-128, 128, dtype=np.int64)
    dx = x - zx
    lo, hi = -128 - zc, 127 - zc
    cols = [int(v) for v in np.unique(values)]
    wants = {c: table[:, c + 128].astype(np.int64) - zc for c in cols}
    for shift in range(1, MAX_SHIFT + 1):
        half = 1 << (shift - 1)
        for m in _near(ratio, shift, search):
            if factor_mult(m) is None:
                continue
            t = dx * m
            offsets: dict[int, int] = {}
            for c in cols:
                c_lo, c_hi = _offsets(t, wants[c], lo, hi, shift)
                c_lo, c_hi = max(c_lo, -(1 << 30)), min(c_hi, 1 << 30)
                if c_lo > c_hi:
                    break
                offsets[c] = min(max(half, c_lo), c_hi) - half
            else:
                if 255 * m + (1 << shift) + (1 << 30) < 1 << 31:
                    return ChannelForm(m, shift, offsets, -128, 127)
    return None


def _feasible(t: np.ndarray, want: np.ndarray, lo: int, hi: int, shift: int, half: int
              ) -> bool:
    c_lo, c_hi = _offsets(t, want, lo, hi, shift)
    return max(c_lo, half - IMM_MAX - 1) <= min(c_hi, half + IMM_MAX)


def _binding(t: np.ndarray, want: np.ndarray, lo: int, hi: int, shift: int) -> np.ndarray:
    """The pairs that set the offset's bounds (the tightest lower and upper ones)."""
    step = 1 << shift
    big = 1 << 62
    low = np.where(want > lo, want * step - t, -big)
    high = np.where(want < hi, (want + 1) * step - 1 - t, big)
    return np.array([int(np.argmax(low)), int(np.argmin(high))], dtype=np.int64)


def _near(ratio: float, shift: int, search: int) -> list[int]:
    """Positive multipliers within ``search`` of ``ratio * 2**shift`` (nearest first), or
    ``[0]`` for a ratio of 0."""
    if ratio == 0:
        return [0]
    m = round(ratio * (1 << shift))
    keep = {k for k in range(m - search, m + search + 1) if k > 0}
    return sorted(keep, key=lambda k: abs(k - ratio * (1 << shift)))
