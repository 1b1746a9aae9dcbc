"""Linking: each kernel's program relocated to the network's DRAM map.

A compiled kernel addresses its own allocations (``data``, ``kernel``, ``bias``, ``res``,
``opnd0``, ``eye``, ``uops``), placed from address 0. ``link_program`` moves every allocation
to its place in the network's memory plan (an activation at its arena offset, named after the
graph value, so the tensor a kernel writes is the one the next kernel reads; a constant in the
constant region) and rewrites the DRAM address of every LOAD and STORE accordingly (addresses
count elements of the buffer moved, as the ISA does). The instructions are otherwise
unchanged, so the program's cycles are the kernel's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vta.compiler.ir.visitor import evolve
from vta.errors import ProgramError
from vta.graph.passes.memory import MemoryPlan
from vta.graph.passes.plan_layouts import DramTensor
from vta.isa import Allocation, Load, MemType, Program, Store
from vta.isa.encoding import EncodedUops

__all__ = ["link_program", "const_name", "CONST_SEP"]

#: a constant's allocation is named ``s<step>#<name>`` (``#const#eye`` when shared): no graph
#: value can take the name (graph value names may hold dots and slashes, as ONNX's do)
CONST_SEP = "#"
CONST_PREFIX = f"{CONST_SEP}const{CONST_SEP}"


def const_name(allocation: str) -> str | None:
    """The kernel-local name of a linked constant allocation (None for a graph tensor)."""
    return allocation.rsplit(CONST_SEP, 1)[-1] if CONST_SEP in allocation else None


def link_program(program: Program, step: int, bind: dict[str, DramTensor],
                 memory: MemoryPlan) -> Program:
    """``program`` (step ``step``'s kernel) with its allocations at the plan's offsets: each
    allocation named in ``bind`` becomes that DRAM tensor (renamed after it), the others are
    the step's constants."""
    new: dict[str, Allocation] = {}
    for a in program.allocations:
        if a.name in bind:
            t = bind[a.name]
            off, name = memory.offset(t), t.name
        elif a.name in memory.shared_consts:
            off = memory.const_base + memory.shared_consts[a.name]
            name = f"{CONST_PREFIX}{a.name}"
        else:
            off = memory.const_base + memory.const_offsets[(step, a.name)]
            name = f"s{step}{CONST_SEP}{a.name}"
        if off % a.elem_bytes:
            raise ProgramError(f"linking step {step}: {a.name} at byte {off} is not aligned to "
                               f"its {a.elem_bytes}-byte elements")
        new[a.name] = Allocation(name, a.kind, a.elems, off, a.elem_bytes)
    # a tiled program repeats most of its DMAs: each distinct one is relocated once (its
    # relocation depends on the instruction alone) and the result shared, as the decoded
    # program shares equal instructions (``vta.run.codec.decode_distinct``: repeats are the
    # same object, so the memo keys on identity, without hashing every field of a DMA)
    spans = _spans(program, new)
    moved: dict[int, Any] = {}
    insns: list[Any] = []
    for insn in program.instructions:
        if isinstance(insn, (Load, Store)):
            got = moved.get(id(insn))
            if got is None:
                got = moved[id(insn)] = _relocated(insn, spans, step)
            insn = got
        insns.append(insn)
    uops = _renamed(program.uops, {k: new[k].name for k in program.uops})
    allocs = tuple(sorted(new.values(), key=lambda a: a.offset))
    return Program(tuple(insns), allocs, uops)


def _renamed(uops: Mapping[str, Any], names: dict[str, str]) -> Mapping[str, Any]:
    """``uops`` (a program's micro-op buffers) under the new names (``names``: old -> new);
    buffers still encoded (``isa.encoding.EncodedUops``) are not decoded to be renamed."""
    if isinstance(uops, EncodedUops):
        return uops.renamed(names)
    return {names[k]: v for k, v in uops.items()}


#: a kernel's allocations of one buffer kind, in the program's order: each one's first and
#: past-the-end element address and how far linking moves it (elements)
Spans = dict[str, list[tuple[int, int, int]]]


def _spans(program: Program, new: dict[str, Allocation]) -> Spans:
    """``program``'s allocations by kind as ``Spans``, moved to their linked places (``new``,
    by kernel-local name): what ``_relocated`` reads per DMA instead of ``Program.find``'s
    scan of every allocation."""
    spans: Spans = {}
    for a in program.allocations:
        spans.setdefault(a.kind, []).append((a.base, a.base + a.elems, new[a.name].base - a.base))
    return spans


def _relocated(insn: Load | Store, spans: Spans, step: int) -> Load | Store:
    """``insn`` (a DMA of step ``step``'s kernel) with its DRAM address moved from the
    allocation it falls in (the first of its kind holding it, as ``Program.find`` picks) to
    that allocation's linked place (``spans``, ``_spans``); unchanged when it moves nothing
    (an empty DMA carrying tokens)."""
    kind = MemType(insn.mem).kind
    addr = insn.dram_base
    for lo, hi, delta in spans.get(kind, ()):
        if lo <= addr < hi:
            # ``evolve``: ``dataclasses.replace``'s copy without its keyword handling (a few
            # thousand DMAs a network)
            out: Load | Store = evolve(insn, dram_base=addr + delta)
            return out
    if insn.y_size * insn.x_size == 0:  # an empty DMA carrying tokens
        return insn
    raise ProgramError(f"linking step {step}: {type(insn).__name__} at element "
                       f"{addr} of {kind} is in no allocation")
