"""2-D convolution (NCHW int8 in, int32 accumulate, requantizing epilogue, int8 out).

``Conv2dSpec`` describes the user's problem; ``conv2d_reference`` is the bit-exact numpy
reference; ``conv2d_compute`` the tensor-IR definition over the packed NCHWnc layout (padding
as a compute stage, the int32 reduction, the requantizing epilogue as element-wise stages and
the narrowing cast as the output). ``schedules/default.py`` schedules and lowers it; the VTA
pipeline (``vta.compiler.pipeline``) compiles the lowered function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vta.compiler import expr as E
from vta.compiler.ops.epilogue import Epilogue, PackedOp, apply_epilogue, epilogue_compute
from vta.compiler.passes._common import CompileError
from vta.compiler.tensor import compute, placeholder, reduce_axis, sum_
from vta.config import HwConfig

if TYPE_CHECKING:
    from vta.compiler.schedules.space import ConvSchedule

__all__ = ["Conv2dSpec", "PackedConv2d", "conv2d_acc", "conv2d_reference", "conv2d_compute",
           "packed_dims"]


class ShapeError(CompileError):
    """A workload shape is invalid."""


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


def conv2d_acc(x: np.ndarray, k: np.ndarray, spec: Conv2dSpec) -> np.ndarray:
    """Bit-exact numpy accumulators (N, OC, OH, OW) int32, wrapping like the hardware's."""
    s, p = spec.stride, spec.pad
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p, p), (p, p)))
    acc = np.zeros((spec.n, spec.oc, spec.oh, spec.ow), np.int64)
    kk = k.astype(np.int64)
    for r in range(spec.kh):
        for q in range(spec.kw):
            win = xp[:, :, r: r + s * (spec.oh - 1) + 1: s, q: q + s * (spec.ow - 1) + 1: s]
            acc += np.einsum("nchw,oc->nohw", win, kk[:, :, r, q], optimize=True)
    return acc.astype(np.int32)  # wraps like the hardware's int32 accumulator


def conv2d_reference(x: np.ndarray, k: np.ndarray, bias: np.ndarray | None, spec: Conv2dSpec,
                     epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: int32 accumulate (wrapping), then the epilogue."""
    return apply_epilogue(conv2d_acc(x, k, spec), bias, epi, channel_axis=1)


@dataclass(frozen=True, slots=True)
class PackedConv2d:
    """Packed dimensions of a conv2d under a hardware config and a schedule (in blocks/tiles)."""

    nb: int
    icb: int  # input channel blocks (padded to the ic tile)
    ocb: int  # output channel blocks (padded to the oc tile x oc threads)
    h: int
    w: int
    kh: int
    kw: int
    stride: int
    pad: int
    ohp: int  # output rows padded to whole tiles (x row threads)
    owp: int
    b: int
    bi: int
    bo: int

    @property
    def data_shape(self) -> tuple[int, ...]:
        return (self.nb, self.icb, self.h, self.w, self.b, self.bi)

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        return (self.ocb, self.icb, self.kh, self.kw, self.bo, self.bi)

    @property
    def bias_shape(self) -> tuple[int, ...]:
        return (self.ocb, self.b, self.bo)

    @property
    def res_shape(self) -> tuple[int, ...]:
        return (self.nb, self.ocb, self.ohp, self.owp, self.b, self.bo)


def _up(a: int, m: int) -> int:
    return -(-a // m) * m


def packed_dims(spec: Conv2dSpec, hw: HwConfig, sch: ConvSchedule) -> PackedConv2d:
    """Packed sizes: channels padded to whole tiles (x oc threads), output rows/columns to
    whole tiles (x row threads); the runtime pads with zeros and drops the padding."""
    g = hw.gemm
    v_oc = sch.vthreads if sch.vt_axis == "oc" else 1
    v_oh = sch.vthreads if sch.vt_axis == "oh" else 1
    return PackedConv2d(
        nb=math.ceil(spec.n / g.batch), icb=_up(math.ceil(spec.ic / g.block_in), sch.tci),
        ocb=_up(math.ceil(spec.oc / g.block_out), sch.tco * v_oc), h=spec.h, w=spec.w,
        kh=spec.kh, kw=spec.kw, stride=spec.stride, pad=spec.pad,
        ohp=_up(spec.oh, sch.th * v_oh), owp=_up(spec.ow, sch.tw), b=g.batch, bi=g.block_in,
        bo=g.block_out)


def row_subsampled(P: PackedConv2d) -> bool:
    """Whether ``data_pad`` keeps only the input rows a one-row, strided, unpadded kernel reads
    (every row of the padded output tiles inside the image)."""
    return P.kh == 1 and P.stride > 1 and P.pad == 0 and (P.ohp - 1) * P.stride < P.h


def conv2d_compute(spec: Conv2dSpec, hw: HwConfig, sch: ConvSchedule, epi: Epilogue) -> PackedOp:
    """The packed conv2d in the tensor IR.

    ``data_pad`` zero-pads the input (it covers every row/column the padded output tiles read;
    rows past the image are zero too), ``conv`` reduces over input-channel blocks, the window and
    the block lanes in int32, the epilogue stages requantize (``>> shift``, ``+ bias``,
    ``max``/``min``) and ``res`` narrows to int8 (docs/ir.md: ``lower`` turns it into the
    copy-out stage)."""
    P = packed_dims(spec, hw, sch)
    s, p = P.stride, P.pad
    hp = max(P.h + 2 * p, (P.ohp - 1) * s + P.kh)
    wp = max(P.w + 2 * p, (P.owp - 1) * s + P.kw)
    data = placeholder(P.data_shape, "int8", "data")
    kernel = placeholder(P.kernel_shape, "int8", "kernel")
    bias = placeholder(P.bias_shape, "int32", "bias") if epi.bias else None
    rs = s  # input rows per output row in data_pad
    if row_subsampled(P):
        # a one-row kernel with stride s reads only every s-th input row: data_pad keeps just
        # those rows (a strided view), so the input copy is one DMA of rows s*W apart that
        # moves no unused row (every row it names lies inside the image: no row padding)
        hp, rs = P.ohp, 1
        pad = compute((P.nb, P.icb, hp, wp, P.b, P.bi), lambda n, c, y, x, b, i: E.select(
            (x >= p) & (x < P.w + p), data[n, c, y * s, x - p, b, i], E.const(0, "int8")),
            "data_pad")
    else:
        pad = compute((P.nb, P.icb, hp, wp, P.b, P.bi), lambda n, c, y, x, b, i: E.select(
            (y >= p) & (y < P.h + p) & (x >= p) & (x < P.w + p), data[n, c, y - p, x - p, b, i],
            E.const(0, "int8")), "data_pad")
    ric, rkh, rkw, rbi = (reduce_axis(P.icb, "ic"), reduce_axis(P.kh, "kh"),
                          reduce_axis(P.kw, "kw"), reduce_axis(P.bi, "bi"))
    conv = compute(P.res_shape, lambda n, o, y, x, b, j: sum_(
        pad[n, ric, y * rs + rkh, x * s + rkw, b, rbi].astype("int32")
        * kernel[o, ric, rkh, rkw, j, rbi].astype("int32"), [ric, rkh, rkw, rbi]), "conv")
    stages, res = epilogue_compute(conv, bias, epi, channel_axis=1)
    inputs = (data, kernel) if bias is None else (data, kernel, bias)
    return PackedOp("conv2d", inputs, pad, conv, tuple(stages), res,
                    {"n": 0, "oc": 1, "oh": 2, "ow": 3})
