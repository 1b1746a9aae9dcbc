"""The cycle-level machine: fetch, load, compute, store (and, on hardware whose ALU is a
separate pipeline, alu) as discrete-event processes.

One environment per run: the lean engine's (``engine.py``, the default) or simpy's (the
reference; ``ENGINES``), which order events identically. Fetch reads instruction words over the
memory port in batches of ``queues.fetch_batch`` and routes each (``module_of`` on the
hardware) into a bounded command queue; each unit pops its dependency tokens, executes the
instruction and pushes its tokens. What an instruction does, where it runs, how long it takes
and whether it ends the program are all read from its definition (``vta.isa.defs``), by table:
a micro-op instruction holds its unit for its ``duration``; a DMA submits its bursts to the
memory port (``vta.isa.memport.Port``, shared by every unit or one per unit,
``memory.shared_port``), which interleaves them burst by burst with the other units' transfers,
and completes when its transfer and its scratchpad work are done (``DmaTiming.cycles``): alone
on the port that is exactly its duration, so the compiler's cost model and the simulator agree
on every uncontended instruction. The arithmetic of each instruction runs after the timing, in the
order the instructions completed (``Machine._values``: the same effect). Units meet only
through these bounded Stores, the port and (separate ALU) the accumulator banks, so every stall
emerges from the model.

A separate ALU pipeline (``alu.separate_pipeline``) shares the accumulator with the GEMM core
through ``alu.acc_banks`` banks: an instruction holds the banks its accumulator indices fall in
(computed before the run from the micro-ops the program loads), and waits (``conflict``) for a
bank the other pipeline holds.

The run ends when the environment has no events left. A unit still waiting then is a deadlock
(``DeadlockError`` names each waiting unit, what it waits on and its instruction).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from vta.config import HwConfig
from vta.errors import DeadlockError, SimError
from vta.isa import (
    DefinitionError,
    Instruction,
    InstructionDef,
    MemType,
    Opcode,
    Program,
    Unit,
    Uop,
    check_fields,
    definition_of,
    n_ops,
    pops_of,
    pushes_of,
    token_queues,
)
from vta.isa.asm import where
from vta.isa.builtins import GEMM
from vta.isa.insn import DEP_FLAGS, values_of
from vta.isa.memport import Port, Transfer
from vta.isa.timing import (
    DmaTiming,
    chisel_refusal,
    fetch_timing,
    read_channel,
    write_channel,
)
from vta.sim import engine as lean
from vta.sim.dram import Dram, check_dram_size, random_inputs
from vta.sim.engine import MISS
from vta.sim.gemm import FastGemm, float_exact
from vta.sim.kernels import Ctx, Sram, exec_load, exec_microop, exec_store
from vta.sim.stats import SimResult, SimStats, Slice, UnitStats, units_of
from vta.sim.trace import write_trace
from vta.words import INSN_BYTES

__all__ = ["simulate", "cycles_of", "mnemonic", "ENGINES"]

Queue = tuple[Unit, Unit]
#: a process of either engine (their events share the API the machine uses)
Proc = Generator[Any, Any, None]

_UNIT_OF = {Unit.LOAD: "load", Unit.COMPUTE: "compute", Unit.STORE: "store",
            Unit.ALU: "alu"}


@dataclass(frozen=True, slots=True)
class _Engine:
    """The discrete-event classes a run is built from: simpy's (the reference) or the lean
    engine's (``engine.py``: the same ordering, less overhead per event)."""

    environment: Callable[[], Any]
    store: Callable[..., Any]
    resource: Callable[..., Any]
    all_of: Callable[..., Any]
    #: whether its environment and stores take the no-event shortcuts (``engine.py``:
    #: ``skip``, ``take``, ``give``; the same effect as yielding)
    shortcuts: bool = False


_LEAN = _Engine(lean.Environment, lean.Store, lean.Resource, lean.AllOf, True)


@lru_cache(maxsize=1)
def _simpy_engine() -> _Engine:
    """simpy's classes, imported at the first run on them: importing simpy (and the
    ``importlib.metadata`` it reads its version with) is about 30 ms that a run on the lean
    engine, every ``vta`` command's, does not need."""
    import simpy

    class _Env(simpy.Environment):
        """simpy's environment with its clock typed as what it is here: every delay the
        machine schedules is an int, so ``now`` stays the int cycle it started at (0) plus
        ints."""

        @property
        def now(self) -> int:
            return self._now  # type: ignore[return-value]

    return _Engine(_Env, simpy.Store, simpy.Resource, simpy.AllOf)


#: the engines ``simulate`` accepts, each made when first asked for: ``lean`` (the default)
#: and ``simpy`` (the reference); both give the same event order, hence the same cycles,
#: statistics and values
ENGINES: dict[str, Callable[[], _Engine]] = {"lean": lambda: _LEAN, "simpy": _simpy_engine}


def _engine_of(name: str) -> _Engine:
    """The engine called ``name``, or a SimError naming the choices."""
    got = ENGINES.get(name)
    if got is None:
        raise SimError(f"unknown simulation engine {name!r} (choose one of "
                       f"{', '.join(ENGINES)})")
    return got()


def _qname(q: Queue) -> str:
    return f"{q[0].label}->{q[1].label}"


def mnemonic(insn: Instruction) -> str:
    """``LOAD.INP``, ``GEMM``, ``ALU.ADD``, ...: the name used in counts and trace slices."""
    return definition_of(insn).mnemonic_of(insn)


@dataclass(frozen=True, slots=True)
class _Static:
    """What the machine needs of one instruction, computed once before the run."""

    defn: InstructionDef
    module: Unit
    cycles: int
    pops: tuple[Queue, ...]
    pushes: tuple[Queue, ...]
    #: (memory kind, bytes) a DMA moves over the memory port; None: it does not use the port
    dma: tuple[str, int] | None
    #: a DMA's bursts and scratchpad work (None: not a DMA, or an empty one)
    timing: DmaTiming | None
    #: its name in counts and trace slices (``mnemonic``)
    mnemonic: str = ""
    #: accumulator banks the instruction touches (separate ALU pipeline only; else empty)
    banks: tuple[int, ...] = ()
    #: the work the statistics count: (GEMM tensor ops, ALU ops, MACs) (``_work``)
    work: tuple[int, int, int] = (0, 0, 0)
    #: a micro-op instruction's executions (``n_ops``, a reset's too; 0 for the others)
    ops: int = 0


