"""ONNX Runtime's CPU kernels where they are *not* an integer GEMM and ORT's requantize.

vta's exact import (``load_onnx(requant="ort")``) reproduces what ONNX Runtime's QLinearConv,
QLinearMatMul and QGemm compute when their int32 accumulator is the exact ``sum (x - z_x) w``:
``quant.ort_requantize`` of it. Two of ORT's x86-64 kernels compute something else, and this
module models each in numpy, operation by operation, so that a test can show ORT's value at
every point where vta's differs (``tests/graph/test_ort_kernels.py``). Nothing here runs on
the accelerator: these are the proofs of the two documented differences (docs/graph.md).

* **U8S8 on AVX2 without VNNI** (``u8s8_pair_sums``): ORT's uint8 x int8 QLinearConv and QGemm
  multiply with ``vpmaddubsw``, which adds each pair of adjacent uint8 x int8 products and
  *saturates the pair* to int16 before ``vpmaddwd`` widens it (MLAS
  ``QgemmU8S8KernelAvx2.S``, ``ConvSymKernelAvx2.S``). The pairs are adjacent along K in the
  order ORT lays the reduction out: a convolution is computed channels-last (QLinearConv
  transposes NCHW to NHWC, and both its GEMM path's im2col and its ``MlasConvSym`` path read K
  as ``(kh, kw, c)``), padded with the input zero point, the uint8 values as stored (0..255, not
  ``u - 128``); the zero point's term ``-z_x * sum_k w`` and the bias are added exactly after.
  Where a pair leaves [-32768, 32767] ORT's accumulator is not the exact sum. With AVX-VNNI or
  AVX512-VNNI (``vpdpbusd``: four products summed in 32 bits) and on ARM, ORT's sum is exact:
  the difference belongs to this machine's CPU (AVX2, no VNNI; ``lscpu``), not to the model.
  ORT's documentation names it and recommends ``reduce_range`` or the U8U8 / S8S8 formats.
* **The QDQ form's float Conv** (``qdq_conv``): with ``ORT_DISABLE_ALL`` (the reference) a
  ``DequantizeLinear -> Conv -> QuantizeLinear`` island runs as written: each operand
  dequantized to float32 (``float32(q - z) * s``), the float convolution (MLAS ``MlasConv``:
  im2col in NCHW order ``(c, kh, kw)``, SGEMM whose FMA3 kernel sums each K block from zero
  with fused multiply-adds in K order and adds the blocks to the output in turn, the bias
  added after, ``MlasActivation``), then quantized (a float32 division, round half to even,
  plus the zero point, saturated). Its rounding depends on the float operands and their
  order, not only on the integers: it is not ``round(acc * ratio)`` of any integer ``acc``,
  so no integer GEMM and requantize reproduces it in general (vta's exact import gives the
  value of the exact sum, which equals ORT's except where the float sum's rounding error
  crosses a rounding boundary of the quantize: a few values in 10**4..10**5).

ORT's **QLinearGlobalAveragePool** (``qlinear_global_avg_pool``; MLAS ``qlgavgpool.cpp``) is
integer arithmetic with one float32 step: the exact int32 sum of each channel minus ``N * z_x``
(``N`` pixels), requantized as QLinearConv is (``MlasRequantizeOutput``: ``quant.ort_requantize``)
by the float32 ratio ``s_x / (s_y * float(N))`` (``qlinear_gap_ratio``), which ORT refuses
outside [2**-32, 256) or for ``N >= 2**24``. The importer gives it those bits on the
accelerator (``load_onnx(requant="ort")``; tests/graph/test_ort_gap.py).

ORT's float **LayerNormalization** (``ort_layer_norm``; the ONNX operator and com.microsoft's
contrib one share ``LayerNormImpl``, onnxruntime ``core/providers/cpu/nn/layer_norm_impl.cc``)
takes one of three paths per row of ``n`` values, chosen by ORT's version, the CPU and the
row length:

* **MLAS's AVX2 kernel** (``layer_norm_avx2``; ``MlasLayerNormF32`` -> ``core/mlas/lib/
  layernorm_kernel_avx2.cpp``, registered on x86-64 with AVX2 and FMA3, used for ``n >= 8``,
  ``LAYER_NORM_AVX2_MIN``): the mean from a float64 sum (four float64 lanes, ``x[i::4]``,
  reduced ``(l0 + l2) + (l1 + l3)``, the tail after) divided by ``n`` and rounded to float32;
  a centred variance: eight float32 lanes ``acc = fma(x - mean, x - mean, acc)`` reduced
  ``((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))``, then the tail of ``n mod 8`` as
  compiled: four values squared (rounded) and added in order when the tail has four or more,
  the rest fused (``fma``); ``inv = 1 / sqrt(var / n + eps)`` in float32; each output
  ``fma((x - mean) * inv, scale, bias)`` (without a bias, ``(x - mean) * inv * scale``).
* **the scalar ComputeJob** (``layer_norm_scalar``; rows shorter than 8, or no AVX2 kernel;
  every row in onnxruntime 1.27 - 1.29):
  Welford's float32 recurrence (``d = x - mean; mean += d / k; m2 += d * (x - mean)``),
  ``den = sqrt(m2 / n + eps)``, each output ``(x - mean) / den * scale + bias``, unfused.
* **the float32 sums** (``layer_norm_sums``; onnxruntime before 1.27): ``sum x`` and ``sum
  x*x`` in order, ``den = sqrt(sum_sq / n - mean * mean + eps)``, ``(x - mean) / den * scale +
  bias``, the loop ``layer_norm_impl.cc`` shows.

Which path a row takes depends on ORT's version (``ort_layer_norm_path``; measured with each
version's wheel: 1.20.1 and 1.26.0 the sums, 1.27.0 - 1.29.0 the scalar Welford loop for every
row, 1.30.0 and 1.32.0 the AVX2 kernel from 8 values) and on the CPU. Each reproduces its ORT
on this machine bit for bit (outputs, Mean and InvStdDev; tests/graph/test_ort_layer_norm.py);
the kernel's lane order is its source's, the tail's and the scalar path's contraction were
measured (the source leaves them to the compiler).

The K blocking of MLAS's SGEMM (``sgemm_stride_k``) depends on the number of output columns a
call computes, which for ``MlasConv``'s segmented algorithm depends on ORT's intra-op thread
count (``conv_segments``): the float reference itself changes with the machine's core count.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np

from vta.errors import GraphError
from vta.graph.ort_add import fma32
from vta.graph.quant import ort_requantize

__all__ = ["PAIR_MIN", "PAIR_MAX", "u8s8_pair_sums", "u8s8_saturates", "nhwc_columns",
           "nhwc_weights", "qlinear_conv_u8s8_acc", "qgemm_u8s8_acc", "sgemm_strides",
           "sgemm_stride_k",
           "conv_segments", "float_conv", "dequantize", "quantize", "qdq_conv",
           "SGEMM_STRIDE", "SGEMM_THREAD_COMPLEXITY", "SGEMM_THREAD_ALIGN", "MAX_THREADS",
           "qlinear_gap_ratio", "gap_ratio_refused", "qlinear_global_avg_pool", "GAP_MAX_PIXELS",
           "LAYER_NORM_AVX2_MIN", "LAYER_NORM_PATHS", "layer_norm_avx2", "layer_norm_scalar",
           "layer_norm_sums", "mlas_has_avx2", "mlas_u8s8_saturates", "cpu_flags",
           "ort_layer_norm_path", "ort_layer_norm"]

#: ``vpmaddubsw``'s saturation bounds: a pair of products is clamped to int16
PAIR_MIN, PAIR_MAX = -(1 << 15), (1 << 15) - 1
#: MLAS's SGEMM strides (``MLAS_SGEMM_STRIDEN`` and ``MLAS_SGEMM_STRIDEK``, mlasi.h)
SGEMM_STRIDE = 128
#: MLAS's thread heuristics for ``MlasConvPrepare`` (``MLAS_SGEMM_THREAD_COMPLEXITY``,
#: ``MLAS_SGEMM_STRIDEN_THREAD_ALIGN``, ``MLAS_MAXIMUM_THREAD_COUNT``, mlasi.h)
SGEMM_THREAD_COMPLEXITY = 64 * 1024
SGEMM_THREAD_ALIGN = 16
MAX_THREADS = 16

_F32 = np.float32


# ---------------------------------------------------------------------------- U8S8, AVX2


def u8s8_pair_sums(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``a @ w`` as ``vpmaddubsw`` + ``vpmaddwd`` compute it: ``a`` (N, K) uint8 values as
    stored (0..255), ``w`` (K, M) int8; the products of K-neighbours ``(2j, 2j+1)`` are summed
    and clamped to int16, then the pairs summed exactly (an odd K's last product alone: MLAS
    pads K with zeros). int64 result (N, M)."""
    a64, w64 = np.asarray(a, np.int64), np.asarray(w, np.int64)
    if a64.ndim != 2 or w64.ndim != 2 or a64.shape[1] != w64.shape[0]:
        raise ValueError(f"u8s8_pair_sums: a {list(a64.shape)} and w {list(w64.shape)} are "
                         f"not (N, K) and (K, M)")
    k = a64.shape[1]
    if k % 2:
        a64 = np.pad(a64, ((0, 0), (0, 1)))
        w64 = np.pad(w64, ((0, 1), (0, 0)))
    pairs = np.einsum("nkp,kpm->nkm", a64.reshape(a64.shape[0], -1, 2),
                      w64.reshape(-1, 2, w64.shape[1]))
    return np.clip(pairs, PAIR_MIN, PAIR_MAX).sum(axis=1)


