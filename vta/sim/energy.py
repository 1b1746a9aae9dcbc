"""Energy of a simulated run: per-operation and per-access energies times the events the run
counted, broken down by component.

The per-event energies are Horowitz's 45 nm figures (M. Horowitz, "Computing's energy problem
(and what we can do about it)", ISSCC 2014, slide table "Energy per operation", 45 nm, 0.9 V):

* integer arithmetic: 8-bit add 0.03 pJ, 32-bit add 0.1 pJ, 8-bit multiply 0.2 pJ, 32-bit
  multiply 3.1 pJ; an int8 x int8 -> int32 multiply-accumulate is one 8-bit multiply and one
  32-bit add (0.3 pJ);
* SRAM, a 64-bit access: 10 pJ from an 8 KB array, 20 pJ from 32 KB, 100 pJ from 1 MB, i.e.
  1.25, 2.5 and 12.5 pJ per byte; a buffer of another size is interpolated log-log between
  those points (extrapolated along the end segments), ``sram_pj_per_byte``;
* DRAM, a 64-bit access: 1.3-2.6 nJ; the low end, 1.3 nJ / 8 B = 162.5 pJ per byte.

A config names its technology node and a scale (``energy.node_nm``, ``energy.scale`` in the
YAML: 45 and 1.0 by default, Horowitz's node); every figure is multiplied by ``scale``, which
the user derives for another node (the model does not invent a scaling law).

What is counted, per run (``energy_of``), from the program the simulator executed and the
traffic it counted (``SimStats.bytes``):

* ``mac``: every multiply-accumulate the GEMM core performs (padding included: it is done);
* ``alu``: every ALU lane operation (a 32-bit add; MUL a 32-bit multiply);
* ``sram_<buffer>``: each micro-op execution reads its micro-op (``uop``), the entries of the
  operands it reads (GEMM: an inp and a wgt entry; a register ALU op: an acc entry), reads and
  writes its accumulator entry and writes the out entry that mirrors it (VTA's HLS design
  writes ``out_mem`` beside ``acc_mem``); a reset (GEMM or ALU) only writes the two entries
  and does no arithmetic (as the simulator counts no work for it); a LOAD writes the bytes it
  moved into its buffer and a STORE reads them from out;
* ``dram``: the bytes every LOAD and STORE moved over the memory port;
* ``fetch``: the instruction words fetched from DRAM (16 bytes each) at DRAM energy.

Register files, control, the command and token queues and leakage are not counted: the figure
is the data-movement and arithmetic energy of the program, the part a schedule changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from vta.config import DTYPE_BITS, HwConfig
from vta.isa import AluOp, InstructionDef, Program, definition_of, n_ops, registered
from vta.isa.builtins import ALU
from vta.isa.insn import values_of

__all__ = ["Energy", "EnergyTable", "energy_table", "energy_of", "sram_pj_per_byte",
           "COMPONENTS", "HOROWITZ_45NM", "sequential_sums"]

#: Horowitz, ISSCC 2014, 45 nm (module docstring): pJ per operation or per byte
HOROWITZ_45NM: dict[str, float] = {
    "add8": 0.03, "add32": 0.1, "mult8": 0.2, "mult32": 3.1,
    "dram_byte": 1300.0 / 8,
}
#: SRAM: (array bytes, pJ per byte) for a 64-bit access, Horowitz's three sizes
SRAM_POINTS: tuple[tuple[int, float], ...] = ((8 << 10, 10.0 / 8), (32 << 10, 20.0 / 8),
                                              (1 << 20, 100.0 / 8))
#: the components of a breakdown, in report order
COMPONENTS = ("mac", "alu", "sram_inp", "sram_wgt", "sram_acc", "sram_out", "sram_uop",
              "dram", "fetch")
#: each component's column in ``_rows``
_COLUMN = {c: k for k, c in enumerate(COMPONENTS)}
#: bytes of one instruction word (the fetch unit's DMA)
_INSN_BYTES = 16


def sram_pj_per_byte(size_bytes: int) -> float:
    """pJ per byte accessed in an SRAM of ``size_bytes``: Horowitz's three points joined
    log-log, the end segments extended beyond them."""
    pts = SRAM_POINTS
    x = math.log(max(1, size_bytes))
    k = 0 if x <= math.log(pts[1][0]) else 1
    (s0, e0), (s1, e1) = pts[k], pts[k + 1]
    slope = (math.log(e1) - math.log(e0)) / (math.log(s1) - math.log(s0))
    return math.exp(math.log(e0) + slope * (x - math.log(s0)))


@dataclass(frozen=True)
class EnergyTable:
    """The per-event energies (pJ) of one hardware config: its node's figures times its scale."""

    mac: float
    alu_add: float
    alu_mul: float
    sram: dict[str, float]
    dram_byte: float
    node_nm: int
    scale: float


