"""The compiler's view of instruction costs: every number comes from the instruction's
definition (``InstructionDef.duration``), the same function the simulator charges.

``instruction_cycles`` is the cycles one instruction occupies its unit; ``unit_busy`` sums
them per unit over a program (what the simulator reports as each unit's busy cycles, since it
charges exactly these durations); ``program_bound`` is a proven lower bound on the cycles the
simulator reports for a whole program (``driver.compile_workload`` skips timing a candidate
whose bound already reaches the best time measured). The schedule model
(``schedules/default.py``) prices the instructions it expects a schedule to emit with the
same function, on prototype instructions (``prototype``), so a changed hardware fact moves
its estimates and the simulator together.
"""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter
from typing import Any

from vta.compiler.ir.visitor import evolve
from vta.config import HwConfig
from vta.isa import AluOp, InstructionDef, MemType, Program, Unit, definition_of
from vta.isa.builtins import ALU
from vta.isa.defs import instance, pops_of, pushes_of
from vta.isa.insn import DEP_FLAGS, values_of
from vta.isa.timing import fetch_cycles

#: an instruction's dependency flags as a tuple of bools (``Deps`` hashes by a Python call)
_dep_flags = attrgetter(*DEP_FLAGS)

__all__ = ["instruction_cycles", "unit_busy", "program_bound", "prototype",
           "microop_instruction_cycles", "max_block_uops",
           "dma_instruction_cycles", "reset_instruction"]


def instruction_cycles(insn: Any, hw: HwConfig) -> int:
    """Cycles ``insn`` occupies its unit on ``hw`` (its definition's duration)."""
    return int(definition_of(insn).duration(insn, hw))


def unit_busy(program: Program, hw: HwConfig) -> dict[str, int]:
    """Busy cycles per unit (load, compute, store) of ``program`` up to its FINISH."""
    out = dict.fromkeys((u.label for u in Unit), 0)
    for insn in program.instructions:
        d = definition_of(insn)
        out[Unit(d.unit_of(insn, hw)).label] += int(d.duration(insn, hw))
        if d.drains:
            break
    return out


def program_bound(program: Program, hw: HwConfig) -> int:
    """A lower bound on the cycles the simulator (``vta.sim.machine``, timed or timing-only)
    takes to run ``program`` to its FINISH: the program's dependency graph with every wait
    the machine adds beyond it relaxed.

    Kept, as the machine enforces them: each unit runs its instructions in program order, one
    at a time, each for at least its definition's duration (a DMA on a busy port only
    longer); the n-th pop of a token queue waits for that queue's n-th push, which follows
    its instruction's completion; nothing starts before the fetch unit has read the first
    batch of ``queues.fetch_batch`` words (at least its time alone on the port); FINISH
    starts after the units it drains are idle. Dropped (each can only delay the machine):
    the later fetches, full command and token queues, the memory port's contention,
    accumulator-bank conflicts. Each relaxation leaves a start time no later than the
    machine's, so the FINISH's completion here is at most the run's (a test holds every
    candidate of ResNet-18's layers on every shipped configuration to it). One pass over the
    program, each instruction's unit and token queues looked up by its definition and flags:
    a sixth or less of the timing-only simulator's time."""
    insns = program.instructions
    first = insns[:hw.queues.fetch_batch or 1]  # the first batch ends at a FINISH in it
    first = first[:next((j + 1 for j, x in enumerate(first) if definition_of(x).drains),
                        len(first))]
    fetched = fetch_cycles(hw, len(first), 0) if first else 0
    cache = _bound_facts(hw)
    #: each instruction object's facts (``_facts``), by identity: a compiled program holds one
    #: object at many places (``insns`` holds every object: no id is reused here)
    by_id: dict[int, _Facts] = {}
    facts = []
    for insn in insns:
        got = by_id.get(id(insn))
        if got is None:
            got = by_id[id(insn)] = _facts(insn, hw, cache)
        facts.append(got)
        if got[0]:  # FINISH: what follows never runs (not priced)
            break
    # by slot (``_Cache.slots``): each unit's free time (from the first fetch on: a unit never
    # used changes neither the FINISH's start nor the latest end, each at least that), each
    # token queue's pops so far and its pushes' times
    n = len(cache.slots)
    free = [fetched] * n
    popped = [0] * n
    pushed: list[list[int]] = [[] for _ in range(n)]
    for drains, unit, took, pops, pushes in facts:
        start = free[unit]
        for q in pops:
            k = popped[q]
            popped[q] = k + 1
            times = pushed[q]
            if k < len(times):  # else the machine deadlocks
                t = times[k]
                if t > start:
                    start = t
        if drains:  # FINISH: it ends the program (its pushes are never popped)
            return max([start, *(free[m] for m in drains)]) + took
        end = free[unit] = start + took
        for q in pushes:
            pushed[q].append(end)
    return max(free, default=0)