class _Refused(Exception):
    """An instruction ``hw`` cannot run: the reason, without where the instruction is."""


#: instructions described per config (``_described``) before that cache starts afresh
_MAX_DESCRIBED = 1 << 16


@lru_cache(maxsize=16)
def _described(hw: HwConfig) -> dict[Any, _Static]:
    """``_describe``'s cache for one config, keyed by (instruction, definition) and by
    (timing key, definition) (``_lookup``): it is a
    pure function of the three, so it is shared across programs (a tuner's candidates and a
    sweep's energy run share most of their instructions). Keyed per config rather than by
    all three: hashing a HwConfig (nested frozen dataclasses) costs more than describing an
    instruction, and this way it is hashed once per program."""
    return {}


def _check(insn: Any, hw: HwConfig, d: InstructionDef) -> None:
    """``insn``'s fields fit its format (``d``) and ``hw`` implements it (a listed
    intrinsic, an enabled op): else a ``_Refused`` naming why not."""
    try:
        check_fields(insn, hw, d)
    except (ValueError, DefinitionError) as e:
        raise _Refused(str(e)) from None


def _describe(insn: Any, hw: HwConfig, d: InstructionDef) -> _Static:
    """What the machine needs of one instruction on ``hw`` (``d``: its definition), its fields
    checked (``_check``; the rest is ``_timed``)."""
    _check(insn, hw, d)
    return _timed(insn, hw, d)


#: a description's module (``Machine``'s count per unit: ``Counter`` over a C-level map)
_module_of = attrgetter("module")

#: an instruction's dependency flags as a tuple of bools (``Deps`` hashes by a Python call)
_dep_flags = attrgetter(*DEP_FLAGS)

#: ``_queues``' results by (module, dependency flags, ``alu.separate_pipeline``)
_QUEUES: dict[tuple[Unit, tuple[bool, ...], bool], tuple[tuple[Queue, ...], tuple[Queue, ...]]] = {}


def _queues(insn: Any, hw: HwConfig, module: Unit
            ) -> tuple[tuple[Queue, ...], tuple[Queue, ...]]:
    """The token queues ``insn`` pops and pushes when ``module`` runs it on ``hw``
    (``pops_of``, ``pushes_of``): those read only the module, the dependency flags and whether
    the ALU is a separate pipeline, so they are asked once per such triple (a program's
    hundreds of distinct instructions have a few dozen); an instruction they refuse is
    refused each time with their error."""
    key = (module, _dep_flags(insn.deps), bool(hw.alu.separate_pipeline))
    got = _QUEUES.get(key)
    if got is None:
        got = _QUEUES[key] = (tuple(pops_of(insn, hw, module)),
                              tuple(pushes_of(insn, hw, module)))
    return got


def _timed(insn: Any, hw: HwConfig, d: InstructionDef) -> _Static:
    """``_describe`` of an instruction whose fields are checked: its unit, duration, token
    queues, DMA, mnemonic and counted work (no accumulator banks: those depend on its place in
    the program), a ``_Refused`` when ``hw`` cannot run it. It reads only what ``d``'s
    ``timing_key`` covers."""
    try:
        module = d.unit_of(insn, hw)
        pops, pushes = _queues(insn, hw, module)
    except (ValueError, DefinitionError) as e:
        raise _Refused(str(e)) from None
    refused = chisel_refusal(insn, hw)
    if refused:
        raise _Refused(refused)
    dma = d.dma(insn, hw) if d.dma is not None else None
    timing = d.dma_timing(insn, hw) if d.dma_timing is not None else None
    # a DMA's duration is its timing alone on the port (``InstructionDef.dma_timing``): taken
    # from the timing in hand rather than timing it a second time through ``d.duration``
    cycles = d.duration(insn, hw) if timing is None else timing.alone
    return _Static(d, module, cycles, pops, pushes, dma, timing,
                   d.mnemonic_of(insn), (), _work(insn, hw, d),
                   n_ops(insn) if d.is_microop else 0)


def _lookup(insn: Any, hw: HwConfig, d: InstructionDef, cache: dict[Any, _Static]
            ) -> _Static:
    """``_describe(insn, hw, d)`` through ``cache`` (``_described``): by the whole
    instruction (its definition and its fields' values, ``values_of``: equal exactly when the
    instructions are), else (its fields checked) by its definition's ``timing_key``, so the many
    DMAs of a tiled program that differ only in their addresses are timed once."""
    key: Any = (d, values_of(d.cls)(insn))  # (``values_of``: no Python __hash__ nor __eq__)
    got = cache.get(key)
    if got is not None:
        return got
    if d.timing_key is None:
        got = _describe(insn, hw, d)
    else:
        _check(insn, hw, d)
        timed: Any = (d.timing_key(insn, hw), d)
        got = cache.get(timed)
        if got is None:
            got = _timed(insn, hw, d)
            cache[timed] = got
    if len(cache) >= _MAX_DESCRIBED:
        cache.clear()
    cache[key] = got
    return got


def _work(insn: Any, hw: HwConfig, d: InstructionDef) -> tuple[int, int, int]:
    """What the statistics count of one instruction: (GEMM tensor ops, ALU ops, MACs). A
    reset's work is not counted (an ignored reset flag computes)."""
    if not d.is_microop or d.reset_mode(insn, hw) is not None:
        return 0, 0, 0
    ops = n_ops(insn)
    macs = ops * d.macs(insn, hw) if d.macs is not None else 0
    if d is GEMM:
        return ops, 0, macs
    if d.opcode == Opcode.ALU:  # the ALU's functions, a user's included
        return 0, ops, macs
    return 0, 0, macs


