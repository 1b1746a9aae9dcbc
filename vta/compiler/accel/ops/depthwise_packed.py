"""Depthwise conv2d (``ops.depthwise.DepthwiseSpec``) on the accelerator.

``out[n, c, y, x] = epilogue(sum_{r,q} in[n, c, y*s + r - p, x*s + q - p] * w[c, r, q])``.

The accelerator has no per-channel unit, so the stock lowering runs each block of ``block``
channels as a GEMM whose weight block is *diagonal* (``w`` on the diagonal, zeros elsewhere):
one tensor op per output pixel, tap and channel block, of which 1/block of the MACs are useful.
This is the best the stock hardware does (the ``"diagonal"`` weight layout, tensorized onto the
GEMM intrinsic). A hardware variant with an element-wise multiply-accumulate unit can take the
same computation with ``"vector"`` weights: one weight *vector* per channel block and tap,
packed like an input entry, and the op multiplies entries lane by lane; ``compile_depthwise``
accepts the intrinsic to tensorize with and the scratchpad its weights live in.

Packed layouts (b = gemm.batch, k = block = block_in = block_out):

* data ``(N/b, C/k, H, W, b, k)`` int8 (as conv2d's);
* diagonal weights ``(C/k, KH, KW, k, k)`` int8 (wgt entries); vector weights ``(C/k, KH, KW,
  b, k)`` int8 (one inp entry each, repeated over the batch rows);
* bias ``(C/k, b, k)`` int32; result ``(N/b, C/k, OH', OW', b, k)`` int8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.accel.cost import instruction_cycles, microop_instruction_cycles, prototype
from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.ops.epilogue_plan import epilogue_plan
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.ir import expr as E
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_
from vta.compiler.ops.depthwise import DepthwiseSpec
from vta.compiler.ops.epilogue import Epilogue, epilogue_compute
from vta.config import HwConfig
from vta.errors import ShapeError, VtaError
from vta.isa import MemType
from vta.isa.builtins import GEMM, LOAD, STORE
from vta.isa.defs import require

if TYPE_CHECKING:
    from vta.compiler.ir.intrin import TensorIntrinsic
    from vta.compiler.ir.schedule import Schedule


WEIGHT_LAYOUTS = ("diagonal", "vector")


@dataclass(frozen=True, slots=True)
class DwSchedule:
    """Tile: ``tc`` channel blocks x ``th`` output rows x ``tw`` output columns per
    accumulator tile; ``vthreads`` threads over the output rows (latency hiding)."""

    tc: int
    th: int
    tw: int
    vthreads: int = 2

    def __post_init__(self) -> None:
        for f in ("tc", "th", "tw", "vthreads"):
            if getattr(self, f) < 1:
                raise VtaError(f"depthwise schedule: {f} must be >= 1, got {getattr(self, f)}")


@dataclass(frozen=True, slots=True)
class PackedDepthwise:
    nb: int
    cb: int  # channel blocks (padded to the channel tile)
    h: int
    w: int
    k: int
    stride: int
    pad: int
    ohp: int
    owp: int
    b: int
    block: int

    @property
    def data_shape(self) -> tuple[int, ...]:
        return (self.nb, self.cb, self.h, self.w, self.b, self.block)

    def kernel_shape(self, layout: str) -> tuple[int, ...]:
        last = (self.block, self.block) if layout == "diagonal" else (self.b, self.block)
        return (self.cb, self.k, self.k, *last)

    @property
    def bias_shape(self) -> tuple[int, ...]:
        return (self.cb, self.b, self.block)

    @property
    def res_shape(self) -> tuple[int, ...]:
        return (self.nb, self.cb, self.ohp, self.owp, self.b, self.block)


def _up(a: int, m: int) -> int:
    return -(-a // m) * m


def packed_depthwise_dims(spec: DepthwiseSpec, hw: HwConfig, s: DwSchedule) -> PackedDepthwise:
    g = hw.gemm
    if g.block_in != g.block_out:
        raise ShapeError(f"depthwise conv2d needs block_in == block_out (one channel per lane), "
                         f"{hw.name} has {g.block_in} and {g.block_out}")
    return PackedDepthwise(
        nb=math.ceil(spec.n / g.batch), cb=_up(math.ceil(spec.c / g.block_out), s.tc),
        h=spec.h, w=spec.w, k=spec.k, stride=spec.stride, pad=spec.pad,
        ohp=_up(spec.oh, s.th * s.vthreads), owp=_up(spec.ow, s.tw), b=g.batch,
        block=g.block_out)


def pack_dw_kernel(w: np.ndarray, P: PackedDepthwise, layout: str) -> np.ndarray:
    """(C, K, K) -> the packed weights of ``layout`` (module docstring), zero padded."""
    c = w.shape[0]
    wp = np.zeros((P.cb * P.block, P.k, P.k), w.dtype)
    wp[:c] = w
    blocks = wp.reshape(P.cb, P.block, P.k, P.k).transpose(0, 2, 3, 1)  # (cb, kh, kw, lane)
    if layout == "diagonal":
        out = np.zeros((*blocks.shape[:3], P.block, P.block), w.dtype)
        lane = np.arange(P.block)
        out[..., lane, lane] = blocks
        return out
    return np.ascontiguousarray(np.repeat(blocks[:, :, :, None, :], P.b, axis=3))


def depthwise_compute(spec: DepthwiseSpec, hw: HwConfig, s: DwSchedule, epi: Epilogue,
                      layout: str = "diagonal") -> PackedOp:
    """The packed depthwise conv2d in the tensor IR: ``data_pad`` zero-pads the input, ``dw``
    reduces over the window (and, for diagonal weights, the block lanes: a GEMM's reduction)
    in int32, the epilogue stages requantize and ``res`` narrows to int8."""
    if layout not in WEIGHT_LAYOUTS:
        raise VtaError(f"depthwise weight layout must be one of {', '.join(WEIGHT_LAYOUTS)}, "
                       f"got {layout!r}")
    P = packed_depthwise_dims(spec, hw, s)
    st, p = P.stride, P.pad
    hp = max(P.h + 2 * p, (P.ohp - 1) * st + P.k)
    wp = max(P.w + 2 * p, (P.owp - 1) * st + P.k)
    data = placeholder(P.data_shape, "int8", "data")
    kernel = placeholder(P.kernel_shape(layout), "int8", "kernel")
    bias = placeholder(P.bias_shape, "int32", "bias") if epi.bias else None
    pad = compute((P.nb, P.cb, hp, wp, P.b, P.block), lambda n, c, y, x, b, i: E.select(
        (y >= p) & (y < P.h + p) & (x >= p) & (x < P.w + p), data[n, c, y - p, x - p, b, i],
        E.const(0, "int8")), "data_pad")
    rkh, rkw = reduce_axis(P.k, "kh"), reduce_axis(P.k, "kw")
    if layout == "diagonal":
        rbi = reduce_axis(P.block, "bi")
        dw = compute(P.res_shape, lambda n, c, y, x, b, j: sum_(
            pad[n, c, y * st + rkh, x * st + rkw, b, rbi].astype("int32")
            * kernel[c, rkh, rkw, j, rbi].astype("int32"), [rkh, rkw, rbi]), "dw")
    else:
        dw = compute(P.res_shape, lambda n, c, y, x, b, j: sum_(
            pad[n, c, y * st + rkh, x * st + rkw, b, j].astype("int32")
            * kernel[c, rkh, rkw, b, j].astype("int32"), [rkh, rkw]), "dw")
    stages, res = epilogue_compute(dw, bias, epi, channel_axis=1)
    inputs = (data, kernel) if bias is None else (data, kernel, bias)
    return PackedOp("depthwise_conv2d", inputs, pad, dw, tuple(stages), res,
                    {"n": 0, "oc": 1, "oh": 2, "ow": 3})


def schedule_depthwise(op: PackedOp, s: DwSchedule, intrin: TensorIntrinsic,
                       weight_scope: str) -> Schedule:
    """The tile loops (channel blocks, rows split over ``vthreads``, columns), the input copy
    per tile, the weights copied once per channel tile (into ``weight_scope``), the bias once,
    the epilogue on the accumulator tile, and the block loops tensorized onto ``intrin``."""
    sch = create_schedule(op.out)
    acc = sch.cache_write(op.acc, "acc")
    sch[op.acc].compute_inline()
    assert op.pad is not None
    inp = sch.cache_read(op.pad, "inp", [acc])
    sch[op.pad].compute_inline()
    wgt = sch.cache_read(op.kernel, weight_scope, [acc])
    if op.bias is not None:
        sch.cache_read(op.bias, "acc", sch.readers(op.bias))
    out = sch[op.out]
    n, c, y, x = out.axis[:4]
    c_o, c_i = out.split(c, s.tc)
    y_t, y_i = out.split(y, s.th)
    x_o, x_i = out.split(x, s.tw)
    outer = [n, c_o]
    if s.vthreads > 1:
        y_o, vt = out.split(y_t, s.vthreads)
        outer += [y_o, vt, x_o]
    else:
        outer += [y_t, x_o]
    out.reorder(*outer, c_i, y_i, x_i, *out.axis[-2:])
    if s.vthreads > 1:
        out.virtual_thread(vt)
    tile = outer[-1]
    sch[acc].compute_at(out, tile)
    for e in op.epilogue:
        sch[e].set_scope("acc")
        sch[e].compute_at(out, tile)
    a = sch[acc]
    sp, red = a.axis, a.reduce_axis
    # the window loops outermost: the init (a GEMM reset) sits before them, outside the tile's
    # spatial loops, so the whole tile is one perfect nest the micro-op folding sees at once
    a.reorder(*red[:2], *sp[:-2], *sp[-2:], *red[2:])
    sch[inp].compute_at(out, tile)  # before the reduction (stage order: the copy comes first)
    sch[wgt].compute_at(out, c_o)
    a.tensorize(sp[-2], intrin)
    return sch


def footprint(spec: DepthwiseSpec, hw: HwConfig, s: DwSchedule, weight_scope: str,
              layout: str) -> dict[str, int]:
    """Scratchpad entries a schedule needs per buffer kind (threads included)."""
    th_in = (s.th - 1) * spec.stride + spec.k
    tw_in = (s.tw - 1) * spec.stride + spec.k
    cb = _up(math.ceil(spec.c / hw.gemm.block_out), s.tc)
    need = {"inp": s.vthreads * s.tc * th_in * tw_in, "wgt": 0,
            "acc": s.vthreads * s.tc * s.th * s.tw + cb}
    need[weight_scope] = need.get(weight_scope, 0) + s.tc * spec.k * spec.k
    return need


def fits(spec: DepthwiseSpec, hw: HwConfig, s: DwSchedule, weight_scope: str,
         layout: str) -> str | None:
    """Why the schedule does not fit the scratchpads (None when it does)."""
    for kind, entries in footprint(spec, hw, s, weight_scope, layout).items():
        if entries > hw.depth(kind):
            return (f"needs {entries} {kind} entries, {hw.name} has {hw.depth(kind)}")
    max_pad = (1 << hw.isa.pad) - 1
    last_x = (math.ceil(spec.ow / s.tw) * s.tw - s.tw) * spec.stride - spec.pad
    if last_x + (s.tw - 1) * spec.stride + spec.k - spec.w > max_pad or spec.pad > max_pad:
        return f"the last column tile needs more zero padding than a LOAD writes ({max_pad})"
    return None


def candidates(spec: DepthwiseSpec, hw: HwConfig, weight_scope: str,
               layout: str) -> list[DwSchedule]:
    """Schedules that fit, two threads when they fit (as VTA), tiles giving few tiles."""
    cbs = math.ceil(spec.c / hw.gemm.block_out)
    tcs = [d for d in range(1, cbs + 1) if cbs % d == 0]
    ths = sorted({-(-spec.oh // k) for k in range(1, min(spec.oh, 32) + 1)})
    tws = sorted({-(-spec.ow // k) for k in range(1, min(spec.ow, 8) + 1)})
    for v in (2, 1):
        out = [DwSchedule(tc, th, tw, v) for tc in tcs for th in ths for tw in tws
               if fits(spec, hw, DwSchedule(tc, th, tw, v), weight_scope, layout) is None]
        if out:
            return out
    raise VtaError(f"no schedule of {spec.describe()} fits {hw.name}")


def estimate(spec: DepthwiseSpec, hw: HwConfig, s: DwSchedule, intrin: TensorIntrinsic,
             weight_scope: str, epi: Epilogue) -> float:
    """First-order cycles: per tile the compute instruction (its definition's timing), the
    epilogue (its instructions') and the input DMA, overlapped by two threads."""
    def micro(defn: Any, n: int, **fields: Any) -> float:
        return microop_instruction_cycles(defn, n, hw, **fields) + 4

    defn = intrin.instruction
    assert defn is not None
    entries = s.tc * s.th * s.tw
    k2 = spec.k * spec.k
    c_comp = micro(defn, entries * k2, **intrin.fixed)
    c_epi = micro(GEMM, entries, reset=True) + sum(
        micro(sel.intrin.instruction, entries, **sel.fields) for sel in epilogue_plan(epi, hw))
    th_in = (s.th - 1) * spec.stride + spec.k
    tw_in = (s.tw - 1) * spec.stride + spec.k
    m_inp = s.tc * instruction_cycles(prototype(LOAD, mem=MemType.INP, y_size=th_in,
                                                x_size=tw_in, x_stride=tw_in), hw)
    m_out = s.tc * instruction_cycles(prototype(STORE, mem=MemType.OUT, y_size=s.th,
                                                x_size=s.tw, x_stride=s.tw), hw)
    cbs = _up(math.ceil(spec.c / hw.gemm.block_out), s.tc)
    tiles = (cbs // s.tc) * math.ceil(spec.oh / (s.th * s.vthreads)) * s.vthreads \
        * math.ceil(spec.ow / s.tw) * math.ceil(spec.n / hw.gemm.batch)
    if s.vthreads > 1:
        tile = max(c_comp + c_epi, m_inp + m_out)
    else:
        tile = c_comp + c_epi + m_inp + m_out
    return tiles * tile


@dataclass
class CompiledDepthwise:
    """A compiled depthwise layer: its program, schedule, weight layout and epilogue."""

    spec: DepthwiseSpec
    hw: HwConfig
    schedule: DwSchedule
    layout: str
    epilogue: Epilogue
    intrin: TensorIntrinsic
    result: Any  # pipeline.CompileResult

    @property
    def program(self) -> Any:
        return self.result.program

    @property
    def packed(self) -> PackedDepthwise:
        return packed_depthwise_dims(self.spec, self.hw, self.schedule)


def compile_depthwise(spec: DepthwiseSpec, hw: HwConfig, *,
                      intrinsic: TensorIntrinsic | None = None, weight_scope: str = "wgt",
                      layout: str = "diagonal", epilogue: Epilogue | None = None,
                      cost: Any = None, refine: int = 3,
                      schedule: DwSchedule | None = None) -> CompiledDepthwise:
    """Compile a depthwise layer: by default the stock lowering (diagonal weights in ``wgt``,
    tensorized onto the GEMM intrinsic); a custom ``intrinsic`` with its ``weight_scope`` and
    ``layout`` otherwise. The schedule is ``schedule``, else the best of the model's ``refine``
    cheapest by the ``cost`` oracle (cycles of a program; the timing-only simulator in
    ``vta.run``), else the model's first choice."""
    epi = epilogue or Epilogue()
    intrin = intrinsic or vta_gemm_intrinsic(hw)
    if intrin.instruction is None:
        raise VtaError(f"depthwise conv2d: {intrin.name} is not an accelerator intrinsic")
    require(intrin.instruction, hw)  # a named error when hw lacks the intrinsic
    def build(s: DwSchedule) -> CompiledDepthwise:
        op = depthwise_compute(spec, hw, s, epi, layout)
        func = lower(schedule_depthwise(op, s, intrin, weight_scope), op.args, op.name)
        return CompiledDepthwise(spec, hw, s, layout, epi, intrin, compile_func(func, hw))

    if schedule is not None:
        why = fits(spec, hw, schedule, weight_scope, layout)
        if why:
            raise VtaError(f"depthwise schedule {schedule} does not fit: {why}")
        return build(schedule)
    ranked = sorted(candidates(spec, hw, weight_scope, layout),
                    key=lambda s: estimate(spec, hw, s, intrin, weight_scope, epi))
    if cost is None:
        return build(ranked[0])
    best: tuple[int, CompiledDepthwise] | None = None
    for s in ranked[:max(1, refine)]:
        c = build(s)
        cycles = cost(c.program)
        if best is None or cycles < best[0]:
            best = (cycles, c)
    assert best is not None
    return best[1]
