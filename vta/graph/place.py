"""Placement: each fused group becomes an accelerator kernel, or runs on the host, by name.

A group (``passes.fuse``) runs on the accelerator when the hardware can express it:

* a convolution or dense layer followed by its ``requantize`` (and any fused chain): the
  conv2d / matmul op (``compiler.driver.compile_workload``: GEMM, the bias and the chain as
  ALU instructions on the accumulator tile, attached by post-scheduling fusion), compiled for
  the exact packed layouts (``layout``); a convolution with few channels reading a graph input
  may fold its window into the channels (the host's pack repacks the input); one padded with an
  input's zero point (``pad_value``, ``passes.fold_pad``) pads with 0 and adds the difference as
  an int32 bias per output position (``pad_correction``, a ``position`` chain operand);
* a max-pool: ``ops.window`` ``max`` (ALU MAX over the window taps) when it does not pad or
  its input cannot be negative (the LOAD's zero padding then never wins);
* a global average pool over a square image: ``ops.window`` ``sum`` (the GEMM core sums the
  window against an identity block) and its requantization on the ALU;
* a stand-alone add, ReLU or clip: ``ops.window`` ``ewise`` with the operator as its chain.

Every fused operator becomes chain stages (``ops.fused``; a ReLU or clip after an operator
ending in a clip narrows that clip instead of adding a stage). Whatever the accelerator
cannot do (an int32 result it cannot store, a stage no instruction covers, a shape a kernel
does not take) is a ``HostOp`` with the reason: the host runs it with the reference semantics
and the report names it. Nothing falls back silently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler.accel import driver
from vta.compiler.accel.ops import packing
from vta.compiler.accel.ops.window_packed import compile_window, window_bound
from vta.compiler.ops.chain import (
    CHANNEL,
    EYE,
    POSITION,
    TABLE,
    TENSOR,
    Chain,
    ChainOperand,
    EwStage,
    add_stage,
    bias_stage,
    channel_requant_stage,
    channel_terms,
    clip_stage,
    even_round_stage,
    exact_requant_stage,
    lut2_stage,
    offset_stage,
    requant_stage,
    round_clip_stage,
    scaled_operand,
    shift_add_add_stage,
    shift_add_channel_stage,
    shift_add_requant_stage,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.window import WindowSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import HostFallback, VtaError
from vta.graph.dram_layout import PackedLayout, canonical
from vta.graph.interp import grouped_conv2d_int32
from vta.graph.ir import (
    INT8_MAX,
    Add,
    Clip,
    Concat,
    Conv2d,
    Dense,
    GlobalAvgPool,
    Graph,
    HostFloat,
    Lut2,
    MatMul,
    MaxPool2d,
    Node,
    QLinearAvgPool,
    QLinearSoftmax,
    Relu,
    Requantize,
    Reshape,
    Stack,
    Take,
    TensorType,
    Transpose,
    Value,
    node_macs,
    split_shift,
)
from vta.graph.ort_add import IMM_MAX, factor_mult
from vta.graph.passes.fuse import group_nodes
from vta.graph.quant import needs_mul
from vta.isa import Program

__all__ = ["Kernel", "HostOp", "Step", "Placer", "place_group", "chain_of", "nonnegative",
           "Cost", "block_diagonal", "grouped_detail", "LUT2_REASON", "pool_chain",
           "pad_correction", "with_pad_correction"]

#: a cost oracle for the compiler's schedule choice (``vta.run.targets.AccelTarget.cycles``)
Cost = Callable[[Program], int]


@dataclass
class Kernel:
    """One group compiled for the accelerator: its program, the graph values its DRAM
    allocations hold (``reads``, ``write``) with their packed layouts, its constants (packed
    entries by allocation), its machine bound and what it was compiled as (``detail``)."""

    group: Node
    kind: str
    program: Program
    reads: dict[str, Value]
    write: tuple[str, Value]
    layouts: dict[str, PackedLayout]
    consts: dict[str, np.ndarray]
    bound: dict[str, float]
    macs: int
    compile_s: float
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class HostOp:
    """A group the host runs (the reference semantics), and why the accelerator does not."""

    group: Node
    reason: str


Step = Kernel | HostOp


# ------------------------------------------------------------------------------ chains


def nonnegative(v: Value, graph: Graph) -> bool:
    """Whether ``v`` provably cannot be negative (a ReLU, a clip or requantization with
    ``lo >= 0``, a max-pool of such a value)."""
    n = graph.producer(v)
    if n is None:
        return False
    last = group_nodes(n)[-1]
    if isinstance(last, Relu):
        return True
    if isinstance(last, (Clip, Requantize, Add, GlobalAvgPool)):
        return last.lo >= 0
    if isinstance(last, MaxPool2d):
        return nonnegative(last.x, graph)
    return False


def chain_of(nodes: tuple[Node, ...], running: Value) -> tuple[Chain, list[Value]]:
    """The ``fused.Chain`` computing ``nodes`` (element-wise) on the running value, and the
    graph values of its operands (``opnd0``, ``opnd1``, ...)."""
    stages: list[tuple[str, tuple[Any, ...]]] = []  # (kind, params), clips merged below
    operands: list[ChainOperand] = []
    values: list[Value] = []
    cur = running
    for n in nodes:
        if isinstance(n, Requantize) and n.exact:
            assert n.mults is not None  # verify_graph: an exact requantize has its words
            operands.append(ChainOperand(f"opnd{len(operands)}", CHANNEL))
            values.append(n.mults)
            stages.append(("requant_f32", (len(operands) - 1, n.zero, n.lo, n.hi)))
        elif isinstance(n, Requantize) and n.shift_add and n.mults is not None:
            first = len(operands)  # per channel: the Horner's shifts as channel operands
            for k, d in enumerate(_channel_shifts(n)):
                operands.append(ChainOperand(f"opnd{len(operands)}", CHANNEL))
                values.append(Value(f"{n.output.name}_sa{k}",
                                    TensorType(d.shape, "int32", "C"), d))
            pre, post = split_shift(n.shift)
            stages.append(("requant_ch_sa", (tuple(range(first, len(operands))), pre, post,
                                             n.zero, n.lo, n.hi)))
        elif isinstance(n, Requantize) and n.mults is not None:
            operands.append(ChainOperand(f"opnd{len(operands)}", CHANNEL))
            values.append(n.mults)
            pre, post = split_shift(n.shift)
            stages.append(("requant_ch", (len(operands) - 1, pre, post, n.zero, n.lo, n.hi)))
        elif isinstance(n, Requantize) and n.shift_add:  # no ALU MUL: shifts and adds
            pre, post = split_shift(n.shift)
            stages.append(("requant_sa", (n.mult, pre, post, n.zero, n.lo, n.hi)))
        elif isinstance(n, Requantize) and n.even:
            stages.append(("round_even", (n.shift, n.zero, n.lo, n.hi)))
        elif isinstance(n, Requantize):
            pre, post = split_shift(n.shift)
            stages.append(("requant", (n.mult, pre, post, 0, n.zero, n.lo, n.hi)))
        elif isinstance(n, (Relu, Clip)):
            lo, hi = (0, INT8_MAX) if isinstance(n, Relu) else (n.lo, n.hi)
            _clip(stages, lo, hi)
        elif isinstance(n, Add) and n.shift_add:  # no ALU MUL: shifts and adds
            if n.a is cur and n.b is cur:
                _offset_stage(stages, -n.zero_a)
                stages.append(("add_sa", (n.mult_a + n.mult_b, 0, None)))
            else:
                mine, z_mine, other, m_other, z_other = \
                    (n.mult_a, n.zero_a, n.b, n.mult_b, n.zero_b) if n.a is cur else \
                    (n.mult_b, n.zero_b, n.a, n.mult_a, n.zero_a)
                operands.append(scaled_operand(f"opnd{len(operands)}", 1, z_other))
                values.append(other)
                _offset_stage(stages, -z_mine)
                stages.append(("add_sa", (mine, m_other, len(operands) - 1)))
            _add_rounding(stages, operands, values, n)
        elif isinstance(n, Add):
            if n.a is cur and n.b is cur:
                stages.append(("scale", (n.mult_a + n.mult_b, n.zero_a)))
            else:
                mine, z_mine, other, m_other, z_other = \
                    (n.mult_a, n.zero_a, n.b, n.mult_b, n.zero_b) if n.a is cur else \
                    (n.mult_b, n.zero_b, n.a, n.mult_a, n.zero_a)
                operands.append(_scaled(f"opnd{len(operands)}", m_other, z_other))
                values.append(other)
                stages.append(("add", (mine, len(operands) - 1, z_mine)))
            _add_rounding(stages, operands, values, n)
        elif isinstance(n, Lut2):  # a table (the GPU's chains; the accelerator refuses it)
            operands.append(ChainOperand(f"opnd{len(operands)}", TABLE))
            values.append(n.table)
            tab = len(operands) - 1
            if n.a is cur and n.b is cur:
                stages.append(("lut2", (tab, None, True)))
            else:
                operands.append(ChainOperand(f"opnd{len(operands)}", TENSOR))
                values.append(n.b if n.a is cur else n.a)
                stages.append(("lut2", (tab, len(operands) - 1, n.a is cur)))
        else:
            raise HostFallback(f"{n.op} is not an element-wise operator")
        cur = n.output
    out: list[EwStage] = []
    for kind, p in stages:
        if kind == "requant":
            mult, pre, post, offset, zero, lo, hi = p
            out.append(requant_stage(mult, pre, post, lo, hi, offset=offset, zero=zero))
        elif kind == "requant_ch":
            out.append(channel_requant_stage(*p))
        elif kind == "requant_f32":
            out.append(exact_requant_stage(*p))
        elif kind == "round_even":
            shift, zero, lo, hi = p
            out.append(even_round_stage(shift, lo, hi, zero=zero))
        elif kind == "requant_ch_sa":
            out.append(shift_add_channel_stage(*p))
        elif kind == "requant_sa":
            mult, pre, post, zero, lo, hi = p
            out.append(shift_add_requant_stage(mult, pre, post, lo, hi, zero=zero))
        elif kind == "add_sa":
            out.append(shift_add_add_stage(*p))
        elif kind == "offset":
            out.append(offset_stage(p[0]))
        elif kind == "round":
            pre, post, zero, lo, hi = p
            out.append(round_clip_stage(pre, post, lo, hi, zero=zero))
        elif kind == "clip":
            out.append(clip_stage(*p))
        elif kind == "lut2":
            out.append(lut2_stage(*p))
        elif kind == "chan":
            out.append(bias_stage(p[0], "chan_offset", "add_chan"))
        elif kind == "add" and p[0] <= IMM_MAX:
            mult, idx, zero = p
            out.append(add_stage(mult, idx, zero=zero))
        elif kind == "add":  # a multiplier wider than an immediate: two MULs (ort_add)
            mult, idx, zero = p
            out.append(EwStage("add", lambda x, o, m=mult, z=zero: _mul(x + (-z) if z else x,
                                                                        m) + o,
                               (idx,), label=f"madd({mult}{f',zero={zero}' if zero else ''})"))
        else:
            m, z = p
            out.append(EwStage("scale", lambda x, m=m, z=z: _mul(x + (-z) if z else x, m),
                               label=f"scale({m})" if not z else f"scale({m},zero={z})"))
    return Chain(tuple(out), tuple(operands)), values


def _channel_shifts(n: Requantize) -> list[np.ndarray]:
    """The channel operands of ``n``'s per-channel multipliers by shifts and adds
    (``ops.chain.shift_add_channel_stage``): per Horner step, each channel's shift of
    ``channel_terms(mults - 1)``, negated (SHR left); a ``HostFallback`` naming the channel
    where no such form fits the SHR's amount."""
    assert n.mults is not None and n.mults.data is not None
    m = [int(v) - 1 for v in n.mults.data]
    try:
        terms = channel_terms(m, f"requantize {n.output.name}")
    except VtaError as e:
        raise HostFallback(str(e)) from None
    shifts = np.array(terms, dtype=np.int64)
    return [(-shifts[:, k]).astype(np.int32) for k in range(shifts.shape[1])]


