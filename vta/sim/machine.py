"""The cycle-level machine: fetch, load, compute and store as simpy processes.

One ``simpy.Environment`` per run. Fetch reads instruction words over the memory port in
batches of ``queues.fetch_batch`` and routes each (``module_of``) into a bounded command queue;
each unit pops its dependency tokens, takes the memory port if it moves data, holds the unit
for the instruction's duration (``vta.sim.timing``: one timeout per instruction), executes the
instruction's arithmetic at completion, and pushes its tokens. Units meet only through these
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
    Alu,
    Finish,
    Gemm,
    Instruction,
    Load,
    Module,
    Program,
    Store,
    module_of,
    pops_of,
    pushes_of,
)
from vta.sim.dram import Dram, random_inputs
from vta.sim.errors import DeadlockError, SimError, where
from vta.sim.gemm import FastGemm, float_exact
from vta.sim.kernels import Ctx, Sram, count_raw_hazards, exec_alu, exec_load, exec_store
from vta.sim.stats import UNITS, SimResult, SimStats, Slice, UnitStats
from vta.sim.timing import INSN_BYTES, dma_bytes, duration, fetch_cycles, uses_memory

__all__ = ["simulate"]

Queue = tuple[Module, Module]
Proc = Generator[simpy.Event, Any, None]

_UNIT_OF = {Module.LOAD: "load", Module.COMPUTE: "compute", Module.STORE: "store"}


def _qname(q: Queue) -> str:
    return f"{q[0].name.lower()}->{q[1].name.lower()}"


def mnemonic(insn: Instruction) -> str:
    """``LOAD.INP``, ``GEMM``, ``ALU.ADD``, ...: the name used in counts and trace slices."""
    if isinstance(insn, (Load, Store)):
        return f"{type(insn).__name__.upper()}.{insn.mem.name}"
    if isinstance(insn, Alu):
        return f"ALU.{insn.op.name}"
    return type(insn).__name__.upper()


@dataclass(frozen=True, slots=True)
class _Static:
    """What the machine needs of one instruction, computed once before the run."""

    module: Module
    cycles: int
    pops: tuple[Queue, ...]
    pushes: tuple[Queue, ...]
    memory: bool


def _static(program: Program, hw: HwConfig, insns: tuple[Instruction, ...]) -> list[_Static]:
    out = []
    for i, insn in enumerate(insns):
        try:
            pops, pushes = tuple(pops_of(insn)), tuple(pushes_of(insn))
        except ValueError as e:
            raise SimError(f"{where(i, insn, program)}: {e}") from None
        out.append(_Static(module_of(insn), duration(hw, insn), pops, pushes, uses_memory(insn)))
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
    """The arithmetic: the vectorised kernels of ``kernels.py`` and the GEMM of ``gemm.py``."""

    def __init__(self, program: Program, hw: HwConfig, inputs: Mapping[str, ArrayLike]) -> None:
        self.program = program
        self.dram = Dram(program, hw)
        self.dram.write_all(inputs)
        self.sram = Sram(hw)
        max_ops = max((i.n_ops for i in program.instructions if isinstance(i, Gemm)), default=0)
        self.gemm = FastGemm(self.sram, float_exact(hw, max_ops))
        a = hw.alu
        issues = -(-hw.gemm.batch * hw.gemm.block_out // a.lanes)
        self.alu_lag = {imm: -(-a.pipeline_depth // (issues * (a.ii_imm if imm else a.ii))) - 1
                        for imm in (False, True)}
        self.hazards = 0

    def __call__(self, index: int, insn: Instruction) -> None:
        ctx = Ctx(index, insn, self.program)
        if isinstance(insn, Gemm):
            self.hazards += self.gemm.run(self.sram, insn, ctx)
        elif isinstance(insn, Load):
            kind, lo, hi = exec_load(self.sram, self.dram, insn, ctx)
            self.gemm.refresh(self.sram, kind, lo, hi)
        elif isinstance(insn, Alu):
            a, s = exec_alu(self.sram, insn, ctx)
            if not insn.reset:
                reads = (a,) if s is None else (a, s)
                self.hazards += count_raw_hazards(a, reads, self.alu_lag[insn.use_imm])
        elif isinstance(insn, Store):
            exec_store(self.sram, self.dram, insn, ctx)


class Machine:
    """One run of one program; build, then ``run()`` once."""

    def __init__(self, program: Program, hw: HwConfig, execute: Callable[[int, Instruction],
                 None] | None) -> None:
        self.program, self.hw, self.execute = program, hw, execute
        finish = next((i for i, x in enumerate(program.instructions) if isinstance(x, Finish)),
                      None)
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
            if isinstance(insn, Finish):
                u.waiting = "the load and store units to drain (FINISH)"
                yield self.drained[Module.LOAD] & self.drained[Module.STORE]
                u.waiting = None
            req = (yield from self._acquire(u, index)) if info.memory else None
            start = self._now()
            yield env.timeout(info.cycles)
            if req is not None:
                self.port[name].release(req)
                assert isinstance(insn, (Load, Store))  # only they use the memory port
                self.bytes[insn.mem.kind] += dma_bytes(self.hw, insn)
            u.busy += info.cycles
            if self.execute is not None:
                self.execute(index, insn)
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
            if isinstance(insn, Finish):
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
        for insn in self.insns:
            counts[mnemonic(insn)] = counts.get(mnemonic(insn), 0) + 1
        g = self.hw.gemm
        gemm_ops = sum(i.n_ops for i in self.insns if isinstance(i, Gemm) and not i.reset)
        alu_ops = sum(i.n_ops for i in self.insns if isinstance(i, Alu))
        return SimStats(cycles=cycles, clock_mhz=self.hw.board.clock_mhz, units=units,
                        bytes=dict(self.bytes), insn_counts=counts, gemm_ops=gemm_ops,
                        gemm_cycles=gemm_ops * g.ii, alu_ops=alu_ops,
                        ops=2 * g.batch * g.block_in * g.block_out * gemm_ops,
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
