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

from collections.abc import Iterable
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
    memory's ``depth`` entries).

    Computed for the whole stream at once, per memory, on its ranges' boundaries (a few dozen
    distinct ones: every range is a union of the segments between consecutive boundaries):
    the latest writer and reader of every segment by module after each instruction touching
    the memory is a running maximum over a small dense table, and an access's answer is the
    largest over its segments of the state before its instruction. The same answers as a
    per-entry table of the latest writer and reader updated instruction by instruction, with
    a handful of numpy calls per memory instead of a few per instruction."""
    latest = np.full((len(stream), rows), -1, np.int64)
    by_mem: dict[str, list[int]] = {m: [] for m in depth}  # (position, lo, hi, writes, row)
    add = {m: flat.extend for m, flat in by_mem.items()}  # per memory, flattened
    for t, (row, acc) in enumerate(stream):
        for mem, lo, hi, wr in acc:
            top = depth[mem]
            if hi > top:
                hi = top
            if hi > lo:
                add[mem]((t, lo, hi, wr, row))
    for flat in by_mem.values():
        if not flat:
            continue
        t, lo, hi, wr, row = np.array(flat, np.int64).reshape(-1, 5).T
        bounds = distinct(np.concatenate((lo, hi)))
        seg = np.arange(len(bounds) - 1)
        cover = ((seg >= np.searchsorted(bounds, lo)[:, None])
                 & (seg < np.searchsorted(bounds, hi)[:, None]))  # (access, segment)
        # (row, writes) pairs present, each a row of the dense table
        kinds, kind = np.unique(row * 2 + wr, return_inverse=True)
        before = _latest_before(cover, kind, len(kinds), t)
        found = np.full((rows, len(t)), -1, np.int64)
        writes = wr.astype(bool)
        for g, k in enumerate(kinds.tolist()):
            r, w = divmod(k, 2)
            # a read waits for earlier writes; a write for earlier writes and reads
            found[r] = np.maximum(found[r], before[g] if w else np.where(writes, before[g], -1))
        np.maximum.at(latest, t, found.T)
    return latest


def _latest_before(cover: np.ndarray, kind: np.ndarray, kinds: int, t: np.ndarray
                   ) -> np.ndarray:
    """Per kind of access (``kind``: its index among ``kinds``), per access of one memory (at
    stream position ``t``, ascending): the latest position before the access's among the
    accesses of that kind whose segments (``cover``) meet the access's; -1 for none. A
    ``(kinds, accesses)`` table."""
    times, u = np.unique(t, return_inverse=True)  # the instructions touching the memory
    touched = np.zeros((kinds, len(times) + 1, cover.shape[1]), bool)  # 0: before the first
    a, s = np.nonzero(cover)
    touched[kind[a], u[a] + 1, s] = True
    last = np.where(touched, np.concatenate(([-1], times))[None, :, None], -1)
    np.maximum.accumulate(last, axis=1, out=last)
    return np.where(cover[None], last[:, u, :], -1).max(axis=2)  # the state before each


def insert_tokens(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    stream = flat_stream(func)
    if stream is None:
        raise CompileError(f"{func.name}: token insertion needs the flattened instruction stream")
    insns, wrap = stream
    return with_stream(func, _Tokens(hw).run(insns), wrap)


class _Tokens:
    """The pass's state over the instruction stream (indices are output positions: relays are
    inserted as the stream is built)."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.separate = hw.alu.separate_pipeline
        self.flags = _flags(self.separate)
        self.modules = [m for m in Unit if m is not Unit.ALU or self.separate]
        #: entries of each on-chip memory: the ranges ``conflicts`` reads are cut to them
        self.depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc", "uop")}
        #: each module's row in ``conflicts``' table
        self.row = {m: int(m) for m in Unit}  # 0 .. len(Unit) - 1: clocks index by it too
        #: the other modules whose conflicts become waits, with their rows, per module
        self.others = {m: [(p, self.row[p]) for p in self.modules if p is not m] for m in Unit}
        #: per module, those of ``others`` it shares a queue with, each as (its row, the queue,
        #: the producer's push flag, this module's pop flag: their ``_BIT``s); and the rows of
        #: the rest (a conflict with one of those may need a relay: ``_add``)
        self.queued: dict[Unit, list[tuple[int, Queue, int, int]]] = {
            m: [(r, (p, m), _BIT[self.flags[(p, m)][0]], _BIT[self.flags[(p, m)][1]])
                for p, r in self.others[m] if (p, m) in self.flags] for m in Unit}
        self.unqueued = {m: [r for p, r in self.others[m] if (p, m) not in self.flags]
                         for m in Unit}
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
        #: ``_describe``'s memo: (id of the instruction, id of its micro-ops) -> (instruction,
        #: micro-ops, module, ranges); the objects are kept so that their ids stay theirs
        self.seen: dict[tuple[int, int], tuple[Any, tuple[Any, ...], Unit, list[Access]]] = {}

    def _describe(self, ins: Insn) -> tuple[Unit, list[Access]]:
        """The module of ``ins`` and ``accesses(ins)``, memoised for a micro-op instruction by
        the identity of its instruction and micro-op list (flatten builds the same GEMM or ALU
        instruction once and reuses the object in every tile that evaluates alike)."""
        if not ins.uops:
            d = definition_of(ins.insn)  # looked up once for both
            return d.unit_of(ins.insn, self.hw), accesses(ins, self.hw, d)
        key = (id(ins.insn), id(ins.uops))
        hit = self.seen.get(key)
        if hit is None or hit[0] is not ins.insn or hit[1] is not ins.uops:
            hit = self.seen[key] = (ins.insn, ins.uops, module_of(ins.insn, self.hw),
                                    accesses(ins, self.hw))
        return hit[2], hit[3]

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
        described = [self._describe(ins) for ins in insns]
        table = conflicts([(self.row[m], acc) for m, acc in described], self.depth,
                          len(self.row)).tolist()
        at: list[int] = []  # each input instruction's output position (relays come between)
        for ins, (m, _acc), latest in zip(insns, described, table, strict=True):
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
        result = []
        made: dict[int, Deps] = {}  # the few distinct flag sets, each made once
        #: (instruction, flags) -> the instruction with them: flatten shares one GEMM or ALU
        #: instruction among the tiles that evaluate alike, and they mostly wait alike
        given: dict[tuple[int, int], Any] = {}
        for ins, f in zip(self.out, self.pending, strict=True):
            if f:
                insn: Any = ins.insn
                k = (id(insn), f)  # ``self.out`` keeps the instruction alive
                x = given.get(k) if ins.uops else None  # a DMA's is its own
                if x is None:
                    deps = made.get(f)
                    if deps is None:
                        deps = made[f] = _deps(f)
                    x = evolve(insn, deps=deps)
                    if ins.uops:
                        given[k] = x
                ins = _INSN(x, ins.dram, ins.uops, ins.thread, ins.note)
            result.append(ins)
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