def _offset_stage(stages: list[tuple[str, tuple[Any, ...]]], c: int) -> None:
    """Append ``x + c`` (nothing for 0)."""
    if c:
        stages.append(("offset", (c,)))


def _add_rounding(stages: list[tuple[str, tuple[Any, ...]]], operands: list[ChainOperand],
                  values: list[Value], n: Add) -> None:
    """An add's per-channel constant (``offsets``) and its rounding shift, zero point and
    clip, after its sum."""
    if n.offsets is not None:  # a constant per channel (a bias: ort_add.ChannelForm)
        operands.append(ChainOperand(f"opnd{len(operands)}", CHANNEL))
        values.append(n.offsets)
        stages.append(("chan", (len(operands) - 1,)))
    pre, post = split_shift(n.shift)
    if n.even:  # ORT's rounding of a power-of-two sum: half to even
        stages.append(("round_even", (n.shift, n.zero, n.lo, n.hi)))
    elif n.offset:  # ORT's rounding (``ort_add``): the offset joins the rounding ADD
        stages.append(("requant", (1, pre, post, n.offset, n.zero, n.lo, n.hi)))
    else:
        stages.append(("round", (pre, post, n.zero, n.lo, n.hi)))


def _mul(x: Any, m: int) -> Any:
    """``x * m`` as ALU MULs by immediates: one, or two factors for a multiplier wider than
    an immediate (``ort_add.factor_mult``; an exact add's, ``ort_add.fit_add``)."""
    f = factor_mult(m) if m >= 0 else None
    if f is None:
        return x * m  # no split: instruction selection names the immediate it cannot take
    m1, m2 = f
    y = x if m1 == 1 else x * m1
    return y if m2 == 1 else y * m2