#: what ``program_bound`` reads of one instruction, units and token queues by their slots
#: (``_Cache.slots``): the units it drains (FINISH), its unit, its cycles, the token queues it
#: pops and those it pushes
_Facts = tuple[tuple[int, ...], int, int, tuple[int, ...], tuple[int, ...]]

#: instructions kept per config (``_Cache.facts``) before that cache starts afresh
_MAX_FACTS = 1 << 16


class _Cache:
    """``program_bound``'s facts for one config (``_bound_facts``)."""

    def __init__(self) -> None:
        #: ``_facts`` by instruction value and by timing key
        self.facts: dict[Any, _Facts] = {}
        #: the token queues' slots an instruction pops and pushes, by (unit, dependency flags):
        #: all ``pops_of`` and ``pushes_of`` read of an instruction on one config
        self.routes: dict[Any, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        #: a small integer per unit and token queue met (never cleared: a few dozen): the
        #: bound keeps their times in lists indexed by these
        self.slots: dict[Any, int] = {}

    def slot(self, what: Any) -> int:
        """``what``'s (a unit's or a token queue's) slot, a new one when first met."""
        return self.slots.setdefault(what, len(self.slots))


@lru_cache(maxsize=16)
def _bound_facts(hw: HwConfig) -> _Cache:
    """``_facts``' cache for one config, shared by every program bounded in this process (a
    workload's candidates, and a network's layers, share most of their instructions: each
    distinct one is priced once per process, not once per program). Keyed per config, as the
    simulator's description cache is (``vta.sim.machine._described``): a HwConfig is hashed
    once per program, not per instruction."""
    return _Cache()


def _facts(insn: Any, hw: HwConfig, cache: _Cache) -> _Facts:
    """``program_bound``'s facts of ``insn`` on ``hw`` through ``cache`` (``_bound_facts``):
    by the whole instruction (its definition and its fields' values, ``values_of``: equal
    exactly when the instructions are; plain values, no Python ``__hash__``), else by its
    definition's ``timing_key`` (what its unit, duration and token queues read: the many
    DMAs of a tiled program that differ only in their addresses are priced once)."""
    facts = cache.facts
    d = definition_of(insn)
    key: Any = (d, values_of(d.cls)(insn))
    got = facts.get(key)
    if got is not None:
        return got
    timed: Any = None if d.timing_key is None else (d.timing_key(insn, hw), d)
    got = None if timed is None else facts.get(timed)
    if got is None:
        unit = d.unit_of(insn, hw)
        via: Any = (unit, _dep_flags(insn.deps))
        route = cache.routes.get(via)
        if route is None:
            route = cache.routes[via] = (tuple(map(cache.slot, pops_of(insn, hw, unit))),
                                         tuple(map(cache.slot, pushes_of(insn, hw, unit))))
        got = (tuple(map(cache.slot, d.drains)), cache.slot(unit), int(d.duration(insn, hw)),
               *route)
        if timed is not None:
            facts[timed] = got
    if len(facts) >= _MAX_FACTS:
        facts.clear()
    facts[key] = got
    return got


def prototype(defn: InstructionDef, **fields: Any) -> Any:
    """An instruction of ``defn`` with ``fields`` (the rest zero), to price a planned one."""
    return instance(defn, **fields)


def max_block_uops(hw: HwConfig) -> int:
    """The most micro-ops one GEMM/ALU instruction's block may hold: a quarter of the micro-op
    buffer. A budget of the compiler's, not a hardware limit (``uop_bgn..uop_end`` may span the
    buffer): several blocks stay resident side by side. ``uop_gen`` turns what a nest needs
    beyond it into instruction loops, and the cost model prices instructions the same way."""
    return max(1, hw.uop_depth // 4)


def microop_instruction_cycles(defn: InstructionDef, n_ops: int, hw: HwConfig,
                               **fields: Any) -> int:
    """Cycles of one micro-op instruction of ``defn`` executing ``n_ops`` micro-ops, folded as
    micro-op generation would where the timing model pays per loop entry (as many micro-ops
    as one instruction may hold, ``max_block_uops``, the rest in
    ``iter_in``). Memoised: the schedule model prices thousands of candidates with a few
    distinct instructions."""
    return _microop_cycles(defn, n_ops, hw, tuple(sorted(fields.items())))


@lru_cache(maxsize=4096)
def _microop_cycles(defn: InstructionDef, n_ops: int, hw: HwConfig,
                    fields: tuple[tuple[str, Any], ...]) -> int:
    per = max(1, min(n_ops, max_block_uops(hw)))
    loops = -(-n_ops // per)
    # the prototype ``prototype(defn, iter_out=1, iter_in=loops, uop_end=per, **fields)``,
    # copied from one made once per instruction and fields (the model prices hundreds of
    # sizes of each; making an instance checks and fills every field)
    return instruction_cycles(evolve(_loop_prototype(defn, fields), iter_in=loops,
                                     uop_end=per), hw)


@lru_cache(maxsize=256)
def _loop_prototype(defn: InstructionDef, fields: tuple[tuple[str, Any], ...]) -> Any:
    """``defn``'s prototype with ``fields`` and one outer iteration (``_microop_cycles``
    sets its micro-op count and inner iterations)."""
    return prototype(defn, iter_out=1, **dict(fields))


@lru_cache(maxsize=4096)
def dma_instruction_cycles(defn: InstructionDef, kind: str, rows: int, cols: int,
                           hw: HwConfig) -> int:
    """Cycles of one 2-D DMA of ``defn`` (LOAD or STORE) moving ``rows`` x ``cols`` entries of
    ``kind`` (memoised, as above)."""
    return instruction_cycles(prototype(defn, mem=MemType[kind.upper()], y_size=rows,
                                        x_size=cols, x_stride=cols), hw)


def reset_instruction(hw: HwConfig, accumulating: InstructionDef
                      ) -> tuple[InstructionDef, tuple[tuple[str, Any], ...]]:
    """The instruction (and its fields) that zeroes an accumulator before ``accumulating``
    sums into it: on hardware whose ALU is a separate pipeline and zeroes on reset
    (``alu.reset: zero``; vta.cc's ALU ignores the flag), an ALU reset (it runs beside the GEMM
    core, so the next tile's reset overlaps this tile's GEMMs; as an immediate form it issues
    at ``alu.ii_imm``), else the accumulating instruction's own reset (VTA's GEMM reset)."""
    if not hw.alu.separate_pipeline:
        return accumulating, ()
    op = next((o for o in (AluOp.ADD, AluOp.MAX, AluOp.MIN, AluOp.SHR, AluOp.MUL)
               if o.name.lower() in hw.alu.ops and ALU[o].reset(hw) == "zero"), None)
    if op is None:
        return accumulating, ()
    return ALU[op], (("use_imm", True), ("imm", 0))
