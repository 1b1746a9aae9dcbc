"""Instruction and micro-op dataclasses (VTA-compatible semantics, see docs/isa.md).

Every instruction carries four dependency flags. Their meaning depends on the module that
executes the instruction (``module_of``):

========  =========================================  ========================================
module    pop (before executing)                     push (after completing)
========  =========================================  ========================================
load      pop_next: compute->load (WAR: may reuse)   push_next: load->compute (RAW: data ready)
compute   pop_prev: load->compute; pop_next:         push_prev: compute->load; push_next:
          store->compute                             compute->store
store     pop_prev: compute->store                   push_prev: store->compute
========  =========================================  ========================================

ALU opcode 4 is MUL, our extension (as VTA's functional simulator): ``acc = wrap32(acc *
operand)``. Neither of VTA's hardware designs implements it (vta.cc's ``alu()`` has MIN, MAX, ADD
and SHR; the Chisel decoder accepts functions 0-3). A shift left is an SHR by a negative amount,
as VTA's compiler expresses ``<<``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import IntEnum
from functools import cache
from operator import attrgetter
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AluOp",
    "Alu",
    "Deps",
    "Finish",
    "Gemm",
    "Instruction",
    "Load",
    "MemType",
    "MicroOpLoop",
    "Unit",
    "values_of",
    "Opcode",
    "Store",
    "Uop",
    "FLAG_QUEUES",
    "queue_of",
    "flag_for",
    "flag_queues",
    "token_queues",
    "FLAG_QUEUES_SEPARATE_ALU",
    "n_ops",
]


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4

    @property
    def kind(self) -> str:
        """The buffer name used by HwConfig (``uop``, ``wgt``, ...): read per DMA by the
        simulator, so from a table by value (``Enum.name`` is a descriptor call)."""
        return _MEM_KINDS[self]


#: ``MemType.kind`` by value
_MEM_KINDS = tuple(m.name.lower() for m in sorted(MemType))


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3  # arithmetic, by the low ``alu.shift_bits`` bits of the operand, signed (a negative
    #        amount shifts left): vta.cc's ``alu()``
    MUL = 4  # our extension (VTA's functional simulator's); see the module docstring


class Unit(IntEnum):
    LOAD = 0
    COMPUTE = 1
    STORE = 2
    #: the ALU as a module of its own: only on hardware whose ALU is a separate pipeline
    #: (``alu.separate_pipeline``); it then sits between compute and store (``FLAG_QUEUES``)
    ALU = 3

    @property
    def label(self) -> str:
        """The unit's name as statistics, timelines and reports print it (``load``)."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Deps:
    """Dependency-token flags: pops happen before execution, pushes after completion."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def __bool__(self) -> bool:
        return self.pop_prev or self.pop_next or self.push_prev or self.push_next


NO_DEPS = Deps()

#: the dependency flags by name, in their order in the instruction word (hw_spec.h: pop_prev_dep,
#: pop_next_dep, push_prev_dep, push_next_dep after the opcode), the order of ``Deps``'s fields
DEP_FLAGS: tuple[str, ...] = tuple(f.name for f in fields(Deps))
#: the flags that pop a token before the instruction runs, and those that push one after it
POP_FLAGS: tuple[str, ...] = tuple(f for f in DEP_FLAGS if f.startswith("pop_"))
PUSH_FLAGS: tuple[str, ...] = tuple(f for f in DEP_FLAGS if f.startswith("push_"))


@dataclass(frozen=True, slots=True)
class Load:
    """2-D strided DMA from DRAM into a scratchpad, with zero padding on four sides.

    Copies ``y_size`` rows of ``x_size`` elements, rows ``x_stride`` elements apart in DRAM
    (``dram_base`` counts elements of the target buffer), into a contiguous SRAM image of
    ``(pad_y0 + y_size + pad_y1) x (pad_x0 + x_size + pad_x1)`` elements at ``sram_base``.

    What each memory type reads of these fields is VTA's HLS design's (apache/tvm-vta@d4a15f6
    hardware/xilinx/src/vta.cc): INP and ACC write the whole padded image (``load_pad_2d``,
    lines 47-73: the pads are written even when ``y_size`` or ``x_size`` is 0); WGT ignores the
    pads (``load_2d``, lines 76-94); UOP copies ``x_size`` micro-ops from ``dram_base`` and
    ignores ``y_size``, ``x_stride`` and the pads (``compute``, lines 482-486: one ``memcpy``).
    ``pads``, ``data_rows``, ``rows``, ``cols`` and ``sram_elems`` state that once.
    """

    mem: MemType
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    pad_y0: int = 0
    pad_y1: int = 0
    pad_x0: int = 0
    pad_x1: int = 0
    deps: Deps = field(default=NO_DEPS)

    opcode = Opcode.LOAD

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """``(y0, y1, x0, x1)`` zero entries written around the data: the pad fields, except
        for WGT and UOP, whose loads ignore them."""
        if self.mem in (MemType.WGT, MemType.UOP):
            return 0, 0, 0, 0
        return self.pad_y0, self.pad_y1, self.pad_x0, self.pad_x1

    @property
    def data_rows(self) -> int:
        """Rows of ``x_size`` elements read from DRAM: ``y_size``, but one for UOP (its load
        copies ``x_size`` micro-ops whatever ``y_size`` says)."""
        return 1 if self.mem is MemType.UOP else self.y_size

    @property
    def rows(self) -> int:
        """Rows written to SRAM, pads included."""
        y0, y1, _, _ = self.pads
        return y0 + self.data_rows + y1

    @property
    def cols(self) -> int:
        """Elements per SRAM row, pads included."""
        _, _, x0, x1 = self.pads
        return x0 + self.x_size + x1

    @property
    def data_elems(self) -> int:
        """Elements read from DRAM (0: the LOAD moves no data, though it may write pads)."""
        return self.data_rows * self.x_size

    @property
    def sram_elems(self) -> int:
        """SRAM entries written from ``sram_base`` on: data and pads (0 for VTA's token
        carrier, a LOAD without data or pads)."""
        return self.rows * self.cols


@dataclass(frozen=True, slots=True)
class Store:
    """2-D strided DMA from the out scratchpad to DRAM (no padding)."""

    mem: MemType
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    deps: Deps = field(default=NO_DEPS)

    opcode = Opcode.STORE

    @property
    def sram_elems(self) -> int:
        return self.y_size * self.x_size


@dataclass(frozen=True, slots=True)
class MicroOpLoop:
    """The fields a micro-op loop instruction starts with: ``for o < iter_out: for i < iter_in:
    for u in uops[uop_bgn:uop_end]``, the destination entry ``u.dst + o*dst_factor_out +
    i*dst_factor_in``. What ``reset`` does is the definition's (``InstructionDef.reset``: zero
    the destination by default). GEMM and a user's instructions extend it (their other
    operands' factors, immediates, then ``deps``)."""

    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int

    @property
    def n_ops(self) -> int:
        """Micro-op executions this instruction performs."""
        return n_ops(self)


