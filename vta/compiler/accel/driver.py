"""Compile a workload for the accelerator: choose the layout and schedule, lower, run the pipeline.

``space_of`` is a workload's schedule space (``schedules.space``); ``build`` compiles one point
of it: defines the op in the tensor IR (``conv2d_compute`` / ``matmul_compute``) over the
point's layout, schedules it with the primitives and ``lower``s it (``schedules.build``) and
runs the VTA pipeline. ``compile_workload`` picks the point (the knobs given, else the analytic
model's ranking of the space, and among its best candidates the one a caller-supplied cost
oracle finds fastest, ``fastest`` timing only those that can still win) and builds it;
``vta.tune`` searches the same space. Running the program and checking it against numpy is
``vta.run``'s job: it sits above the compiler and the simulator and passes the timing-only
simulator as the cost oracle.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from vta.compiler.accel.cost import program_bound
from vta.compiler.accel.ops.chain_plan import apply_chain, chain_cost, chain_cycles_split
from vta.compiler.accel.ops.conv2d_packed import conv2d_compute, packed_dims
from vta.compiler.accel.ops.epilogue_plan import epilogue_cycles_per_entry
from vta.compiler.accel.ops.fold import ConvFold
from vta.compiler.accel.ops.matmul_packed import matmul_compute, packed_matmul_dims
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pipeline import CompileResult, collector_paused, compile_func
from vta.compiler.accel.schedules import model
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.accel.schedules.space import (
    TILE_KNOBS,
    ConvProblem,
    ConvSchedule,
    ConvSpace,
    check_tile_knobs,
    fit_report,
)
from vta.compiler.accel.schedules.space import exact_layout as space_exact_layout
from vta.compiler.ir.space import Point
from vta.compiler.ops.chain import Chain
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload
from vta.config import DTYPE_BITS, HwConfig
from vta.errors import ScheduleError
from vta.isa import Program

__all__ = ["Compiled", "CompileMemo", "Cost", "Rewrite", "build", "chain_text", "compile_key",
           "compile_workload", "compulsory_bytes", "default_points", "fastest",
           "exact_layout", "memory_cycles", "op_compute", "packed_bytes", "roofline",
           "space_of"]

#: A cost oracle: cycles a program takes (``vta.run`` passes the timing-only simulator). It
#: must never answer fewer than ``cost.program_bound`` (the simulator never does: a test holds
#: it), which lets ``fastest`` skip timing a candidate that cannot win.
Cost = Callable[[Program], int]
#: A replacement of an op's epilogue (same inputs and accumulator; see ``compile_workload``).
Rewrite = Callable[[PackedOp], PackedOp]


@dataclass
class Compiled:
    """A compiled workload. ``conv`` is the convolution the program computes: the user's, or
    for a folded layer (``fold.kind != "none"``, ``ops.fold``) the folded one over the
    repacked input; ``fold.spec`` is always the user's."""

    workload: Workload
    hw: HwConfig
    conv: Conv2dSpec
    schedule: ConvSchedule
    epilogue: Epilogue
    result: CompileResult
    fold: ConvFold | None = None
    #: element-wise operators fused after the epilogue (``ops.fused``)
    chain: Chain | None = None
    #: ``roofline``'s answer, kept once computed: a function of the request alone, so a
    #: program read from the compile cache brings it (a warm ``vta run resnet18`` selected
    #: every chain's instructions again for it: 0.1 s)
    bound: dict[str, float] | None = field(default=None, compare=False, repr=False)

    @property
    def program(self) -> Program:
        return self.result.program

    @property
    def packed(self):  # type: ignore[no-untyped-def]
        """The packed layouts of the op's tensors (``PackedConv2d`` / its matmul twin)."""
        if isinstance(self.workload.spec, MatmulSpec):
            return packed_matmul_dims(self.workload.spec, self.hw, self.schedule)
        return packed_dims(self.conv, self.hw, self.schedule)

    @property
    def user_conv(self) -> Conv2dSpec:
        """The user's convolution (a matmul as its 1x1 convolution)."""
        return self.fold.spec if self.fold is not None else self.conv

    @property
    def fold_kind(self) -> str:
        return self.fold.kind if self.fold is not None else "none"


class CompileMemo(Protocol):
    """Where ``compile_workload`` (and ``ops.window_packed.compile_window``) keep what they
    compiled, by a canonical key of the request (``compile_key``); the persistent compile
    cache is one (``vta.tune.compile_cache``). The caller vouches that its cost oracle is the
    same for every key (the timing-only simulator of the memo's hardware) and the memo keys
    the hardware itself."""

    def get(self, key: str) -> Any:
        """What was compiled for ``key`` (a ``Compiled``, a ``CompiledWindow``), or None."""
        ...

    def put(self, key: str, compiled: Any) -> None:
        """Keep ``compiled`` for ``key``."""
        ...


