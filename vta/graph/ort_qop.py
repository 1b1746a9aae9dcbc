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
* ``qlinear_softmax``: ``QLinearSoftmax`` (com.microsoft, ``qlinear_softmax.cc`` with MLAS's
  x86-64 kernel ``qsoftmax_kernel_avx2.cpp``): a table of 256 float32 exponentials ``exp((i -
  255 + bit_shift) * s_x)`` built in double (``bit_shift = max(0, log(FLT_MAX / D) - 5) /
  s_x``, ``D`` the reduced axis' length), per row the maximum ``m``, the float32 sum of
  ``t = table[x - m + 255]`` in MLAS's AVX2 order (``_avx2_row_sums``), ``scale =
  float32(1 / sum) * floor(1 / s_y)``, each output ``float32(t * scale)`` rounded half to
  even, plus ``z_y`` (an integer: a product of 13.4999 gives 13 + z_y, not the float sum
  rounded), saturated to the stored type (a row with one dominant value gives 256 + z_y = 128
  for z_y = -128: ORT answers 127). Measured against onnxruntime 1.32.0, whose kernel is not
  the source at hand in every detail: the zero point's place and the saturation were found
  by comparing. The portable kernel (``(t * floor(1 / s_y)) / sum``
  summed in order, an int8 cast that wraps) differs in rare last-place ties: seen once in
  1,310,720 values of BERT-tiny before the AVX2 order was modelled.
* ``qlinear_average_pool``: ``QLinearAveragePool`` (com.microsoft, ``qlinear_pool.cc``, 2-D
  NCHW): every value dequantized, ``float32(x - z_x) * s_x``; per output the float32 sum of
  its window's values in row-major order (a padded tap adds nothing), divided in float32 by
  the window's size (``count_include_pad``) or by its taps inside the image;
  ``nearbyintf(float32(y / s_y) + z_y)`` saturated. (ORT takes a window covering the whole
  unpadded image to its global average pool, which the importer maps to ``global_avg_pool``.)
"""

from __future__ import annotations

import math

import numpy as np

from vta.graph.ort_add import stored_grid

__all__ = ["qlinear_mul_table", "softmax_exp_table", "qlinear_softmax",
           "qlinear_average_pool"]

_F32 = np.float32
_F64 = np.float64



def qlinear_mul_table(sa: float, za: int, sb: float, zb: int, sc: float, zc: int,
                      unsigned: bool = False) -> np.ndarray:
    """ORT's ``QLinearMul`` (SSE2 kernel, module docstring) of every stored pair: a (256, 256)
    table of stored outputs indexed by ``(a - lo, b - lo)`` (``lo`` -128, or 0 for uint8);
    zero points in the stored type."""
    ratio = _F32(_F32(_F32(sa) * _F32(sb)) / _F32(sc))
    a, b = stored_grid(unsigned)
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


def _avx2_row_sums(t: np.ndarray) -> np.ndarray:
    """MLAS's AVX2 row sum of float32 ``t`` (rows, D) (``exp_and_sum_*_avx2``): eight float32
    lanes, each block of 16 values adding its first 8 then its last 8 lane-wise; the
    ``D % 16`` trailing values summed in order from 0; then that partial sum plus lanes 0..7
    in order."""
    rows, d = t.shape
    full = d - d % 16
    lanes = np.zeros((rows, 8), _F32)
    for i in range(0, full, 16):
        lanes = (lanes + t[:, i:i + 8]).astype(_F32)
        lanes = (lanes + t[:, i + 8:i + 16]).astype(_F32)
    total = np.zeros(rows, _F32)
    for i in range(full, d):
        total = (total + t[:, i]).astype(_F32)
    for j in range(8):
        total = (total + lanes[:, j]).astype(_F32)
    return total


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
    t = table[rows - rows.max(axis=1, keepdims=True) + 255]
    total = _avx2_row_sums(t)
    ys = _F32(math.floor(_F32(1.0) / _F32(y_scale)))
    scale = ((_F32(1.0) / total).astype(_F32) * ys).astype(_F32)  # per row
    v = (t * scale[:, None]).astype(_F32)
    q = np.rint(v.astype(_F64)).astype(np.int64) + y_zero  # rounded, then the zero point
    lo, hi = (0, 255) if unsigned else (-128, 127)
    out = np.clip(q, lo, hi).astype(np.uint8 if unsigned else np.int8)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def qlinear_average_pool(x: np.ndarray, x_scale: float, x_zero: int, kernel: int, stride: int,
                         pad: int, count_include_pad: bool, y_scale: float, y_zero: int,
                         unsigned: bool = False) -> np.ndarray:
    """ORT's ``QLinearAveragePool`` (module docstring) of stored NCHW values ``x``, a square
    ``kernel`` window, one ``stride``, ``pad`` on every side: stored outputs."""
    n, c, h, w = x.shape
    xf = (np.asarray(x).astype(np.int64) - x_zero).astype(_F32) * _F32(x_scale)
    xp = np.pad(xf, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ones = np.pad(np.ones((h, w), np.int64), pad)
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    total = np.zeros((n, c, oh, ow), _F32)
    count = np.zeros((oh, ow), np.int64)
    for r in range(kernel):
        for q in range(kernel):
            rows = slice(r, r + stride * (oh - 1) + 1, stride)
            cols = slice(q, q + stride * (ow - 1) + 1, stride)
            total = (total + xp[:, :, rows, cols]).astype(_F32)  # + 0.0 at a padded tap
            count += ones[rows, cols]
    size = np.full((oh, ow), kernel * kernel) if count_include_pad else count
    mean = (total / size.astype(_F32)).astype(_F32)
    v = ((mean / _F32(y_scale)).astype(_F32) + _F32(y_zero)).astype(_F32)
    lo, hi = (0, 255) if unsigned else (-128, 127)
    return np.clip(np.rint(v.astype(_F64)), lo, hi).astype(np.uint8 if unsigned else np.int8)