@dataclass(frozen=True, slots=True)
class Gemm(MicroOpLoop):
    """``for o < iter_out: for i < iter_in: for u in uops[uop_bgn:uop_end]``: one tensor op each.

    ``acc[dst] (+)= inp[src] . wgt[wgt]^T`` with ``idx = u.idx + o*idx_factor_out +
    i*idx_factor_in``; with ``reset`` the accumulator entry gets 0 and the out entry what
    ``gemm.reset_out`` says (vta.cc: the low bits of the sum, as without reset).
    """

    src_factor_out: int
    src_factor_in: int
    wgt_factor_out: int
    wgt_factor_in: int
    deps: Deps = field(default=NO_DEPS)
    #: the outer loop starts at iteration ``uop_base``: every operand index is offset by
    #: ``uop_base * factor_out`` (hardware with ``gemm.uop_base`` only; else 0)
    uop_base: int = 0

    opcode = Opcode.GEMM


@dataclass(frozen=True, slots=True)
class Alu:
    """Vector ALU over accumulator entries: ``acc[dst] = op(acc[dst], imm or acc[src])``.

    Loops like GEMM; ``src`` indexes acc. The reset flag does what ``alu.reset`` says (vta.cc:
    nothing).
    """

    op: AluOp | int  # an AluOp, or the function value of a user-defined ALU function
    reset: bool
    uop_bgn: int
    uop_end: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    use_imm: bool
    imm: int
    deps: Deps = field(default=NO_DEPS)
    #: as ``Gemm.uop_base``
    uop_base: int = 0

    opcode = Opcode.ALU

    @property
    def n_ops(self) -> int:
        return n_ops(self)


@dataclass(frozen=True, slots=True)
class Finish:
    """Ends the program once every earlier instruction has completed."""

    deps: Deps = field(default=NO_DEPS)

    opcode = Opcode.FINISH


@dataclass(frozen=True, slots=True)
class Uop:
    """A 32-bit micro-op: accumulator, input (or acc, for ALU) and weight indices."""

    dst: int
    src: int
    wgt: int


@runtime_checkable
class Instruction(Protocol):
    """Any instruction: a frozen dataclass with dependency flags whose class is registered with
    an ``InstructionDef`` (the built-ins above, or a user's). What else it has is described by
    its definition (``vta.isa.defs.definition_of``)."""

    @property
    def deps(self) -> Deps: ...


