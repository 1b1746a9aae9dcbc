"""The cycle-level machine: fetch, load, compute and store as simpy processes.

One ``simpy.Environment`` per run. Fetch reads instruction words over the memory port in
batches of ``queues.fetch_batch`` and routes each (``module_of``) into a bounded command queue;
each unit pops its dependency tokens, takes the memory port if it moves data, holds the unit
for the instruction's duration (its definition's ``duration``: one timeout per instruction),
executes the instruction's arithmetic at completion, and pushes its tokens. What an instruction
does, where it runs, how long it takes and whether it ends the program are all read from its
definition (``vta.isa.defs``), by table. Units meet only through these
bounded Stores and the memory port(s), so every stall emerges from the model.

The run ends when the environment has no events left. A unit still waiting then is a deadlock
(``DeadlockError`` names each waiting unit, what it waits on and its instruction).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

import simpy
from numpy.typing import ArrayLike
from simpy.resources.resource import Request

from vta.config import HwConfig
from vta.isa import (
    DefinitionError,
    Instruction,
    InstructionDef,
    Module,
    Opcode,
    Program,
    definition_of,
    n_ops,
    pops_of,
    pushes_of,
)
from vta.isa.builtins import GEMM
from vta.isa.defs import require
from vta.isa.timing import INSN_BYTES, fetch_cycles
from vta.sim.dram import Dram, random_inputs
from vta.sim.errors import DeadlockError, SimError, where
from vta.sim.gemm import FastGemm, float_exact
from vta.sim.kernels import Ctx, Sram, exec_load, exec_microop, exec_store
from vta.sim.stats import UNITS, SimResult, SimStats, Slice, UnitStats

__all__ = ["simulate", "mnemonic"]

Queue = tuple[Module, Module]
Proc = Generator[simpy.Event, Any, None]

_UNIT_OF = {Module.LOAD: "load", Module.COMPUTE: "compute", Module.STORE: "store"}


def _qname(q: Queue) -> str:
    return f"{q[0].name.lower()}->{q[1].name.lower()}"


def mnemonic(insn: Instruction) -> str:
    """``LOAD.INP``, ``GEMM``, ``ALU.ADD``, ...: the name used in counts and trace slices."""
    return definition_of(insn).mnemonic_of(insn)


@dataclass(frozen=True, slots=True)
class _Static:
    """What the machine needs of one instruction, computed once before the run."""

    defn: InstructionDef
    module: Module
    cycles: int
    pops: tuple[Queue, ...]
    pushes: tuple[Queue, ...]
    #: (memory kind, bytes) a DMA moves over the memory port; None: it does not use the port
    dma: tuple[str, int] | None


def _static(program: Program, hw: HwConfig, insns: tuple[Instruction, ...]) -> list[_Static]:
    out = []
    for i, insn in enumerate(insns):
        try:
            d = definition_of(insn)
            require(d, hw)
            pops, pushes = tuple(pops_of(insn)), tuple(pushes_of(insn))
        except (ValueError, DefinitionError) as e:
            raise SimError(f"{where(i, insn, program)}: {e}") from None
        dma = d.dma(insn, hw) if d.dma is not None else None
        out.append(_Static(d, d.unit_of(insn), d.duration(insn, hw), pops, pushes, dma))
    return out


class _Unit:
    """Mutable bookkeeping of one unit during a run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.busy = self.token = self.queue = self.memory = 0
        self.insns = 0
        self.waiting: str | None = None
        self.current: int | None = None


class _Executor:
    """The arithmetic: the vectorised kernels of ``kernels.py`` (DMA, and every micro-op
    instruction through its definition's semantics) and the faster GEMM of ``gemm.py``."""

    def __init__(self, program: Program, hw: HwConfig, inputs: Mapping[str, ArrayLike]) -> None:
        self.program, self.hw = program, hw
        self.dram = Dram(program, hw)
        self.dram.write_all(inputs)
        self.sram = Sram(hw)
        gemm_ops = [n_ops(i) for i in program.instructions if definition_of(i) is GEMM]
        self.gemm = FastGemm(self.sram, float_exact(hw, max(gemm_ops, default=0)), GEMM)
        self.hazards = 0
        #: how each kind of definition executes (FINISH does nothing)
        self.role: dict[str, Callable[[Ctx, Any, InstructionDef], None]] = {
            "load": self._load, "store": self._store, "compute": self._compute}

    def _load(self, ctx: Ctx, insn: Any, d: InstructionDef) -> None:
        kind, lo, hi = exec_load(self.sram, self.dram, insn, ctx)
        self.gemm.refresh(self.sram, kind, lo, hi)

    def _store(self, ctx: Ctx, insn: Any, d: InstructionDef) -> None:
        exec_store(self.sram, self.dram, insn, ctx)

    def _compute(self, ctx: Ctx, insn: Any, d: InstructionDef) -> None:
        if d is GEMM:
            self.hazards += self.gemm.run(self.sram, insn, ctx)
        else:
            self.hazards += exec_microop(self.sram, insn, d, ctx, d.hazard_lag(insn, self.hw))

    def __call__(self, index: int, insn: Instruction, d: InstructionDef) -> None:
        run = self.role.get(d.role)
        if run is not None:
            run(Ctx(index, insn, self.program), insn, d)


