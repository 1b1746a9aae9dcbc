"""Window operators (``ops.window.WindowSpec``) on the accelerator, over the packed NCHWnc
layout, with fused chains.

A window op over a packed int8 input ``data``
``(N/b, C/k, H, W, b, k)`` (k = block_in = block_out) and output ``(N/b, C/k, OH, OW, b, k)``:

* ``"max"``: ``max`` over each ``kernel x kernel`` window. The GEMM core brings the padded
  input tile into the accumulator (``chain_plan.widen``: one GEMM against an identity weight block
  per input entry; LOAD pads with zeros, so the caller places a padded max-pool here only when
  its input cannot be negative: zero then never wins either); on the output tile a GEMM reset,
  an ALU ADD of the first tap (a copy) and an ALU MAX with a register operand per further tap.
* ``"sum"``: the sum over each window, computed by the GEMM core as a reduction against the
  identity block (the window's taps are the reduction), no padding: the global average pool
  is a ``sum`` over the whole image followed by its requantization (a fused chain).
* ``"ewise"``: a 1x1 window: the input widened into the accumulator; its fused chain is the
  whole kernel (a stand-alone add, ReLU or clip: graph operators not fused into a producer).

Every kind takes a ``ops.chain.Chain`` after its own stages (requantization, operands). The tile
is ``tc`` channel blocks x ``th`` x ``tw`` output pixels; two virtual threads split the rows
when two copies fit. ``compile_window`` ranks the tiles that fit by a first-order estimate
(instruction cycles from the definitions, compute against DMA) and keeps the fastest of the
best ``REFINE`` under a cost oracle (the timing-only simulator, ``AccelTarget.cycles``).
``window_bound`` is the machine bound: the compute module's instructions at one execution per
entry (each input entry widened once, each output entry's stages), against the compulsory
DRAM bytes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from vta.compiler.accel.cost import instruction_cycles, microop_instruction_cycles, prototype
from vta.compiler.accel.driver import CompileMemo, chain_text, fastest, memory_cycles
from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.ops.chain_plan import (
    apply_chain,
    chain_cost,
    chain_cycles_split,
    chain_instructions,
    check_widening,
    identity_weights,
    widen,
)
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pipeline import CompileResult, compile_func
from vta.compiler.accel.schedules.fusion import attach_epilogue
from vta.compiler.accel.schedules.model import ISSUE_GAP
from vta.compiler.ir import expr as E
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import AttachAt, Schedule, create_schedule
from vta.compiler.ir.tensor import Tensor, placeholder, reduce_axis
from vta.compiler.ir.tensor import sum_ as tsum
from vta.compiler.ops.chain import Chain, ew
from vta.compiler.ops.window import WindowSpec
from vta.config import HwConfig
from vta.errors import ScheduleError
from vta.isa import MemType, Program, by_name
from vta.isa.builtins import GEMM, LOAD, STORE
from vta.isa.defs import instance

#: candidates compiled and timed by the cost oracle
REFINE = 3


@dataclass(frozen=True, slots=True)
class WindowSchedule:
    """``tc`` channel blocks x ``th`` x ``tw`` output pixels per tile; ``vthreads`` over rows."""

    tc: int
    th: int
    tw: int
    vthreads: int = 2


def _blocks(spec: WindowSpec, hw: HwConfig) -> tuple[int, int]:
    g = hw.gemm
    return math.ceil(spec.n / g.batch), math.ceil(spec.c / g.block_out)


def _in_tile(spec: WindowSpec, s: WindowSchedule) -> tuple[int, int]:
    return (s.th - 1) * spec.stride + spec.kernel, (s.tw - 1) * spec.stride + spec.kernel


def window_compute(spec: WindowSpec, hw: HwConfig, chain: Chain | None = None) -> PackedOp:
    """The op in the tensor IR over the packed layouts (module docstring), the chain after."""
    check_widening(hw, spec.describe())
    g = hw.gemm
    nb, cb = _blocks(spec, hw)
    b, k = g.batch, g.block_out
    s, p, kk = spec.stride, spec.pad, spec.kernel
    data = placeholder((nb, cb, spec.h, spec.w, b, k), g.inp_dtype, "data")
    eye = identity_weights(hw)
    oshape = (nb, cb, spec.oh, spec.ow, b, k)
    pad: Tensor | None = None
    stages: list[Tensor] = []
    if spec.kind == "sum":
        rr, rq, ri = reduce_axis(kk, "r"), reduce_axis(kk, "q"), reduce_axis(k, "bi")
        acc = ew(oshape, lambda n, c, y, x, bb, j: tsum(
            data[n, c, y * s + rr, x * s + rq, bb, ri].astype("int32")
            * eye[0, 0, j, ri].astype("int32"), [rr, rq, ri]), "pool_sum")
    elif spec.kind == "ewise":
        acc = widen(data, eye, "data_acc")
    else:
        hp, wp = (spec.oh - 1) * s + kk, (spec.ow - 1) * s + kk
        pad = ew((nb, cb, hp, wp, b, k), lambda n, c, y, x, bb, i: E.select(
            (y >= p) & (y < spec.h + p) & (x >= p) & (x < spec.w + p),
            data[n, c, y - p, x - p, bb, i], E.const(0, g.inp_dtype)), "data_pad")
        win = widen(pad, eye, "data_acc")
        acc = ew(oshape, lambda *ax: E.const(0, g.acc_dtype), "pool_init")
        stages.append(win)
        cur = acc
        for t in range(spec.taps):
            r, q = divmod(t, kk)
            prev = cur

            def tap(n: E.Var, c: E.Var, y: E.Var, x: E.Var, bb: E.Var, j: E.Var,
                    prev: Tensor = prev, r: int = r, q: int = q, first: bool = t == 0
                    ) -> E.Expr:
                v = win[n, c, y * s + r, x * s + q, bb, j]
                return prev[n, c, y, x, bb, j] + v if first else E.max_(prev[n, c, y, x, bb, j],
                                                                        v)

            cur = ew(oshape, tap, f"pool_t{t}")
            stages.append(cur)
    last = stages[-1] if stages else acc
    res = ew(oshape, lambda *ax: last[ax].astype(g.out_dtype), "res")
    inputs = (data, eye)
    op = PackedOp(f"{spec.kind}_window", inputs, pad, acc, tuple(stages), res,
                  {"n": 0, "oc": 1, "oh": 2, "ow": 3})
    return apply_chain(op, chain, hw) if chain else op


def schedule_window(op: PackedOp, spec: WindowSpec, hw: HwConfig, s: WindowSchedule
                    ) -> Schedule:
    """Tile the output (channel blocks x rows x columns, threads over rows), compute the
    input copy and every accumulator stage at the tile, tensorize the GEMMs; the fused chain
    is attached by post-scheduling fusion."""
    sch = create_schedule(op.out)
    out = sch[op.out]
    n, c, y, x, bb, j = out.axis
    co, ci = out.split(c, s.tc)
    yo, yi = out.split(y, s.th)
    xo, xi = out.split(x, s.tw)
    if s.vthreads > 1:
        yoo, yv = out.split(yo, s.vthreads)
        out.reorder(n, co, yoo, yv, xo, ci, yi, xi, bb, j)
        out.virtual_thread(yv)
    else:
        out.reorder(n, co, yo, xo, ci, yi, xi, bb, j)
    tile = xo
    gemm = vta_gemm_intrinsic(hw)
    eye = op.inputs[1]
    if spec.kind == "sum":
        acc = sch.cache_write(op.acc, "acc")
        sch[op.acc].compute_inline()
        inp = sch.cache_read(op.data, "inp", [acc])
        sch.cache_read(eye, "wgt", [acc])
        a = sch[acc]
        a.compute_at(out, tile)
        sch[inp].compute_at(out, tile)
        ax, red = a.axis, a.reduce_axis
        a.reorder(*red[:-1], *ax, red[-1])
        a.tensorize(ax[-2], gemm)
        return attach_epilogue(sch, op, hw)
    # the widened input (ewise: it is the accumulator; max: a stage), then the op's stages
    wid = op.acc if spec.kind == "ewise" else op.epilogue[0]
    src = op.pad if op.pad is not None else op.data
    inp = sch.cache_read(src, "inp", [wid])
    if op.pad is not None:
        sch[op.pad].compute_inline()
    sch.cache_read(eye, "wgt", [wid])
    sch[inp].compute_at(out, tile)
    own = [wid] if spec.kind == "ewise" else [op.acc, *op.epilogue[:1 + spec.taps]]
    for t in own:
        st = sch[t]
        st.set_scope("acc")
        st.compute_at(out, tile)
    w = sch[wid]
    ax, red = w.axis, w.reduce_axis
    w.reorder(red[0], *ax, red[1])
    w.tensorize(ax[-2], gemm)
    return attach_epilogue(sch, op, hw, at=AttachAt(out, tile))


def _footprint(spec: WindowSpec, hw: HwConfig, s: WindowSchedule,
               chain: Chain | None) -> dict[str, int]:
    th_in, tw_in = _in_tile(spec, s)
    v = s.vthreads
    out = s.tc * s.th * s.tw
    cc = chain_cost(chain, hw) if chain else None
    extra = cc.tensors if cc else 0
    copies = cc.copies if cc else 0  # acc tiles only (ops.chain_plan.copy_tile)
    _, cb = _blocks(spec, hw)
    acc = {"max": s.tc * th_in * tw_in + out, "sum": out, "ewise": out}[spec.kind]
    return {"inp": v * (s.tc * th_in * tw_in + extra * out), "wgt": 1,
            "acc": v * (acc + (extra + copies) * out) + (cc.channels * cb if cc else 0)}


def _fits(spec: WindowSpec, hw: HwConfig, s: WindowSchedule, chain: Chain | None) -> bool:
    need = _footprint(spec, hw, s, chain)
    if any(need[k] > hw.depth(k) for k in need):
        return False
    return spec.pad <= (1 << hw.isa.pad) - 1  # a LOAD's pad fields


def _microop(hw: HwConfig, defn: Any, n_ops: int, **fields: object) -> float:
    """One micro-op instruction of ``n_ops`` executions (its definition's cycles) plus the
    schedule model's issue gap (``schedules.model.ISSUE_GAP``)."""
    return float(microop_instruction_cycles(defn, n_ops, hw, **fields)) + ISSUE_GAP


def _dma(hw: HwConfig, kind: str, rows: int, cols: int) -> float:
    insn = prototype(LOAD if kind != "out" else STORE, mem=MemType[kind.upper()], y_size=rows,
                     x_size=cols, x_stride=cols)
    return float(instruction_cycles(insn, hw))


def _own_cycles(spec: WindowSpec, hw: HwConfig, out_entries: int, in_entries: int) -> float:
    """Compute-module cycles of the op's own stages on a tile (one instruction per stage)."""
    if spec.kind == "sum":
        return (_microop(hw, GEMM, out_entries, reset=True)
                + _microop(hw, GEMM, out_entries * spec.taps))
    widen_c = _microop(hw, GEMM, in_entries, reset=True) + _microop(hw, GEMM, in_entries)
    if spec.kind == "ewise":
        return widen_c
    add, mx = _alu_def("add"), _alu_def("max")
    return (widen_c + _microop(hw, GEMM, out_entries, reset=True)
            + _microop(hw, add, out_entries) + (spec.taps - 1) * _microop(hw, mx, out_entries))


def _alu_def(op: str) -> object:
    return by_name(f"ALU.{op.upper()}")


def estimate(spec: WindowSpec, hw: HwConfig, s: WindowSchedule, chain: Chain | None) -> float:
    """First-order cycles: per tile the compute module's instructions against the tile's DMA
    (overlapped with two threads, serial with one)."""
    nb, cb = _blocks(spec, hw)
    tiles = nb * math.ceil(cb / s.tc) * math.ceil(spec.oh / s.th) * math.ceil(spec.ow / s.tw)
    th_in, tw_in = _in_tile(spec, s)
    out_e, in_e = s.tc * s.th * s.tw, s.tc * th_in * tw_in
    compute = _own_cycles(spec, hw, out_e, in_e)
    extra = 0
    if chain:  # each fused instruction over the tile's entries, as the conv model prices them
        compute += sum(_microop(hw, d, out_e, **f) for d, f in chain_instructions(chain, hw))
        extra = len(chain.tensors)
    mem = s.tc * (_dma(hw, "inp", th_in, tw_in) + extra * _dma(hw, "inp", s.th, s.tw)
                  + _dma(hw, "out", s.th, s.tw))
    per = max(compute, mem) if s.vthreads > 1 else compute + mem
    return tiles * per


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(spec: WindowSpec, hw: HwConfig, chain: Chain | None = None,
               exact: bool = True) -> list[WindowSchedule]:
    """Tiles that fit, cheapest estimate first; with ``exact`` only tiles dividing the output
    (the packed output is then exactly the tensor's), two threads when two copies fit."""
    _, cb = _blocks(spec, hw)
    rows = _divisors(spec.oh) if exact else list(range(1, spec.oh + 1))
    cols = _divisors(spec.ow) if exact else list(range(1, spec.ow + 1))
    out: list[tuple[float, int, WindowSchedule]] = []
    for v in (2, 1):
        for tc in _divisors(cb):
            for th in rows:
                if exact and spec.oh % (th * v):
                    continue
                for tw in cols:
                    s = WindowSchedule(tc, th, tw, v)
                    if _fits(spec, hw, s, chain):
                        out.append((estimate(spec, hw, s, chain), len(out), s))
        if out:
            break
    if not out:
        raise ScheduleError(f"no tile of {spec.describe()} fits the scratchpads of {hw.name}"
                            f"{' with an exact output layout' if exact else ''}")
    out.sort(key=lambda e: (round(e[0], 6), e[1]))
    return [s for _, _, s in out]


@dataclass
class CompiledWindow:
    """A compiled window op: its program, schedule and packed shapes."""

    spec: WindowSpec
    hw: HwConfig
    schedule: WindowSchedule
    chain: Chain | None
    result: CompileResult

    @property
    def program(self) -> Program:
        return self.result.program

    @property
    def in_shape(self) -> tuple[int, ...]:
        nb, cb = _blocks(self.spec, self.hw)
        g = self.hw.gemm
        return (nb, cb, self.spec.h, self.spec.w, g.batch, g.block_in)

    @property
    def out_shape(self) -> tuple[int, ...]:
        nb, cb = _blocks(self.spec, self.hw)
        g = self.hw.gemm
        return (nb, cb, self.spec.oh, self.spec.ow, g.batch, g.block_out)


def compile_window(spec: WindowSpec, hw: HwConfig, chain: Chain | None = None, *,
                   cost: Callable[[Program], int] | None = None, refine: int = REFINE,
                   exact: bool = True, schedule: WindowSchedule | None = None,
                   memo: CompileMemo | None = None) -> CompiledWindow:
    """Compile ``spec`` with ``chain`` fused after it: ``schedule`` if given, else the fastest
    under ``cost`` of the model's ``refine`` cheapest (the first without ``cost``).
    ``memo``: a compile cache (``driver.compile_workload``'s), keyed by ``window_key``."""
    if chain is not None and chain.positions:
        raise ScheduleError(f"{spec.kind} window: per-position operands "
                            f"({', '.join(o.name for o in chain.positions)}) are a convolution's "
                            f"or dense layer's (its accumulator tile); a window op takes none")
    if memo is not None:
        t0 = time.perf_counter()
        key = window_key(spec, chain, refine=refine if cost is not None else 1, exact=exact,
                         schedule=schedule)
        hit = memo.get(key)
        if isinstance(hit, CompiledWindow):
            hit = replace(hit, hw=hw, chain=chain)
            hit.result.seconds = time.perf_counter() - t0
            return hit
        c = compile_window(spec, hw, chain, cost=cost, refine=refine, exact=exact,
                           schedule=schedule)
        memo.put(key, c)
        return c
    t0 = time.perf_counter()
    cands = [schedule] if schedule is not None else candidates(spec, hw, chain, exact)
    cands = cands[:max(1, refine) if cost is not None else 1]
    op = window_compute(spec, hw, chain)  # the same op under every tile

    def build(s: WindowSchedule) -> CompiledWindow:
        func = lower(schedule_window(op, spec, hw, s), op.args, op.name)
        return CompiledWindow(spec, hw, s, chain, compile_func(func, hw))

    c = build(cands[0]) if len(cands) == 1 or cost is None else \
        fastest(cands, build, cost, hw)
    c.result.seconds = time.perf_counter() - t0
    return c


def window_key(spec: WindowSpec, chain: Chain | None, *, refine: int, exact: bool,
               schedule: WindowSchedule | None) -> str:
    """``compile_window``'s request as canonical text (a compile cache's key; the hardware is
    the cache's to key): the window op, the fused chain, the schedule if forced and how many
    candidates are timed."""
    return json.dumps({"op": "window", "spec": repr(spec), "chain": chain_text(chain),
                       "exact": exact, "refine": refine,
                       "schedule": None if schedule is None else repr(schedule)},
                      sort_keys=True, separators=(",", ":"))


def window_bound(spec: WindowSpec, hw: HwConfig, chain: Chain | None = None
                 ) -> dict[str, float]:
    """The machine bound of ``spec`` with ``chain``: the compute module's cycles with each
    input entry widened once (max, ewise) or each output entry's window summed once (sum) and
    each output entry's own and fused instructions at one micro-op each (their definitions'
    issue cycles; on a separate ALU pipeline the larger of the GEMM core's and the ALU's),
    against every packed tensor moved once over the port (reads and writes on their own
    channels, ``driver.memory_cycles``)."""
    nb, cb = _blocks(spec, hw)
    out_e = nb * cb * spec.oh * spec.ow
    in_e = nb * cb * spec.h * spec.w

    def issue(defn: Any, **fields: object) -> int:
        return int(defn.issue(instance(defn, **fields), hw))

    reset, gemm = issue(GEMM, reset=True), issue(GEMM)
    if spec.kind == "sum":
        on_gemm, on_alu, resets = out_e * spec.taps * gemm, 0, out_e
    elif spec.kind == "ewise":
        on_gemm, on_alu, resets = in_e * gemm, 0, in_e
    else:
        on_gemm, resets = in_e * gemm, in_e + out_e
        on_alu = out_e * (issue(_alu_def("add")) + (spec.taps - 1) * issue(_alu_def("max")))
    tensors = 0
    if chain:
        widen, alu = chain_cycles_split(chain, hw)
        on_gemm += out_e * widen
        on_alu += out_e * alu
        tensors = len(chain.tensors)
    if hw.alu.separate_pipeline:
        # the ALU runs beside the GEMM core; the resets may run on either (left out: a bound)
        compute = max(on_gemm, on_alu)
    else:  # VTA's one compute pipeline runs everything in turn
        compute = on_gemm + on_alu + resets * reset
    read = in_e * hw.elem_bytes("inp") + tensors * out_e * hw.elem_bytes("inp")
    written = out_e * hw.elem_bytes("out")

    memory = memory_cycles(hw, read, written)
    return {"compute_cycles": float(compute), "memory_cycles": memory,
            "machine_cycles": max(float(compute), memory), "min_bytes": float(read + written)}