def u8s8_saturates(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Which outputs of ``u8s8_pair_sums(a, w)`` differ from the exact ``a @ w`` (bool (N, M))."""
    exact = np.asarray(a, np.int64) @ np.asarray(w, np.int64)
    return u8s8_pair_sums(a, w) != exact


def _pads(pads: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError(f"pads must be (top, left, bottom, right) >= 0, got {pads}")
    return pads


def _windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
             dilation: tuple[int, int]) -> Iterator[tuple[int, int, np.ndarray]]:
    """Each kernel tap ``(i, j)`` of a padded (C, H, W) ``x``: the (C, OH, OW) values it reads."""
    kh, kw = kernel
    (sh, sw), (dh, dw) = stride, dilation
    oh = (x.shape[1] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[2] - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"a {kh}x{kw} window does not fit the padded input "
                         f"{list(x.shape[1:])}")
    for i in range(kh):
        for j in range(kw):
            yield i, j, x[:, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                          j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _padded(x: np.ndarray, pads: tuple[int, int, int, int], value: float | int) -> np.ndarray:
    t, left, b, r = _pads(pads)
    return np.pad(x, ((0, 0), (t, b), (left, r)), constant_values=value)


def nhwc_columns(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int] = (1, 1),
                 pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                 dilation: tuple[int, int] = (1, 1), fill: int = 0) -> np.ndarray:
    """The im2col matrix of one (C, H, W) image as QLinearConv reads it: (OH * OW, K) with K in
    ``(kh, kw, c)`` order, the padding filled with ``fill`` (the input zero point)."""
    xp = _padded(np.asarray(x, np.int64), pads, fill)
    taps = [v for _, _, v in _windows(xp, kernel, stride, dilation)]  # each (C, OH, OW)
    cols = np.stack(taps)  # (taps, C, OH, OW)
    return cols.reshape(len(taps) * x.shape[0], -1).T


def nhwc_weights(w: np.ndarray) -> np.ndarray:
    """OIHW weights as the (K, M) matrix of ``nhwc_columns``' K order ``(kh, kw, c)``."""
    w = np.asarray(w)
    return w.transpose(2, 3, 1, 0).reshape(-1, w.shape[0])


def qlinear_conv_u8s8_acc(x: np.ndarray, zx: int, w: np.ndarray, bias: np.ndarray,
                          stride: tuple[int, int] = (1, 1),
                          pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                          dilation: tuple[int, int] = (1, 1)) -> np.ndarray:
    """ORT's int32 accumulator of a uint8 x int8 ``QLinearConv`` (group 1) on AVX2: ``x`` one
    (C, H, W) uint8 image as stored, ``zx`` its zero point, ``w`` int8 OIHW (zero point 0,
    ORT's symmetric weights), ``bias`` int32 (M,). Returns (M, OH, OW) int64: the pair sums
    (``u8s8_pair_sums``) in ORT's channels-last K order, minus ``zx * sum_k w``, plus the
    bias. Grouped convolutions run other MLAS kernels and are not modelled (``ValueError``)."""
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[1] != np.shape(x)[0]:
        raise ValueError(f"qlinear_conv_u8s8_acc: weights {list(w.shape)} for an input of "
                         f"{np.shape(x)[0]} channels: only group 1 is modelled")
    cols = nhwc_columns(x, (w.shape[2], w.shape[3]), stride, pads, dilation, fill=zx)
    wk = nhwc_weights(w).astype(np.int64)
    acc = u8s8_pair_sums(cols, wk) - zx * wk.sum(axis=0) + np.asarray(bias, np.int64)
    oh, ow = _out_hw(np.shape(x)[1:], (w.shape[2], w.shape[3]), stride, pads, dilation)
    return acc.T.reshape(w.shape[0], oh, ow)


def qgemm_u8s8_acc(a: np.ndarray, za: int, w_km: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """ORT's int32 accumulator of a uint8 x int8 ``QGemm`` / ``QLinearMatMul`` on AVX2: ``a``
    (N, K) uint8 as stored, ``w_km`` (K, M) int8 (zero point 0), ``bias`` (M,)."""
    w64 = np.asarray(w_km, np.int64)
    return u8s8_pair_sums(a, w64) - za * w64.sum(axis=0) + np.asarray(bias, np.int64)


def _out_hw(hw: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int],
            pads: tuple[int, int, int, int], dilation: tuple[int, int]) -> tuple[int, int]:
    t, left, b, r = pads
    return ((hw[0] + t + b - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1,
            (hw[1] + left + r - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1)


# ---------------------------------------------------------------------------- float Conv


def sgemm_strides(n: int, k: int) -> tuple[int, int]:
    """MLAS's ``(N stride, K stride)`` for an SGEMM of ``n`` output columns and depth ``k``
    (``MlasSgemmOperation`` / ``MlasConvOperation``: both start at 128; a wide product trades
    K for N while half the K stride still covers K, a narrow one trades N for K while the N
    stride stays at least 16 and half of it still covers N)."""
    sn = sk = SGEMM_STRIDE
    if n >= k:
        while sk // 2 >= k:
            sn, sk = sn * 2, sk // 2
    else:
        while sn > 16 and sn // 2 >= n:
            sn, sk = sn // 2, sk * 2
    return sn, sk


def sgemm_stride_k(n: int, k: int) -> int:
    """MLAS's K block for ``n`` output columns and depth ``k`` (``sgemm_strides``)."""
    return sgemm_strides(n, k)[1]


def conv_segments(filters: int, outputs: int, k: int, threads: int) -> list[tuple[int, int]]:
    """The column ranges ``(start, count)`` of a float convolution's output that MLAS computes
    with one K blocking each, for ``threads`` intra-op threads (``MlasConvPrepare``: the
    expand-then-GEMM-segmented algorithm slices the output columns across threads, each slice
    into N strides; a convolution with more filters than output columns expands fully and
    runs one GEMM, modelled as one slice). Pointwise convolutions (GEMM direct) likewise."""
    if filters > outputs:
        return [(0, outputs)]
    complexity = filters * outputs * k
    target = complexity // SGEMM_THREAD_COMPLEXITY + 1 if \
        complexity < SGEMM_THREAD_COMPLEXITY * MAX_THREADS else MAX_THREADS
    target = min(target, threads)
    stride = -(-outputs // target)
    if target > 1:
        stride = (stride + SGEMM_THREAD_ALIGN - 1) // SGEMM_THREAD_ALIGN * SGEMM_THREAD_ALIGN
        if stride >= outputs:
            target = 1
    if target == 1:
        stride = outputs
    out = []
    for seg in range(0, outputs, stride):
        count = min(stride, outputs - seg)
        sn = sgemm_strides(count, k)[0]
        out += [(seg + n, min(sn, count - n)) for n in range(0, count, sn)]
    return out


def _fma_chain(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a (M, K) @ b (K, N)`` as one FMA3 kernel call: from zero, ``acc = fma(a_k, b_k, acc)``
    for k in order, in float32."""
    acc = np.zeros((a.shape[0], b.shape[1]), _F32)
    for kk in range(a.shape[1]):
        acc = fma32(a[:, kk:kk + 1], b[kk:kk + 1, :], acc)
    return acc


def _sgemm(a: np.ndarray, b: np.ndarray, stride_k: int) -> np.ndarray:
    """MLAS's float32 ``a @ b`` with K blocks of ``stride_k`` (each block's FMA chain from
    zero, added to the output: ``fma(acc, alpha=1, C)`` is one rounding of ``acc + C``)."""
    out: np.ndarray | None = None
    for k0 in range(0, a.shape[1], stride_k):
        part = _fma_chain(a[:, k0:k0 + stride_k], b[k0:k0 + stride_k])
        out = part if out is None else (out + part).astype(_F32)
    assert out is not None
    return out


def float_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
               stride: tuple[int, int] = (1, 1), pads: tuple[int, int, int, int] = (0, 0, 0, 0),
               dilation: tuple[int, int] = (1, 1), threads: int = 1) -> np.ndarray:
    """ORT's float32 ``Conv`` (group 1) of one (C, H, W) float32 image by OIHW float32
    weights, as ``MlasConv`` computes it on x86-64 (module docstring): im2col in ``(c, kh,
    kw)`` order, per column range of ``conv_segments`` an SGEMM with MLAS's K blocks of FMA
    chains, then the bias added (one float32 addition). Returns (M, OH, OW) float32."""
    w = np.asarray(w, _F32)
    if w.ndim != 4 or w.shape[1] != np.shape(x)[0]:
        raise ValueError(f"float_conv: weights {list(w.shape)} for an input of "
                         f"{np.shape(x)[0]} channels: only group 1 is modelled")
    xp = _padded(np.asarray(x, _F32), pads, 0.0)
    taps = list(_windows(xp, (w.shape[2], w.shape[3]), stride, dilation))
    oh, ow = taps[0][2].shape[1:]
    cols = np.stack([v for _, _, v in taps], axis=1)  # (C, taps, OH, OW): K = (c, kh, kw)
    cols = cols.reshape(-1, oh * ow)
    wm = w.reshape(w.shape[0], -1)
    y = np.empty((w.shape[0], oh * ow), _F32)
    for start, count in conv_segments(w.shape[0], oh * ow, wm.shape[1], threads):
        block = sgemm_stride_k(count, wm.shape[1])
        y[:, start:start + count] = _sgemm(wm, cols[:, start:start + count], block)
    if bias is not None:
        y = (y + np.asarray(bias, _F32)[:, None]).astype(_F32)
    return y.reshape(w.shape[0], oh, ow)


def dequantize(q: np.ndarray, scale: float | np.ndarray, zero: int | np.ndarray = 0,
               axis: int | None = None) -> np.ndarray:
    """ORT's ``DequantizeLinear``: ``float32(q - z) * s`` (one float32 product); a per-channel
    ``scale`` (and ``zero``) along ``axis``."""
    q = np.asarray(q, np.int64)
    s, z = np.asarray(scale, _F32), np.asarray(zero, np.int64)
    if s.ndim and axis is not None:
        shape = [-1 if d == axis else 1 for d in range(q.ndim)]
        s = s.reshape(shape)
        z = z.reshape(shape) if z.ndim else z
    return ((q - z).astype(_F32) * s).astype(_F32)


def quantize(v: np.ndarray, scale: float, zero: int, unsigned: bool) -> np.ndarray:
    """ORT's ``QuantizeLinear`` of float32 ``v``: a float32 division, round half to even,
    plus the zero point, saturated to uint8 or int8 (int64 result)."""
    q = np.rint((np.asarray(v, _F32) / _F32(scale)).astype(np.float64)).astype(np.int64) + zero
    return np.clip(q, *((0, 255) if unsigned else (-128, 127))).astype(np.int64)


def qdq_conv(x: np.ndarray, sx: float, zx: int, w: np.ndarray, sw: float | np.ndarray,
             bias: np.ndarray | None, sb: float | np.ndarray, sy: float, zy: int,
             unsigned: bool, stride: tuple[int, int] = (1, 1),
             pads: tuple[int, int, int, int] = (0, 0, 0, 0),
             dilation: tuple[int, int] = (1, 1), relu: bool = False,
             threads: int = 1) -> np.ndarray:
    """ORT's ``QuantizeLinear(Conv(DequantizeLinear(x), DequantizeLinear(w),
    DequantizeLinear(b)))`` (a ``Relu`` before the quantize with ``relu``) with
    ``ORT_DISABLE_ALL``: ``x`` one (C, H, W) image as stored (uint8 0..255 or int8), ``w``
    int8 OIHW (zero point 0; ``sw`` per tensor or per output channel), ``bias`` int32 with
    scale ``sb``. Returns the stored output (M, OH, OW), int64."""
    xf = dequantize(x, sx, zx)
    wf = dequantize(w, sw, 0, axis=0)
    bf = None if bias is None else dequantize(bias, sb, 0, axis=0)
    y = float_conv(xf, wf, bf, stride, pads, dilation, threads)
    if relu:
        y = np.maximum(y, _F32(0))
    return quantize(y, sy, zy, unsigned)


#: ORT's largest QLinearGlobalAveragePool image (``ImageSize >= 0x1000000`` is refused: the sum's
#: float32 conversion must stay exact)
GAP_MAX_PIXELS = (1 << 24) - 1


def qlinear_gap_ratio(sx: float, sy: float, pixels: int) -> float:
    """ORT's QLinearGlobalAveragePool ratio (MLAS ``CheckQLinearGlobalAveragePoolScaleAndSize``):
    ``ScaleInput / (ScaleOutput * float(ImageSize))``, each operation rounded to float32."""
    f32 = np.float32
    return float(f32(sx) / (f32(sy) * f32(pixels)))


def gap_ratio_refused(ratio: float, pixels: int) -> str | None:
    """Why ORT's QLinearGlobalAveragePool refuses ``ratio`` over ``pixels`` (its range check:
    the output would be constant, or the image too large), or None."""
    if pixels > GAP_MAX_PIXELS:
        return f"an image of {pixels} pixels (ORT's limit is {GAP_MAX_PIXELS})"
    if not 2.0 ** -32 <= ratio < 256.0:
        return f"the ratio s_x / (s_y * pixels) = {ratio:.6g} is outside [2**-32, 256)"
    return None


def qlinear_global_avg_pool(x: np.ndarray, zx: int, ratio: float, zy: int, lo: int = -128,
                            hi: int = 127) -> np.ndarray:
    """ORT's QLinearGlobalAveragePool of NCHW integers ``x`` (as stored, or the graph IR's
    int8 form with its zero points: the sum minus ``N * zx`` is the same): the exact sum per
    channel minus ``N * zx``, then ``ort_requantize`` by ``ratio`` (``qlinear_gap_ratio``) to
    ``zy``, clamped to [``lo``, ``hi``]; shape (N, C)."""
    a = np.asarray(x, dtype=np.int64)
    pixels = int(np.prod(a.shape[2:]))
    acc = a.sum(axis=tuple(range(2, a.ndim))) - pixels * int(zx)
    return ort_requantize(acc, ratio, zy, lo, hi)


# ---------------------------------------------------------------------------- LayerNormalization

#: ``MlasLayerNormF32``'s x86 threshold: a LayerNormalization row shorter than this runs ORT's
#: scalar ComputeJob even where the AVX2 kernel is registered (core/mlas/lib/layernorm.cpp)
LAYER_NORM_AVX2_MIN = 8
_F64 = np.float64


def _lanes_sum(acc: np.ndarray) -> np.ndarray:
    """The AVX2 kernel's horizontal sum of eight float32 lanes (rows, 8): ``extractf128`` +
    ``add_ps`` (lane i + lane i+4), ``movehl`` + ``add_ps`` (0+2, 1+3), ``movehdup`` +
    ``add_ss`` (0+1), each a float32 rounding."""
    r = (acc[:, :4] + acc[:, 4:]).astype(_F32)
    r = (r[:, :2] + r[:, 2:]).astype(_F32)
    return (r[:, 0] + r[:, 1]).astype(_F32)


def _kernel_mean(x: np.ndarray) -> np.ndarray:
    """The AVX2 kernel's mean of rows ``x`` (rows, n) float32: four float64 lanes (``cvtps_pd``
    + ``add_pd``), reduced (0+2, 1+3) then (0+1), the tail added in order, divided by ``n`` in
    float64, rounded to float32."""
    n = x.shape[1]
    body = n - n % 4
    lanes = np.zeros((x.shape[0], 4), _F64)
    for i in range(0, body, 4):
        lanes = lanes + x[:, i:i + 4].astype(_F64)
    r = lanes[:, :2] + lanes[:, 2:]
    total = r[:, 0] + r[:, 1]
    for i in range(body, n):
        total = total + x[:, i].astype(_F64)
    return (total / _F64(n)).astype(_F32)


def _kernel_variance_sum(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The AVX2 kernel's ``sum (x - mean)**2`` of rows ``x`` (float32): eight lanes of fused
    multiply-adds, ``_lanes_sum``, then the tail as the compiler built it (measured against
    ORT 1.32.0: a four-wide block squared and added in order, the rest fused)."""
    n = x.shape[1]
    body = n - n % 8
    acc = np.zeros((x.shape[0], 8), _F32)
    for i in range(0, body, 8):
        d = (x[:, i:i + 8] - mean[:, None]).astype(_F32)
        acc = fma32(d, d, acc)
    total = _lanes_sum(acc)
    i = body
    if n - i >= 4:
        for j in range(i, i + 4):
            d = (x[:, j] - mean).astype(_F32)
            total = (total + (d * d).astype(_F32)).astype(_F32)
        i += 4
    for j in range(i, n):
        d = (x[:, j] - mean).astype(_F32)
        total = fma32(d, d, total)
    return total