def pool_chain(a: GlobalAvgPool, rest: Chain, vals: list[Value]) -> tuple[Chain, list[Value]]:
    """The chain after a global average pool's window sum: its rescale (the fixed-point
    requantize, or ORT's ``REQUANT_F32`` by the scale words of an exact pool, read as one more
    ``channel`` operand), then ``rest`` (the fused operators after it, operands ``vals``)."""
    hw = a.x.type.shape[2] * a.x.type.shape[3]
    if a.shift_add:  # no ALU MUL: the zero point's term, then shifts and adds
        pre, post = split_shift(a.shift)
        head = [offset_stage(-hw * a.zero_x)] if a.zero_x else []
        rq = shift_add_requant_stage(a.mult, pre, post, a.lo, a.hi, zero=a.zero)
        return Chain((*head, rq, *rest.stages), rest.operands), vals
    if not a.exact:
        pre, post = split_shift(a.shift)
        rq = requant_stage(a.mult, pre, post, a.lo, a.hi, offset=-hw * a.zero_x, zero=a.zero)
        return Chain((rq, *rest.stages), rest.operands), vals
    assert a.mults is not None  # verify_graph: an exact pool has its words
    k = len(rest.operands)
    rq = exact_requant_stage(k, a.zero, a.lo, a.hi, offset=-hw * a.zero_x)
    return (Chain((rq, *rest.stages), (*rest.operands, ChainOperand(f"opnd{k}", CHANNEL))),
            [*vals, a.mults])