def energy_table(hw: HwConfig) -> EnergyTable:
    """``hw``'s per-event energies (module docstring)."""
    s = hw.energy.scale
    h = HOROWITZ_45NM
    sram = {k: sram_pj_per_byte(hw.depth(k) * hw.elem_bytes(k)) * s
            for k in ("inp", "wgt", "acc", "out", "uop")}
    return EnergyTable(mac=(h["mult8"] + h["add32"]) * s, alu_add=h["add32"] * s,
                       alu_mul=h["mult32"] * s, sram=sram, dram_byte=h["dram_byte"] * s,
                       node_nm=hw.energy.node_nm, scale=s)


@dataclass(frozen=True)
class Energy:
    """A run's energy in pJ per component (``COMPONENTS``)."""

    pj: dict[str, float]

    @property
    def total_pj(self) -> float:
        return sum(self.pj.values())

    @property
    def total_uj(self) -> float:
        return self.total_pj / 1e6

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the total and each component in µJ."""
        return {"total_uj": self.total_uj,
                "components_uj": {k: self.pj[k] / 1e6 for k in COMPONENTS}}

    def __add__(self, other: Energy) -> Energy:
        return Energy({k: self.pj.get(k, 0.0) + other.pj.get(k, 0.0) for k in COMPONENTS})

    def times(self, n: int) -> Energy:
        return Energy({k: v * n for k, v in self.pj.items()})

    @staticmethod
    def zero() -> Energy:
        return Energy(dict.fromkeys(COMPONENTS, 0.0))

    @staticmethod
    def total(parts: Iterable[Energy]) -> Energy:
        out = Energy.zero()
        for p in parts:
            out = out + p
        return out


def _additions(insn: Any, d: InstructionDef, hw: HwConfig, t: EnergyTable,
               eb: dict[str, int], lanes: int) -> list[tuple[str, float]]:
    """What one execution of the micro-op instruction ``insn`` (definition ``d``) adds to
    the breakdown (module docstring), in the order ``energy_of`` sums it: (component, pJ).
    A pure function of the instruction's fields, so a tiled program's repeats share it."""
    n = n_ops(insn)
    out = [("sram_uop", n * eb["uop"] * t.sram["uop"])]
    dst = d.dst.memory
    if dst == "acc":  # the out entry mirroring it
        out.append(("sram_out", n * eb["out"] * t.sram["out"]))
    if d.reset_mode(insn, hw) is not None:  # a reset writes its entry, computes nothing
        out.append((f"sram_{dst}", n * eb[dst] * t.sram[dst]))
        return out
    for op in d.reads(insn, hw):
        out.append((f"sram_{op.memory}", n * eb[op.memory] * t.sram[op.memory]))
    out.append((f"sram_{dst}", 2 * n * eb[dst] * t.sram[dst]))  # read-modify-write
    if d.macs is not None:
        out.append(("mac", n * d.macs(insn, hw) * t.mac))
    else:
        out.append(("alu", n * lanes * (t.alu_mul if d is ALU[AluOp.MUL] else t.alu_add)))
    return out


def _rows(additions: list[tuple[str, float]]) -> list[list[float]]:
    """``additions`` as rows of a (rows, ``COMPONENTS``) matrix, in order, a new row wherever
    a component would be added to twice (an ALU op reading acc adds its read, then its
    read-modify-write): summing the rows' columns in order adds every value in its turn."""
    rows: list[list[float]] = []
    row: list[float] | None = None
    for comp, pj in additions:
        k = _COLUMN[comp]
        if row is None or row[k]:
            row = [0.0] * len(COMPONENTS)
            rows.append(row)
        row[k] = pj
    return rows