def layer_norm_avx2(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None,
                    epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MLAS's ``MlasLayerNormKernelAvx2`` on each row of ``x`` (rows, n) float32 with
    ``scale`` and ``bias`` (n,) (module docstring): ``(y, mean, inv_std_dev)``, float32."""
    x = np.asarray(x, _F32)
    n = x.shape[1]
    mean = _kernel_mean(x)
    var = _kernel_variance_sum(x, mean)
    den = np.sqrt((var / _F32(n) + _F32(epsilon)).astype(_F32)).astype(_F32)
    inv = (_F32(1) / den).astype(_F32)
    t = ((x - mean[:, None]).astype(_F32) * inv[:, None]).astype(_F32)
    s = np.asarray(scale, _F32).reshape(1, n)
    if bias is None:
        y = (t * s).astype(_F32)
    else:
        y = fma32(t, s, np.broadcast_to(np.asarray(bias, _F32).reshape(1, n), t.shape))
    return y, mean, inv


def layer_norm_scalar(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None,
                      epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ORT's scalar float ``ComputeJob`` (layer_norm_impl.cc) on each row of ``x`` (rows, n)
    float32: Welford's recurrence in float32, ``den = sqrt(m2 / n + eps)``, ``y = (x - mean) /
    den * scale + bias`` unfused (module docstring): ``(y, mean, 1 / den)``, float32."""
    x = np.asarray(x, _F32)
    n = x.shape[1]
    mean = np.zeros(x.shape[0], _F32)
    m2 = np.zeros(x.shape[0], _F32)
    for k in range(n):
        d = (x[:, k] - mean).astype(_F32)
        mean = (mean + (d / _F32(k + 1)).astype(_F32)).astype(_F32)
        m2 = (m2 + (d * (x[:, k] - mean).astype(_F32)).astype(_F32)).astype(_F32)
    den = np.sqrt((m2 / _F32(n) + _F32(epsilon)).astype(_F32)).astype(_F32)
    y = ((x - mean[:, None]).astype(_F32) / den[:, None]).astype(_F32)
    y = (y * np.asarray(scale, _F32).reshape(1, n)).astype(_F32)
    if bias is not None:
        y = (y + np.asarray(bias, _F32).reshape(1, n)).astype(_F32)
    return y, mean, (_F32(1) / den).astype(_F32)


def layer_norm_sums(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None,
                    epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ORT's float ComputeJob before onnxruntime 1.27 on each row of ``x`` (rows, n) float32:
    ``sum x`` and ``sum x*x`` accumulated in order in float32, ``mean = sum / n``, ``den =
    sqrt(sum_sq / n - mean * mean + eps)``, ``y = (x - mean) / den * scale + bias`` unfused:
    ``(y, mean, 1 / den)``, float32."""
    x = np.asarray(x, _F32)
    n = x.shape[1]
    total = np.zeros(x.shape[0], _F32)
    squares = np.zeros(x.shape[0], _F32)
    for k in range(n):
        total = (total + x[:, k]).astype(_F32)
        squares = (squares + (x[:, k] * x[:, k]).astype(_F32)).astype(_F32)
    mean = (total / _F32(n)).astype(_F32)
    var = ((squares / _F32(n)).astype(_F32) - (mean * mean).astype(_F32)).astype(_F32)
    den = np.sqrt((var + _F32(epsilon)).astype(_F32)).astype(_F32)
    y = ((x - mean[:, None]).astype(_F32) / den[:, None]).astype(_F32)
    y = (y * np.asarray(scale, _F32).reshape(1, n)).astype(_F32)
    if bias is not None:
        y = (y + np.asarray(bias, _F32).reshape(1, n)).astype(_F32)
    return y, mean, (_F32(1) / den).astype(_F32)


_LayerNorm = Callable[[np.ndarray, np.ndarray, np.ndarray | None, float],
                      tuple[np.ndarray, np.ndarray, np.ndarray]]
#: ORT's LayerNormalization paths by name (``ort_layer_norm_path``)
LAYER_NORM_PATHS: dict[str, _LayerNorm] = {"avx2": layer_norm_avx2, "welford": layer_norm_scalar,
                                           "sums": layer_norm_sums}


@cache
def cpu_flags() -> frozenset[str]:
    """This machine's CPU feature flags (/proc/cpuinfo's ``flags``) on x86-64; empty elsewhere
    or where they cannot be read. The flags pick MLAS's x86 kernels (``platform.cpp``)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(next((ln.split(":", 1)[1].split() for ln in text.splitlines()
                           if ln.startswith("flags")), []))


