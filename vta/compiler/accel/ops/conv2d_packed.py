"""conv2d on the accelerator: the tensor-IR definition over the packed NCHWnc layout.

``conv2d_compute`` defines the op over the packed layout under a schedule (padding as a compute
stage, the int32 reduction, the requantizing epilogue as element-wise stages and the narrowing
cast as the output); ``packed_dims`` gives the packed dimensions a schedule's tiles need.
``schedules/default.py`` schedules and lowers it; the pipeline (``accel.pipeline``) compiles the
lowered function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue, epilogue_compute
from vta.config import HwConfig

if TYPE_CHECKING:
    from vta.compiler.accel.schedules.space import ConvSchedule


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


def padded_rows(oh: Any, th: Any, vthreads: int, vt_axis: str) -> Any:
    """Output rows padded to whole tiles of ``th`` rows (x the row threads): ``packed_dims``'s
    ``ohp``; ``th`` may be an array of tile sizes (the schedule model prices many at once)."""
    return _up(oh, th * (vthreads if vt_axis == "oh" else 1))


def padded_extents(spec: Conv2dSpec, hw: HwConfig, sch: Any) -> tuple[Any, Any, Any, Any]:
    """``packed_dims``'s ``(icb, ocb, ohp, owp)``: channel blocks padded to whole tiles (x oc
    threads), output rows/columns to whole tiles (x row threads). ``sch`` is a
    ``ConvSchedule`` or a ``schedules.space.TileBatch`` (its tile knobs arrays: then arrays
    of answers; the graph's exact-layout rule filters a whole space at once)."""
    g = hw.gemm
    v_oc = sch.vthreads if sch.vt_axis == "oc" else 1
    return (_up(math.ceil(spec.ic / g.block_in), sch.tci),
            _up(math.ceil(spec.oc / g.block_out), sch.tco * v_oc),
            padded_rows(spec.oh, sch.th, sch.vthreads, sch.vt_axis), _up(spec.ow, sch.tw))


def packed_dims(spec: Conv2dSpec, hw: HwConfig, sch: ConvSchedule) -> PackedConv2d:
    """Packed sizes: channels padded to whole tiles (x oc threads), output rows/columns to
    whole tiles (x row threads); the runtime pads with zeros and drops the padding."""
    g = hw.gemm
    icb, ocb, ohp, owp = padded_extents(spec, hw, sch)
    return PackedConv2d(
        nb=math.ceil(spec.n / g.batch), icb=icb, ocb=ocb, h=spec.h, w=spec.w,
        kh=spec.kh, kw=spec.kw, stride=spec.stride, pad=spec.pad, ohp=ohp, owp=owp,
        b=g.batch, bi=g.block_in, bo=g.block_out)


def rows_subsampled(kh: int, stride: int, pad: int, ohp: Any, h: int) -> Any:
    """Whether ``data_pad`` keeps only the input rows a one-row, strided, unpadded kernel reads
    (every row of the ``ohp`` padded output rows inside the image); ``ohp`` may be an array
    (then an array of answers where the kernel qualifies)."""
    return kh == 1 and stride > 1 and pad == 0 and (ohp - 1) * stride < h


def row_subsampled(P: PackedConv2d) -> bool:
    """``rows_subsampled`` of a packed convolution."""
    return bool(rows_subsampled(P.kh, P.stride, P.pad, P.ohp, P.h))


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
