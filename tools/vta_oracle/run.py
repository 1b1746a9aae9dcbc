"""Running a program through vta.cc and comparing it with vta's simulators, byte for byte.

``run_program(driver, program, inputs)`` builds the program's DRAM image exactly as the
simulators do (``vta.sim.dram.Dram``: micro-ops encoded, inputs written, the rest zero),
encodes the instructions (``vta.isa.encode_program``), hands the driver one file per region
(``image.regions``) and reads every region back: an ``OracleRun`` whose ``outputs`` are every
allocation by name, shaped as ``vta.sim.simulate`` and ``run_reference`` return them.

``differences(program, got, want)`` compares two such dicts allocation by allocation (equal
values of one dtype are equal bytes) and describes, per differing allocation, the first
differing entry and element and how many entries differ.

``vta_rounds(program)`` models vta()'s main loop on the program's dependency flags: vta()
runs rounds of loads, computes and stores and gives up after 1001 rounds, progress or not, so
a program whose token chain needs more rounds ends in vta.cc's final assertion (tokens left);
a failed or incomplete run says so.

``OracleTarget`` is an ``AccelTarget`` whose ``execute`` runs the cycle-level simulator as
usual (so every run in ``vta.run`` proceeds exactly as it would) and then the same program on
the same arrays through vta.cc, and records the comparison (``Record``): ``run_layer``,
``run_graph`` and ``run_tc`` given this target check every program they execute.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tools.vta_oracle.build import Driver
from tools.vta_oracle.errors import OracleConfigError, OracleRunError
from tools.vta_oracle.image import regions
from tools.vta_oracle.macros import vta_macros
from vta.config import HwConfig
from vta.isa import (
    Alu,
    AluOp,
    Finish,
    Load,
    MemType,
    Program,
    Store,
    definition_of,
    encode_program,
)
from vta.run.targets import AccelTarget, Execution
from vta.sim import run_reference
from vta.sim.dram import Dram

__all__ = ["VTA_CC_INSTRUCTIONS", "OracleRun", "Difference", "Record", "OracleTarget",
           "run_program", "differences", "check_program", "corner_uses", "Rounds", "vta_rounds",
           "ROUND_LIMIT"]

#: the instructions vta.cc decodes (ALU.MUL is opcode 4 with ALU function 4: vta.cc accepts
#: the word and, having no MUL branch, leaves the accumulator unchanged)
VTA_CC_INSTRUCTIONS = ("LOAD", "STORE", "GEMM", "ALU.MIN", "ALU.MAX", "ALU.ADD", "ALU.SHR",
                       "ALU.MUL", "FINISH")

_STATUS = re.compile(r"oracle-driver: insns=(\d+) executed=(\d+) unread=(\d+)")


# ---------------------------------------------------------------------------- vta()'s loop

#: vta() stops its main loop when its round counter exceeds 1000 (``exit_counter > 1000``),
#: counting every round, not only rounds without progress
ROUND_LIMIT = 1001


@dataclass(frozen=True)
class Rounds:
    """How vta()'s main loop runs a program (``vta_rounds``): ``rounds`` executed, whether a
    FINISH ended it (``done``) and how many instructions it dispatched."""

    rounds: int
    done: bool
    dispatched: int


def vta_rounds(program: Program) -> Rounds:
    """vta()'s main loop on ``program``'s dependency flags alone (no data): each round runs
    the load queue, then the compute queue, then the store queue, each until its head waits
    for a token (vta.cc's ``vta()``); the loop ends after a round whose last compute
    instruction was a FINISH (``compute()`` clears ``done`` on every instruction), or gives up
    after ``ROUND_LIMIT`` rounds. Fetch routes as vta.cc's ``fetch()``: STORE to
    store, LOAD of INP or WGT to load, everything else to compute."""
    queues: dict[str, list[Any]] = {"load": [], "compute": [], "store": []}
    for insn in program.instructions:
        if isinstance(insn, Store):
            queues["store"].append(insn)
        elif isinstance(insn, Load) and insn.mem in (MemType.INP, MemType.WGT):
            queues["load"].append(insn)
        else:
            queues["compute"].append(insn)
    tokens = {"l2g": 0, "g2l": 0, "g2s": 0, "s2g": 0}
    #: per module: (flag, queue it pops) and (flag, queue it pushes), as vta.cc reads them
    pops = {"load": (("pop_next", "g2l"),), "compute": (("pop_prev", "l2g"), ("pop_next", "s2g")),
            "store": (("pop_prev", "g2s"),)}
    pushes = {"load": (("push_next", "l2g"),),
              "compute": (("push_prev", "g2l"), ("push_next", "g2s")),
              "store": (("push_prev", "s2g"),)}
    heads = {k: 0 for k in queues}
    done, rounds = False, 0
    while True:
        rounds += 1
        for unit in ("load", "compute", "store"):
            q = queues[unit]
            while heads[unit] < len(q):
                deps = q[heads[unit]].deps
                if any(getattr(deps, f) and not tokens[t] for f, t in pops[unit]):
                    break
                for f, t in pops[unit]:
                    tokens[t] -= getattr(deps, f)
                for f, t in pushes[unit]:
                    tokens[t] += getattr(deps, f)
                if unit == "compute":  # compute() clears done, a FINISH sets it
                    done = isinstance(q[heads[unit]], Finish)
                heads[unit] += 1
        if done or rounds >= ROUND_LIMIT:
            return Rounds(rounds, done, sum(heads.values()))


# ---------------------------------------------------------------------------- running


@dataclass
class OracleRun:
    """One program through vta.cc: every allocation afterwards, how many instructions vta()
    dispatched (``executed``) of ``insns``, how many it left unread in its queues, what vta.cc
    printed (its "waiting on ..." lines when its main loop gave up) and how long it took."""

    outputs: dict[str, np.ndarray]
    insns: int
    executed: int
    unread: int
    printed: str
    seconds: float
    #: vta()'s main loop on this program, modelled (``vta_rounds``)
    rounds: Rounds | None = None

    @property
    def complete(self) -> bool:
        """Whether vta() ran every instruction."""
        return self.executed == self.insns and self.unread == 0


def _check_instructions(program: Program) -> None:
    for i, insn in enumerate(program.instructions):
        name = definition_of(insn).name
        if name not in VTA_CC_INSTRUCTIONS:
            raise OracleConfigError(f"instruction {i}: {name} is not an instruction of vta.cc "
                                    f"(it decodes {', '.join(VTA_CC_INSTRUCTIONS)})")


def _image(program: Program, hw: HwConfig,
           inputs: Mapping[str, ArrayLike] | None) -> Dram:
    dram = Dram(program, hw)
    dram.write_all(inputs or {})
    return dram


def _same_build(driver: Driver, hw: HwConfig) -> HwConfig:
    """``hw`` if vta.cc compiles for it as for the driver's config (an error otherwise)."""
    if vta_macros(hw) != vta_macros(driver.hw):
        raise OracleConfigError(f"{hw.name}: vta.cc is compiled differently for it than for "
                                f"the driver's {driver.hw.name}: build a driver for {hw.name}")
    return hw


def run_program(driver: Driver, program: Program,
                inputs: Mapping[str, ArrayLike] | None = None, *, fill: int = 0,
                timeout: float | None = None, hw: HwConfig | None = None) -> OracleRun:
    """Run ``program`` on ``inputs`` (arrays by allocation name; missing ones zero, as
    ``run_reference``) through vta.cc. ``fill``: the byte vta()'s uninitialised on-chip
    buffers (its inp, wgt and out arrays, locals of vta()) start with. ``hw``: the config
    ``program`` was built for when it is not the driver's but a variant vta.cc is compiled the
    same for (e.g. the driver's with ALU MUL: vta.cc receives the same instruction words)."""
    _check_instructions(program)
    hw = driver.hw if hw is None else _same_build(driver, hw)
    dram = _image(program, hw, inputs)
    words = encode_program(program.instructions, hw).astype("<u8")
    regs = [r for r in regions(program, hw) if r.nbytes]
    with tempfile.TemporaryDirectory(prefix="vta-oracle-") as tmp:
        d = Path(tmp)
        (d / "insns.bin").write_bytes(words.tobytes())
        lines = [f"image {max(program.dram_bytes, 1)}", f"fill {fill}",
                 f"insns {len(program.instructions)} {d / 'insns.bin'}"]
        for k, r in enumerate(regs):
            (d / f"in{k}.bin").write_bytes(dram.buf[r.offset: r.offset + r.nbytes].tobytes())
            lines += [f"load {r.offset} {d / f'in{k}.bin'}",
                      f"save {r.offset} {r.nbytes} {d / f'out{k}.bin'}"]
        (d / "manifest").write_text("\n".join(lines) + "\n")
        t0 = time.perf_counter()
        proc = subprocess.run([str(driver.path), "run", str(d / "manifest")],
                              capture_output=True, text=True, timeout=timeout, check=False)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise OracleRunError(_failure(proc) + _round_note(vta_rounds(program)))
        for k, r in enumerate(regs):
            dram.buf[r.offset: r.offset + r.nbytes] = np.frombuffer(
                (d / f"out{k}.bin").read_bytes(), dtype=np.uint8)
    m = _STATUS.search(proc.stderr)
    if m is None:
        raise OracleRunError(f"the driver printed no status line: {proc.stderr.strip()}")
    n, executed, unread = (int(g) for g in m.groups())
    return OracleRun(dram.outputs(), n, executed, unread, proc.stdout, seconds,
                     vta_rounds(program))


def _round_note(r: Rounds) -> str:
    """Why vta() may have stopped early, from the model of its main loop ("" if it finishes)."""
    if r.done:
        return ""
    return (f"; vta()'s main loop gives up after {ROUND_LIMIT} rounds whether or not they "
            f"progress, and this program's dependency tokens need more (by then "
            f"{r.dispatched} of its instructions have run)")


def _failure(proc: subprocess.CompletedProcess[str]) -> str:
    """What a failed driver run means, from its exit status and messages."""
    said = (proc.stderr.strip() + "\n" + proc.stdout.strip()).strip()
    if proc.returncode == -6 and "Assertion" in proc.stderr:
        return ("vta.cc's final assertion failed: vta() returned with dependency tokens left "
                f"in its queues ({said})")
    if proc.returncode < 0:
        return f"the driver was killed by signal {-proc.returncode}: {said}"
    return f"the driver failed (exit status {proc.returncode}): {said}"


# ---------------------------------------------------------------------------- corners


def corner_uses(program: Program) -> list[str]:
    """The constructs of ``program`` at the ISA's edges, where vta.cc's meaning is the
    surprising one (``probes``): ALU.MUL (vta's extension), an ALU reset, SHR by an immediate
    outside -16..15 or by a register, LOAD.WGT/LOAD.UOP pads, LOAD.UOP with y_size other than
    1, a LOAD with no rows or columns carrying pads. vta's simulators follow vta.cc on all but
    MUL; the compiler emits none of them, which the tests check."""
    uses: set[str] = set()
    shifts: set[int] = set()
    for insn in program.instructions:
        if isinstance(insn, Alu):
            if insn.op == AluOp.MUL:
                uses.add("ALU.MUL")
            if insn.reset:
                uses.add("ALU with reset")
            if insn.op == AluOp.SHR and not insn.use_imm:
                uses.add("SHR by a register")
            if insn.op == AluOp.SHR and insn.use_imm and not -16 <= insn.imm <= 15:
                shifts.add(insn.imm)
        elif isinstance(insn, Load):
            pads = (insn.pad_y0, insn.pad_y1, insn.pad_x0, insn.pad_x1)
            if insn.mem in (MemType.WGT, MemType.UOP) and any(pads):
                uses.add(f"LOAD.{insn.mem.name} with pads")
            if insn.mem == MemType.UOP and insn.y_size != 1:
                uses.add(f"LOAD.UOP with y_size {insn.y_size}")
            if (insn.y_size == 0 or insn.x_size == 0) and any(pads):
                uses.add("an empty LOAD with pads")
    if shifts:
        uses.add("SHR by " + ", ".join(str(s) for s in sorted(shifts)))
    return sorted(uses)


# ---------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Difference:
    """An allocation whose bytes differ: the first differing entry (element address offset
    within the allocation) and element in it, both values, and how many entries differ."""

    allocation: str
    kind: str
    entry: int
    index: tuple[int, ...]
    got: int
    want: int
    entries: int
    total: int

    def describe(self, got: str = "vta.cc", want: str = "the simulator") -> str:
        at = f"[{', '.join(map(str, self.index))}]" if self.index else ""
        return (f"allocation {self.allocation!r} ({self.kind}) entry {self.entry}{at}: "
                f"{got} {self.got}, {want} {self.want} ({self.entries} of {self.total} "
                f"entries differ)")


def differences(program: Program, got: Mapping[str, np.ndarray],
                want: Mapping[str, np.ndarray]) -> list[Difference]:
    """Every allocation of ``program`` whose contents differ between ``got`` and ``want``, in
    declaration order."""
    out = []
    for a in program.allocations:
        g, w = np.asarray(got[a.name]), np.asarray(want[a.name])
        if g.dtype != w.dtype or g.shape != w.shape:
            raise ValueError(f"allocation {a.name!r}: {g.dtype}{list(g.shape)} against "
                             f"{w.dtype}{list(w.shape)}")
        if a.elems == 0 or np.array_equal(g, w):
            continue
        bad = (g != w).reshape(a.elems, -1)
        rows = np.flatnonzero(bad.any(axis=1))
        entry = int(rows[0])
        col = int(np.argmax(bad[entry]))
        index = tuple(int(i) for i in np.unravel_index(col, g.shape[1:])) if g.ndim > 1 else ()
        at = (entry, *index)
        out.append(Difference(a.name, a.kind, entry, index, int(g[at]), int(w[at]), len(rows),
                              a.elems))
    return out


@dataclass
class Record:
    """One program checked: vta.cc's run (or why it failed), its differences from the
    simulator and (when asked) from the reference interpreter; ``label`` says which program of
    a run it was (a slice, a graph step), set by the caller."""

    program: Program
    oracle: OracleRun | None
    error: str = ""
    vs_simulator: list[Difference] = field(default_factory=list)
    vs_reference: list[Difference] | None = None
    execution: Execution | None = field(default=None, repr=False)
    label: str = ""

    @property
    def passed(self) -> bool:
        """vta.cc ran every instruction and every allocation is byte-identical."""
        return (self.oracle is not None and self.oracle.complete and not self.vs_simulator
                and not self.vs_reference)

    @property
    def verdict(self) -> str:
        """PASS, DIFF (a difference or an incomplete run) or ERROR (vta.cc failed)."""
        if self.oracle is None:
            return "ERROR"
        return "PASS" if self.passed else "DIFF"

    def line(self) -> str:
        """The verdict and what it rests on, in one line."""
        if self.oracle is None:
            return f"ERROR: {self.error}"
        o = self.oracle
        parts = [f"{o.executed} of {o.insns} instructions"]
        if not o.complete:
            parts.append(f"vta() returned early, {o.unread} left in its queues"
                         + (_round_note(o.rounds) if o.rounds else ""))
        if self.vs_simulator:
            parts.append(f"vs simulator: {self.vs_simulator[0].describe()}")
            if len(self.vs_simulator) > 1:
                parts.append(f"{len(self.vs_simulator)} allocations differ")
        else:
            parts.append("vs simulator: byte-identical")
        if self.vs_reference is not None:
            parts.append("vs reference: " + (self.vs_reference[0].describe(
                want="the reference") if self.vs_reference else "byte-identical"))
        return f"{self.verdict}: " + "; ".join(parts)


def check_program(driver: Driver, program: Program, inputs: Mapping[str, ArrayLike] | None,
                  sim_outputs: Mapping[str, np.ndarray], *, reference: bool = False,
                  fill: int = 0) -> Record:
    """``program`` through vta.cc on ``inputs``, compared with the simulator's outputs on the
    same inputs (and with ``run_reference``'s when ``reference``)."""
    try:
        o = run_program(driver, program, inputs, fill=fill)
    except OracleRunError as e:
        return Record(program, None, str(e))
    rec = Record(program, o, vs_simulator=differences(program, o.outputs, sim_outputs))
    if reference:
        ref = run_reference(program, driver.hw, inputs)
        rec.vs_reference = differences(program, o.outputs, ref)
    return rec


class OracleTarget(AccelTarget):
    """The simulated accelerator, with every executed program also run through vta.cc and
    compared (module docstring); ``records`` holds one ``Record`` per execution, in order."""

    def __init__(self, driver: Driver, *, reference: bool = False, fill: int = 0) -> None:
        super().__init__(driver.hw)
        self.driver = driver
        self.reference_too = reference
        self.fill = fill
        self.records: list[Record] = []

    def __repr__(self) -> str:
        return f"OracleTarget({self.hw.name})"

    def execute(self, artifact: Any, arrays: Mapping[str, np.ndarray], *,
                trace_path: str | None = None) -> Execution:
        ex = super().execute(artifact, arrays, trace_path=trace_path)
        rec = check_program(self.driver, self._program(artifact), arrays, ex.outputs,
                            reference=self.reference_too, fill=self.fill)
        rec.execution = ex
        self.records.append(rec)
        return ex