def chain_text(chain: Chain | None) -> Any:
    """A fused chain as JSON for a compile key: its stages and operands by name and label
    (``Chain.key``, with the names the program's allocations take)."""
    if not chain:
        return None
    return [[[s.name, s.label, list(s.reads)] for s in chain.stages],
            [[o.name, o.kind, o.label] for o in chain.operands]]


#: How many of the schedule model's best candidates ``compile_workload`` compiles and measures
#: with the cost oracle to pick the fastest; 1 (or no oracle) = the model's first choice.
REFINE = 3


def space_of(w: Workload, hw: HwConfig, *, chain: Chain | None = None, exact: bool = False,
             fold: str | None = None, vthreads: int | None = None,
             **forced: Any) -> ConvProblem:
    """The schedule space of ``w`` on ``hw`` (``schedules.space.ConvSpace`` bound to its
    shape): what ``compile_workload`` ranks, ``vta tune`` searches and ``build`` compiles."""
    fused = chain_cost(chain, hw) if chain else None
    return ConvSpace(hw).bind(w.spec, fused=fused, exact=exact, fold=fold, vthreads=vthreads,
                              **forced)


def build(w: Workload, hw: HwConfig, point: Point, *, epilogue: Epilogue | None = None,
          rewrite: Rewrite | None = None, chain: Chain | None = None,
          exact: bool = False) -> Compiled:
    """Compile ``w`` with the schedule at ``point`` of its space: the one function from a
    point to a program (the default schedule, the tuner and the graph level all build
    through it). A point that does not fit is a ``ScheduleError`` naming why."""
    problem = space_of(w, hw, chain=chain, exact=exact)
    why = problem.refusal(point)
    if why is not None:
        raise ScheduleError(why[1])
    fold, sch = problem.schedule(point)
    return _compile_with(w, hw, fold, sch, epilogue or w.epilogue, rewrite, chain)