def mlas_has_avx2() -> bool:
    """Whether MLAS registers its AVX2 LayerNorm kernel on this machine: x86-64 with AVX2 and
    FMA3 (``platform.cpp``'s AVX2 block; False where the flags cannot be read: ORT's scalar
    path)."""
    return {"avx2", "fma"} <= cpu_flags()


def mlas_u8s8_saturates() -> bool:
    """Whether ORT's uint8 x int8 kernels on this machine saturate pairs of products to int16
    (``u8s8_pair_sums``): x86-64 with AVX2 and neither AVX-VNNI nor AVX512-VNNI. MLAS's
    AVX2 and AVX512-Core U8S8 kernels use ``vpmaddubsw``; its VNNI kernels (``vpdpbusd``) and
    ARM's sum exactly."""
    flags = cpu_flags()
    return "avx2" in flags and not {"avx_vnni", "avx512_vnni"} & flags


def _ort_version() -> tuple[int, int] | None:
    """The installed onnxruntime's (major, minor), read from its package metadata (ORT is not
    imported), or None where it is not installed. (``importlib.metadata`` is imported here, not
    with the module: with ``email`` and the rest it costs every ``vta`` command's start about
    20 ms, and only a layer normalization asks.)"""
    from importlib import metadata

    try:
        parts = metadata.version("onnxruntime").split(".")
        return int(parts[0]), int(parts[1])
    except (metadata.PackageNotFoundError, ValueError, IndexError):
        return None


