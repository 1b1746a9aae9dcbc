"""2-D convolution (NCHW int8 in, int32 accumulate, requantizing epilogue, int8 out).

``Conv2dSpec`` describes the user's problem; ``conv2d_reference`` is the bit-exact numpy
reference; ``conv2d_compute`` the tensor-IR definition (packed NCHWnc layout); and
``conv2d_func`` the loop-nest ``PrimFunc`` a schedule lowers to, in the form docs/ir.md fixes
(stages under ``AttrStmt("stage")``, cache copies into inp/wgt/acc scopes, the update under
``AttrStmt("tensorize")``). The VTA pipeline (``vta.compiler.pipeline``) compiles that function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.passes._common import CompileError
from vta.config import HwConfig

__all__ = ["Conv2dSpec", "PackedConv2d", "conv2d_reference", "conv2d_func", "packed_dims"]


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
        if self.pad >= max(self.kh, self.kw) or self.pad > 15:
            raise ShapeError(f"conv2d: pad must be smaller than the kernel and <= 15, got "
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


def conv2d_reference(x: np.ndarray, k: np.ndarray, bias: np.ndarray | None, spec: Conv2dSpec,
                     epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: int32 accumulate (wrapping), then the epilogue."""
    s, p = spec.stride, spec.pad
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p, p), (p, p)))
    acc = np.zeros((spec.n, spec.oc, spec.oh, spec.ow), np.int64)
    kk = k.astype(np.int64)
    for r in range(spec.kh):
        for q in range(spec.kw):
            win = xp[:, :, r: r + s * (spec.oh - 1) + 1: s, q: q + s * (spec.ow - 1) + 1: s]
            acc += np.einsum("nchw,oc->nohw", win, kk[:, :, r, q], optimize=True)
    acc32 = acc.astype(np.int32)  # wraps like the hardware's int32 accumulator
    return apply_epilogue(acc32, bias, epi, channel_axis=1)


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


def packed_dims(spec: Conv2dSpec, hw: HwConfig, sch: ConvSchedule) -> PackedConv2d:  # noqa: F821
    g = hw.gemm
    v_oc = sch.vthreads if sch.vt_axis == "oc" else 1
    v_oh = sch.vthreads if sch.vt_axis == "oh" else 1
    return PackedConv2d(
        nb=math.ceil(spec.n / g.batch), icb=_up(math.ceil(spec.ic / g.block_in), sch.tci),
        ocb=_up(math.ceil(spec.oc / g.block_out), sch.tco * v_oc), h=spec.h, w=spec.w,
        kh=spec.kh, kw=spec.kw, stride=spec.stride, pad=spec.pad,
        ohp=_up(spec.oh, sch.th * v_oh), owp=_up(spec.ow, sch.tw), b=g.batch, bi=g.block_in,
        bo=g.block_out)


def _nest(shape: tuple[int, ...], names: str, body) -> S.Stmt:  # type: ignore[no-untyped-def]
    vs = [E.Var(n) for n in names.split()]
    s = body(*vs)
    for v, n in reversed(list(zip(vs, shape))):
        s = S.For(v, E.IntImm(0), E.IntImm(n), s)
    return s


def _stage(name: str, body: S.Stmt) -> S.Stmt:
    return S.AttrStmt("stage", name, body)


