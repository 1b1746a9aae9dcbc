"""2-D convolution (NCHW int8 in, int32 accumulate, requantizing epilogue, int8 out): the
problem and its bit-exact numpy reference.

``Conv2dSpec`` describes the user's problem; ``conv2d_int32`` is the one convolution reference
(the layer runs' check and the graph interpreter read it), ``conv2d_acc`` its int32
accumulators for a spec (wrapping like the hardware's) and ``conv2d_reference`` applies the
epilogue to them. The
accelerator's packed form is ``vta.compiler.accel.ops.conv2d_packed``, the GPU's implicit GEMM
``vta.gpu.ops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vta.compiler.ir import semantics as sem
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.errors import ShapeError

if TYPE_CHECKING:
    pass

__all__ = ["Conv2dSpec", "conv2d_int32", "conv2d_acc", "conv2d_reference"]

#: a float64 sum of integer products is exact while every partial sum stays below 2**53
_FLOAT64_EXACT = 1 << 53
#: float32 holds every integer of magnitude up to 2**24 exactly (its 24-bit significand)
_FLOAT32_EXACT = 1 << 24
#: a sum below this in magnitude is an int32 as it is (no wrap)
_INT32_RANGE = 1 << 31


@dataclass(frozen=True, slots=True)
class Conv2dSpec:
    """NCHW convolution: ``n`` images of ``ic`` x ``h`` x ``w``, ``oc`` filters ``kh`` x ``kw``."""

    n: int
    ic: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    stride: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        for f in ("n", "ic", "h", "w", "oc", "kh", "kw", "stride"):
            if getattr(self, f) < 1:
                raise ShapeError(f"conv2d: {f} must be >= 1, got {getattr(self, f)}")
        if self.pad < 0:
            raise ShapeError(f"conv2d: pad must be >= 0, got {self.pad}")
        if self.pad >= max(self.kh, self.kw):
            raise ShapeError(f"conv2d: pad must be smaller than the kernel, got "
                             f"pad {self.pad} for a {self.kh}x{self.kw} kernel")
        if self.oh < 1 or self.ow < 1:
            raise ShapeError(f"conv2d: kernel {self.kh}x{self.kw} does not fit the padded "
                             f"{self.h}x{self.w} input")

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.kh) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.kw) // self.stride + 1

    @property
    def ops(self) -> int:
        """Arithmetic operations (2 per MAC) of the convolution proper."""
        return 2 * self.n * self.oc * self.oh * self.ow * self.ic * self.kh * self.kw

    def describe(self) -> str:
        return (f"conv2d N={self.n} {self.ic}x{self.h}x{self.w} -> {self.oc}x{self.oh}x{self.ow}"
                f" k={self.kh}x{self.kw} s={self.stride} p={self.pad}")


def _max_abs(a: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int64)).max()) if a.size else 0


def _dtype_max_abs(a: np.ndarray) -> int | None:
    """The largest magnitude ``a``'s integer dtype can hold (128 for int8), None for another
    dtype: a bound on ``_max_abs`` without reading the values."""
    if a.dtype.kind not in "iu":
        return None
    info = np.iinfo(a.dtype)
    return max(-int(info.min), int(info.max))


def _product_bound(x: np.ndarray, w: np.ndarray, taps: int) -> int:
    """A bound on the magnitude of every product of an element of ``x`` and one of ``w``:
    from the dtypes' ranges alone when that bound already shows float64 sums of ``taps``
    products exact (int8 by int8 always: the interpreter's convolutions read no operand an
    extra time), else from the values (max |x| x max |w|)."""
    bx, bw = _dtype_max_abs(x), _dtype_max_abs(w)
    if bx is not None and bw is not None and bx * bw * taps < _FLOAT64_EXACT:
        return bx * bw
    return _max_abs(x) * _max_abs(w)


def float32_rows(product: int, rows: int) -> int:
    """How many rows of an (O, K) @ (K, P) product of integers each product of magnitude at
    most ``product`` may sum in one float32 product with every partial sum exact (float32
    holds every integer up to 2**24, whatever order BLAS adds in): at most ``rows``, at
    least 1 when a single product is exact, 0 when not even one is."""
    if product > _FLOAT32_EXACT:
        return 0
    return min(rows, _FLOAT32_EXACT // product) if product else rows


def _float32_int32(w: np.ndarray, cols: np.ndarray, step: int) -> np.ndarray:
    """The int32 (O, P) sums of ``w`` (O, K) @ ``cols`` (K, P), float32, ``step`` rows of K
    at a time (``float32_rows``: each product's sums exact), the parts added in int32 (the
    caller knows no sum can leave int32)."""
    k = w.shape[1]
    if step >= k:
        return (w @ cols).astype(np.int32)
    acc = np.zeros((w.shape[0], cols.shape[1]), np.int32)
    for a in range(0, k, step):
        acc += (w[:, a:a + step] @ cols[a:a + step]).astype(np.int32)
    return acc


def conv2d_int32(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """Exact int32 (wrapping) sums (N, O, OH, OW) of an NCHW integer convolution with an OIHW
    kernel, ``stride`` and ``pad`` zeros on each side. im2col and matrix products, in BLAS
    where every partial sum is exact there: in float32 (half the bytes to gather, about twice
    the speed of float64), as many taps at a time as keep the sums below 2**24
    (``float32_rows``: 1,024 for int8 by int8), when no sum can leave int32 (int8 by int8
    with fewer than 131,072 taps), the parts added in int32; else in float64 (max |x| x
    max |w| x taps < 2**53, which int8 and int16 operands always meet); else in int64, whose
    wrap modulo 2**64 keeps the result modulo 2**32 exact. Either way the int32 result wraps
    like the hardware's (when no sum can leave int32, it is converted to int32 directly)."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    taps = w[0].size if o else 0
    product = _product_bound(x, w, taps)
    bound = product * taps
    step = float32_rows(product, taps) if bound < _INT32_RANGE else 0
    dt = np.float32 if step else np.float64 if bound < _FLOAT64_EXACT else np.int64
    # padded in the operand's own dtype, converted once, by the gather into columns
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, : stride * (oh - 1) + 1: stride, : stride * (ow - 1) + 1: stride]
    # the columns as (K, P), gathered along the image's rows (contiguous runs; the (P, K)
    # order gathers kernel rows of a few elements); the sums are exact in any order
    cols: np.ndarray = np.ascontiguousarray(win.transpose(1, 4, 5, 0, 2, 3), dtype=dt).reshape(
        -1, n * oh * ow)
    # (O, K) @ (K, P): BLAS is far faster with the wide side last
    wm: np.ndarray = w.astype(dt).reshape(o, -1)
    if step:
        out = _float32_int32(wm, cols, step)
    elif bound < _INT32_RANGE:  # no sum wraps: the int32 values as they are
        out = (wm @ cols).astype(np.int32)
    else:
        out = np.asarray(sem.cast((wm @ cols).astype(np.int64), sem.dtype("int32")))  # wrap
    # C order, as callers expect of a fresh array (np.zeros_like of it feeds kernels)
    return np.ascontiguousarray(out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))


def conv2d_acc(x: np.ndarray, k: np.ndarray, spec: Conv2dSpec) -> np.ndarray:
    """Bit-exact numpy accumulators (N, OC, OH, OW) int32 of ``spec``, wrapping like the
    hardware's (``conv2d_int32``)."""
    return conv2d_int32(x, k, spec.stride, spec.pad)


def conv2d_reference(x: np.ndarray, k: np.ndarray, bias: np.ndarray | None, spec: Conv2dSpec,
                     epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: int32 accumulate (wrapping), then the epilogue."""
    return apply_epilogue(conv2d_acc(x, k, spec), bias, epi, channel_axis=1)