@cache
def values_of(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an instruction of class ``cls`` its compared fields as one flat tuple,
    its dependency flags spread in (``deps.pop_prev``, ...): two instructions of ``cls`` are
    equal exactly when their tuples are (the dataclass's ``__eq__`` compares the same values
    in the same order). Made once per class (``operator.attrgetter``, C): a cache keyed by it
    hashes and compares plain ints where the instruction's own ``__hash__`` and ``__eq__``
    are Python calls, one more for its ``Deps`` (the simulator's description cache)."""
    names: list[str] = []
    for f in fields(cls):
        if not f.compare:
            continue
        if f.name == "deps":
            names += [f"deps.{g}" for g in DEP_FLAGS]
        else:
            names.append(f.name)
    if len(names) == 1:  # attrgetter of one name gives the value, not a tuple
        get = attrgetter(names[0])
        return lambda insn: (get(insn),)
    return attrgetter(*names)


def n_ops(insn: Any) -> int:
    """Executions of a micro-op loop instruction: ``iter_out * iter_in * (uop_end - uop_bgn)``."""
    return int(insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn))


#: What each dependency flag names on each module: (module, flag) -> (producer, consumer).
#: The one home of VTA's token routing (docs/isa.md); the simulator and the compiler's token
#: insertion both read it.
FLAG_QUEUES: dict[tuple[Unit, str], tuple[Unit, Unit]] = {
    (Unit.LOAD, "pop_next"): (Unit.COMPUTE, Unit.LOAD),
    (Unit.LOAD, "push_next"): (Unit.LOAD, Unit.COMPUTE),
    (Unit.COMPUTE, "pop_prev"): (Unit.LOAD, Unit.COMPUTE),
    (Unit.COMPUTE, "pop_next"): (Unit.STORE, Unit.COMPUTE),
    (Unit.COMPUTE, "push_prev"): (Unit.COMPUTE, Unit.LOAD),
    (Unit.COMPUTE, "push_next"): (Unit.COMPUTE, Unit.STORE),
    (Unit.STORE, "pop_prev"): (Unit.COMPUTE, Unit.STORE),
    (Unit.STORE, "push_prev"): (Unit.STORE, Unit.COMPUTE),
}


#: The token routing of hardware whose ALU is a separate pipeline: the modules form the chain
#: load <-> compute <-> alu <-> store (compute's "next" and store's "prev" are the ALU), so every
#: instruction keeps VTA's four flags. A dependence between compute and store goes through an
#: ALU instruction (the compiler's token pass relays it, ``coproc_sync``).
FLAG_QUEUES_SEPARATE_ALU: dict[tuple[Unit, str], tuple[Unit, Unit]] = {
    (Unit.LOAD, "pop_next"): (Unit.COMPUTE, Unit.LOAD),
    (Unit.LOAD, "push_next"): (Unit.LOAD, Unit.COMPUTE),
    (Unit.COMPUTE, "pop_prev"): (Unit.LOAD, Unit.COMPUTE),
    (Unit.COMPUTE, "pop_next"): (Unit.ALU, Unit.COMPUTE),
    (Unit.COMPUTE, "push_prev"): (Unit.COMPUTE, Unit.LOAD),
    (Unit.COMPUTE, "push_next"): (Unit.COMPUTE, Unit.ALU),
    (Unit.ALU, "pop_prev"): (Unit.COMPUTE, Unit.ALU),
    (Unit.ALU, "pop_next"): (Unit.STORE, Unit.ALU),
    (Unit.ALU, "push_prev"): (Unit.ALU, Unit.COMPUTE),
    (Unit.ALU, "push_next"): (Unit.ALU, Unit.STORE),
    (Unit.STORE, "pop_prev"): (Unit.ALU, Unit.STORE),
    (Unit.STORE, "push_prev"): (Unit.STORE, Unit.ALU),
}


def flag_queues(separate_alu: bool = False) -> dict[tuple[Unit, str], tuple[Unit, Unit]]:
    """The routing table of VTA's modules, or of the chain with a separate ALU module."""
    return FLAG_QUEUES_SEPARATE_ALU if separate_alu else FLAG_QUEUES


def token_queues(separate_alu: bool = False) -> tuple[tuple[Unit, Unit], ...]:
    """The token queues of that routing, (producer, consumer), each once."""
    return tuple(dict.fromkeys(flag_queues(separate_alu).values()))


def queue_of(module: Unit, flag: str, separate_alu: bool = False
             ) -> tuple[Unit, Unit] | None:
    """The token queue a flag of ``module`` refers to (None if the flag has no queue there)."""
    return flag_queues(separate_alu).get((module, flag))


def flag_for(queue: tuple[Unit, Unit], module: Unit, push: bool,
             separate_alu: bool = False) -> str:
    """The flag with which ``module`` pushes to (``push``) or pops from ``queue``."""
    for (m, f), q in flag_queues(separate_alu).items():
        if m is module and q == queue and f.startswith("push" if push else "pop"):
            return f
    raise ValueError(f"the {module.label} module has no flag for queue {queue}")
