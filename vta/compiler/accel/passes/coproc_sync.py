"""Dependency tokens: push/pop pairs between the load, compute (alu) and store modules
(VTA's CoProcSync, computed on the flattened instruction stream).

Pre:  a flat ``SeqStmt`` of ``Insn``s (flatten) in program order, without dependency flags.
Post: the same instructions with ``Deps`` set so that running the modules concurrently, each in
      its own program order, gives the sequential result. For every instruction and every
      other module, the latest earlier instruction of that module it conflicts with is found
      from the SRAM ranges both touch (inp, wgt, acc = out, and uop: the micro-ops an ALU
      module reads):

      * RAW load -> compute: a GEMM reads inp/wgt a LOAD wrote;
      * WAR compute -> load: a LOAD overwrites inp/wgt a GEMM still reads (the other thread's
        buffer is free, so only a thread's own previous use waits);
      * RAW compute -> store: a STORE reads out entries GEMM/ALU wrote;
      * WAR store -> compute: a GEMM reset/ALU/LOAD ACC overwrites entries a STORE still reads.

      Where the two modules share a token queue (``vta.isa.token_queues`` of the hardware),
      the producer gets the push flag and the consumer the pop flag. Needs are strictly
      increasing per queue, so the k-th pop of a queue waits for exactly the k-th push (queues
      are FIFO counters): tokens balance by construction (every push is popped once) and every
      edge points backwards in program order.

      Token queues hold ``queues.token_depth`` tokens and fetch is in order, so a push also
      waits for room: the pop that makes room for a queue's k-th push (its (k - depth)-th)
      must come before the push in program order, or the pushing module can stall while that
      pop sits unfetched behind it (the pusher's command queue full). Where a new token would
      break this, the queue's latest pop waits for the new producer instead (its push moves
      later; it came after the producer in program order) and no token is added. With every
      wait - for a token, for room - pointing backwards in program order, the earliest
      unfinished instruction can always run: no deadlock at any queue depth.

      Hardware whose ALU is a separate pipeline chains its modules load <-> compute <-> alu <->
      store: compute and store share no queue. A conflict between them is already ordered
      when the instruction waits, through the tokens it pops, for one that waited for the
      conflicting one (each instruction's vector clock: the latest instruction of every module
      known complete before it starts); otherwise an ALU instruction with no micro-ops is
      inserted just before it as a relay (it pops from the producer and pushes to the
      consumer), as VTA's runtime emits empty LOADs and STOREs to carry tokens. On VTA's own
      chain (load <-> compute <-> store) load and store never share a memory: nothing changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import fields
from itertools import chain, compress, count
from operator import attrgetter
from typing import Any

import numpy as np

from vta.compiler.accel.passes._common import distinct, flat_stream, with_stream
from vta.compiler.accel.vta_ir import Insn, maker
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import evolve
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import (
    Alu,
    AluOp,
    Deps,
    InstructionDef,
    MemType,
    Unit,
    definition_of,
    flag_for,
    module_of,
)
from vta.isa import token_queues as _token_queues
from vta.isa.insn import DEP_FLAGS

__all__ = ["insert_tokens", "accesses", "conflicts", "relay"]

Queue = tuple[Unit, Unit]
#: ``Insn`` taking every field in order (``maker``): one per instruction given tokens
_INSN = maker(Insn)


def _flags(separate: bool) -> dict[Queue, tuple[str, str]]:
    """(producer, consumer) -> (producer's push flag, consumer's pop flag), from the ISA's one
    table for this chain of modules."""
    return {q: (flag_for(q, q[0], True, separate), flag_for(q, q[1], False, separate))
            for q in _token_queues(separate)}


#: the routing of VTA's modules (tests read it)
FLAGS = _flags(False)


def relay() -> Insn:
    """A token carrier on the ALU module: an ALU instruction that executes no micro-op."""
    return Insn(Alu(AluOp.ADD, False, 0, 0, 1, 1, 0, 0, 0, 0, True, 0), note="token relay")


#: each dependency flag's bit in an instruction's flag set (``_Tokens.pending``)
_BIT = {name: 1 << k for k, name in enumerate(DEP_FLAGS)}


def _deps(flags: int) -> Deps:
    """The ``Deps`` of a flag set (``_BIT``)."""
    return Deps(**{name: True for name, bit in _BIT.items() if flags & bit})


#: every flag set's ``Deps``, made once (``_Tokens._given``)
_DEPS = tuple(_deps(f) for f in range(1 << len(_BIT)))


_EXTREMES: dict[tuple[int, int, str], tuple[tuple[Any, ...], int, int]] = {}


def _extremes(uops: tuple[Any, ...], f: str) -> tuple[int, int]:
    """The smallest and largest ``f`` field of a micro-op list, once per content: flatten
    gives every instruction its own tuple of a block, most of them copies holding the same
    ``Uop`` objects (``flatten._block``), so the memo is keyed by the first micro-op's
    identity and the length, and a hit is checked by comparing the tuples, which compares
    identical elements by identity (a loop in C; distinct elements compare by their fields, so
    an equal list has the same extremes either way). The memo holds the list it answered, so
    its first element's id stays its own."""
    key = (id(uops[0]), len(uops), f)
    hit = _EXTREMES.get(key)
    if hit is None or (hit[0] is not uops and hit[0] != uops):
        vals = list(map(attrgetter(f), uops))  # C-level reads: blocks hold hundreds
        hit = _EXTREMES[key] = (uops, min(vals), max(vals))
        if len(_EXTREMES) > 4096:
            _EXTREMES.clear()
            _EXTREMES[key] = hit
    return hit[1], hit[2]