def _plain_classes() -> set[type]:
    """The instruction classes whose every registered definition adds nothing to a run's
    breakdown (``energy_of``'s rows are a micro-op instruction's) and does not drain the
    machine (LOAD and STORE): ``energy_of`` passes their instances by class alone, without
    finding each one's definition (most of a tiled program's distinct instructions are DMAs
    that differ only in their addresses). Read from the registry on every call (a user may
    register a definition since)."""
    defs = registered()
    return {d.cls for d in defs} - {d.cls for d in defs if d.is_microop or d.drains}


def _row_order(first: list[int], count: list[int]) -> np.ndarray:
    """The rows of each instruction in program order (instruction ``i``'s rows are
    ``first[i]`` to ``first[i] + count[i] - 1``), as one index array: the instructions'
    ranges concatenated, without a Python step per instruction."""
    n = np.array(count, dtype=np.intp)
    base = np.array(first, dtype=np.intp)
    ends = np.cumsum(n)
    return np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.intp) + np.repeat(
        base - (ends - n), n)


def sequential_sums(rows: np.ndarray) -> np.ndarray:
    """Each column of ``rows`` (2-D float64) summed top to bottom, one addition at a time:
    the bits a Python loop of ``+=`` gives (``np.add.accumulate`` adds in order; ``np.sum``
    adds pairwise, which rounds differently). Zeros change nothing (the values are finite
    and not negative zero)."""
    if not rows.shape[0]:
        return np.zeros(rows.shape[1])
    return np.add.accumulate(rows, axis=0)[-1]


def energy_of(program: Program, bytes_moved: dict[str, int], hw: HwConfig) -> Energy:
    """The energy of one run of ``program`` on ``hw`` that moved ``bytes_moved`` (the
    simulator's ``SimStats.bytes``: per buffer kind, and ``insn`` for the fetch), by
    component (module docstring). Every instruction up to FINISH runs once. Each distinct
    instruction's additions (``_additions``) are made once (the resnet18 graph's 18,639
    instructions are 5,381 objects; C1-C11's 6,469 are 2,270 values), and summed per
    component in program order (``sequential_sums``: the same bits as adding them one by
    one). The objects are visited in order of first occurrence (the per-instruction work is
    C-level maps and one index array, ``_row_order``)."""
    t = energy_table(hw)
    acc_bits = DTYPE_BITS[hw.gemm.acc_dtype]
    lanes = hw.elem_bytes("acc") * 8 // acc_bits
    eb = {k: hw.elem_bytes(k) for k in ("inp", "wgt", "acc", "out", "uop")}
    insns = program.instructions
    ids = list(map(id, insns))
    table: list[list[float]] = []
    #: per instruction object (``program`` keeps each alive), in order of first occurrence,
    #: and per value (an equal instruction that is another object: its class and compared
    #: fields, ``values_of``): its first row in ``table`` and its number of rows
    first: dict[int, int] = {}
    count: dict[int, int] = {}
    equal: dict[Any, tuple[int, int, bool]] = {}
    plain = _plain_classes()
    cut = len(ids)
    for key, insn in dict(zip(ids, insns, strict=True)).items():
        cls = type(insn)
        if cls in plain:  # no rows, does not drain (a DMA): not in ``first`` nor ``count``
            continue
        value = (cls, values_of(cls)(insn))
        got = equal.get(value)
        if got is None:
            d = definition_of(insn)
            rows = _rows(_additions(insn, d, hw, t, eb, lanes)) if d.is_microop else []
            got = equal[value] = (len(table), len(rows), bool(d.drains))
            table.extend(rows)
        first[key], count[key] = got[0], got[1]
        if got[2]:  # what follows never runs
            cut = ids.index(key) + 1
            break
    ran = ids[:cut] if cut < len(ids) else ids
    sums = sequential_sums(np.array(table, dtype=np.float64).reshape(-1, len(COMPONENTS))
                           [_row_order(list(map(first.get, ran, repeat(0))),
                                       list(map(count.get, ran, repeat(0))))])
    pj = {c: float(v) for c, v in zip(COMPONENTS, sums.tolist(), strict=True)}
    for kind in ("inp", "wgt", "acc", "uop", "out"):
        moved = bytes_moved.get(kind, 0)
        pj["dram"] += moved * t.dram_byte
        pj[f"sram_{kind}"] += moved * t.sram[kind]  # written by a LOAD, read by a STORE
    pj["fetch"] = bytes_moved.get("insn", 0) * t.dram_byte
    return Energy(pj)