def conv2d_func(spec: Conv2dSpec, hw: HwConfig, sch: ConvSchedule,  # noqa: F821
                epi: Epilogue, name: str = "conv2d") -> S.PrimFunc:
    """The lowered loop nest of a packed conv2d under schedule ``sch`` (see module docstring).

    Loop order: image, oc tile [vthread], weights+bias copied per oc tile when the whole
    reduction fits one ic tile (weights reused across all spatial tiles), oh tile [vthread],
    ow tile; inside, the acc tile is reset, accumulated over ic tiles (input copy with halo and
    zero padding, then the tensorized update), requantized and copied out.
    """
    P = packed_dims(spec, hw, sch)
    b, bi, bo, s = P.b, P.bi, P.bo, P.stride
    tco, tci, th, tw, V = sch.tco, sch.tci, sch.th, sch.tw, sch.vthreads
    th_in, tw_in = (th - 1) * s + P.kh, (tw - 1) * s + P.kw
    data = S.Buffer("data", P.data_shape, "int8")
    kernel = S.Buffer("kernel", P.kernel_shape, "int8")
    bias = S.Buffer("bias", P.bias_shape, "int32")
    res = S.Buffer("res", P.res_shape, "int8")
    res_acc = S.Buffer("res_acc", (tco, th, tw, b, bo), "int32", "acc")
    data_inp = S.Buffer("data_inp", (tci, th_in, tw_in, b, bi), "int8", "inp")
    kernel_wgt = S.Buffer("kernel_wgt", (tco, tci, P.kh, P.kw, bo, bi), "int8", "wgt")
    bias_acc = S.Buffer("bias_acc", (tco, b, bo), "int32", "acc")

    n, oco, oho, owo, ico = (E.Var(x) for x in ("n", "oc_o", "oh_o", "ow_o", "ic_o"))
    vt = E.Var("vt")
    vt_oc, vt_oh = (V > 1 and sch.vt_axis == "oc"), (V > 1 and sch.vt_axis == "oh")
    oc_t = oco * V + vt if vt_oc else oco
    oh_t = oho * V + vt if vt_oh else oho
    hoist = tci == P.icb
    ic0 = E.IntImm(0) if hoist else ico * tci

    wgt_copy = _stage("kernel.wgt", _nest(
        kernel_wgt.shape, "co ci r q o i",
        lambda co, ci, r, q, o, i: kernel_wgt.store(
            kernel.load(oc_t * tco + co, ic0 + ci, r, q, o, i), co, ci, r, q, o, i)))
    bias_copy = _stage("bias.acc", _nest(
        bias_acc.shape, "co bb o",
        lambda co, bb, o: bias_acc.store(bias.load(oc_t * tco + co, bb, o), co, bb, o)))

    def inp_body(c: E.Var, y: E.Var, x: E.Var, bb: E.Var, i: E.Var) -> S.Stmt:
        gy = oh_t * (th * s) - P.pad + y
        gx = owo * (tw * s) - P.pad + x
        cond = (gy >= 0) & (gy < P.h) & (gx >= 0) & (gx < P.w)
        val = E.Select(cond, data.load(n, ico * tci + c, gy, gx, bb, i), E.IntImm(0, "int8"),
                       "int8")
        return data_inp.store(val, c, y, x, bb, i)

    inp_copy = _stage("data.inp", _nest(data_inp.shape, "c y x bb i", inp_body))
    init = _stage("res.init", _nest(res_acc.shape, "co y x bb o",
                                    lambda co, y, x, bb, o: res_acc.store(E.IntImm(0), co, y, x, bb, o)))

    def upd(co: E.Var, y: E.Var, x: E.Var, ci: E.Var, r: E.Var, q: E.Var, bb: E.Var, o: E.Var,
            i: E.Var) -> S.Stmt:
        a = res_acc.load(co, y, x, bb, o)
        prod = (E.Cast("int32", data_inp.load(ci, y * s + r, x * s + q, bb, i))
                * E.Cast("int32", kernel_wgt.load(co, ci, r, q, o, i)))
        return res_acc.store(a + prod, co, y, x, bb, o)

    intrin = _gemm_intrinsic(hw)
    update = _stage("res.update", S.AttrStmt("tensorize", intrin, _nest(
        (tco, th, tw, tci, P.kh, P.kw, b, bo, bi), "co y x ci r q bb o i", upd)))

    def ew(name: str, f) -> S.Stmt:  # type: ignore[no-untyped-def]
        return _stage(name, _nest(res_acc.shape, "co y x bb o", lambda co, y, x, bb, o: res_acc.store(
            f(res_acc.load(co, y, x, bb, o), co, bb, o), co, y, x, bb, o)))

    epilogue: list[S.Stmt] = []
    if epi.shift:
        epilogue.append(ew("res.shr", lambda a, co, bb, o: a >> epi.shift))
    if epi.bias:
        epilogue.append(ew("res.bias", lambda a, co, bb, o: a + bias_acc.load(co, bb, o)))
    epilogue.append(ew("res.clip", lambda a, co, bb, o: E.min_(E.max_(a, epi.clip_lo), epi.clip_hi)))
    out_copy = _stage("res.out", _nest(res_acc.shape, "co y x bb o", lambda co, y, x, bb, o: res.store(
        E.Cast("int8", res_acc.load(co, y, x, bb, o)), n, oc_t * tco + co, oh_t * th + y,
        owo * tw + x, bb, o)))

    if hoist:
        ic_body: S.Stmt = S.Allocate(data_inp, S.seq(inp_copy, update))
    else:
        ic_body = S.Allocate(data_inp, S.Allocate(kernel_wgt, S.seq(inp_copy, wgt_copy, update)))
    tile = S.Allocate(res_acc, S.seq(
        init, S.For(ico, E.IntImm(0), E.IntImm(P.icb // tci), ic_body), *epilogue, out_copy))
    sp: S.Stmt = S.For(owo, E.IntImm(0), E.IntImm(P.owp // tw), tile)
    if vt_oh:
        sp = S.For(vt, E.IntImm(0), E.IntImm(V), sp, S.ForKind.VTHREAD)
    sp = S.For(oho, E.IntImm(0), E.IntImm(P.ohp // (th * (V if vt_oh else 1))), sp)
    per_oc: S.Stmt = S.seq(wgt_copy if hoist else None, bias_copy if epi.bias else None, sp)
    if epi.bias:
        per_oc = S.Allocate(bias_acc, per_oc)
    if hoist:
        per_oc = S.Allocate(kernel_wgt, per_oc)
    if vt_oc:
        per_oc = S.For(vt, E.IntImm(0), E.IntImm(V), per_oc, S.ForKind.VTHREAD)
    body: S.Stmt = S.For(oco, E.IntImm(0), E.IntImm(P.ocb // (tco * (V if vt_oc else 1))), per_oc)
    body = S.For(n, E.IntImm(0), E.IntImm(P.nb), body)
    params = (data, kernel, bias, res) if epi.bias else (data, kernel, res)
    return S.PrimFunc(name, params, body, (("packed", P), ("schedule", sch)))


def _gemm_intrinsic(hw: HwConfig) -> object:
    """The registered GEMM intrinsic for ``hw`` when the registry exists, else its name."""
    try:
        from vta.compiler.intrin import vta_gemm_intrinsic  # type: ignore[attr-defined]
    except ImportError:
        return "vta.gemm"
    try:
        return vta_gemm_intrinsic(hw)
    except Exception:
        return "vta.gemm"