def _span(uops, f: str, fo: int, fi: int, io: int, ii: int, base: int = 0) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    lo, top = _extremes(uops, f)
    hi = top + (io - 1) * fo + (ii - 1) * fi
    return base + lo, base + hi + 1


#: a range an instruction touches: (memory, first entry, end entry, whether it writes)
Access = tuple[str, int, int, bool]


def accesses(ins: Insn, hw: HwConfig, d: InstructionDef | None = None) -> list[Access]:
    """(memory, lo, hi, is_write) ranges an instruction touches on ``hw`` (acc stands for acc
    and out; ``uop`` for the micro-ops a LOAD.UOP writes and a micro-op instruction reads), from
    its definition: a DMA its SRAM range (``Load.sram_elems``: what its memory type writes), a
    micro-op instruction each operand it reads (``InstructionDef.reads``). A reset counts as
    writing its destination only: what vta.cc's GEMM reset reads (inp, wgt: it writes the low
    bits of acc + inp . wgt to out) reaches nothing but those out entries, and the compiler
    follows every reset with the instructions that compute the entries before a STORE reads
    them, so no token needs to order those reads (ordering them would hold each tile's reset
    back until its input had loaded: C2 on pynq 572,574 -> 597,756 cycles). ``d``: the
    instruction's definition where the caller has it."""
    i = ins.insn
    if d is None:
        d = definition_of(i)
    x: Any = i
    if d.role == "load":
        if x.mem is MemType.UOP:
            return [("uop", x.sram_base, x.sram_base + x.sram_elems, True)]
        return [(x.mem.kind, x.sram_base, x.sram_base + x.sram_elems, True)]
    if d.role == "store":
        return [("acc", x.sram_base, x.sram_base + x.sram_elems, False)]
    if d.role != "compute" or not ins.uops:
        return []
    out = []
    uops = ins.executed
    reads = d.reads(i, hw) if d.reset_mode(i, hw) is None else ()
    for op in (d.dst, *reads):
        fo, fi, base = op.placement(x)
        lo, hi = _span(uops, op.name, fo, fi, x.iter_out, x.iter_in, base)
        out.append((op.memory, lo, hi, op.writes))
    # the micro-ops it reads: uop-buffer positions once emitted; before that the range counts
    # within the instruction's own block, and no LOAD UOP exists yet to conflict with it
    if x.uop_end > x.uop_bgn:
        out.append(("uop", x.uop_bgn, x.uop_end, False))
    return out


def conflicts(stream: list[tuple[int, list[Access]]], depth: dict[str, int],
              rows: int) -> np.ndarray:
    """For every instruction of ``stream`` (each its module's row and its ``accesses``), the
    latest earlier instruction of each module row that it conflicts with, -1 for none: an
    ``(instructions, rows)`` table of stream positions. Two accesses conflict where their
    ranges of one memory overlap and at least one of them writes (ranges are cut to the
    memory's ``depth`` entries). ``_conflict_table`` on the stream's accesses in a row."""
    code = {m: k for k, m in enumerate(depth)}
    flat = [(t, code[mem], lo, hi, int(wr), row)
            for t, (row, acc) in enumerate(stream) for mem, lo, hi, wr in acc]
    t, mem, lo, hi, wr, row = np.array(flat, np.int64).reshape(-1, 6).T
    return _conflict_table(t, mem, lo, hi, wr, row, list(depth.values()), len(stream), rows)


