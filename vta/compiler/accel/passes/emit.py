"""Emit: the token-synchronised instruction stream becomes an ``isa.Program``.

Pre:  ``insert_tokens`` has run (flat ``Insn`` stream with dependency flags).
Post: (returns a ``Program``, the end of the pipeline) DRAM allocations, in parameter order,
      one per global buffer (kind from how it is moved: loaded into inp/wgt/acc, or stored
      from out), then ``uops``; micro-op blocks deduplicated and placed in the uop buffer: all
      loaded by one LOAD UOP at the start when they fit, else loaded on demand into a ring
      (the compute module runs in order, so a block is never overwritten while in use); DRAM
      offsets made absolute; a FINISH at the end. Every immediate lies where its
      instruction computes its pattern (``InstructionDef.imm_range``: an SHR amount within
      ``alu.shift_bits``, which instruction selection keeps to): checked here, a
      ``CompileError`` naming the instruction otherwise (``check_immediates``).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress
from operator import attrgetter
from typing import Any

from vta.compiler.accel.passes._common import entries_of, flat_stream
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import evolve
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import (
    Finish,
    Instruction,
    InstructionDef,
    Load,
    MemType,
    Program,
    ProgramBuilder,
    Unit,
    Uop,
    definition_of,
    module_of,
)
from vta.isa.asm import where
from vta.isa.defs import layout_of

__all__ = ["emit_program", "check_immediates"]


def _insns(func: S.PrimFunc) -> list[Insn]:
    stream = flat_stream(func)
    if stream is None:
        raise CompileError(f"{func.name}: emit needs the flattened instruction stream")
    return stream[0]


#: an ``Insn``'s instruction, and its micro-op block (empty: none), read in C
_INSN, _UOPS = attrgetter("insn"), attrgetter("uops")


def _definitions(insns: list[Insn]) -> tuple[list[InstructionDef], list[str]]:
    """Each instruction's definition (looked up once, here) and role: the loops in C, a
    distinct definition's role (a property) read once. Definitions are told apart by
    themselves (an ``InstructionDef`` hashes and compares by identity, in C), not by their
    ``id``s: ``id`` makes an int object per instruction."""
    defs = list(map(definition_of, map(_INSN, insns)))
    role_of = {d: d.role for d in dict.fromkeys(defs)}
    return defs, list(map(role_of.__getitem__, defs))


def emit_program(func: S.PrimFunc, hw: HwConfig) -> Program:
    insns = _insns(func)
    defs, roles = _definitions(insns)
    kinds: dict[S.Buffer, str] = {}
    for ins, role in zip(insns, roles, strict=True):
        if ins.dram is not None:
            i: Any = ins.insn
            k = "out" if role == "store" else i.mem.kind
            if kinds.setdefault(ins.dram, k) != k:
                raise CompileError(f"{func.name}: global buffer {ins.dram.name} is moved as both "
                                   f"{kinds[ins.dram]} and {k}")
    pb = ProgramBuilder(hw)
    #: each global buffer's DRAM base, in elements (a DMA's offset is relative to it)
    bases: dict[S.Buffer, int] = {}
    for p in func.params:
        if p in kinds:
            bases[p] = pb.alloc(p.name, kinds[p], entries_of(p)).base
    view = _views()
    canon = _blocks(insns, hw, view)
    shifted = _shared_by_base(insns, canon, hw, view) if hw.gemm.uop_base else {}
    for ins in insns if shifted else ():
        if id(ins) in shifted:
            canon[id(ins.uops)] = shifted[id(ins)][0]
    blocks = _unique(canon.values(), view)
    total = sum(len(b) for b in blocks)
    depth = hw.uop_depth
    if any(len(b) > depth for b in blocks):
        raise CompileError(f"{func.name}: an instruction needs more micro-ops than the uop "
                           f"buffer holds ({depth})")
    uop_alloc = pb.alloc("uops", "uop", 0)
    dram_pos: dict[int, int] = {}
    for b in blocks:
        dram_pos[id(b)] = pb.add_uops("uops", b)
    resident: dict[int, tuple[int, int]] = {}  # block id -> (position, length)
    out: list[Instruction] = []
    #: the definition of each of ``out`` (an instruction placed keeps its input's)
    out_defs: list[InstructionDef] = []
    load_uop = definition_of(Load(MemType.UOP, 0, 0, 1, 1, 1))
    if total <= depth:
        pos = 0
        for b in blocks:
            resident[id(b)] = (pos, len(b))
            pos += len(b)
        if total:
            out.append(Load(MemType.UOP, 0, uop_alloc.base, 1, total, total))
            out_defs.append(load_uop)
    cursor = 0
    #: (instruction, block position) -> the instruction placed there: flatten and token
    #: insertion share an instruction object among the tiles that evaluate and wait alike
    placed: dict[tuple[int, int], Any] = {}
    #: every block resident: each micro-op tuple's block position, read once per tuple (by
    #: id) instead of through its block for every instruction that runs it; dropped should
    #: a block ever need loading (the ring's path below may move the others)
    at: dict[int, int] | None = {
        u: resident[id(b)][0] for u, b in canon.items() if id(b) in resident} \
        if total <= depth else None
    for ins, d, role in zip(insns, defs, roles, strict=True):
        i = ins.insn
        if role == "compute" and not ins.uops:  # a token relay: no micro-op to place
            out.append(i)
        elif role == "compute":
            start = at.get(id(ins.uops)) if at is not None else None
            if start is None:
                at = None
                b = canon[id(ins.uops)]
                if id(b) not in resident:
                    if cursor + len(b) > depth:
                        cursor = 0
                    lo, hi = cursor, cursor + len(b)
                    for ob, (op, ol) in list(resident.items()):
                        if op < hi and lo < op + ol:
                            del resident[ob]
                    out.append(Load(MemType.UOP, lo, uop_alloc.base + dram_pos[id(b)], 1,
                                    len(b), len(b)))
                    out_defs.append(load_uop)
                    resident[id(b)] = (lo, len(b))
                    cursor = hi
                start = resident[id(b)][0]
            x: Any = placed.get((id(i), start))  # ``insns`` keeps ``i`` alive
            if x is None:
                x = i  # its range counts within the block (the whole block, or a part of it)
                x = placed[(id(i), start)] = evolve(x, uop_bgn=start + x.uop_bgn,
                                                    uop_end=start + x.uop_end)
            if shifted and id(ins) in shifted:
                x = evolve(x, uop_base=1, **shifted[id(ins)][1])
            out.append(x)
        elif role in ("load", "store"):
            assert ins.dram is not None
            base = bases[ins.dram]
            # at base 0 (the first buffer placed) the offset is already absolute: the
            # instruction itself, not an equal copy of it (half of a layer's DMAs)
            out.append(evolve(i, dram_base=i.dram_base + base) if base else i)
        else:
            out.append(i)
        out_defs.append(d)
    out.append(Finish())
    out_defs.append(definition_of(out[-1]))
    if hw.alu.separate_pipeline:
        out = _alu_waits_for_uops(func, hw, out, total <= depth)  # flags only: defs as they were
    pb.extend(out)
    program = pb.build()
    _check_immediates(program, out_defs, hw, func.name)
    return program


def check_immediates(program: Program, hw: HwConfig, name: str = "program") -> None:
    """A ``CompileError`` naming the first instruction of ``program`` whose immediate lies
    outside the values its definition computes its pattern for (``InstructionDef.imm_range``;
    stock VTA would compute something else: an SHR by 24 shifts left by 8)."""
    _check_immediates(program, [definition_of(i) for i in program.instructions], hw, name)


def _check_immediates(program: Program, defs: list[InstructionDef], hw: HwConfig,
                      name: str) -> None:
    """``check_immediates`` with each instruction's definition given (``defs``, in program
    order: the emitter has them), only the definitions with an ``imm_range`` asked: those
    instructions picked in C (``outside_range``'s answer for the others is None without the
    call, and most of a program's instructions are DMAs and GEMMs)."""
    insns = program.instructions
    if len(insns) != len(defs):
        raise ValueError(f"{name}: {len(defs)} definitions for {len(insns)} instructions")
    ranged = {d: d.imm_range is not None for d in dict.fromkeys(defs)}
    for k in compress(range(len(defs)), map(ranged.__getitem__, defs)):
        insn, d = insns[k], defs[k]
        bad = d.outside_range(insn, hw)
        if bad is not None:
            raise CompileError(f"{name}: {where(k, insn, program)}: {bad}")


def _used(ins: Insn, hw: HwConfig) -> tuple[str, ...]:
    """The micro-op fields whose values ``ins`` needs: its destination and the operands it
    reads, but for a reset its destination alone (what vta.cc's GEMM reset reads reaches only
    out entries computed again before any STORE: ``coproc_sync.accesses``)."""
    d = definition_of(ins.insn)
    if d.reset_mode(ins.insn, hw) is not None:
        return (d.dst.name,)
    return tuple(o.name for o in (d.dst, *d.reads(ins.insn, hw)))


def _in_range(ins: Insn, block: tuple[Uop, ...], hw: HwConfig) -> bool:
    """Whether every entry ``ins`` reads on ``hw`` with ``block``'s micro-ops lies inside its
    scratchpad (another block's fields it does not need may still be read: vta.cc's GEMM reset
    reads inp and wgt)."""
    d = definition_of(ins.insn)
    x: Any = ins.insn
    us = block[x.uop_bgn:x.uop_end]
    for op in d.reads(x, hw):
        fo, fi, base = op.placement(x)
        top = max(getattr(u, op.name) for u in us) + base
        top += max(0, x.iter_out - 1) * fo + max(0, x.iter_in - 1) * fi
        if top >= hw.depth(op.memory):
            return False
    return True


def _blocks(insns: list[Insn], hw: HwConfig, view: _Views) -> dict[int, tuple[Uop, ...]]:
    """The micro-op block each instruction's ``uops`` is placed as (by id of the tuple): equal
    blocks are one, and a block whose instruction needs only some fields (a reset only
    ``dst``, an ALU immediate ``dst`` alone too) is any earlier block that agrees on those
    fields and keeps its other reads in range (a tile's reset and its epilogue's immediate ALU
    instructions share one block). Blocks of instructions that need every field come first,
    in first-use order; blocks are told apart by their views' keys (``_Views.key``: ints,
    each view hashed once)."""
    first: dict[int, tuple[Uop, ...]] = {}
    canon: dict[int, tuple[Uop, ...]] = {}
    partial: list[tuple[Insn, tuple[str, ...]]] = []
    every = len(Uop.__dataclass_fields__)
    for ins in filter(_UOPS, insns):  # those with micro-ops
        if id(ins.uops) in canon:
            continue
        used = _used(ins, hw)
        if len(used) < every:
            canon[id(ins.uops)] = ins.uops  # placeholder until the second round
            partial.append((ins, used))
        else:
            canon[id(ins.uops)] = first.setdefault(view.key(ins.uops), ins.uops)
    placed = list(first.values())
    #: (fields, length) -> the first block placed of each view of those fields and that
    #: length: blocks of other lengths never agree, so their views are not made for it
    by_view: dict[tuple[tuple[str, ...], int], dict[int, tuple[Uop, ...]]] = {}
    for ins, used in partial:
        at = (used, len(ins.uops))
        if at not in by_view:
            by_view[at] = {}
            for b in placed:
                if len(b) == at[1]:
                    by_view[at].setdefault(view.key(b, used), b)
        hit = by_view[at].get(view.key(ins.uops, used))
        if hit is None or not _in_range(ins, hit, hw):
            hit = ins.uops
            placed.append(hit)
            for (u, n), index in by_view.items():
                if n == len(hit):
                    index.setdefault(view.key(hit, u), hit)
        canon[id(ins.uops)] = hit
    return canon


def _shared_by_base(insns: list[Insn], canon: dict[int, tuple[Uop, ...]], hw: HwConfig,
                    view: _Views) -> dict[int, tuple[tuple[Uop, ...], dict[str, int]]]:
    """Instructions (by id) that can run an earlier block with ``uop_base`` 1: their block is
    the earlier one plus a constant ``delta`` in every field (``_norm`` equal), each field they
    read has ``delta >= 0`` that fits its ``factor_out`` field, and either ``iter_out`` is 1
    (the factor is theirs to set) or the factor already equals ``delta``. Maps each to the
    earlier block and the ``factor_out`` fields to set. A block is shifted only when every
    instruction that runs it can be."""
    users: dict[int, list[Insn]] = {}
    for ins in insns:
        if ins.uops and definition_of(ins.insn).role == "compute":
            users.setdefault(id(canon[id(ins.uops)]), []).append(ins)
    kept: dict[tuple[tuple[int, int, int], ...], tuple[Uop, ...]] = {}
    out: dict[int, tuple[tuple[Uop, ...], dict[str, int]]] = {}
    for b in _unique(canon.values(), view):
        key = _norm(b)
        b0 = kept.get(key)
        plan = None if b0 is None else _shift_plan(users.get(id(b), []), b0, b, hw)
        if plan is None:
            kept.setdefault(key, b)
            continue
        for ins, fields in plan:
            out[id(ins)] = (b0, fields)  # type: ignore[assignment]
    return out


def _norm(block: tuple[Uop, ...]) -> tuple[tuple[int, int, int], ...]:
    """A block relative to its first micro-op: blocks one shift apart are equal."""
    d0, s0, w0 = block[0].dst, block[0].src, block[0].wgt
    return tuple((u.dst - d0, u.src - s0, u.wgt - w0) for u in block)


def _shift_plan(users: list[Insn], b0: tuple[Uop, ...], b: tuple[Uop, ...], hw: HwConfig
                ) -> list[tuple[Insn, dict[str, int]]] | None:
    """The ``factor_out`` fields each of ``users`` needs to run ``b0`` as ``b`` (None: one
    cannot)."""
    plan = []
    for ins in users:
        d = definition_of(ins.insn)
        x: Any = ins.insn
        if not any(o.base_steps for o in d.operands) or getattr(x, "uop_base", 0) != 0:
            return None
        widths = {f.name: f.width for half in layout_of(d, hw) for f in half}
        fields: dict[str, int] = {}
        for o in (d.dst, *d.reads(x, hw)):
            if not o.factors:
                return None
            delta = getattr(b[0], o.name) - getattr(b0[0], o.name)
            fo = o.factors[0]
            if delta < 0 or delta >= 1 << widths[fo]:
                return None
            if x.iter_out != 1 and getattr(x, fo) != delta:
                return None
            fields[fo] = delta
        plan.append((ins, fields))
    return plan


def _view(block: tuple[Uop, ...], used: tuple[str, ...]) -> tuple[Any, ...]:
    """The fields ``used`` of every micro-op of ``block`` (a field alone when one is used)."""
    return tuple(map(attrgetter(*used), block))


_FIELDS = attrgetter(*Uop.__dataclass_fields__)


def _content(block: tuple[Uop, ...]) -> tuple[tuple[int, int, int], ...]:
    """A block's micro-ops as plain tuples: equal exactly when the blocks are, and hashed in C
    (a micro-op's dataclass hash is Python, and blocks are hashed by the thousand)."""
    return tuple(map(_FIELDS, block))


class _Views:
    """``_content`` (``used`` None) and ``_view`` of blocks, each computed once (``_views``:
    one memo for the emits of a process, so for a block of micro-op objects met in another
    candidate too): by the identity of the tuple, and for a tuple of the same micro-op
    objects as one met before (flatten gives every instruction its own copy of a block it made
    before, holding the same ``Uop``s: ``flatten._block``) from that one. Equal tuples are
    found by comparing the candidates with the same first micro-op object and length (``==``
    on tuples compares identical elements by identity, a loop in C; other elements compare by
    their fields, so an equal tuple has the same view either way). The memo holds the tuples
    it answered for, so their ids and their first elements' stay theirs. Equal views are one
    object, so a view's id tells it apart (``key``): a view's tuple is hashed once, when it is
    made, not on every lookup of a block in ``_blocks``' and ``_unique``'s tables."""

    def __init__(self) -> None:
        self.by_id: dict[tuple[int, tuple[str, ...] | None],
                         tuple[tuple[Uop, ...], tuple[Any, ...]]] = {}
        self.by_head: dict[tuple[int, int, tuple[str, ...] | None],
                           list[tuple[tuple[Uop, ...], tuple[Any, ...]]]] = {}
        #: per ``used``: each view made, by itself (equal views are one object: ``key``)
        self.interned: dict[tuple[str, ...] | None, dict[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.held = 0  # micro-ops in the tuples ``by_id`` holds

    def __call__(self, block: tuple[Uop, ...], used: tuple[str, ...] | None = None
                 ) -> tuple[Any, ...]:
        hit = self.by_id.get((id(block), used))
        if hit is not None:
            return hit[1]
        same = self.by_head.setdefault((id(block[0]) if block else 0, len(block), used), [])
        made = next((v for other, v in same if other == block), None)
        if made is None:
            made = _content(block) if used is None else _view(block, used)
            made = self.interned.setdefault(used, {}).setdefault(made, made)
            same.append((block, made))
        self.by_id[(id(block), used)] = (block, made)
        self.held += len(block)
        return made

    def key(self, block: tuple[Uop, ...], used: tuple[str, ...] | None = None) -> int:
        """A key of ``block``'s view (``used`` as for a call): equal exactly when the views
        are, an int where the view is a tuple hashed item by item on every dict lookup (views
        are interned, and the memo keeps them alive, so their ids stay theirs)."""
        return id(self(block, used))


#: the ``_Views`` the emits of this process share (``_views``): flatten builds a layer's
#: candidates' blocks from the same micro-op objects where their values agree
#: (``flatten._block``: C1-C11's 33 candidates on pynq take the content of 291 blocks, 108
#: of them of micro-ops met in an earlier candidate), and a view depends on the block's
#: values alone. A fresh one replaces it once it holds more than ``_VIEWS_UOPS`` micro-ops.
_SHARED: list[_Views] = []
_VIEWS_UOPS = 400_000


def _views() -> _Views:
    """The shared ``_Views`` (a fresh one where it holds too much)."""
    if not _SHARED or _SHARED[0].held > _VIEWS_UOPS:
        _SHARED[:] = [_Views()]
    return _SHARED[0]


def _unique(blocks: Iterable[tuple[Uop, ...]], view: _Views) -> list[tuple[Uop, ...]]:
    """The first block of each content, in order (``dict.fromkeys`` by content), each block
    object's content taken once (``view``)."""
    seen: dict[int, None] = {}
    first: dict[int, tuple[Uop, ...]] = {}
    for b in blocks:
        if id(b) not in seen:
            seen[id(b)] = None
            first.setdefault(view.key(b), b)
    return list(first.values())


def _alu_waits_for_uops(func: S.PrimFunc, hw: HwConfig, out: list[Instruction],
                        resident: bool) -> list[Instruction]:
    """On hardware whose ALU is a separate module, the micro-ops the compute module loads first
    must be there before the ALU reads them: the first ALU instruction waits for the LOAD.UOP
    (a compute -> alu token) unless it already waits, through its tokens, for a later compute
    instruction. Reloading micro-ops mid-program would race the ALU: refused."""
    if not resident:
        raise CompileError(f"{func.name}: the program's micro-ops exceed the uop buffer "
                           f"({hw.uop_depth}); with a separate ALU pipeline they must all be "
                           f"resident (reloading them would race the ALU)")
    first_alu = next((k for k, x in enumerate(out) if module_of(x, hw) is Unit.ALU), None)
    if first_alu is None or not (isinstance(out[0], Load) and out[0].mem is MemType.UOP):
        return out
    x: Any = out[first_alu]
    if x.deps.pop_prev:  # pops compute -> alu: waits for a compute instruction after the load
        return out
    load: Any = out[0]
    out[0] = evolve(load, deps=evolve(load.deps, push_next=True))
    out[first_alu] = evolve(x, deps=evolve(x.deps, pop_prev=True))
    return out