def _static(program: Program, hw: HwConfig) -> list[_Static]:
    """Each instruction's unit, duration, token queues and DMA timing, from its definition,
    up to and including the first that drains the machine (FINISH: what follows it never
    runs, and is not checked). A tiled program repeats most of its instructions: each
    distinct one is checked and timed once (``_describe``; its first occurrence names it in
    an error) and its description shared by every occurrence, only its accumulator banks
    per place (``_banked``). Occurrences are told apart by identity first (a compiled
    program repeats one instruction object, and hashing a frozen dataclass hashes every field
    on every call), then by value (``_lookup``'s cache): an equal instruction that is another
    object gets the same description. The objects are described in the order they first
    occur, up to the first that drains, so the same instructions are checked in the same
    order as one pass in program order would; the per-instruction work (identities, the
    descriptions' list, the cut after the drain) is done by C-level maps."""
    insns = program.instructions
    ids = list(map(id, insns))
    objects = dict(zip(ids, insns, strict=True))  # by id: ``program`` keeps each alive
    cache = _described(hw)
    desc: dict[int, _Static] = {}
    cut = len(ids)
    for key, insn in objects.items():  # (in order of first occurrence)
        try:
            got = _lookup(insn, hw, definition_of(insn), cache)
        except (DefinitionError, _Refused) as e:
            i = ids.index(key)
            raise SimError(f"{where(i, insn, program)}: {e}") from None
        desc[key] = got
        if got.defn.drains:  # what follows never runs: not described, not checked
            cut = ids.index(key) + 1
            break
    out = list(map(desc.__getitem__, ids[:cut] if cut < len(ids) else ids))
    if hw.alu.separate_pipeline:
        return _banked(program, hw, out)
    return out


def _banked(program: Program, hw: HwConfig, info: list[_Static]) -> list[_Static]:
    """``info`` (``_static``'s descriptions) with each instruction's accumulator banks
    (``_AccBanks``, in program order: they depend on the micro-ops loaded by then)."""
    banks = _AccBanks(program, hw)
    return [replace(got, banks=banks.of(insn, got.defn))
            for insn, got in zip(program.instructions, info, strict=False)]