def _conflict_table(t: np.ndarray, mem: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    wr: np.ndarray, row: np.ndarray, depths: list[int], n: int,
                    rows: int) -> np.ndarray:
    """``conflicts`` of ``n`` instructions from their accesses, one array element each: the
    instruction's position ``t`` (ascending), the memory's index in ``depths``, the range
    ``[lo, hi)``, whether it writes (0/1) and the instruction's module row.

    Computed for every memory at once, without a loop over instructions: the ranges are cut to
    their memory's depth and laid end to end (memory k's entries after those of the memories
    before it, so ranges of two memories never meet); a memory nothing writes is left out (no
    access of it conflicts). The ranges' boundaries cut the address space into segments, and
    every access becomes its incidences, one per segment it covers. Sorted by (segment,
    position), the latest earlier incidence of each kind of access (module row, writes) in an
    incidence's own segment is a running maximum, read just before the first incidence of the
    incidence's own instruction in that segment (strictly earlier instructions only). An
    access waits for the kinds that write, and a write also for those that read; an
    instruction's answer per row is the largest over its incidences. The same answers as a
    per-entry table of the latest writer and reader updated instruction by instruction, with
    about forty numpy calls per stream."""
    latest = np.full((n, rows), -1, np.int64)
    base = np.cumsum([0, *depths[:-1]])
    hi = np.minimum(hi, np.asarray(depths, np.int64)[mem])
    written = np.zeros(len(depths), bool)
    written[mem[wr.astype(bool)]] = True
    keep = (hi > lo) & written[mem]
    if not keep.any():
        return latest
    off = base[mem[keep]]
    t, lo, hi, wr, row = t[keep], lo[keep] + off, hi[keep] + off, wr[keep], row[keep]
    bounds = distinct(np.concatenate((lo, hi)))
    first_seg = np.searchsorted(bounds, lo)
    count = np.searchsorted(bounds, hi) - first_seg  # segments per access, at least one
    starts = np.cumsum(count) - count
    a = np.repeat(np.arange(len(t)), count)  # each incidence's access, in stream order
    e = len(a)
    pos = t[a]
    span = n + 1
    seg = first_seg[a] + np.arange(e) - starts[a]
    key = seg * span + pos  # segment, then position
    # incidences come in position order: a stable sort by segment alone orders them by key
    # (a radix sort on small integers)
    order = np.argsort(seg.astype(np.uint16 if len(bounds) <= 1 << 16 else np.int64),
                       kind="stable")
    ks = key[order]
    floor = ks - ks % span  # the segment's first key
    # each incidence's predecessor outside its (segment, position) run: strictly earlier
    run_start = np.empty(e, bool)
    run_start[0] = True
    np.not_equal(ks[1:], ks[:-1], out=run_start[1:])
    # (its index + 1 in ``last`` below, whose element 0 stands for none: -1)
    prev = np.maximum.accumulate(np.where(run_start, np.arange(e), 0))
    kind = (row * 2 + wr)[a][order]
    writes = wr[a][order].astype(bool)
    found = np.full((rows, e), -1, np.int64)
    last = np.empty(e + 1, np.int64)
    last[0] = -1
    for g in distinct(kind).tolist():
        np.maximum.accumulate(np.where(kind == g, ks, -1), out=last[1:])
        # the position of the latest earlier incidence of kind g in the incidence's own
        # segment, or below 0 for none (found is never below -1, so a maximum with found
        # needs no clamp to -1)
        hit = last[prev] - floor
        r, w = divmod(g, 2)
        # a read waits for earlier writes; a write for earlier writes and reads
        found[r] = np.maximum(found[r], hit if w else np.where(writes, hit, -1))
    by_incidence = np.empty_like(found)
    by_incidence[:, order] = found
    first = np.flatnonzero(np.concatenate(([True], pos[1:] != pos[:-1])))
    latest[pos[first]] = np.maximum.reduceat(by_incidence, first, axis=1).T
    return latest