def compile_workload(w: Workload, hw: HwConfig, *, latency_hiding: bool = True,
                     epilogue: Epilogue | None = None, refine: int = REFINE,
                     fold: str | None = None, cost: Cost | None = None,
                     rewrite: Rewrite | None = None, chain: Chain | None = None,
                     exact: bool = False, memo: CompileMemo | None = None,
                     **knobs: Any) -> Compiled:
    """Compile ``w``: the schedule is the knobs given, else the best of the model's ``refine``
    cheapest estimates measured by ``cost`` (the model ranks, the oracle decides among near
    ties the first-order estimate cannot separate); without ``cost``, the model's first choice.

    ``epilogue``: the layer's calibrated one (``Workload.epilogue``) unless given.
    ``fold`` (``ops.fold``): ``None`` lets the model choose among the plain layout and, for a
    convolution with fewer input channels than ``block_in``, its reduction folds (their
    schedules ranked together by the estimate, the best ``refine`` timed); ``"none"``,
    ``"kw"`` or ``"khkw"`` forces one. Fully forced tile knobs (tco, tci, th, tw) describe the
    plain layout unless ``fold`` names another.

    ``rewrite`` replaces the op's epilogue before it is scheduled (the TC mapping puts its ALU
    chain there: ``PackedOp`` in, ``PackedOp`` with the same inputs and accumulator out).
    ``chain`` appends fused element-wise operators after the epilogue (``ops.fused``: a
    residual add, a ReLU; graph-level fusion's), attached to the scheduled anchor by
    post-scheduling fusion; the model prices its instructions and scratchpad tiles.
    ``exact``: only schedules whose packed tensors have exactly the tensors' shapes (no
    padded channels, rows or columns; a folded input is the host's to pack), so that one op's
    packed output is the next op's packed input (graph-level layout planning).

    ``memo``: a compile cache; the program kept for this request's ``compile_key`` is returned
    without compiling (with ``w``, ``hw`` and ``chain`` the caller's, ``result.seconds`` the
    lookup's), and what is compiled is kept. A ``rewrite`` (a function) cannot be keyed: it
    bypasses the memo."""
    if memo is not None and rewrite is None:
        t0 = time.perf_counter()
        key = compile_key(w, hw, latency_hiding=latency_hiding, epilogue=epilogue,
                          refine=refine, fold=fold, timed=cost is not None, chain=chain,
                          exact=exact, **knobs)
        hit = memo.get(key)
        if isinstance(hit, Compiled):
            hit = replace(hit, workload=w, hw=hw, chain=chain)
            hit.result.seconds = time.perf_counter() - t0
            return hit
        c = compile_workload(w, hw, latency_hiding=latency_hiding, epilogue=epilogue,
                             refine=refine, fold=fold, cost=cost, chain=chain, exact=exact,
                             **knobs)
        roofline(c)  # kept with the program (``Compiled.bound``)
        memo.put(key, c)
        return c
    t0 = time.perf_counter()
    epi = epilogue or w.epilogue  # the layer's calibrated requantization
    vth = knobs.pop("vthreads", None)
    if not latency_hiding:
        vth = 1
    over = {k: v for k, v in knobs.items() if v is not None}
    check_tile_knobs([*((k, over.get(k)) for k in TILE_KNOBS if k != "vthreads"),
                      ("vthreads", vth)])
    if {"tco", "tci", "th", "tw"} <= over.keys():
        problem = space_of(w, hw, chain=chain, exact=exact, fold=fold or "none")
        f = problem.folds[0]
        sch = ConvSchedule(over["tco"], over["tci"], over["th"], over["tw"], vth or 1,
                           over.get("vt_axis", "oh"), over.get("order", "oc"),
                           over.get("operands", "once"))
        fit_report(f.device, hw, sch, problem.fused)
        if exact and not exact_layout(w, hw, f)(sch):
            raise ScheduleError(f"schedule {sch} pads the packed tensors of {w.name}; the "
                                f"graph's layout needs them exact")
        return _compile_with(w, hw, f, sch, epi, rewrite, chain)
    problem = space_of(w, hw, chain=chain, exact=exact, fold=fold, vthreads=vth, **over)
    ranked = model.rank(problem, epi, limit=max(1, refine) if cost is not None else 1,
                        prefer_two_threads=vth is None)
    if not ranked:
        raise problem.no_fit_error(problem.folds[0])
    cands = [problem.schedule(p) for _, p in ranked]
    if len(cands) == 1 or cost is None:
        return _compile_with(w, hw, cands[0][0], cands[0][1], epi, rewrite, chain)
    with collector_paused():  # young collections here free next to nothing (pipeline's)
        c = fastest(cands, lambda fs: _compile_with(w, hw, fs[0], fs[1], epi, rewrite, chain),
                    cost, hw)
    c.result.seconds = time.perf_counter() - t0  # the whole choice counts as compile time
    return c


class _HasProgram(Protocol):
    @property
    def program(self) -> Program: ...


_C = TypeVar("_C", bound=_HasProgram)
_T = TypeVar("_T")


def fastest(cands: list[_T], compile_one: Callable[[_T], _C], cost: Cost,
            hw: HwConfig) -> _C:
    """The compiled candidate ``cost`` finds fastest, the earliest in ``cands`` of equals (as
    timing each in order and keeping a strictly faster one: the model's order breaks ties).

    Branch and bound: every candidate is compiled and its program's lower bound taken
    (``cost.program_bound``, a sixth of a timing or less); they are timed lowest bound first
    (the model's order among equal bounds), and one whose bound already exceeds the best
    cycles measured (or equals them, coming later in ``cands``) cannot be chosen, so it is
    not timed. ``Cost`` never answers below the bound, so the choice is the one timing them
    all makes. Lowest bound first rather than the model's choice first: the candidate of the
    lowest bound is most often the fastest, and its cycles prune the most (ResNet-18 on
    pynq: 39 of the graph's 59 candidates timed against 44, 26 of C1-C11's 33 against 27)."""
    if not cands:
        raise ValueError("fastest: no candidate")
    built = [compile_one(c) for c in cands]
    if len(built) == 1:  # nothing to prune: no bound (timed as before, for the caller's cost)
        cost(built[0].program)
        return built[0]
    order = sorted((program_bound(c.program, hw), k) for k, c in enumerate(built))
    best: tuple[int, int] | None = None  # (cycles, index)
    for bound, k in order:
        if best is not None and (bound, k) >= best:
            continue  # not even its bound beats the best: it cannot be chosen
        got = (cost(built[k].program), k)
        if best is None or got < best:
            best = got
    assert best is not None
    return built[best[1]]


