"""Share compile work among the points of a default-schedule sweep (``trials`` 0, issue 22).

A default schedule is chosen per layer and point as ``driver.compile_workload`` chooses it: the
model ranks the schedule space (``driver.default_points``), its best ``REFINE`` candidates are
compiled and timed on the timing-only simulator, the fastest is kept. Points of a sweep that
differ only in how long instructions take (DRAM bandwidth and latency, pipeline depths and
initiation intervals, queue depths) compile the same op over the same buffers, so most of that
work is the same at each of them; this module does it once and redoes only what the timing
changes, with results identical to compiling every point cold.

What the compile reads (derived from the code: ``tests/tune/test_sweep_share.py`` runs the
lowering and every pass of ``pipeline.PASSES`` on a configuration that records each field it
is asked for, over ResNet-18's layers on several configurations):

* ``lower`` (``op_compute`` + ``lower_op``) and the passes not in ``TIMED_PASSES`` read only
  *structural* fields: the GEMM shape and dtypes, the buffer sizes, the ALU's operations,
  lanes and immediate width, banks, the token queue depth, intrinsics (and the name, in
  messages only). Their output is a function of their input IR and ``structural_digest``.
* ``TIMED_PASSES`` also read ``TIMING_FIELDS``, through instructions' durations: ``lower_alu``
  picks an ALU form by its initiation interval, ``uop_gen`` folds loops into the fewest cycles
  (micro-op loads included, so DRAM latency and bus width), ``drain_tail`` splits the last
  instruction only where it shortens the tail. So DRAM bandwidth *is* read by the compile,
  and a program compiled at one bandwidth is not in general the program of another (``python
  bench/sweep_scale.py --mode programs``: at pynq with ``memory.latency`` 16 instead of 32, 10
  of the 25 default candidates C1-C11 have in common compile to another program).

``SharedCompiles`` therefore keeps, per candidate schedule, the tree of IRs the pipeline went
through: the lowered function and the output of every untimed pass are computed once and
reused; a timed pass runs again at each point, and when its output equals (structurally) one
it gave before, the IR after it and everything downstream, up to the emitted program, are
reused (incremental evaluation with early cut-off, as a build system skips the dependants of a
rebuilt file that came out unchanged). A program that comes out the same is the same object,
so its bit-exact check runs once (``default_group``): the values a program computes do not
depend on ``CHECK_FREE`` fields, so points differing only in those are timed, not re-run
with values. Each point's cycles and energy come from the one timing-only run of the program
it chose (``energy_of`` over that run's counted events).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.accel import driver
from vta.compiler.accel.ops.fold import ConvFold
from vta.compiler.accel.passes._common import flat_stream
from vta.compiler.accel.passes.emit import emit_program
from vta.compiler.accel.pipeline import PASSES, CompileResult
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.accel.schedules.space import ConvSchedule
from vta.compiler.ir import stmt as S
from vta.compiler.ir.structural import structural_equal
from vta.compiler.ir.verify import verify, verify_after
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import VtaError
from vta.isa import Program
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget
from vta.sim.energy import energy_of
from vta.sim.machine import simulate
from vta.tune.cache import hw_digest

__all__ = ["TIMING_FIELDS", "NOT_HARDWARE", "CHECK_FREE", "TIMED_PASSES", "structural_digest",
           "check_digest", "SharedCompiles", "DefaultGroup", "default_group"]

#: fields that only say how long instructions take: read by the compile only through
#: instruction durations (in ``TIMED_PASSES`` and the model's ranking), and by the simulator's
#: timing
TIMING_FIELDS = frozenset({
    "memory.bus_bytes", "memory.latency", "memory.burst_bytes", "memory.outstanding",
    "memory.row_overhead", "memory.row_overlap", "memory.uop_beat_bytes", "memory.arbiter",
    "memory.burst_boundary", "memory.shared_port",
    "gemm.pipeline_depth", "gemm.ii", "gemm.fill", "gemm.flat_loop",
    "alu.ii", "alu.ii_imm", "alu.pipeline_depth", "alu.fill", "alu.flat_loop",
    "queues.command_depth", "queues.fetch_batch"})
#: what is not the hardware's content (``cache.hw_digest`` leaves them out too): a label, the
#: stock-VTA claim (validated, changes nothing), the board (clock, resources) and the energy
#: model's technology
NOT_HARDWARE = frozenset({"name", "stock", "board", "energy"})
#: fields the values a program computes cannot depend on: DRAM timing and the command queues
#: (the pipeline depths are not here: the value simulation counts accumulator hazards within
#: the pipeline's window)
CHECK_FREE = frozenset({f for f in TIMING_FIELDS if f.startswith(("memory.", "queues."))})
#: the passes of ``pipeline.PASSES`` that read ``TIMING_FIELDS`` (module docstring)
TIMED_PASSES = frozenset({"lower_alu", "uop_gen", "drain_tail"})


def _digest_without(hw: HwConfig, left_out: frozenset[str]) -> str:
    """A content digest of ``hw`` without the fields (``section.field``) or whole sections and
    top-level fields named in ``left_out``."""
    d = hw.to_dict()
    for key in left_out:
        sec, _, leaf = key.partition(".")
        if not leaf:
            d.pop(sec, None)
        elif isinstance(d.get(sec), dict):
            d[sec].pop(leaf, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def structural_digest(hw: HwConfig) -> str:
    """The digest of what the lowering and the untimed passes read (module docstring): points
    of one structural digest share their lowered functions and untimed passes."""
    return _digest_without(hw, TIMING_FIELDS | NOT_HARDWARE)


def check_digest(hw: HwConfig) -> str:
    """The digest of what a program's values can depend on besides the program: points of one
    check digest that chose the same program share its bit-exact check."""
    return _digest_without(hw, CHECK_FREE | NOT_HARDWARE)


@dataclass(eq=False)
class _Node:
    """An IR the pipeline reached (the lowered function, or a timed pass's output), what the
    untimed passes after it made of it, and the timed pass outputs seen after those."""

    func: S.PrimFunc
    after: dict[str, S.PrimFunc] = field(default_factory=dict)
    branches: list[_Node] = field(default_factory=list)
    program: Program | None = None


class SharedCompiles:
    """The compiles of one workload's candidate schedules at points of one structural digest
    (module docstring); ``compile`` gives the same program as ``driver.build`` at that
    point, the same ``Program`` object whenever it comes out the same."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._digest: str | None = None
        self._roots: dict[tuple[ConvFold, ConvSchedule], _Node] = {}
        #: by step (``lower``, a pass's name, ``emit``): how often it ran, and how often its
        #: result was taken from the tree instead (for reports and tests)
        self.ran: Counter[str] = Counter()
        self.reused: Counter[str] = Counter()

    def compile(self, hw: HwConfig, fold: ConvFold, sch: ConvSchedule) -> driver.Compiled:
        """``self.workload`` with schedule ``sch`` over layout ``fold`` on ``hw`` (a
        ``ValueError`` for a point of another structural digest than the first's)."""
        digest = structural_digest(hw)
        if self._digest is None:
            self._digest = digest
        elif digest != self._digest:
            raise ValueError(f"{hw.name}: another structure than the points compiled before "
                             f"(structural digest {digest}, not {self._digest})")
        t0 = time.perf_counter()
        w, epi = self.workload, self.workload.epilogue
        node = self._roots.get((fold, sch))
        if node is None:
            func = lower_op(driver.op_compute(w, hw, sch, epi, fold), hw, sch)
            verify(func)
            node = self._roots[(fold, sch)] = _Node(func)
            self.ran["lower"] += 1
        else:
            self.reused["lower"] += 1
        func = node.func
        for name, fn, _why in PASSES:
            if name in TIMED_PASSES:
                out = fn(func, hw)
                self.ran[name] += 1
                node = self._branch(node, out, name, unchanged=out is func)
                func = node.func
                continue
            got = node.after.get(name)
            if got is None:
                got = node.after[name] = fn(func, hw)
                if got is not func:  # as compile_func: an unchanged input stays verified
                    verify_after(name, got)
                self.ran[name] += 1
            else:
                self.reused[name] += 1
            func = got
        if node.program is None:
            node.program = emit_program(func, hw)
            self.ran["emit"] += 1
        else:
            self.reused["emit"] += 1
        res = CompileResult(node.program, {}, time.perf_counter() - t0)
        return driver.Compiled(w, hw, fold.device, sch, epi, res, fold, None)

    @staticmethod
    def _branch(node: _Node, out: S.PrimFunc, name: str, *, unchanged: bool) -> _Node:
        """The node of timed pass ``name``'s output ``out`` (``unchanged``: its input) after
        ``node``: one seen before whose IR is structurally equal (the same up to the identity
        of variables: a pass that binds a loop makes a fresh variable each run; on the flat
        instruction stream, which binds none, plain equality, much cheaper), its downstream
        work reused, else a new one."""
        if flat_stream(out) is not None:  # no loops left to bind a variable: plain equality
            same = next((c for c in node.branches if c.func is out or c.func == out), None)
        else:
            same = next((c for c in node.branches
                         if c.func is out or structural_equal(c.func, out)), None)
        if same is not None:  # the first equal one: the rest are not compared
            return same
        if not unchanged:  # an output equal to a verified one (or its input) is verified
            verify_after(name, out)
        child = _Node(out)
        node.branches.append(child)
        return child


@dataclass(frozen=True)
class DefaultGroup:
    """One layer of a default-schedule sweep at points of one structural digest (``hws``, each
    a distinct hardware content or energy model), to compile and measure in one worker;
    ``check``: also run each distinct program chosen cycle by cycle against numpy."""

    workload: Workload
    hws: tuple[HwConfig, ...]
    check: bool


def default_group(task: DefaultGroup) -> list[dict[str, Any]]:
    """The figures of a sweep row for ``task.workload`` at each of ``task.hws`` (in order):
    its default schedule chosen as ``driver.compile_workload`` with the timing-only
    simulator as oracle chooses it, the cycles of that timing run and its counted events
    priced by ``energy_of`` at the point's energy model (pJ by component), the compiles
    shared (``SharedCompiles``); points of one hardware content (``hw_digest``: they differ in
    the energy model) are chosen and timed once. With ``check``, each distinct program (and
    ``check_digest``) runs once cycle by cycle against numpy (the inputs and numpy's answer
    drawn and computed once for the group); a point whose program was checked at another
    takes that verdict, and its utilization and machine bound from its own timing run. A
    point no schedule fits comes back with ``refused``. Runs in a worker."""
    shared = SharedCompiles(task.workload)
    chosen: dict[str, _Choice | str] = {}
    checked: dict[tuple[int, str], bool] = {}
    references: dict[Any, Any] = {}  # the layer's inputs and numpy answer, drawn once
    out = []
    for hw in task.hws:
        t0 = time.perf_counter()
        key = hw_digest(hw)
        if key not in chosen:
            chosen[key] = _choose(task.workload, hw, shared)
        got = chosen[key]
        if isinstance(got, str):
            out.append({"refused": got})
            continue
        c = dataclasses.replace(got.compiled, hw=hw)
        res: dict[str, Any] = {
            "cycles": got.cycles, "pj": dict(energy_of(c.program, dict(got.stats.bytes), hw).pj),
            "schedule": {"fold": c.fold_kind, **dataclasses.asdict(c.schedule)},
            "evaluated": got.evaluated, "seconds": time.perf_counter() - t0 + got.seconds}
        if task.check:
            res["verify"] = _verify(c, got, checked, references)
        out.append(res)
    return out


@dataclass(frozen=True)
class _Choice:
    """A point's default schedule: the program chosen, its timing-only run, how many
    candidates it was chosen among (``evaluated``: all compiled, those ``driver.fastest``
    could rule out by their bound not timed) and the seconds the choice took."""

    compiled: driver.Compiled
    cycles: int
    stats: Any
    evaluated: int
    seconds: float


def _choose(w: Workload, hw: HwConfig, shared: SharedCompiles) -> _Choice | str:
    """``w``'s default schedule on ``hw`` as ``driver.compile_workload`` with the timing-only
    simulator for its oracle chooses it: the model's best candidates compiled through
    ``shared`` and handed to ``driver.fastest``, which times them lowest bound first and skips
    one whose lower bound (``cost.program_bound``) cannot beat the best timed (the first of
    the fastest, the same choice as timing them all); why not, when no schedule fits. The
    chosen program's timing run is kept for its cycles and energy (not simulated again)."""
    t0 = time.perf_counter()
    runs: dict[int, Any] = {}  # id(program) -> its timing-only run's stats at ``hw``

    def cycles(program: Program) -> int:
        st = simulate(program, hw, timing_only=True).stats
        runs[id(program)] = st
        return int(st.cycles)

    try:
        points = driver.default_points(w, hw)
        problem = driver.space_of(w, hw)
        cands = [problem.schedule(p) for p in points]
        best = driver.fastest(cands, lambda fs: shared.compile(hw, fs[0], fs[1]), cycles, hw)
    except VtaError as e:
        return f"{type(e).__name__}: {e}"
    st = runs[id(best.program)]
    return _Choice(best, int(st.cycles), st, len(points), time.perf_counter() - t0)


def _verify(c: driver.Compiled, got: _Choice, checked: dict[tuple[int, str], bool],
            references: dict[Any, Any]) -> dict[str, Any]:
    """The check of a chosen program on ``c.hw``: a cycle-by-cycle run against numpy, unless
    the same program was run so at a point of the same ``check_digest`` (its verdict is this
    point's; the figures are from this point's timing run). The random inputs and numpy's
    answer depend on the layer and the seed, not the point: ``references`` (``run_layer``'s
    memo) draws and computes them once for all the group's checks."""
    key = (id(c.program), check_digest(c.hw))
    if key in checked:
        return {"passed": checked[key], "cycles": got.cycles, "timing_only": True,
                "utilization": got.stats.gemm_cycles / got.cycles,
                "of_machine_bound": driver.roofline(c)["machine_cycles"] / got.cycles}
    r = run_layer(c.workload, AccelTarget(c.hw), compiled=c, references=references)
    sm = r.summary()
    checked[key] = bool(r.passed)
    return {"passed": r.passed, "cycles": r.cycles, "timing_only": False,
            "utilization": sm["utilization"], "of_machine_bound": sm["of_machine_bound"]}