#: fields of a DMA instruction that do not change which module runs it or how many entries
#: it touches from its ``sram_base`` (``_Tokens._kinds``)
_ADDRESSES = frozenset({"sram_base", "dram_base", "deps"})


def _dma_key(cls: type) -> Callable[[Any], Any] | None:
    """A getter of the class and the fields of an instruction of class ``cls`` but its
    addresses and flags (``_ADDRESSES``): equal for two instructions whose SRAM ranges differ
    only by where they start. None for a class without a ``sram_base``."""
    names = [f.name for f in fields(cls)]
    if "sram_base" not in names:
        return None
    return attrgetter("__class__", *(n for n in names if n not in _ADDRESSES))


#: the modules by row (``_Tokens.row``: a module's row is its value)
_UNIT_OF = {int(m): m for m in Unit}


def _gather(table: np.ndarray, start: np.ndarray, kind: np.ndarray, count: np.ndarray
            ) -> np.ndarray:
    """The rows of ``table`` of every element of ``kind`` in order: ``count`` of them (the
    element's kind's row count) from ``start[kind]`` (the kind's first row) each, a ragged
    gather in a few numpy calls."""
    first = np.cumsum(count) - count  # each element's first output row
    return table[np.repeat(start[kind] - first, count) + np.arange(int(count.sum()))]