def compile_key(w: Workload, hw: HwConfig, *, latency_hiding: bool = True,
                epilogue: Epilogue | None = None, refine: int = REFINE, fold: str | None = None,
                timed: bool = True, chain: Chain | None = None, exact: bool = False,
                **knobs: Any) -> str:
    """What ``compile_workload`` compiles, as canonical text (a compile cache's key, with the
    hardware's digest and the compiler's version beside it): the op and its shapes, the
    epilogue, the fused chain (its stages and operands by name and label, ``Chain.key``), the
    layout and schedule knobs forced, how many candidates are timed and whether they are.
    Not the workload's name (a label: equal shapes compile alike) nor the hardware (the cache
    keys it by content)."""
    parts = {
        "op": type(w.spec).__name__, "spec": repr(w.spec),
        "epilogue": repr(epilogue or w.epilogue),
        "chain": chain_text(chain),
        "exact": exact, "fold": fold, "latency_hiding": latency_hiding,
        "refine": refine if timed else 1,
        "knobs": {k: v for k, v in sorted(knobs.items()) if v is not None},
    }
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def default_points(w: Workload, hw: HwConfig, *, epilogue: Epilogue | None = None,
                   refine: int = REFINE, chain: Chain | None = None,
                   exact: bool = False) -> list[Point]:
    """The points ``compile_workload`` (with a cost oracle) times: the model's ``refine``
    best, the one the oracle finds fastest being the default schedule."""
    problem = space_of(w, hw, chain=chain, exact=exact)
    ranked = model.rank(problem, epilogue or w.epilogue, limit=max(1, refine),
                        prefer_two_threads=True)
    if not ranked:
        raise problem.no_fit_error(problem.folds[0])
    return [p for _, p in ranked]


def _compile_with(w: Workload, hw: HwConfig, fold: ConvFold, sch: ConvSchedule,
                  epi: Epilogue, rewrite: Rewrite | None = None,
                  chain: Chain | None = None) -> Compiled:
    t0 = time.perf_counter()
    op = op_compute(w, hw, sch, epi, fold)
    if rewrite is not None:
        op = rewrite(op)
    if chain:
        op = apply_chain(op, chain, hw)
    func = lower_op(op, hw, sch)
    t_lower = time.perf_counter() - t0
    res = compile_func(func, hw)
    res.seconds += t_lower
    return Compiled(w, hw, fold.device, sch, epi, res, fold, chain)


def exact_layout(w: Workload, hw: HwConfig, fold: ConvFold) -> Callable[[ConvSchedule], bool]:
    """Whether a schedule's packed tensors are exactly the tensors' (``compile_workload``'s
    ``exact``; ``schedules.space.exact_layout``)."""
    return space_exact_layout(w.spec, hw, fold)


def op_compute(w: Workload, hw: HwConfig, sch: ConvSchedule, epi: Epilogue,
               fold: ConvFold | None = None) -> PackedOp:
    """The workload's op in the tensor IR, over the layouts packed for ``sch`` (a folded
    convolution: the folded one, ``ops.fold``)."""
    if isinstance(w.spec, MatmulSpec):
        return matmul_compute(w.spec, hw, sch, epi)
    return conv2d_compute(fold.device if fold is not None else w.spec, hw, sch, epi)


def packed_bytes(conv: Conv2dSpec, hw: HwConfig, bias: bool) -> int:
    """Every packed tensor of ``conv`` moved exactly once."""
    g = hw.gemm
    icb, ocb = math.ceil(conv.ic / g.block_in), math.ceil(conv.oc / g.block_out)
    nb = math.ceil(conv.n / g.batch)
    return (nb * icb * conv.h * conv.w * hw.elem_bytes("inp")
            + ocb * icb * conv.kh * conv.kw * hw.elem_bytes("wgt")
            + (ocb * hw.elem_bytes("acc") if bias else 0)
            + nb * ocb * conv.oh * conv.ow * hw.elem_bytes("out"))


def _span(size: int, out: int, k: int, stride: int, pad: int) -> int:
    """How many of ``size`` input rows (or columns) some window reads: ``out`` windows of
    ``k`` taps, ``stride`` apart, starting ``pad`` before the first."""
    read: set[int] = set()
    for o in range(out):
        lo = o * stride - pad
        read.update(range(max(0, lo), min(size, lo + k)))
    return len(read)