class Machine:
    """One run of one program; build, then ``run()`` once."""

    def __init__(self, program: Program, hw: HwConfig,
                 execute: Callable[[int, Instruction, InstructionDef], None] | None) -> None:
        self.program, self.hw, self.execute = program, hw, execute
        finish = next((i for i, x in enumerate(program.instructions)
                       if definition_of(x).drains), None)
        self.insns = program.instructions if finish is None else program.instructions[:finish + 1]
        self.info = _static(program, hw, self.insns)
        env = self.env = simpy.Environment()
        q = hw.queues
        self.cmdq = {m: simpy.Store(env, capacity=q.command_depth) for m in Module}
        self.tokq = {k: simpy.Store(env, capacity=q.token_depth) for k in
                     ((Module.LOAD, Module.COMPUTE), (Module.COMPUTE, Module.LOAD),
                      (Module.COMPUTE, Module.STORE), (Module.STORE, Module.COMPUTE))}
        shared = simpy.Resource(env, capacity=1) if hw.memory.shared_port else None
        self.port = {u: shared or simpy.Resource(env, capacity=1) for u in UNITS}
        self.units = {u: _Unit(u) for u in UNITS}
        self.count = {m: sum(1 for s in self.info if s.module == m) for m in Module}
        self.drained = {m: env.event() for m in (Module.LOAD, Module.STORE)}
        for m, ev in self.drained.items():
            if self.count[m] == 0:
                ev.succeed()
        self.slices: list[Slice] = []
        self.bytes = dict.fromkeys(("inp", "wgt", "acc", "uop", "out", "insn"), 0)
        self.finished_at: int | None = None

    # ------------------------------------------------------------------ helpers

    def _now(self) -> int:
        """The current cycle (simpy types time as float; every delay here is an int)."""
        return int(self.env.now)

    def _waited(self, u: _Unit, kind: str, since: int, label: str, index: int) -> None:
        now = self._now()
        dt = now - since
        if dt:
            setattr(u, kind, getattr(u, kind) + dt)
            self.slices.append(Slice(u.name, kind, since, now, index, label))
        u.waiting = None

    def _acquire(self, u: _Unit, index: int) -> Generator[simpy.Event, Any, Request]:
        port = self.port[u.name]
        t = self._now()
        u.waiting = "the memory port"
        req = port.request()
        yield req
        self._waited(u, "memory", t, "wait memory", index)
        return req

    # ------------------------------------------------------------------ processes

    def _fetch(self) -> Proc:
        u, env, n = self.units["fetch"], self.env, len(self.insns)
        batch = self.hw.queues.fetch_batch
        for first in range(0, n, batch):
            k = min(batch, n - first)
            u.current = first
            req = yield from self._acquire(u, first)
            cycles = fetch_cycles(self.hw, k)
            start = self._now()
            yield env.timeout(cycles)
            self.port["fetch"].release(req)
            u.busy += cycles
            u.insns += k
            self.bytes["insn"] += INSN_BYTES * k
            self.slices.append(Slice("fetch", "insn", start, self._now(), first,
                                     f"FETCH {first}..{first + k - 1}"))
            for i in range(first, first + k):
                u.current = i
                m = self.info[i].module
                t = self._now()
                u.waiting = f"command queue {_UNIT_OF[m]} (full)"
                yield self.cmdq[m].put(i)
                self._waited(u, "queue", t, f"wait {_UNIT_OF[m]} queue", i)
        u.current = None

    def _unit(self, module: Module) -> Proc:
        name = _UNIT_OF[module]
        u, env = self.units[name], self.env
        for _ in range(self.count[module]):
            t = self._now()
            u.waiting = "its command queue (empty)"
            index = yield self.cmdq[module].get()
            self._waited(u, "queue", t, "wait command", index)
            u.current = index
            insn, info = self.insns[index], self.info[index]
            for q in info.pops:
                t = self._now()
                u.waiting = f"token queue {_qname(q)} (empty)"
                yield self.tokq[q].get()
                self._waited(u, "token", t, f"pop {_qname(q)}", index)
            if info.defn.drains:
                names = " and ".join(_UNIT_OF[m] for m in info.defn.drains)
                u.waiting = f"the {names} units to drain ({mnemonic(insn)})"
                yield simpy.AllOf(self.env, [self.drained[m] for m in info.defn.drains])
                u.waiting = None
            req = (yield from self._acquire(u, index)) if info.dma is not None else None
            start = self._now()
            yield env.timeout(info.cycles)
            if req is not None:
                assert info.dma is not None
                self.port[name].release(req)
                self.bytes[info.dma[0]] += info.dma[1]
            u.busy += info.cycles
            if self.execute is not None:
                self.execute(index, insn, info.defn)
            self.slices.append(Slice(name, "insn", start, self._now(), index, mnemonic(insn)))
            for q in info.pushes:
                t = self._now()
                u.waiting = f"token queue {_qname(q)} (full)"
                yield self.tokq[q].put(True)
                self._waited(u, "queue", t, f"push {_qname(q)}", index)
            u.insns += 1
            u.current = None
            if module in self.drained and u.insns == self.count[module]:
                self.drained[module].succeed()
            if info.defn.drains:
                self.finished_at = self._now()

    # ------------------------------------------------------------------ run

    def run(self) -> int:
        """Run to completion; returns total cycles. Raises DeadlockError if stuck."""
        procs = {"fetch": self.env.process(self._fetch())}
        for m in Module:
            procs[_UNIT_OF[m]] = self.env.process(self._unit(m))
        self.env.run()
        stuck = [n for n in UNITS if procs[n].is_alive]
        if stuck:
            raise DeadlockError(self._deadlock_text(stuck))
        return int(self.env.now if self.finished_at is None else self.finished_at)

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
        for n in UNITS:
            u = self.units[n]
            idle = cycles - u.busy - u.token - u.queue - u.memory
            units[n] = UnitStats(u.busy, u.token, u.queue, u.memory, idle, u.insns)
        counts: dict[str, int] = {}
        gemm_ops = alu_ops = macs = 0
        for insn, info in zip(self.insns, self.info, strict=True):
            d = info.defn
            counts[mnemonic(insn)] = counts.get(mnemonic(insn), 0) + 1
            x: Any = insn
            if not d.is_microop or x.reset:
                continue
            if d is GEMM:
                gemm_ops += n_ops(x)
            elif d.opcode == Opcode.ALU:  # the ALU's functions, a user's included
                alu_ops += n_ops(x)
            if d.macs is not None:
                macs += n_ops(x) * d.macs(x, self.hw)
        return SimStats(cycles=cycles, clock_mhz=self.hw.board.clock_mhz, units=units,
                        bytes=dict(self.bytes), insn_counts=counts, gemm_ops=gemm_ops,
                        gemm_cycles=gemm_ops * self.hw.gemm.ii, alu_ops=alu_ops, ops=2 * macs,
                        acc_hazards=hazards)