def insert_tokens(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    stream = flat_stream(func)
    if stream is None:
        raise CompileError(f"{func.name}: token insertion needs the flattened instruction stream")
    insns, wrap = stream
    return with_stream(func, _Tokens(hw).run(insns), wrap)


#: ``_routing``'s answer: what the pass reads of a configuration, the same for every stream
Routing = tuple[bool, dict[Queue, tuple[str, str]], list[Unit], dict[str, int], dict[Unit, int],
                dict[Unit, list[tuple[Unit, int]]], dict[Unit, list[tuple[int, Queue, int, int]]],
                dict[Unit, list[int]], dict[str, int]]


@functools.lru_cache(maxsize=16)
def _routing(hw: HwConfig) -> Routing:
    """The parts of ``_Tokens``' state that depend on the configuration alone, worked out once
    per configuration instead of once per stream (read only; a serial ResNet-18 run gives
    the pass 59 streams): whether the ALU is a separate pipeline; each queue's flags
    (``_flags``); the modules; the entries of each on-chip memory (the ranges ``conflicts``
    reads are cut to them); each module's row in ``conflicts``' table; per module the other
    modules whose conflicts become waits, with their rows; per module those of them it
    shares a queue with, each as (its row, the queue, the producer's push flag, this module's
    pop flag: their ``_BIT``s), and the rows of the rest (a conflict with one of those may
    need a relay: ``_add``); each memory's index in ``_conflict_table``'s arrays."""
    separate = hw.alu.separate_pipeline
    flags = _flags(separate)
    modules = [m for m in Unit if m is not Unit.ALU or separate]
    depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc", "uop")}
    row = {m: int(m) for m in Unit}  # 0 .. len(Unit) - 1: clocks index by it too
    others = {m: [(p, row[p]) for p in modules if p is not m] for m in Unit}
    queued = {m: [(r, (p, m), _BIT[flags[(p, m)][0]], _BIT[flags[(p, m)][1]])
                  for p, r in others[m] if (p, m) in flags] for m in Unit}
    unqueued = {m: [r for p, r in others[m] if (p, m) not in flags] for m in Unit}
    code = {m: k for k, m in enumerate(depth)}
    return separate, flags, modules, depth, row, others, queued, unqueued, code


class _Tokens:
    """The pass's state over the instruction stream (indices are output positions: relays are
    inserted as the stream is built)."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        (self.separate, self.flags, self.modules, self.depth, self.row, self.others,
         self.queued, self.unqueued, self.code) = _routing(hw)
        self.satisfied = {q: -1 for q in self.flags}
        self.out: list[Insn] = []
        #: per instruction, its dependency flags so far (a set of ``_BIT``s: a push is added
        #: when a later instruction waits for it, and may move, ``_retarget``)
        self.pending: list[int] = []
        #: per instruction: the latest index of each module known complete once it completes
        #: (indexed by the module's ``Unit`` value, -1: none); ``_start`` before it starts.
        #: Only relays read them, so they are worked out when one may be due (``_known``), from
        #: what each instruction's clock is made of (``made_of``)
        self.done: list[list[int]] = []
        #: per instruction: (its module's previous instruction or -1, the instructions it
        #: pops tokens from, its module)
        self.made_of: list[tuple[int, tuple[int, ...], Unit]] = []
        self.last_of: dict[Unit, int] = {}
        #: per queue, where its pushes and pops are (the k-th pop pairs with the k-th push)
        self.push_at: dict[Queue, list[int]] = {q: [] for q in self.flags}
        self.pop_at: dict[Queue, list[int]] = {q: [] for q in self.flags}
        self.token_depth = hw.queues.token_depth
        #: ``_kinds``'s kinds: (module row, ``_flat`` accesses: relative to ``sram_base`` for
        #: a kind of DMAs alike)
        self.kinds: list[tuple[int, tuple[int, ...]]] = []
        #: ``_kinds``'s memo of DMAs: (class, fields but the addresses and flags) -> their
        #: kind; each class's key getter (``_dma_key``)
        self.dma_seen: dict[tuple[Any, ...], int] = {}
        self.dma_key: dict[type, Callable[[Any], Any] | None] = {}
        #: ``_kinds``'s memo: (id of the instruction, id of its micro-ops) -> (instruction,
        #: micro-ops, kind); the objects are kept so that their ids stay theirs
        self.seen: dict[tuple[int, int], tuple[Any, tuple[Any, ...], int]] = {}

    def _flat(self, acc: list[Access]) -> tuple[int, ...]:
        """``accesses`` as ``_conflict_table`` reads them: (memory index, lo, hi, writes) of
        every range, one after the other."""
        code = self.code
        return tuple(v for mem, lo, hi, wr in acc for v in (code[mem], lo, hi, int(wr)))

    def _describe(self, ins: Insn) -> tuple[Unit, tuple[int, ...]]:
        """The module of ``ins`` and its ``accesses`` (``_flat``): its kind's (``_kinds``),
        moved to it."""
        (k,), (b,) = self._kinds([ins])
        m, flat = self.kinds[k]
        return _UNIT_OF[m], tuple(v + b if j % 4 in (1, 2) else v for j, v in enumerate(flat))

    def _kinds(self, insns: list[Insn]) -> tuple[list[int], list[int]]:
        """The kind of every instruction of ``insns`` (its index in ``kinds``: a module row
        and the ``_flat`` accesses of every instruction of the kind) and the entry by which
        its kind's ranges are moved for it, memoised: a micro-op instruction by the identity
        of its instruction and micro-op list (flatten builds the same GEMM or ALU instruction
        once and reuses the object in every tile that evaluates alike; not moved), a DMA by
        its class and its fields but the addresses and flags (``_dma_key``): what a DMA
        touches is one range that starts at its ``sram_base``, its module and extent set by
        the other fields, so DMAs alike but for where they go are one kind, moved by their
        ``sram_base`` (twenty thousand DMAs in a serial ResNet-18 run, a few hundred kinds).
        One loop over the stream answering the memo's hits in place (forty thousand
        instructions in a serial run, nearly all hits: a call per instruction was a third of
        the pass); a miss adds the kind (``_kind_uops``, ``_kind_dma``)."""
        kinds: list[int] = []
        bases: list[int] = []
        kind_of, base_of = kinds.append, bases.append
        seen, dma_seen, dma_key = self.seen, self.dma_seen, self.dma_key
        for ins in insns:
            x: Any = ins.insn
            u = ins.uops
            if u:
                hit = seen.get((id(x), id(u)))
                if hit is None or hit[0] is not x or hit[1] is not u:
                    hit = self._kind_uops(ins)
                kind_of(hit[2])
                base_of(0)
                continue
            get = dma_key.get(type(x), _dma_key)
            if get is _dma_key:  # a class not seen yet
                get = dma_key[type(x)] = _dma_key(type(x))
            k = None if get is None else dma_seen.get(get(x))
            if k is None:
                k, b = self._kind_dma(ins, get)
                kind_of(k)
                base_of(b)
            else:
                kind_of(k)
                base_of(x.sram_base)
        return kinds, bases

    def _kind_uops(self, ins: Insn) -> tuple[Any, tuple[Any, ...], int]:
        """``_kinds``' memo entry of a micro-op instruction not in the memo, added to it: its
        instruction, its micro-ops and a new kind."""
        x: Any = ins.insn
        u = ins.uops
        made = self._new(module_of(x, self.hw), self._flat(accesses(ins, self.hw)))
        hit = self.seen[(id(x), id(u))] = (x, u, made)
        return hit

    def _kind_dma(self, ins: Insn, get: Callable[[Any], Any] | None) -> tuple[int, int]:
        """``_kinds`` of an instruction without micro-ops not in the memo (``get``: its
        class's ``_dma_key``): a kind for those alike, added to the memo, where it has a
        ``sram_base`` and touches one range; else a kind of its own."""
        x: Any = ins.insn
        d = definition_of(x)  # looked up once for both
        m, flat = d.unit_of(x, self.hw), self._flat(accesses(ins, self.hw, d))
        if get is None or len(flat) != 4:
            return self._new(m, flat), 0
        b = x.sram_base
        k = self.dma_seen[get(x)] = self._new(m, (flat[0], flat[1] - b, flat[2] - b, flat[3]))
        return k, b

    def _new(self, m: Unit, flat: tuple[int, ...]) -> int:
        """A new kind (``_kinds``) of module ``m`` with accesses ``flat``: its index."""
        self.kinds.append((int(m), flat))
        return len(self.kinds) - 1

    def _table(self, insns: list[Insn]) -> tuple[np.ndarray, np.ndarray]:
        """Each instruction's module (as an array of rows) and its row of
        ``conflicts``' table. Every instruction is read as its kind and the entry its kind is
        moved by (``_kinds``); ``_conflict_table``'s arrays are gathered from the kinds'
        accesses with numpy (``_gather``: a stream has a few dozen kinds)."""
        n = len(insns)
        if not n:
            return np.zeros(0, np.int64), np.zeros((0, len(self.row)), np.int64)
        kinds, bases = self._kinds(insns)
        kind = np.fromiter(kinds, np.int64, n)
        known = self.kinds
        kind_row = np.fromiter((m for m, _f in known), np.int64, len(known))
        kind_count = np.fromiter((len(f) for _m, f in known), np.int64, len(known)) // 4
        kind_acc = np.fromiter(chain.from_iterable(f for _m, f in known), np.int64,
                               4 * int(kind_count.sum())).reshape(-1, 4)
        rows = kind_row[kind]  # a module's row is its value
        count = kind_count[kind]
        mem, lo, hi, wr = _gather(kind_acc, np.cumsum(kind_count) - kind_count, kind,
                                  count).T
        moved = np.repeat(np.fromiter(bases, np.int64, n), count)
        table = _conflict_table(np.repeat(np.arange(n), count), mem, lo + moved, hi + moved,
                                wr, np.repeat(rows, count), list(self.depth.values()), n,
                                len(self.row))
        return rows, table

    def _would_overflow(self, q: Queue, need: int) -> bool:
        """Whether a new token on ``q`` pushed by instruction ``need`` could find the queue
        full with no way out: fetch is in order, so the pop that makes room for the k-th push
        (the (k - depth)-th) must come before the push in program order, or the pushing
        module stalls while that pop is never fetched (its command queue fills behind it)."""
        pops = self.pop_at[q]
        k = len(pops) + 1  # this token's number
        return k > self.token_depth and pops[k - 1 - self.token_depth] > need

    def _retarget(self, q: Queue, need: int) -> None:
        """Instead of a new token, make the queue's latest pop wait for ``need`` (its push moves
        from an earlier instruction of the producer to ``need``). The latest pop comes after
        ``need`` in program order (``_would_overflow``), so the edge still points backwards;
        it waits longer, never less; and the moved push keeps its room (the pop that frees it
        came before the old position)."""
        push, _pop = self.flags[q]
        old = self.push_at[q][-1]
        self.pending[old] &= ~_BIT[push]
        self.pending[need] |= _BIT[push]
        self.push_at[q][-1] = need

    def run(self, insns: list[Insn]) -> list[Insn]:
        rows, table = self._table(insns)
        if self._queued_only(rows, table):
            self._by_queue(insns, rows, table)
        else:
            self._one_by_one(insns, rows, table.tolist())
        return self._given()

    def _queued_only(self, mods: np.ndarray, table: np.ndarray) -> bool:
        """Whether no instruction conflicts with a module it shares no queue with: then no
        relay is due anywhere, and ``_by_queue`` gives every token."""
        for m, rows in self.unqueued.items():
            if rows and (table[mods == int(m)][:, rows] >= 0).any():
                return False
        return True

    def _by_queue(self, insns: list[Insn], mods: np.ndarray, table: np.ndarray) -> None:
        """The tokens ``_append_queued`` gives, instruction by instruction, where every
        conflict is with a module sharing a queue (``_queued_only``): output positions are the
        input's (no relay), and the queues are independent of one another (each its own
        ``satisfied``, pushes, pops and flag bits), so each is worked out on its own. A queue's
        waits are the instructions of its consumer whose conflict with the producer is later
        than every earlier one's (the running maximum ``satisfied``); ``_room`` then keeps the
        queue's depth. No clock is made: none is read without a relay."""
        pending = np.zeros(len(insns), np.int64)
        for m in Unit:
            at = np.flatnonzero(mods == int(m))
            if not at.size:
                continue
            for r, q, push, pop in self.queued[m]:
                latest = table[at, r]
                before = np.maximum.accumulate(np.concatenate(([-1], latest[:-1])))
                waits = latest > before
                needs = latest[waits]
                if not needs.size:
                    continue
                self.satisfied[q] = int(needs[-1])
                pushes, pops = self._room(q, needs.tolist(), at[waits].tolist())
                pending[pushes] |= push
                pending[pops] |= pop
        self.out = list(insns)
        self.pending = pending.tolist()

    def _room(self, q: Queue, needs: list[int], waiting: list[int]
              ) -> tuple[list[int], list[int]]:
        """Queue ``q``'s pushes and pops (``push_at``, ``pop_at``, set here) for its waits in
        order (the ``waiting`` instruction waits for ``needs``), as ``_would_overflow`` and
        ``_retarget`` place them one wait at a time: a wait whose token could find the queue
        full moves the latest push to its need instead of adding a token. Where no wait
        would (the k-th pop after the (k + depth)-th need: checked at once), every wait is a
        token."""
        d = self.token_depth
        if len(needs) <= d or not (np.asarray(waiting[:-d]) > np.asarray(needs[d:])).any():
            self.push_at[q], self.pop_at[q] = needs, waiting
            return needs, waiting
        pushes: list[int] = []
        pops: list[int] = []
        for need, k in zip(needs, waiting, strict=True):
            c = len(pops)
            if c >= d and pops[c - d] > need:
                pushes[-1] = need  # the previous pop now waits for ``need``: no new token
            else:
                pushes.append(need)
                pops.append(k)
        self.push_at[q], self.pop_at[q] = pushes, pops
        return pushes, pops

    def _one_by_one(self, insns: list[Insn], rows: np.ndarray, table: list[list[int]]
                    ) -> None:
        """Every instruction appended in order (``rows``: their modules' rows), relays placed
        where due (``_add``)."""
        at: list[int] = []  # each input instruction's output position (relays come between)
        mods = list(map(_UNIT_OF.__getitem__, rows.tolist()))  # only this path reads them
        for ins, m, latest in zip(insns, mods, table, strict=True):
            unqueued = False  # a conflict with a module sharing no queue (a loop, not any():
            for r in self.unqueued[m]:  # no generator per instruction on the hot path)
                if latest[r] >= 0:
                    unqueued = True
                    break
            if unqueued:
                needs = {p: at[latest[r]] for p, r in self.others[m] if latest[r] >= 0}
                at.append(self._add(ins, m, needs))
            else:
                at.append(self._append_queued(ins, m, latest, at))

    def _given(self) -> list[Insn]:
        """The output instructions with their flags (``pending``) set: only those with flags
        are rebuilt."""
        result = list(self.out)
        pending = self.pending
        #: (instruction, flags) -> the instruction with them: flatten shares one GEMM or ALU
        #: instruction among the tiles that evaluate alike, and they mostly wait alike
        given: dict[int, Any] = {}  # keyed by id(instruction) * len(_DEPS) + flags
        deps, kinds = _DEPS, len(_DEPS)
        for k, ins, f in compress(zip(count(), self.out, pending), pending):
            insn: Any = ins.insn
            if ins.uops:
                key = id(insn) * kinds + f  # ``self.out`` keeps the instruction alive
                x = given.get(key)
                if x is None:
                    x = given[key] = evolve(insn, deps=deps[f])
            else:  # a DMA's is its own
                x = evolve(insn, deps=deps[f])
            result[k] = _INSN(x, ins.dram, ins.uops, ins.thread, ins.note)
        return result

    def _append_queued(self, ins: Insn, m: Unit, latest: list[int], at: list[int]) -> int:
        """``_add`` for an instruction of ``m`` whose conflicts (``latest``: ``conflicts``'
        row, input positions; ``at``: their output positions) are all with modules it shares a
        queue with (no relay can be due), as ``_append`` would append it, in one loop."""
        k = len(self.out)
        flags = 0
        waits: list[int] = []
        satisfied, pending = self.satisfied, self.pending
        for r, q, push, pop in self.queued[m]:
            t = latest[r]
            if t < 0:
                continue
            need = at[t]
            if need <= satisfied[q]:
                continue
            waits.append(need)
            satisfied[q] = need
            if self._would_overflow(q, need):
                self._retarget(q, need)  # the previous pop now waits for ``need``: no new token
                continue
            pending[need] |= push
            flags |= pop
            self.push_at[q].append(need)
            self.pop_at[q].append(k)
        self.made_of.append((self.last_of.get(m, -1), tuple(waits), m))
        self.out.append(ins)
        pending.append(flags)
        self.last_of[m] = k
        return k

    def _start(self, m: Unit, pops: dict[Queue, int]) -> list[int]:
        """The clock of the next instruction, of ``m``, that pops ``pops`` (``_clock``)."""
        self._known()
        return self._clock(self.last_of.get(m, -1), pops.values())

    def _clock(self, prev: int, needs: Iterable[int]) -> list[int]:
        """The clock of an instruction whose module's previous instruction is ``prev`` (-1:
        none) and that waits for ``needs``: what each of them knew complete, element-wise
        latest."""
        clock = list(self.done[prev]) if prev >= 0 else [-1] * len(Unit)
        for need in needs:
            clock = list(map(max, clock, self.done[need]))
        return clock

    def _known(self) -> None:
        """Every instruction's clock (``done``) up to the last one appended: computed only
        where a relay may be due (hardware whose modules all share queues never needs one)."""
        for k in range(len(self.done), len(self.out)):
            prev, needs, m = self.made_of[k]
            clock = self._clock(prev, needs)
            clock[m] = k
            self.done.append(clock)

    def _append(self, ins: Insn, m: Unit, pops: dict[Queue, int]) -> int:
        k = len(self.out)
        flags = 0
        for q, need in pops.items():
            push, pop = self.flags[q]
            self.satisfied[q] = need
            if self._would_overflow(q, need):
                self._retarget(q, need)  # the previous pop now waits for ``need``: no new token
                continue
            self.pending[need] |= _BIT[push]
            flags |= _BIT[pop]
            self.push_at[q].append(need)
            self.pop_at[q].append(k)
        # a retargeted wait orders this one too (same module)
        self.made_of.append((self.last_of.get(m, -1), tuple(pops.values()), m))
        self.out.append(ins)
        self.pending.append(flags)
        self.last_of[m] = k
        return k

    def _add(self, ins: Insn, m: Unit, needs: dict[Unit, int]) -> int:
        """Append ``ins`` (of module ``m``) waiting for ``needs`` (``conflicts``: the latest
        earlier instruction of each other module it conflicts with, output positions), with a
        relay before it where two modules share no queue; its output position."""
        pops = {(p, m): n for p, n in needs.items()
                if (p, m) in self.flags and n > self.satisfied[(p, m)]}
        clock: list[int] | None = None  # this one's start clock, where a relay may be due
        for p, n in needs.items():
            if (p, m) in self.flags:
                continue
            if clock is None:
                clock = self._start(m, pops)
            if clock[p] >= n:
                continue
            # no queue between them and not yet ordered: relay through the ALU module
            r = Unit.ALU
            if (p, r) not in self.flags or (r, m) not in self.flags:
                raise CompileError(f"no token path from the {p.name.lower()} to the "
                                   f"{m.name.lower()} module")
            carrier_pops = {(p, r): n} if n > self.satisfied[(p, r)] else {}
            carrier = self._append(relay(), r, carrier_pops)
            pops[(r, m)] = carrier
            clock = self._start(m, pops)
        return self._append(ins, m, pops)