def compulsory_bytes(w: Workload, hw: HwConfig, bias: bool) -> tuple[int, int]:
    """``(read, written)`` bytes any schedule must move: every input element some window reads
    (a strided 1x1 layer reads a quarter of its input), every weight, the bias and every output
    element, each once, at its dtype's width (no channel padding, no halo twice)."""
    g = hw.gemm
    ib, wb, ob = (DTYPE_BITS[t] // 8 for t in (g.inp_dtype, g.wgt_dtype, g.out_dtype))
    bb = DTYPE_BITS[g.acc_dtype] // 8
    spec = w.spec
    if isinstance(spec, MatmulSpec):
        return (spec.m * spec.k * ib + spec.n * spec.k * wb + (spec.n * bb if bias else 0),
                spec.m * spec.n * ob)
    c = spec
    pixels = _span(c.h, c.oh, c.kh, c.stride, c.pad) * _span(c.w, c.ow, c.kw, c.stride, c.pad)
    read = (c.n * c.ic * pixels * ib + c.oc * c.ic * c.kh * c.kw * wb
            + (c.oc * bb if bias else 0))
    return read, c.n * c.oc * c.oh * c.ow * ob


def memory_cycles(hw: HwConfig, read: int, written: int) -> float:
    """The fewest cycles moving ``read`` and ``written`` bytes takes: the port's read and write
    channels each move ``bus_bytes`` a cycle, side by side (``vta.isa.memport``)."""
    return max(read, written) / hw.memory.bus_bytes


def roofline(c: Compiled) -> dict[str, float]:
    """Two lower bounds on the layer's cycles, whatever schedule and layout the compiler
    chose (``compulsory_bytes``: only the elements the computation reads, each once):

    * the classic roofline ``max(compute, memory)``: ``compute`` = the true MACs at the GEMM
      core's peak (``ops / (2 * MACs per cycle)``), ``memory`` = the compulsory bytes over the
      port (``memory_cycles``);
    * the machine bound, which adds what this machine cannot avoid: the GEMM core does whole
      micro-ops, each one accumulator entry (``batch x block_out`` outputs) by ``block_in`` of
      its reduction, so an entry takes at least ``ceil(reduction / block_in)`` of them
      (``gemm_cycles``; C1's 3 x 7 x 7 = 147 reduction needs 10 micro-ops of 16); and per entry
      the accumulator reset and the epilogue's instructions (``ops.epilogue.
      epilogue_cycles_per_entry``, each at its definition's issue cycles; HLS: SHR, bias ADD,
      MAX, MIN at II=2), which VTA's one compute pipeline runs serially with its GEMMs
      (``max(gemm + epilogue, memory)``) and a separate ALU pipeline beside them
      (``max(gemm, epilogue, memory)``).

    Pipeline fills, DMA latencies and contention are not in either: a run's cycles are at least
    both (a test holds every shipped configuration to it). Computed once per ``c`` (kept in
    ``c.bound``; a copy is returned)."""
    if c.bound is None:
        c.bound = _roofline(c)
    return dict(c.bound)


def _roofline(c: Compiled) -> dict[str, float]:
    """``roofline`` of ``c``, computed."""
    hw, conv = c.hw, c.user_conv
    ops = c.workload.spec.ops
    compute = ops / (2 * hw.macs_per_cycle)
    g, epi = hw.gemm, c.epilogue
    ocb = math.ceil(conv.oc / g.block_out)
    nb = math.ceil(conv.n / g.batch)
    read, written = compulsory_bytes(c.workload, hw, epi.bias)
    entries = nb * ocb * conv.oh * conv.ow
    gemm = entries * math.ceil(conv.ic * conv.kh * conv.kw / g.block_in) * g.ii
    per_entry = epilogue_cycles_per_entry(epi, hw)
    if c.chain:  # fused operators: their instructions, their int8 operands read once

        widen, alu = chain_cycles_split(c.chain, hw)
        gemm += entries * widen  # the widening GEMMs run on the GEMM core
        per_entry += alu
        read += (len(c.chain.tensors) * conv.n * conv.oc * conv.oh * conv.ow
                 * (DTYPE_BITS[g.inp_dtype] // 8))
        read += (len(c.chain.positions) * conv.n * conv.oc * conv.oh * conv.ow
                 * (DTYPE_BITS[g.acc_dtype] // 8))  # per-position int32 operands
    memory = memory_cycles(hw, read, written)
    epilogue = entries * per_entry
    serial = not hw.alu.separate_pipeline
    machine = max(gemm + epilogue, memory) if serial else max(gemm, epilogue, memory)
    return {"compute_cycles": compute, "memory_cycles": memory,
            "bound_cycles": max(compute, memory), "gemm_cycles": gemm,
            "epilogue_cycles": epilogue, "epilogue_per_entry": per_entry,
            "machine_cycles": machine, "min_bytes": read + written, "min_read_bytes": read,
            "min_write_bytes": written, "ops": ops, "serial_epilogue": serial}