def _scaled(name: str, mult: int, zero: int) -> ChainOperand:
    """``scaled_operand``, with a multiplier wider than an immediate split into two."""
    if mult <= IMM_MAX:
        return scaled_operand(name, mult, zero)
    return ChainOperand(name, TENSOR, lambda v: _mul(v + (-zero) if zero else v, mult),
                        f"-{zero}*{mult}" if zero else f"*{mult}")


def _clip(stages: list[tuple[str, tuple[Any, ...]]], lo: int, hi: int) -> None:
    """Append ``clip(lo, hi)``, or narrow the clip the previous stage ends with."""
    if stages and stages[-1][0] in ("requant", "requant_f32", "round", "round_even",
                                    "requant_sa", "requant_ch_sa", "clip"):
        kind, p = stages[-1]
        plo, phi = p[-2], p[-1]
        nlo, nhi = max(plo, lo), min(phi, hi)
        if nlo <= nhi:
            stages[-1] = (kind, (*p[:-2], nlo, nhi))
            return
    stages.append(("clip", (lo, hi)))


# ------------------------------------------------------------------------------ kernels


def _eye(hw: HwConfig) -> np.ndarray:
    g = hw.gemm
    return np.eye(g.block_out, g.block_in, dtype=np.int8).reshape(1, g.block_out, g.block_in)