@cache
def ort_layer_norm_path(n: int) -> str:
    """The path (``LAYER_NORM_PATHS``) the installed ONNX Runtime takes on this CPU for a
    LayerNormalization row of ``n`` values (module docstring): ``"avx2"`` from 1.30 for ``n
    >= LAYER_NORM_AVX2_MIN`` where ``mlas_has_avx2()``, ``"welford"`` from 1.27 otherwise,
    ``"sums"`` before; without onnxruntime installed, the newest measured behaviour."""
    version = _ort_version() or (1, 32)
    if version >= (1, 30) and n >= LAYER_NORM_AVX2_MIN and mlas_has_avx2():
        return "avx2"
    return "welford" if version >= (1, 27) else "sums"


def ort_layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int,
                   epsilon: float, path: str | None = None) -> np.ndarray:
    """ONNX Runtime's CPU LayerNormalization of float32 ``x`` over the axes from ``axis`` on
    (``scale`` and ``bias`` of that many values), each row by ``path`` (``LAYER_NORM_PATHS``;
    default ``ort_layer_norm_path``: the installed ORT's on this CPU). Returns float32 of
    ``x``'s shape."""
    x = np.asarray(x, _F32)
    axis = axis + x.ndim if axis < 0 else axis
    n = int(np.prod(x.shape[axis:], dtype=np.int64))
    if np.asarray(scale).size != n or (bias is not None and np.asarray(bias).size != n):
        raise GraphError(f"layer norm over {list(x.shape[axis:])} ({n} values) needs a scale "
                         f"and bias of {n} values, got {np.asarray(scale).size} and "
                         f"{'none' if bias is None else np.asarray(bias).size}")
    name = ort_layer_norm_path(n) if path is None else path
    if name not in LAYER_NORM_PATHS:
        raise GraphError(f"unknown layer norm path {name!r} (known: "
                         f"{', '.join(LAYER_NORM_PATHS)})")
    y = LAYER_NORM_PATHS[name](x.reshape(-1, n), scale, bias, epsilon)[0]
    return y.reshape(x.shape)