def simulate(program: Program, hw: HwConfig, inputs: Mapping[str, ArrayLike] | None = None, *,
             seed: int | None = None, timing_only: bool = False,
             trace_path: str | None = None) -> SimResult:
    """Run ``program`` on the cycle-level machine.

    ``inputs`` maps allocation names to arrays (see ``vta.sim.dram``); when None, full-range
    random inputs are drawn with ``seed`` (0 when None too). ``timing_only`` skips all
    arithmetic (and with it SRAM index checks) and gives the same cycle count. ``trace_path``
    writes a Chrome/Perfetto trace (``vta.sim.trace``).
    """
    if inputs is None:
        inputs = random_inputs(program, hw, 0 if seed is None else seed)
    executor = None if timing_only else _Executor(program, hw, inputs)
    machine = Machine(program, hw, executor)
    cycles = machine.run()
    dram = None if executor is None else executor.dram
    result = SimResult(
        hw_name=hw.name, program=program,
        stats=machine.stats(cycles, None if executor is None else executor.hazards),
        slices=tuple(machine.slices), inputs=dict(inputs),
        outputs={} if dram is None else dram.outputs(),
        dram=None if dram is None else dram.buf, timing_only=timing_only)
    if trace_path is not None:
        from vta.sim.trace import write_trace
        write_trace(result, trace_path)
    return result