class _AccBanks:
    """Which accumulator banks each instruction touches, from the micro-ops the program has
    loaded by then (its LOAD.UOPs replayed in program order over the allocations' contents)."""

    def __init__(self, program: Program, hw: HwConfig) -> None:
        self.program, self.hw = program, hw
        self.size = max(1, hw.acc_depth // hw.alu.acc_banks)
        self.uops: dict[int, Uop] = {}
        #: banks of each instruction seen since the micro-ops last changed
        self.seen: dict[Any, tuple[int, ...]] = {}

    def _span(self, lo: int, hi: int) -> tuple[int, ...]:
        if hi <= lo:
            return ()
        return tuple(range(lo // self.size, (hi - 1) // self.size + 1))

    def of(self, insn: Any, d: InstructionDef) -> tuple[int, ...]:
        if d.role == "load" and insn.mem is MemType.UOP:
            self._load_uops(insn)
            self.seen.clear()
            return ()
        hit = self.seen.get(insn)
        if hit is None:
            hit = self.seen[insn] = self._banks(insn, d)
        return hit

    def _banks(self, insn: Any, d: InstructionDef) -> tuple[int, ...]:
        if d.role == "load" and insn.mem is MemType.ACC:
            return self._span(insn.sram_base, insn.sram_base + insn.sram_elems)
        if d.role != "compute":
            return ()
        uops = [self.uops.get(k) for k in range(insn.uop_bgn, insn.uop_end)]
        if not uops or n_ops(insn) == 0:
            return ()
        touched: set[int] = set()
        for op in (d.dst, *d.reads(insn, self.hw)):
            if op.memory != "acc" or any(u is None for u in uops):
                continue
            fo, fi, off = op.placement(insn)
            base = [getattr(u, op.name) + off for u in uops if u is not None]
            steps = (insn.iter_out - 1) * fo + (insn.iter_in - 1) * fi
            touched.update(self._span(min(base), max(base) + steps + 1))
        return tuple(sorted(touched))

    def _load_uops(self, insn: Any) -> None:
        alloc = self.program.find("uop", insn.dram_base)
        if alloc is None:
            return
        words = self.program.uops.get(alloc.name, ())
        k = insn.sram_base
        for y in range(insn.data_rows):  # a LOAD.UOP copies x_size micro-ops (Load.data_rows)
            first = insn.dram_base - alloc.base + y * insn.x_stride
            for x in range(insn.x_size):
                if 0 <= first + x < len(words):
                    self.uops[k] = words[first + x]
                k += 1


#: the first step (cycles) of the lean engine's port planning (``_PortServer._plan``):
#: C1-C11's transfers mostly arrive 32-256 cycles into a plan, and callgrind counts a
#: timing-only pass's instructions least at 128 (of 32, 64, 128, 256; doubling each step;
#: planning to the completion at once: 6 % more)
_HORIZON = 128


class _PortServer:
    """The simulator's side of a ``memport.Port``: it wakes when a transfer completes (by the
    port's exact prediction) or a new one arrives, and triggers the event of each completed
    transfer.

    It waits as a process waiting on ``wake`` (an idle port) or on ``timeout | wake`` would
    (``_serve``), but as callbacks on those events rather than a generator: the same events
    are scheduled in the same order (the ``AnyOf`` as a plain event triggered by the first of
    the two, ``_either``), so every engine runs it the same, without a process resumed per
    wake or a condition object per wait (the port's waits are about a third of a run's)."""

    def __init__(self, env: Any, hw: HwConfig, shortcuts: bool) -> None:
        self.env = env
        self.shortcuts = shortcuts
        self.port = Port(read_channel(hw), write_channel(hw))
        self.waiting: dict[int, Any] = {}
        #: a request woke the idle port (``wake`` processed): the server's turn
        self._idle_cb = self._serve
        self._done_cb = self._waited
        self._either_cb = self._either
        #: the timeout of the wait in progress (``_arm``); None when none is (it ended, or
        #: the port is idle and waits on ``wake`` alone)
        self._until: Any = None
        self.wake = env.event()
        #: whether ``wake`` has been triggered (only ``request`` triggers it; ``_serve``
        #: makes a fresh one then): ``wake.triggered`` without a property call
        self.woken = False
        #: whether ``request`` is processing its ``wake`` at once (``_waited``'s shortcut
        #: waits for the requesting process to yield)
        self.requesting = False
        self.wake.callbacks.append(self._idle_cb)  # an idle port: a request wakes it

    def request(self, transfer: Transfer) -> Any:
        """An event that fires when ``transfer``, submitted now, has completed. The caller
        yields it at once (nothing else happens before), so on the lean engine a ``wake``
        that would be the next event processed is processed here (``process_now``)."""
        env = self.env
        now: int = env.now
        key = self.port.submit(transfer, now)
        done = env.event()
        self.waiting[key] = done
        if not self.woken:
            self.woken = True
            wake = self.wake
            if self.shortcuts and env.quiet_through(now):
                self.requesting = True
                wake.process_now()
                self.requesting = False
            else:
                wake.succeed()
        return done

    def at_once(self, timing: DmaTiming, alone: int) -> int | None:
        """A DMA on an idle port with nothing else scheduled before it ends (the lean
        engine's shortcut): its ``transfer`` submitted now completes at its solo time ``t``,
        and the DMA at ``now + timing.cycles(t - now)``, which is ``now + alone`` (its
        duration, ``timing.alone``: the caller has it; ``t - now`` is its transfer alone on
        the idle channel, ``memport.alone``, the same channel its timing holds); when nothing
        is scheduled at or before that cycle, no arrival can change ``t`` and no other
        process runs before the DMA ends, so the port takes the transfer and retires it at
        ``t`` as the server would (``Port.run_alone``: the state submit, plan and finish
        leave) and the DMA's end is returned (the caller jumps there). None otherwise (the
        caller requests it and waits)."""
        end: int = self.env.now + alone
        if self.woken or not self.env.quiet_through(end):
            return None
        if self.port.run_alone(timing.transfer, end - alone) is None:  # (not idle)
            return None
        return end

    def _arm(self, timeout: Any) -> None:
        """Wait for ``timeout | wake``: both call ``_either`` when processed."""
        self._until = timeout
        timeout.callbacks.append(self._either_cb)
        self.wake.callbacks.append(self._either_cb)

    def _either(self, ev: Any) -> None:
        """``ev`` processed: when it is the first of the wait in progress (``_arm``), the
        wait ends where the engines' ``timeout | wake`` would be processed: after the
        callbacks ``ev`` ran before this one, as an event scheduled now, or at once (the lean
        engine's shortcut) when that event would be the next one processed (nothing is
        scheduled at or before this cycle). Else it does nothing (the wait ended already,
        or ``ev`` is the timeout of an earlier wait that a request ended), as a condition
        already triggered does. No condition object, closure or event per wait: the port's
        waits are a third of a run's."""
        until = self._until
        if until is None or (ev is not until and ev is not self.wake):
            return
        self._until = None
        env = self.env
        if self.shortcuts and env.quiet_through(env.now):
            self._waited(None)
        else:
            either = env.event()
            either.callbacks.append(self._done_cb)
            either.succeed()

    def _waited(self, _: Any) -> None:
        """The next completion's cycle came, or a request arrived before it (the first of the
        two processed): retire what is complete, then serve on.

        The lean engine's shortcut: when one transfer completed and the port is idle after it,
        the server's turn (``_serve``) schedules nothing and takes no event id, so its
        transfer's event is triggered after it instead of before (the same queue entry), and
        processed at once (``process_now``) when it would be the next event processed (nothing
        is scheduled at or before this cycle; the event being processed calls only this, so
        nothing else runs before the run loop would pop it). Not while ``request`` processes
        its ``wake`` (the requesting process has not yielded yet)."""
        keys = self.port.finish(self.env.now)
        if len(keys) == 1 and self.shortcuts and not self.port.active and not self.requesting:
            done = self.waiting.pop(keys[0])
            self._serve()
            if self.env.quiet_through(self.env.now):
                done.process_now()
            else:
                done.succeed()
            return
        for key in keys:
            self.waiting.pop(key).succeed()
        self._serve()

    def _finish(self) -> None:
        for key in self.port.finish(self.env.now):
            self.waiting.pop(key).succeed()

    def _serve(self, _: Any = None) -> None:
        """The server's loop, up to its next wait: a fresh ``wake``; on an idle port, wait
        for it; else plan the next completion and wait for it or a request (``_arm``), or
        (the lean engine's shortcut: nothing else is scheduled before it, so no request can
        come first) jump there, retire and go on. On the lean engine the completion is
        planned by steps (``_plan``), unless every active transfer is alone on its channel
        (``Port.lone_next``: the completion, which no plan changes). (A turn that retires
        and goes on keeps its ``wake``: nothing waits on it yet.) Also the callback of an
        idle port's ``wake``."""
        env, port = self.env, self.port
        if self.woken:
            wake = self.wake = env.event()
            self.woken = False
        else:  # no request came: the wait on it ended by its timeout, and only the
            wake = self.wake  # server's ended waits are on it (``_either`` would ignore them)
            wake.callbacks.clear()
        while True:
            if not port.active:
                wake.callbacks.append(self._idle_cb)
                return
            now: int = env.now
            if self.shortcuts:
                nxt = port.lone_next
                if nxt is None:
                    nxt = self._plan(now, _HORIZON, None, wake)
                    if nxt is None:  # a checkpoint plans on (the timeout's id is taken)
                        return
            else:
                nxt = port.next_completion()
                assert nxt is not None
            if nxt > now and not (self.shortcuts and env.skip(nxt - now)):
                timeout = self._until = env.timeout(nxt - now)  # (``_arm``, inline)
                timeout.callbacks.append(self._either_cb)
                wake.callbacks.append(self._either_cb)
                return
            self._finish()

    def _plan(self, now: int, step: int, deferred: tuple[int, Any] | None, wake: Any
              ) -> int | None:
        """The lean engine's planning: the port's next completion planned to ``now + step``,
        the step doubled while nothing else is scheduled by then (nothing can submit a
        transfer first); where something is, the plan stops there: a checkpoint at that
        cycle goes on (``_checkpoint``), and the timeout at the completion (its id taken now,
        as ``env.timeout`` would take it: ``deferred``, the id and the event) is pushed once
        it is known. The port's plan to the completion is the same, but a transfer that
        arrives first (most do: ``_arm``'s ``wake``) discards only the bursts planned by
        then, not every one up to the completion. Returns the completion when it is known
        here and no timeout was deferred; else None."""
        env, port = self.env, self.port
        horizon = now + step
        while True:
            nxt = port.next_completion(horizon)
            if nxt is not None:
                if deferred is None:
                    return nxt
                env.schedule_as(deferred[1], nxt, deferred[0])
                return None
            if not env.quiet_through(horizon):
                if deferred is None:
                    done = env.event()
                    done._value = None  # a timeout's value
                    deferred = (env.reserve(), done)
                    self._arm(done)
                self._checkpoint(horizon, 2 * step, deferred, wake)
                return None
            step *= 2
            horizon = now + step

    def _checkpoint(self, at: int, step: int, deferred: tuple[int, Any], wake: Any) -> None:
        """At cycle ``at`` (under the deferred timeout's id: an entry that changes nothing
        another process sees) plan on by ``step``, unless a transfer arrived meanwhile
        (``wake`` triggered: the server planned afresh then)."""
        env = self.env

        def resume(_: Any) -> None:
            if not wake.triggered:
                self._plan(int(env.now), step, deferred, wake)

        cp = env.event()
        cp.callbacks.append(resume)
        env.schedule_as(cp, at, deferred[0])


#: ``fetch_timing`` memoised: fetch asks it once per batch, and the programs run on one config
#: ask the same (batch, first word) pairs (C1-C11 on pynq: 814 asks, 194 distinct)
_fetch_timing = lru_cache(maxsize=4096)(fetch_timing)


#: a wait's two texts: the unit's ``waiting`` while it waits, the timeline slice's label
_Texts = tuple[str, str]


@lru_cache(maxsize=1024)
def _wire_texts(module: Unit, pops: tuple[Queue, ...], pushes: tuple[Queue, ...]
                ) -> tuple[_Texts, tuple[_Texts, ...], tuple[_Texts, ...]]:
    """The texts ``_Wires`` reports waits with, for an instruction of ``module`` popping and
    pushing these token queues: the same for every run, and a program's descriptions share a
    few combinations (keyed by ``Unit``s, which hash as ints)."""
    m = _UNIT_OF[module]

    def token(q: Queue, pop: bool) -> _Texts:
        side = ("empty", "pop") if pop else ("full", "push")
        return f"token queue {_qname(q)} ({side[0]})", f"{side[1]} {_qname(q)}"

    return ((f"command queue {m} (full)", f"wait {m} queue"),
            tuple(token(q, True) for q in pops), tuple(token(q, False) for q in pushes))


@dataclass(frozen=True, slots=True)
class _Wires:
    """What one description's instructions meet on a run (``Machine._wire``): the command
    queue fetch routes them to, the token queues they pop and push, each with the texts a
    wait on it is reported with (``waiting``, the timeline's label)."""

    cmdq: tuple[Any, tuple[str, str]]
    pops: tuple[tuple[Any, tuple[str, str]], ...]
    pushes: tuple[tuple[Any, tuple[str, str]], ...]


#: ``tuple.__new__``: makes the named tuples a run makes per instruction (``Slice``, ``Ctx``)
#: without their ``__new__``, a Python-level call
_new_tuple = tuple.__new__


class _Unit:
    """Mutable bookkeeping of one unit during a run (slots: its fields are set several times
    per instruction)."""

    __slots__ = ("busy", "conflict", "current", "insns", "memory", "name", "queue", "token",
                 "waiting")

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy = self.token = self.queue = self.memory = self.conflict = 0
        self.insns = 0
        self.waiting: str | None = None
        self.current: int | None = None


#: ``_Executor._steps``' miss (None is a step: FINISH computes nothing)
_UNKNOWN: Any = object()


class _Executor:
    """The arithmetic: the vectorised kernels of ``kernels.py`` (DMA, and every micro-op
    instruction through its definition's semantics) and the faster GEMM of ``gemm.py``."""

    def __init__(self, program: Program, hw: HwConfig, inputs: Mapping[str, ArrayLike]) -> None:
        self.program, self.hw = program, hw
        self.dram = Dram(program, hw)
        self.dram.write_all(inputs)
        self.sram = Sram(hw)
        self.gemm = FastGemm(self.sram, True, GEMM)  # ``prepare`` sets its precision
        #: its stacked products' sums may wait (``FastGemm.defers``): ``run_all`` flushes them
        #: before any other step than an accumulating GEMM or a LOAD of inp, wgt or micro-ops
        self.gemm.defers = True
        self.hazards = 0
        #: the steps that leave the GEMM's pending sums waiting (bound once: ``run_all``
        #: compares identities)
        self._load_step, self._gemm_step = self._load, self._gemm
        #: how the instructions of one description execute (``_step``), by the description's
        #: identity (the machine's ``info`` keeps every one alive for the run): decided once
        #: per distinct instruction instead of on every execution (None: it computes
        #: nothing, FINISH). Only where the step is a function of the description: see
        #: ``__call__``
        self._steps: dict[int, Callable[[Ctx, Any], None] | None] = {}

    def prepare(self, info: list[_Static]) -> None:
        """Before the first execution: the GEMM's wide shadows are float64 where every GEMM
        that runs (``info``: the machine's descriptions) sums exactly in it, else int64."""
        biggest = max((s.ops for s in info if s.defn is GEMM), default=0)
        self.gemm.dtype = np.float64 if float_exact(self.hw, biggest) else np.int64

    def _load(self, ctx: Ctx, insn: Any) -> None:
        if insn.mem is MemType.ACC and self.gemm.pending:  # it writes acc: sums first
            self.gemm.flush()
        kind, lo, hi = exec_load(self.sram, self.dram, insn, ctx)
        self.gemm.refresh(self.sram, kind, lo, hi)

    def _store(self, ctx: Ctx, insn: Any) -> None:
        exec_store(self.sram, self.dram, insn, ctx)

    def _compute(self, ctx: Ctx, insn: Any, d: InstructionDef) -> None:
        if d is GEMM:
            mode = d.reset_mode(insn, self.hw)
            self.hazards += self.gemm.run(self.sram, insn, ctx) if mode is None else \
                self.gemm.reset(self.sram, insn, ctx, mode)
        else:
            self.hazards += exec_microop(self.sram, insn, d, ctx,
                                         lambda: d.hazard_lag(insn, self.hw))

    def _gemm(self, ctx: Ctx, insn: Any) -> None:
        """``_compute`` of a GEMM that accumulates (no reset on this config)."""
        self.hazards += self.gemm.run(self.sram, insn, ctx)

    def _step(self, insn: Any, d: InstructionDef) -> Callable[[Ctx, Any], None] | None:
        """How ``insn`` (definition ``d``) executes, by its role: a LOAD's or STORE's DMA, a
        compute instruction's ``_compute`` (``_gemm`` for a GEMM that accumulates: its reset
        mode resolved here), None for the others (FINISH)."""
        if d.role == "load":
            return self._load_step
        if d.role == "store":
            return self._store
        if d.role != "compute":
            return None
        if d is GEMM and d.reset_mode(insn, self.hw) is None:
            return self._gemm_step
        return lambda ctx, x: self._compute(ctx, x, d)

    def __call__(self, index: int, insn: Instruction, info: _Static) -> None:
        """Execute instruction ``index`` (``insn``, described by ``info``)."""
        self.run_all((index,), {index: insn}, {index: info})

    def run_all(self, order: list[int] | tuple[int, ...],
                insns: tuple[Instruction, ...] | dict[int, Instruction],
                info: list[_Static] | dict[int, _Static]) -> None:
        """Execute the instructions ``order`` names, in that order (``insns[i]``, described by
        ``info[i]``): ``__call__`` of each, in one loop (a Python call less per instruction,
        the loop's names read once: a run executes thousands)."""
        steps, program, gemm = self._steps, self.program, self.gemm
        pending, load, accumulate = gemm.pending, self._load_step, self._gemm_step
        try:
            for index in order:
                insn, desc = insns[index], info[index]
                step = steps.get(id(desc), _UNKNOWN)
                if step is _UNKNOWN:
                    d = desc.defn
                    step = self._step(insn, d)
                    # a description stands for one instruction's fields unless its
                    # definition times by a ``timing_key`` (LOAD and STORE: their step is
                    # their role's; a user's compute definition might leave its reset flag
                    # out of the key: asked each time)
                    if d.timing_key is None or d.role != "compute":
                        steps[id(desc)] = step
                if pending and step is not accumulate and step is not load:
                    gemm.flush()  # it may read or write acc or out (``_load``: an acc LOAD)
                if step is not None:  # (``tuple.__new__``: the named tuple's is a Python call)
                    step(_new_tuple(Ctx, (index, insn, program)), insn)
        finally:  # the scratchpads as the executions left them, also after an error
            if pending:
                gemm.flush()


class Machine:
    """One run of one program; build, then ``run()`` once."""

    def __init__(self, program: Program, hw: HwConfig,
                 execute: Callable[[int, Instruction, _Static], None] | None,
                 engine: str = "lean", timeline: bool = True) -> None:
        self.program, self.hw, self.execute = program, hw, execute
        #: whether the run records its timeline (``slices``; the statistics count the same
        #: cycles either way)
        self.timeline = timeline
        sim = self.sim = _engine_of(engine)
        self.info = _static(program, hw)
        self.insns = program.instructions[:len(self.info)]
        env = self.env = sim.environment()
        q = hw.queues
        separate = hw.alu.separate_pipeline
        self.modules = [m for m in Unit if m is not Unit.ALU or separate]
        self.unit_names = units_of(separate)
        self.cmdq = {m: sim.store(env, capacity=q.command_depth) for m in self.modules}
        self.tokq = {k: sim.store(env, capacity=q.token_depth) for k in token_queues(separate)}
        fast = self.fast = sim.shortcuts
        shared = _PortServer(env, hw, fast) if hw.memory.shared_port else None
        self.port = {u: shared or _PortServer(env, hw, fast) for u in self.unit_names}
        self.banks = [sim.resource(env, capacity=1) for _ in range(hw.alu.acc_banks)]
        self.units = {u: _Unit(u) for u in self.unit_names}
        per_module = Counter(map(_module_of, self.info))  # (one C-level pass)
        self.count = {m: per_module.get(m, 0) for m in self.modules}
        self.drained = {m: env.event() for m in self.modules}
        for m, ev in self.drained.items():
            if self.count[m] == 0:
                ev.succeed()
        self.slices: list[Slice] = []
        #: ``_wire`` of each description, by its identity (``info`` keeps every one alive)
        self.wires: dict[int, _Wires] = {}
        #: ``_wire`` by what it reads of a description: (module, pops, pushes)
        self.shapes: dict[tuple[Unit, tuple[Queue, ...], tuple[Queue, ...]], _Wires] = {}
        #: instruction indices in the order they completed (their arithmetic runs in this
        #: order after the timing, ``run``)
        self.completed: list[int] = []
        self.bytes = dict.fromkeys(("inp", "wgt", "acc", "uop", "out", "insn"), 0)
        self.finished_at: int | None = None

    # ------------------------------------------------------------------ helpers

    def _wire(self, info: _Static) -> _Wires:
        """The stores ``info``'s instructions meet on this run and the texts their waits
        are reported with (``wires``, by the description's identity: the processes look
        them up per instruction, and a dictionary keyed by enum pairs hashes each enum in
        Python; the texts are ``_wire_texts``')."""
        shape = (info.module, info.pops, info.pushes)
        wire = self.shapes.get(shape)
        if wire is None:  # (a program's descriptions share a few shapes)
            module, pops, pushes = shape
            cmd, pop_texts, push_texts = _wire_texts(module, pops, pushes)
            tokq = self.tokq
            wire = self.shapes[shape] = _Wires(
                (self.cmdq[module], cmd),
                tuple(zip([tokq[q] for q in pops], pop_texts, strict=True)),
                tuple(zip([tokq[q] for q in pushes], push_texts, strict=True)))
        self.wires[id(info)] = wire
        return wire

    def _waited(self, u: _Unit, kind: str, since: int, label: str, index: int) -> None:
        """Account the cycles ``u`` waited since ``since`` as ``kind`` (a slice of the
        timeline when there were any); the hot paths skip the call when none passed."""
        now = self.env.now
        dt = now - since
        if dt:
            setattr(u, kind, getattr(u, kind) + dt)
            if self.timeline:
                self.slices.append(_new_tuple(Slice, (u.name, kind, since, now, index, label)))
        u.waiting = None

    def _dma_now(self, u: _Unit, timing: DmaTiming, alone: int) -> bool:
        """The lean engine's idle-port DMA (``_PortServer.at_once``): run it at once and
        return True, or return False (the caller runs ``_dma``)."""
        end = self.port[u.name].at_once(timing, alone)
        if end is None:
            return False
        self.env.now = end
        u.busy += alone  # (``_dma_done`` of a DMA that took its duration: no memory stall)
        return True

    def _dma(self, u: _Unit, timing: DmaTiming, alone: int, index: int
             ) -> Proc:
        """Run a DMA: its bursts on the unit's port, its scratchpad work beside and after them.
        The unit is busy for the DMA's duration (``alone``); the cycles the port's other
        traffic added are ``memory`` stall. (On the lean engine the caller tries
        ``_dma_now`` first.) Fetch's; ``_unit`` runs the same steps inline (a generator less
        per DMA that waits on the port: a third of the instructions of a tuner's candidates)."""
        start = self.env.now
        u.waiting = "the memory port"
        yield self.port[u.name].request(timing.transfer)
        total = timing.cycles(self.env.now - start)
        rest = start + total - self.env.now
        if not (self.fast and self.env.skip(rest)):
            yield self.env.timeout(rest)
        self._dma_done(u, start, total, alone, index)

    def _dma_done(self, u: _Unit, start: int, total: int, alone: int, index: int) -> None:
        """Account a DMA that took ``total`` cycles from ``start`` (``alone`` on an idle
        port): busy for ``alone``, the rest memory stall."""
        u.waiting = None
        u.busy += alone
        if total > alone:
            u.memory += total - alone
            if self.timeline:
                self.slices.append(_new_tuple(Slice, (u.name, "memory", start + alone,
                                                      start + total, index,
                                                      "port contention")))

    def _acquire_banks(self, u: _Unit, banks: tuple[int, ...], index: int
                       ) -> Generator[Any, Any, list[Any]]:
        """Hold the accumulator banks an instruction touches (in bank order: no deadlock)."""
        held = []
        t = self.env.now
        for b in banks:
            u.waiting = f"accumulator bank {b}"
            req = self.banks[b].request()
            yield req
            held.append((b, req))
        self._waited(u, "conflict", t, "wait acc bank", index)
        return held

    # ------------------------------------------------------------------ processes

    def _fetch(self) -> Proc:
        u, n, env, fast = self.units["fetch"], len(self.insns), self.env, self.fast
        # (an instruction's command queue by its module; the texts of a wait on it only on
        # a wait, ``_wire``)
        infos, cmdq = self.info, self.cmdq
        batch = self.hw.queues.fetch_batch
        assert batch is not None  # set from the timing model when the config loads
        for first in range(0, n, batch):
            k = min(batch, n - first)
            u.current = first
            timing = _fetch_timing(self.hw, k, first)
            start = self.env.now
            alone = timing.alone
            if not (fast and self._dma_now(u, timing, alone)):
                yield from self._dma(u, timing, alone, first)
            u.insns += k
            self.bytes["insn"] += INSN_BYTES * k
            if self.timeline:
                self.slices.append(_new_tuple(Slice, ("fetch", "insn", start, self.env.now,
                                                      first, f"FETCH {first}..{first + k - 1}")))
            for i in range(first, first + k):
                u.current = i
                info = infos[i]
                store = cmdq[info.module]
                if not (fast and store.give(i)):  # (``waiting``: as in ``_unit``)
                    wire = self.wires.get(id(info)) or self._wire(info)
                    text, label = wire.cmdq[1]
                    t = env.now
                    u.waiting = text
                    yield store.put(i)
                    if env.now != t:
                        self._waited(u, "queue", t, label, i)
                    u.waiting = None
        u.current = None

    def _unit(self, module: Unit) -> Proc:
        name = _UNIT_OF[module]
        u, env, fast = self.units[name], self.env, self.fast
        cmdq, slices, done = self.cmdq[module], self.slices, self.completed
        timeline = self.timeline
        count, wires, moved = self.count[module], self.wires, self.bytes
        infos, port = self.info, self.port[name]
        # (``waiting`` is set only around a yield: a deadlock report reads it of a process
        # suspended there, and a shortcut that does not yield leaves the clock as it was)
        for _ in range(count):
            index = cmdq.take() if fast else MISS
            if index is MISS:
                t = env.now
                u.waiting = "its command queue (empty)"
                index = yield cmdq.get()
                if env.now != t:
                    self._waited(u, "queue", t, "wait command", index)
                u.waiting = None
            u.current = index
            info = infos[index]
            wire = wires.get(id(info)) or self._wire(info)
            for store, (text, label) in wire.pops:
                if not fast or store.take() is MISS:
                    t = env.now
                    u.waiting = text
                    yield store.get()
                    if env.now != t:
                        self._waited(u, "token", t, label, index)
                    u.waiting = None
            drains = info.defn.drains
            if drains:
                others = [m for m in drains if m in self.drained and m is not module]
                names = " and ".join(_UNIT_OF[m] for m in others)
                u.waiting = f"the {names} units to drain ({mnemonic(self.insns[index])})"
                yield self.sim.all_of(self.env, [self.drained[m] for m in others])
                u.waiting = None
            banks = info.banks
            held = (yield from self._acquire_banks(u, banks, index)) if banks else None
            start = env.now
            timing, cycles = info.timing, info.cycles
            if timing is not None:  # (``_dma_now``, its call inline)
                end = port.at_once(timing, cycles) if fast else None
                if end is None:  # (``_dma``, inline: no generator per DMA)
                    u.waiting = "the memory port"
                    yield port.request(timing.transfer)
                    total = timing.cycles(env.now - start)
                    rest = start + total - env.now
                    if not (fast and env.skip(rest)):
                        yield env.timeout(rest)
                    self._dma_done(u, start, total, cycles, index)
                else:  # (``_dma_done`` of a DMA that took its duration: no memory stall)
                    env.now = end
                    u.busy += cycles
            else:
                if not (fast and env.skip(cycles)):
                    yield env.timeout(cycles)
                u.busy += cycles
            if held:
                for b, req in held:
                    self.banks[b].release(req)
            dma = info.dma
            if dma is not None:
                moved[dma[0]] += dma[1]
            done.append(index)
            if timeline:
                slices.append(_new_tuple(Slice, (name, "insn", start, env.now, index,
                                                 info.mnemonic)))
            for store, (text, label) in wire.pushes:
                if not (fast and store.give(True)):
                    t = env.now
                    u.waiting = text
                    yield store.put(True)
                    if env.now != t:
                        self._waited(u, "queue", t, label, index)
                    u.waiting = None
            u.insns += 1
            u.current = None
            if u.insns == count and not self.drained[module].triggered:
                self.drained[module].succeed()
            if drains:
                self.finished_at = env.now

    # ------------------------------------------------------------------ run

    def run(self) -> int:
        """Run to completion; returns total cycles. Raises DeadlockError if stuck."""
        procs = {"fetch": self.env.process(self._fetch())}
        for m in self.modules:
            procs[_UNIT_OF[m]] = self.env.process(self._unit(m))
        self.env.run()
        if self.execute is not None:
            self._values()
        stuck = [n for n in self.unit_names if procs[n].is_alive]
        if stuck:
            raise DeadlockError(self._deadlock_text(stuck))
        return int(self.env.now if self.finished_at is None else self.finished_at)

    def _values(self) -> None:
        """The arithmetic of every completed instruction, in the order they completed: the
        order in which the units' executions would have changed the scratchpads and DRAM
        had each run at its completion inside the event loop (the timing never reads a
        value, so running them after it changes nothing, and the first execution that
        fails is the one that would have failed first; a deadlock is reported after the
        executions that completed before it)."""
        execute, insns, info = self.execute, self.insns, self.info
        assert execute is not None
        if isinstance(execute, _Executor):  # its own loop (``run_all``)
            execute.run_all(self.completed, insns, info)
            return
        for index in self.completed:
            execute(index, insns[index], info[index])

    def _deadlock_text(self, stuck: list[str]) -> str:
        parts = []
        for name in stuck:
            u = self.units[name]
            at = ""
            if u.current is not None:
                at = f" at {where(u.current, self.insns[u.current], self.program)}"
            parts.append(f"{name} unit waits on {u.waiting}{at}")
        return f"deadlock at cycle {int(self.env.now)}: " + "; ".join(parts)

    def stats(self, cycles: int, hazards: int | None) -> SimStats:
        units = {}
        for n in self.unit_names:
            u = self.units[n]
            idle = cycles - u.busy - u.token - u.queue - u.memory - u.conflict
            units[n] = UnitStats(u.busy, u.token, u.queue, u.memory, idle, u.insns, u.conflict)
        counts: dict[str, int] = {}
        gemm_ops = alu_ops = macs = 0
        # per distinct description (a tiled program shares them), in order of first
        # occurrence, so each mnemonic still enters ``counts`` at its first instruction
        ids = list(map(id, self.info))
        of = dict(zip(ids, self.info, strict=True))
        for key, times in Counter(ids).items():
            info = of[key]
            counts[info.mnemonic] = counts.get(info.mnemonic, 0) + times
            g, a, m = info.work
            gemm_ops += times * g
            alu_ops += times * a
            macs += times * m
        return SimStats(cycles=cycles, clock_mhz=self.hw.board.clock_mhz, units=units,
                        bytes=dict(self.bytes), insn_counts=counts, gemm_ops=gemm_ops,
                        gemm_cycles=gemm_ops * self.hw.gemm.ii, alu_ops=alu_ops, ops=2 * macs,
                        acc_hazards=hazards)


def cycles_of(program: Program, hw: HwConfig, engine: str = "lean") -> int:
    """``simulate(program, hw, timing_only=True).cycles`` without the rest of the result: the
    run alone, none of the statistics, the timeline's tuple or the result object a caller
    that asks only the cycles (the compiler's cost oracle, ``AccelTarget.cycles``, once per
    candidate) would drop. The same checks and errors (an unknown engine, a DRAM image too
    large, a refused instruction, a deadlock)."""
    _engine_of(engine)
    check_dram_size(program)
    return Machine(program, hw, None, engine, timeline=False).run()


def simulate(program: Program, hw: HwConfig, inputs: Mapping[str, ArrayLike] | None = None, *,
             seed: int | None = None, timing_only: bool = False,
             trace_path: str | None = None, engine: str = "lean",
             timeline: bool = True) -> SimResult:
    """Run ``program`` on the cycle-level machine.

    ``inputs`` maps allocation names to arrays (see ``vta.sim.dram``); when None, full-range
    random inputs are drawn with ``seed`` (0 when None too), but for ``timing_only``, which
    skips all arithmetic (and with it SRAM index checks), draws nothing (the result's
    ``inputs`` is then empty) and gives the same cycle count. ``trace_path``
    writes a Chrome/Perfetto trace (``vta.sim.trace``). ``engine`` picks the discrete-event
    engine (``ENGINES``: ``lean``, or simpy itself as the reference; same results).
    ``timeline=False`` records no timeline (the result's ``slices`` empty; the statistics are
    the same): for a caller that reads none (a worker of ``vta run`` without a trace); a
    ``trace_path`` records it regardless.
    """
    _engine_of(engine)  # a bad name fails before any input is drawn
    if inputs is None and timing_only:  # no values at all: none are drawn
        check_dram_size(program)
        inputs = {}
    elif inputs is None:
        inputs = random_inputs(program, hw, 0 if seed is None else seed)
    executor = None if timing_only else _Executor(program, hw, inputs)
    machine = Machine(program, hw, executor, engine, timeline or trace_path is not None)
    if executor is not None:
        executor.prepare(machine.info)
    cycles = machine.run()
    dram = None if executor is None else executor.dram
    result = SimResult(
        hw_name=hw.name, program=program,
        stats=machine.stats(cycles, None if executor is None else executor.hazards),
        slices=tuple(machine.slices), inputs=dict(inputs),
        outputs={} if dram is None else dram.outputs(),
        dram=None if dram is None else dram.buf, timing_only=timing_only)
    if trace_path is not None:
        write_trace(result, trace_path)
    return result
