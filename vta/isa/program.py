"""A program: instructions, the micro-ops they load, and the DRAM map they address.

DRAM is one byte-addressed space holding named allocations. Each allocation holds elements of
one buffer kind (``inp``, ``wgt``, ``acc``, ``out`` or ``uop``), is aligned so that its first
byte is a whole element of that kind (instructions count DRAM addresses in elements of the
buffer they move, as VTA does), and is placed in declaration order. Micro-op allocations carry
their contents (the compiler's output); the others are inputs or outputs of a run. Every
element of an allocation must be addressable by an instruction's DRAM field
(``hw.isa.dram_addr`` bits, counted in elements of the allocation's kind): a larger allocation
is a ``ProgramError`` naming it, before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vta.config import BUFFER_KINDS, HwConfig
from vta.errors import ProgramError
from vta.isa.insn import Instruction, Uop

__all__ = ["Allocation", "Program", "ProgramBuilder", "ProgramError", "KINDS", "DRAM_ALIGN"]


KINDS = BUFFER_KINDS
#: every allocation starts on a multiple of this many bytes (and of its element size)
DRAM_ALIGN = 64


@dataclass(frozen=True, slots=True)
class Allocation:
    """A named DRAM region of ``elems`` elements of buffer kind ``kind`` at byte ``offset``."""

    name: str
    kind: str
    elems: int
    offset: int
    elem_bytes: int

    @property
    def nbytes(self) -> int:
        return self.elems * self.elem_bytes

    @property
    def base(self) -> int:
        """The first element's DRAM address in elements of this kind (what instructions use)."""
        return self.offset // self.elem_bytes

    def contains(self, elem_addr: int, count: int = 1) -> bool:
        return self.base <= elem_addr and elem_addr + count <= self.base + self.elems


@dataclass(frozen=True)
class Program:
    """Instructions plus the DRAM map; the unit the simulators run and the assembler prints."""

    instructions: tuple[Instruction, ...]
    allocations: tuple[Allocation, ...] = ()
    uops: Mapping[str, tuple[Uop, ...]] = field(default_factory=dict)

    @property
    def dram_bytes(self) -> int:
        """Size of the DRAM image holding every allocation."""
        return max((a.offset + a.nbytes for a in self.allocations), default=0)

    def allocation(self, name: str) -> Allocation:
        for a in self.allocations:
            if a.name == name:
                return a
        raise KeyError(f"no DRAM allocation named {name!r} "
                       f"(have: {', '.join(a.name for a in self.allocations) or 'none'})")

    def find(self, kind: str, elem_addr: int) -> Allocation | None:
        """The allocation of ``kind`` holding element address ``elem_addr`` (None if none)."""
        for a in self.allocations:
            if a.kind == kind and a.contains(elem_addr):
                return a
        return None

    @property
    def inputs(self) -> tuple[Allocation, ...]:
        """Allocations a run must provide data for (inp, wgt, acc)."""
        return tuple(a for a in self.allocations if a.kind in ("inp", "wgt", "acc"))

    @property
    def outputs(self) -> tuple[Allocation, ...]:
        return tuple(a for a in self.allocations if a.kind == "out")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return (self.instructions == other.instructions
                and self.allocations == other.allocations
                and {k: tuple(v) for k, v in self.uops.items()}
                == {k: tuple(v) for k, v in other.uops.items()})

    __hash__ = None  # type: ignore[assignment]


class ProgramBuilder:
    """Builds a Program: declare allocations (placed in order, aligned), add uops and insns."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self._allocs: list[Allocation] = []
        self._uops: dict[str, list[Uop]] = {}
        self._insns: list[Instruction] = []
        self._next = 0

    def alloc(self, name: str, kind: str, elems: int) -> Allocation:
        """Declare a DRAM allocation of ``elems`` elements of ``kind``."""
        if kind not in KINDS:
            raise ProgramError(f"allocation {name!r}: kind must be one of {', '.join(KINDS)}, "
                             f"got {kind!r}")
        if elems < 0:
            raise ProgramError(f"allocation {name!r}: element count must be >= 0, got {elems}")
        if any(a.name == name for a in self._allocs):
            raise ProgramError(f"allocation {name!r} is declared twice")
        eb = self.hw.elem_bytes(kind)
        align = max(DRAM_ALIGN, eb)
        offset = -(-self._next // align) * align
        a = Allocation(name, kind, elems, offset, eb)
        _check_addressable(a, self.hw)
        self._allocs.append(a)
        self._next = offset + a.nbytes
        if kind == "uop":
            self._uops[name] = []
        return a

    def add_uops(self, name: str, uops: Iterable[Uop]) -> int:
        """Append micro-ops to uop allocation ``name`` (growing it); returns the first index."""
        if name not in self._uops:
            raise KeyError(f"no uop allocation named {name!r}")
        lst = self._uops[name]
        first = len(lst)
        lst.extend(uops)
        idx = next(i for i, a in enumerate(self._allocs) if a.name == name)
        a = self._allocs[idx]
        if len(lst) > a.elems:
            if idx != len(self._allocs) - 1:
                raise ProgramError(f"uop allocation {name!r} declared for {a.elems} uops, "
                                   f"got {len(lst)}")
            self._allocs[idx] = Allocation(a.name, a.kind, len(lst), a.offset, a.elem_bytes)
            _check_addressable(self._allocs[idx], self.hw)
            self._next = a.offset + len(lst) * a.elem_bytes
        return first

    def emit(self, insn: Instruction) -> None:
        self._insns.append(insn)

    def extend(self, insns: Iterable[Instruction]) -> None:
        self._insns.extend(insns)

    def build(self) -> Program:
        return Program(tuple(self._insns), tuple(self._allocs),
                       {k: tuple(v) for k, v in self._uops.items()})


def _check_addressable(a: Allocation, hw: HwConfig) -> None:
    """Every element of ``a`` has a DRAM address the instructions' address field can hold."""
    bits = hw.isa.dram_addr
    if a.base + a.elems > 1 << bits:
        raise ProgramError(f"allocation {a.name!r}: {a.elems} {a.kind} elements do not fit the "
                           f"DRAM address space ({bits}-bit element addresses reach "
                           f"{1 << bits} {a.kind} elements of {a.elem_bytes} B; this one would "
                           f"end at element {a.base + a.elems})")