def _check_layout(name: str, have: tuple[int, ...], want: PackedLayout, what: str) -> None:
    """The kernel's packed shape of ``name`` is ``want``'s (same entries in the same order)."""
    sq = lambda s: tuple(d for d in s if d != 1)  # noqa: E731
    if math.prod(have) != math.prod(want.shape) or sq(have) != sq(want.shape):
        raise HostFallback(f"{what}: its {name} is packed as {have}, the graph's layout is "
                           f"{want.shape}")


class Placer:
    """Places a graph's groups one after another (``place``), remembering the schedule each
    structure chose: a later group of the same structure (shapes, fold, chain stages; not
    the requantization constants, which the model's choice does not depend on) is compiled
    with those knobs instead of choosing again. ``place_all`` is one placer over every group;
    ``vta.run.compile_pool`` runs placers over a graph's structures in worker processes."""

    def __init__(self, graph: Graph, hw: HwConfig, cost: Cost | None, refine: int,
                 memo: driver.CompileMemo | None = None) -> None:
        self.graph, self.hw, self.cost, self.refine = graph, hw, cost, refine
        self.memo = memo  # a compile cache (``driver.compile_workload``'s ``memo``)
        #: structural key -> the schedule knobs the model and the oracle chose
        self.knobs: dict[Any, dict[str, Any]] = {}

    def place(self, group: Node) -> Step:
        try:
            return self._kernel(group)
        except HostFallback as e:
            return HostOp(group, str(e))
        except VtaError as e:  # a stage no instruction covers, a shape no schedule fits
            return HostOp(group, f"{type(e).__name__}: {e}")

    def _kernel(self, group: Node) -> Kernel:
        nodes = group_nodes(group)
        a = nodes[0]
        if isinstance(a, (Conv2d, Dense)):
            return self._gemm(group, a, nodes[1:])
        if isinstance(a, MaxPool2d):
            if a.pad and not nonnegative(a.x, self.graph):
                raise HostFallback("max-pool pads with -inf but a LOAD pads with zeros, and its "
                                   "input may be negative")
            n, c, h, w = a.x.type.shape
            spec = WindowSpec("max", n, c, h, w, a.kernel, a.stride, a.pad)
            chain, vals = chain_of(nodes[1:], a.output)
            return self._window(group, spec, chain, a.x, vals)
        if isinstance(a, GlobalAvgPool):
            n, c, h, w = a.x.type.shape
            if "mul" not in self.hw.alu.ops and needs_mul(a):
                raise HostFallback(f"global average pool over {h}x{w}: its multiplier "
                                   f"{a.mult} / 2**{a.shift} (1/{h * w} of a ratio of scales) "
                                   f"is not a shift and {self.hw.name}'s ALU has no MUL")
            if h != w:
                raise HostFallback(f"global average pool over a {h}x{w} image (the sum window "
                                   f"is square)")
            spec = WindowSpec("sum", n, c, h, w, h)
            chain, vals = pool_chain(a, *chain_of(nodes[1:], a.output))
            return self._window(group, spec, chain, a.x, vals)
        if isinstance(a, (Add, Relu, Clip)):
            x = a.a if isinstance(a, Add) else a.x
            shape = x.type.shape
            n, c, h, w = (*shape, 1, 1) if len(shape) == 2 else shape
            chain, vals = chain_of(nodes, x)
            return self._window(group, WindowSpec("ewise", n, c, h, w), chain, x, vals)
        if isinstance(a, Lut2):
            raise HostFallback(LUT2_REASON)
        if isinstance(a, TRANSFORMER_HOST):
            raise HostFallback(transformer_reason(a))
        raise HostFallback(f"no accelerator kernel for {a.op} (its int32 input cannot be "
                           f"stored by the accelerator)" if isinstance(a, Requantize) else
                           f"no accelerator kernel for {a.op}")

    # ------------------------------------------------------------------ conv2d / dense

    def _gemm(self, group: Node, a: Conv2d | Dense, rest: tuple[Node, ...]) -> Kernel:
        hw, g = self.hw, self.hw.gemm
        if not rest or not isinstance(rest[0], Requantize):
            raise HostFallback(f"{a.op} without a requantize: its int32 result does not fit "
                               f"the accelerator's {g.out_dtype} out port")
        chain, vals = chain_of(rest, a.output)
        if isinstance(a, Conv2d) and a.pad_value and a.pad:
            chain, vals = with_pad_correction(a, chain, vals)
        w_data, b_data = a.weight.data, a.bias.data
        runtime = w_data is None and isinstance(a, Dense)  # packed by the host at run time
        if (w_data is None and not runtime) or b_data is None:
            raise HostFallback(f"{a.op} weights and bias must be constants")
        if isinstance(a, Conv2d):
            assert w_data is not None  # only a dense layer's weight is packed at run time
            if a.groups != 1:
                w_data = block_diagonal(w_data, a.groups)
        epi = Epilogue(shift=0, bias=True, clip=False)  # acc + bias; the chain requantizes
        if isinstance(a, Conv2d):
            assert w_data is not None
            n, ic, h, w = a.x.type.shape
            oc, _, kh, kw = w_data.shape
            spec: Conv2dSpec | MatmulSpec = Conv2dSpec(n, ic, h, w, oc, kh, kw, a.stride, a.pad)
            from_host = self.graph.producer(a.x) is None
            fold = None if from_host else "none"
        else:
            n, k = a.x.type.shape
            spec = MatmulSpec(n, a.weight.type.shape[0], k)
            fold = "none"
        wl = Workload(f"{a.op}:{a.output.name}", spec)
        skey = (spec, fold, tuple((s.name, s.reads) for s in chain.stages),
                tuple(o.kind for o in chain.operands), hw.name)
        forced = self.knobs.get(skey, {})
        t0 = time.perf_counter()
        c = driver.compile_workload(wl, hw, epilogue=epi, chain=chain, exact=True,
                                    fold=forced.get("fold", fold), cost=self.cost,
                                    refine=self.refine, memo=self.memo,
                                    **{k: v for k, v in forced.items() if k != "fold"})
        secs = time.perf_counter() - t0
        s = c.schedule
        self.knobs[skey] = {"fold": c.fold_kind, "tco": s.tco, "tci": s.tci, "th": s.th,
                            "tw": s.tw, "vthreads": s.vthreads, "vt_axis": s.vt_axis}
        P = c.packed
        folded = c.fold is not None and c.fold.kind != "none"
        out_l = canonical(group.output.type, hw)
        in_l = PackedLayout(P.data_shape, c.fold) if folded else canonical(a.x.type, hw)
        what = f"{group.output.name} ({a.op})"
        _check_layout("output", P.res_shape, out_l, what)
        if not folded:
            _check_layout("input", P.data_shape, in_l, what)
        consts = {"bias": packing.to_entries(packing.pack_bias(b_data, g.batch, g.block_out,
                                                               P.ocb))}
        reads = {"data": a.x}
        layouts = {"data": in_l, "res": out_l}
        if runtime:
            reads["kernel"] = a.weight
            layouts["kernel"] = PackedLayout(P.kernel_shape, buffer="wgt")
        elif isinstance(a, Conv2d):
            assert w_data is not None
            wk = packing.fold_kernel(w_data, c.fold) if folded and c.fold else w_data
            consts["kernel"] = packing.to_entries(packing.pack_kernel(wk, g.block_out,
                                                                      g.block_in,
                                                                      P.kernel_shape))
        else:
            assert w_data is not None
            consts["kernel"] = packing.to_entries(packing.pack_matrix(
                w_data, g.block_out, g.block_in, P.kernel_shape))
        self._operands(chain, vals, reads, layouts, consts, P.ocb)
        detail = (f"tco={s.tco} tci={s.tci} th={s.th} tw={s.tw} vt={s.vthreads}"
                  f"{s.vt_axis if s.vthreads > 1 else ''}"
                  f"{' fold=' + c.fold_kind if folded else ''}"
                  f"{grouped_detail(a) if isinstance(a, Conv2d) else ''}"
                  f"{' weight packed at run time' if runtime else ''}")
        return Kernel(group, a.op, c.program, reads, ("res", group.output), layouts, consts,
                      driver.roofline(c), node_macs(a), secs, detail,
                      {"schedule": dict(self.knobs[skey])})

    def _operands(self, chain: Chain, vals: list[Value], reads: dict[str, Value],
                  layouts: dict[str, PackedLayout], consts: dict[str, np.ndarray],
                  ocb: int = 0) -> None:
        """Each chain operand: an activation read from DRAM, or a per-channel constant
        (per-channel multipliers) packed like the bias (``ocb`` channel blocks)."""
        g = self.hw.gemm
        for o, v in zip(chain.operands, vals, strict=True):
            if o.kind == POSITION:  # int32 like the result: packed like it, as acc entries
                assert v.data is not None and ocb  # with_pad_correction: a conv's constant
                res = layouts["res"].shape
                consts[o.name] = packing.to_entries(packing.pack_data(
                    v.data, g.batch, g.block_out, res))
                continue
            if o.kind == CHANNEL:
                if v.data is None or not ocb:
                    raise HostFallback(f"per-channel operand {v.name} is not a constant of a "
                                       f"convolution or dense layer")
                consts[o.name] = packing.to_entries(packing.pack_bias(v.data, g.batch,
                                                                      g.block_out, ocb))
                continue
            reads[o.name] = v
            layouts[o.name] = canonical(v.type, self.hw)
        if chain.tensors:
            consts[EYE] = _eye(self.hw)

    # ------------------------------------------------------------------ window ops

    def _window(self, group: Node, spec: WindowSpec, chain: Chain, x: Value,
                vals: list[Value]) -> Kernel:
        hw = self.hw
        skey = (spec, tuple((s.name, s.reads) for s in chain.stages),
                tuple(o.kind for o in chain.operands), hw.name)
        t0 = time.perf_counter()
        c = compile_window(spec, hw, chain or None, cost=self.cost, refine=self.refine,
                           schedule=self.knobs.get(skey, {}).get("window"), memo=self.memo)
        secs = time.perf_counter() - t0
        self.knobs[skey] = {"window": c.schedule}
        what = f"{group.output.name} ({spec.kind} window)"
        in_l, out_l = canonical(x.type, hw), canonical(group.output.type, hw)
        _check_layout("input", c.in_shape, in_l, what)
        _check_layout("output", c.out_shape, out_l, what)
        reads = {"data": x}
        layouts = {"data": in_l, "res": out_l}
        consts = {EYE: _eye(hw)}
        # per-channel constants (an exact pool's scale words) packed like a bias, per block
        self._operands(chain, vals, reads, layouts, consts, -(-spec.c // hw.gemm.block_out))
        s = c.schedule
        detail = f"tc={s.tc} th={s.th} tw={s.tw} vt={s.vthreads}"
        return Kernel(group, spec.kind, c.program, reads, ("res", group.output), layouts, consts,
                      window_bound(spec, hw, chain or None), 0, secs, detail,
                      {"schedule": {"tc": s.tc, "th": s.th, "tw": s.tw, "vthreads": s.vthreads}})


def place_group(graph: Graph, group: Node, hw: HwConfig, cost: Cost | None = None,
                refine: int = driver.REFINE, memo: driver.CompileMemo | None = None) -> Step:
    """``group`` of ``graph`` as a ``Kernel`` or, naming why, a ``HostOp`` (``memo``: a
    compile cache)."""
    return Placer(graph, hw, cost, refine, memo).place(group)


def place_all(graph: Graph, hw: HwConfig, cost: Cost | None = None,
              refine: int = driver.REFINE, memo: driver.CompileMemo | None = None
              ) -> list[Step]:
    """Every group of the fused ``graph`` placed, in order (schedules reused between groups
    of the same structure: the model's choice does not depend on the requantization
    constants)."""
    p = Placer(graph, hw, cost, refine, memo)
    return [p.place(n) for n in graph.nodes]


#: why a ``Lut2`` runs on the host on the accelerator (the GPU has a table kernel:
#: ``vta.gpu.window.lut2_func``)
LUT2_REASON = ("a 256x256 table lookup (ONNX Runtime's element-wise arithmetic: an add whose "
               "exact ties it rounds half to even, an add or a product with a constant tensor, "
               "a product of two tensors); no accelerator kernel indexes a table")


# ------------------------------------------------------------------------------ zero-point pad


def pad_correction(a: Conv2d) -> np.ndarray:
    """What convolution ``a`` adds for padding with ``a.pad_value`` instead of 0, per output
    position: ``conv(P, w)`` with ``P`` the image that is ``pad_value`` in the padding and 0
    inside (``passes.fold_pad``), ``(N, O, OH, OW)`` int32 (wrapped, as the accumulator
    wraps): ``pad_value`` times the sum of the weights over the taps that fall in the padding.
    Zero where a window lies inside the image."""
    n, c, h, w = a.x.type.shape
    p, v = a.pad, a.pad_value
    assert a.weight.data is not None  # verify_graph: a convolution's weight is a constant
    img = np.full((1, c, h + 2 * p, w + 2 * p), v, dtype=np.int8)
    img[:, :, p:p + h, p:p + w] = 0
    corr = grouped_conv2d_int32(img, a.weight.data, a.stride, 0, a.groups)
    return np.ascontiguousarray(np.broadcast_to(corr, (n, *corr.shape[1:])), dtype=np.int32)


def with_pad_correction(a: Conv2d, chain: Chain, vals: list[Value]
                        ) -> tuple[Chain, list[Value]]:
    """``chain`` with ``a``'s zero-point padding (``pad_correction``) added first, as an
    int32 per-position operand (the kernel's LOAD pads with zeros)."""
    k = len(chain.operands)
    corr = pad_correction(a)
    v = Value(f"{a.output.name}_padfix", TensorType(corr.shape, "int32", "NCHW"), corr)
    ch = Chain((bias_stage(k), *chain.stages),
               (*chain.operands, ChainOperand(f"opnd{k}", POSITION, label="pad_value")))
    return ch, [*vals, v]


# ------------------------------------------------------------------------------ grouped conv


def block_diagonal(w: np.ndarray, groups: int) -> np.ndarray:
    """A grouped convolution's weight ``(O, I/groups, KH, KW)`` as the plain convolution's
    ``(O, I, KH, KW)``: group ``g``'s block on the diagonal, zeros elsewhere. The GEMM core (and
    the GPU's implicit GEMM) then computes the grouped convolution exactly, multiplying the
    zeros too: ``1 - 1/groups`` of its MACs are wasted (a depthwise convolution of C channels:
    ``1 - 1/C``)."""
    o, cg, kh, kw = w.shape
    og = o // groups
    out = np.zeros((o, cg * groups, kh, kw), dtype=w.dtype)
    for g in range(groups):
        out[g * og:(g + 1) * og, g * cg:(g + 1) * cg] = w[g * og:(g + 1) * og]
    return out


def grouped_detail(a: Conv2d) -> str:
    """The per-op table's note for a grouped convolution: its groups and the share of the
    GEMM's MACs that multiply the block-diagonal zeros (empty for ``groups`` 1)."""
    if a.groups == 1:
        return ""
    return f" groups={a.groups} (block-diagonal: {1 - 1 / a.groups:.1%} of GEMM MACs on zeros)"
# ------------------------------------------------------------------------------ transformers

#: the transformer operators the host runs (``transformer_reason`` says why)
TRANSFORMER_HOST: tuple[type[Node], ...] = (MatMul, Reshape, Transpose, HostFloat, Take, Stack,
                                             QLinearSoftmax, Concat, QLinearAvgPool)


def transformer_reason(n: Node) -> str:
    """Why a transformer operator runs on the host (the per-op table's reason)."""
    if isinstance(n, HostFloat):
        return f"float32 on the host ({n.name}: ONNX Runtime's float operator)"
    if isinstance(n, QLinearAvgPool):
        return ("ONNX Runtime's QLinearAveragePool: float32 window sums divided by the "
                "window's taps, quantized; no integer form of it is proven")
    if isinstance(n, QLinearSoftmax):
        return ("ONNX Runtime's QLinearSoftmax: a 256-entry float32 exponential table, a float32 "
                "row sum and a division per element; no accelerator instruction divides")
    if isinstance(n, MatMul):
        return ("a product of two activations with a zero point: its cross terms depend on "
                "both runtime operands (passes.split_matmul runs the symmetric ones as dense "
                "layers)")
    return f"{n.op}: a layout operator (the host moves the bytes)"
