"""ONNX Runtime's QOperator arithmetic beyond the add (``ort_add``), exactly.

The QOperator form of a transformer (ORT's ``quantize_static`` with ``QuantFormat.QOperator``)
holds integer operators whose meaning is ORT's CPU kernel, not an ideal real-valued formula;
each function here reproduces one kernel operation by operation, so the importer can emit a
node with ORT's bits (the tests compare with ORT itself, ``ORT_DISABLE_ALL``):

* ``qlinear_mul_table``: ``QLinearMul`` (com.microsoft) of every stored input pair, a (256,
  256) table like ``ort_add.qlinear_add_table``. MLAS ``qlmul.cpp``, the SSE2 kernel x86-64
  builds use (there is no AVX2 one): the products ``(a - z_a) * (b - z_b)`` in int16 x int16 ->
  int32 (exact), ``ratio = float32(float32(s_a * s_b) / s_c)``, then per element
  ``cvtps_epi32(float32(float32(p) * ratio) + float32(z_c))`` (round half to even; the SSE2
  intrinsics are not contracted into an FMA) saturated to int16 then to the stored type. A
  broadcast scalar operand goes through the same kernel (``IsScalarB``), and a scalar *first*
  operand is swapped into the second place (the product and the ratio commute, so the table is
  the same).
* ``qlinear_softmax``: ``QLinearSoftmax`` (com.microsoft, ``qlinear_softmax.cc``): a table of
  256 float32 exponentials ``exp((i - 255 + bit_shift) * s_x)`` built in double (``bit_shift
  = max(0, log(FLT_MAX / D) - 5) / s_x``, ``D`` the reduced axis' length; ``EXP_OUT_DTYPE`` is
  float), per row the maximum ``m``, the float32 sum of ``table[x - m + 255]`` in order, and
  each output ``nearbyintf(float32(t * floor(1 / s_y)) / sum) + z_y`` saturated to the stored
  type (onnxruntime 1.32.0 saturates an int8 output at 127: a row with one dominant value
  gives 256 + z_y = 128 for z_y = -128, and ORT answers 127; an older source, which capped at
  255 and cast, would wrap it to -128; the tests hold the measured behaviour).
* ``qlinear_average_pool`` is not reproduced: ``QLinearAveragePool`` is refused by the importer
  by name (docs/graph.md).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["qlinear_mul_table", "softmax_exp_table", "qlinear_softmax"]

_F32 = np.float32
_F64 = np.float64


def _grid(unsigned: bool) -> tuple[np.ndarray, np.ndarray]:
    v = np.arange(0, 256) if unsigned else np.arange(-128, 128)
    return v[:, None].astype(np.int64), v[None, :].astype(np.int64)


def qlinear_mul_table(sa: float, za: int, sb: float, zb: int, sc: float, zc: int,
                      unsigned: bool = False) -> np.ndarray:
    """ORT's ``QLinearMul`` (SSE2 kernel, module docstring) of every stored pair: a (256, 256)
    table of stored outputs indexed by ``(a - lo, b - lo)`` (``lo`` -128, or 0 for uint8);
    zero points in the stored type."""
    ratio = _F32(_F32(_F32(sa) * _F32(sb)) / _F32(sc))
    a, b = _grid(unsigned)
    p = ((a - za) * (b - zb)).astype(_F32)  # |p| <= 255 * 255: exact in float32
    v = (p * ratio).astype(_F32) + _F32(zc)
    q = np.rint(v.astype(_F64)).astype(np.int64)
    q = np.clip(q, -(1 << 15), (1 << 15) - 1)  # packs_epi32
    lo, hi = (0, 255) if unsigned else (-128, 127)
    return np.clip(q, lo, hi).astype(np.int64)  # packus / packs to 8 bits


#: ``std::numeric_limits<float>::max()``: ORT sizes its exponentials so a row's sum fits it
_FLT_MAX = float(np.finfo(np.float32).max)
#: the bits ORT keeps in reserve below the float range (``reserve_bit`` for a float table)
_RESERVE_BITS = 5.0


def softmax_exp_table(x_scale: float, reduce_len: int) -> np.ndarray:
    """ORT's 256 float32 exponentials for ``QLinearSoftmax`` (``QlinearBuildLookupTable``):
    entry ``i`` is ``exp((i - 255 + bit_shift) * s_x)`` computed in double and rounded to
    float32, entry 255 belonging to a row's maximum."""
    s = float(_F32(x_scale))
    bit_shift = max(0.0, math.log(_FLT_MAX / reduce_len) - _RESERVE_BITS) / s
    i = np.arange(256, dtype=_F64)
    return np.exp((i - 255.0 + bit_shift) * s).astype(_F32)


def qlinear_softmax(x: np.ndarray, x_scale: float, y_scale: float, y_zero: int, axis: int,
                    unsigned: bool = False) -> np.ndarray:
    """ORT's ``QLinearSoftmax`` (opset 13 semantics: along ``axis`` alone) of stored values
    ``x`` (int8, or uint8 held as uint8), stored outputs of ``x``'s dtype (module
    docstring)."""
    axis = axis + x.ndim if axis < 0 else axis
    moved = np.moveaxis(np.asarray(x).astype(np.int64), axis, -1)
    d = moved.shape[-1]
    rows = moved.reshape(-1, d)
    table = softmax_exp_table(x_scale, d)
    idx = rows - rows.max(axis=1, keepdims=True) + 255
    t = table[idx]
    total = np.cumsum(t, axis=1, dtype=_F32)[:, -1:]  # a float32 sum, in order
    ys = _F32(math.floor(_F32(1.0) / _F32(y_scale)))
    q = np.rint(((t * ys).astype(_F32) / total).astype(_F32).astype(_F64)).astype(np.int64)
    q = q + y_zero
    lo, hi = (0, 255) if unsigned else (-128, 127)
    out = np.clip(q, lo, hi).astype(np.uint8 if unsigned else np.int8)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)
