"""Drain the tail: the last tile's store overlaps the last instruction of its epilogue.

A program ends with the epilogue of its last tile (the ALU instructions on the accumulator
tile) and then the STOREs of that tile: the store module cannot start before the last ALU
instruction has written every entry, so the whole tile's store (C10 on pynq: 1,600 cycles, 4%
of the layer) runs after the compute module has finished. This pass splits that last
instruction into parts along its micro-op range (each part's ``uop_bgn``/``uop_end`` a
slice of the same block, running the same ``iter_out`` x ``iter_in`` loops, so no micro-op is
added) and each trailing STORE into pieces (rows, or columns of a one-row store), and places
each piece right after the part that completes its entries: the store of the first pieces runs
while the compute module works on the later parts, and only the last piece is left after it.

Splitting is sound when the order of the instruction's executions does not matter: an
element-wise (``update``) ALU instruction whose destination entries are all
distinct and whose every other operand entry is either not a destination or the destination
of the same execution. The number of parts is the one whose tail ends first by the
instructions' own durations (``InstructionDef.duration``, the timing model of the hardware):
each part pays its loops' pipeline fill on the HLS design and each piece its DMA latency, so
the split is only made where it shortens the tail, counting the store module's backlog of
earlier STOREs (pieces queued behind it gain nothing) and one fetch of the extra instruction
words (the simulator is the judge of how much).

Pre:  a flat ``SeqStmt`` of ``Insn``s (flatten, hoist_resets) in program order, no tokens.
Post: the same instructions with the last compute instruction possibly replaced by parts and
      the STOREs after it by pieces, interleaved; the set of (entry, operation) pairs each
      module performs is unchanged and every store piece follows every write to its entries,
      so token insertion (next) orders them like the original.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from operator import attrgetter
from typing import Any

import numpy as np

from vta.compiler.accel.passes._common import distinct, flat_stream, with_stream
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import evolve
from vta.config import HwConfig
from vta.isa import Unit, definition_of, module_of
from vta.isa.timing import fetch_cycles

__all__ = ["drain_tail", "MAX_PARTS"]

#: the most parts the last instruction is split into (each costs a pipeline fill on HLS)
MAX_PARTS = 32
#: the most pieces one STORE is split into
MAX_PIECES = 64


def drain_tail(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    stream = flat_stream(func)
    if stream is None or not stream[0]:
        return func
    insns, wrap = stream
    new_tail = _drained(insns, hw)
    if new_tail is None:
        return func
    return with_stream(func, insns[:len(insns) - new_tail[0]] + new_tail[1], wrap)


def _drained(insns: list[Insn], hw: HwConfig) -> tuple[int, list[Insn]] | None:
    """(how many trailing instructions to replace, their replacement), or None to keep all."""
    k = len(insns)
    while k > 0 and definition_of(insns[k - 1].insn).role == "store":
        k -= 1
    stores = insns[k:]
    if not stores or k == 0:
        return None
    last = insns[k - 1]
    if not _splittable(last, hw):
        return None
    x: Any = last.insn  # a frozen dataclass: hashable
    busy = _backlog(insns[:k - 1], module_of(x, hw), hw)
    chosen = _chosen(x, last.uops, tuple(st.insn for st in stores), busy, hw)
    if chosen is None:
        return None
    own = (last, *stores)
    return 1 + len(stores), [own[i] if y is None else _part(y, own[i], note)
                             for y, i, note in chosen]


#: a chosen tail as ``_chosen`` keeps it: per instruction, its ISA instruction (None: the
#: ``Insn``'s own, unchanged), which ``Insn`` it is a part or a piece of (0: the split
#: instruction, k: the k-th store) and the note of a piece (None: the ``Insn``'s own)
Chosen = tuple[tuple[Any, int, str | None], ...]


@functools.lru_cache(maxsize=256)
def _chosen(last: Any, uops: tuple[Any, ...], stores: tuple[Any, ...], busy: float,
            hw: HwConfig) -> Chosen | None:
    """The fastest tail (``_finish``) over every part count for the split instruction ``last``
    (an ISA instruction running micro-ops ``uops``) followed by ``stores`` (their ISA
    instructions) behind a store ``busy`` backlog, as ``Chosen``; None when one part is best.
    The choice reads nothing else of the program (the ``Insn``s' buffers, threads and notes
    are only carried into the result), so it is memoised by these values: the candidates of
    a layer, and layers alike, mostly end in the same tail (C1-C11's 33 candidates on pynq:
    33 tails, each planned for 32 part counts, the part and piece durations most of the
    pass's time)."""
    split, after = Insn(last, uops=uops), [Insn(x) for x in stores]
    tops = _last_writers(_dst_entries(split), after)
    best: tuple[float, list[Item]] | None = None
    made: Made = {}
    for m in range(1, min(MAX_PARTS, len(uops)) + 1):
        # the store module alone cannot finish before ``busy`` plus the pieces' durations: a
        # layout whose pieces add up to the rest of the best tail's time is not finished
        room = math.inf if best is None else best[0] - busy
        layout = _layout(split, after, tops, m, hw, made, room)
        if layout is None:
            continue
        plan: list[Item] = []
        t = _timed(_items(split, layout, hw, made), layout[2], layout[3], hw, 1 + len(after),
                   busy, math.inf if best is None else best[0], plan)
        if best is None or t < best[0]:
            best = (t, plan)
    if best is None or len(best[1]) == 1 + len(after):  # one part: nothing gained
        return None
    which = {id(ins): j for j, ins in enumerate((split, *after))}
    return tuple((None if x is ins.insn else x, which[id(ins)], note)
                 for x, ins, note, _store, _t in best[1])


#: one instruction of a planned tail: the ISA instruction, the ``Insn`` it is a part or a
#: piece of, the note of a piece (None: the ``Insn``'s own), whether it is a STORE and its
#: duration (its definition's, worked out once when the part or piece is made); plans are
#: compared by these durations alone, and only the chosen one is built (``_made``)
Item = tuple[Any, Insn, str | None, bool, int]
#: the parts and pieces made so far for one tail, by (which: -1 for the split instruction, k
#: for the k-th store; first, stop), each as its plan ``Item``: the plans of different part
#: counts share most of them
Made = dict[tuple[int, int, int], Item]


def _made(item: Item) -> Insn:
    """The ``Insn`` of a plan's item."""
    return _part(*item[:3])


def _part(x: Any, ins: Insn, note: str | None) -> Insn:
    """``ins`` running ISA instruction ``x`` (a part or a piece of it) under ``note`` (None:
    its own)."""
    if x is ins.insn:
        return ins
    return evolve(ins, insn=x) if note is None else evolve(ins, insn=x, note=note)


def _splittable(ins: Insn, hw: HwConfig) -> bool:
    """Whether ``ins`` is an element-wise ALU instruction whose executions may run in any
    order (module docstring)."""
    d = definition_of(ins.insn)
    if (d.role != "compute" or d.kind != "update" or not ins.uops
            or len(ins.executed) != len(ins.uops)):
        return False  # not an element-wise instruction running its whole block
    if module_of(ins.insn, hw) not in (Unit.COMPUTE, Unit.ALU) or not d.alu:
        return False
    x: Any = ins.insn
    if getattr(x, "reset", False):
        return False
    dst = _indices(ins, d.dst)
    flat = dst.ravel()
    if distinct(flat).size != flat.size:
        return False
    for op in d.reads(x, hw):
        if op.memory != d.dst.memory:
            continue
        src = _indices(ins, op)
        clash = np.isin(src, flat) & (src != dst)
        if clash.any():
            return False
    return True


def _indices(ins: Insn, op: Any) -> np.ndarray:
    """The entries operand ``op`` of ``ins`` addresses: an array (uop, iter_out, iter_in)."""
    x: Any = ins.insn
    fo, fi, base = op.placement(x)
    u = np.fromiter(map(attrgetter(op.name), ins.uops), np.int64, len(ins.uops))  # C-level
    o = np.arange(x.iter_out, dtype=np.int64) * fo
    i = np.arange(x.iter_in, dtype=np.int64) * fi
    return base + u[:, None, None] + o[None, :, None] + i[None, None, :]


def _dst_entries(ins: Insn) -> np.ndarray:
    """Per micro-op of ``ins``, the destination entries it writes (uop x executions)."""
    d = definition_of(ins.insn)
    idx = _indices(ins, d.dst)
    return idx.reshape(idx.shape[0], -1)


def _bounds(n: int, m: int) -> list[tuple[int, int]]:
    """``m`` near-equal consecutive slices of ``range(n)``."""
    cuts = [round(j * n / m) for j in range(m + 1)]
    return [(cuts[j], cuts[j + 1]) for j in range(m)]


def _last_writers(sets: np.ndarray, stores: list[Insn]) -> list[np.ndarray]:
    """Per store, per row (or, for a one-row store, per column) it reads: the last micro-op of
    the split instruction writing one of its entries (-1: none). The parts are consecutive
    micro-op slices, so the part completing a row is the part of that micro-op, for any
    number of parts (``_plan``)."""
    lo = int(sets.min())
    writer = np.full(int(sets.max()) - lo + 1, -1, np.int64)  # entry -> micro-op writing it
    writer[sets - lo] = np.arange(sets.shape[0], dtype=np.int64)[:, None]  # entries distinct
    out = []
    for st in stores:
        x: Any = st.insn
        e = x.sram_base + np.arange(x.y_size * x.x_size, dtype=np.int64)
        inside = (e >= lo) & (e < lo + writer.size)
        r = np.where(inside, writer[np.clip(e - lo, 0, writer.size - 1)], -1)
        out.append(r.reshape(x.y_size, x.x_size).max(axis=1) if x.y_size > 1 else r)
    return out


def _plan(last: Insn, stores: list[Insn], tops: list[np.ndarray], m: int, hw: HwConfig,
          made: Made | None = None) -> list[Item] | None:
    """The tail with ``last`` in ``m`` parts and each store in pieces placed after the part
    that completes them (``tops``: ``_last_writers``), timed on ``hw``; None when a store
    would need too many pieces. ``made``: the parts and pieces built for other part counts of
    this tail, reused and added to."""
    if made is None:
        made = {}
    layout = _layout(last, stores, tops, m, hw, made)
    return None if layout is None else list(_items(last, layout, hw, made))


#: a tail's layout for one part count (``_layout``): the parts' micro-op slices, the store
#: pieces after each part (index 0: before the first), how many instructions the tail has
#: and the pieces' durations added up
Layout = tuple[list[tuple[int, int]], list[list[Item]], int, int]


def _layout(last: Insn, stores: list[Insn], tops: list[np.ndarray], m: int, hw: HwConfig,
            made: Made, room: float = math.inf) -> Layout | None:
    """``_plan``'s store pieces and part slices, its parts not made yet (``_items``); None
    when a store would need too many pieces, or when the pieces' durations add up to
    ``room`` or more (a tail that cannot beat the best so far: ``_timed`` would stop it
    before its first item; the pieces after that are not made)."""
    parts = _bounds(len(last.uops), m)
    cuts = np.array([a for a, _ in parts], np.int64)
    after: list[list[Item]] = [[] for _ in range(m + 1)]  # index 0: before the first part
    n, stored = m, 0
    for k, (st, top) in enumerate(zip(stores, tops, strict=True)):
        # the first cut is 0: a row no micro-op writes (-1) has no part (-1) as well
        key = np.searchsorted(cuts, top, side="right") - 1
        pieces = _pieces(st, key, hw, made, k, room - stored)
        if pieces is None:
            return None
        n += len(pieces)
        for j, p in pieces:
            after[j + 1].append(p)
            stored += p[4]
    return parts, after, n, stored


def _items(last: Insn, layout: Layout, hw: HwConfig, made: Made) -> Iterator[Item]:
    """The items of ``_plan`` in program order, each part made (or taken from ``made``) only
    when it is reached: a plan ``_timed`` cuts short makes no more of them."""
    parts, after = layout[0], layout[1]
    yield from after[0]
    x: Any = last.insn
    duration = definition_of(x).duration  # a part is an instance of the same definition
    whole = len(parts) == 1
    for j, (a, b) in enumerate(parts):
        part = made.get((-1, a, b))
        if part is None:
            y = x if whole else evolve(x, uop_bgn=a, uop_end=b)  # one part: the whole of it
            part = made[(-1, a, b)] = (y, last, None, False, int(duration(y, hw)))
        yield part
        yield from after[j + 1]


def _pieces(st: Insn, key: np.ndarray, hw: HwConfig, made: Made, which: int,
            room: float = math.inf) -> list[tuple[int, Item]] | None:
    """``st`` (the ``which``-th store) cut into runs of rows (or, for one row, of columns)
    that the same part completes (``key``: that part per row or column, -1 for none): (part
    index or -1, piece); None where the pieces' durations add up to ``room`` or more (the
    pieces after that are not made)."""
    x: Any = st.insn
    duration = definition_of(x).duration  # a piece is an instance of the same definition
    rows = x.y_size > 1
    cut = np.flatnonzero(key[1:] != key[:-1]) + 1  # where a run of equal parts ends
    if len(cut) >= MAX_PIECES:
        return None
    if len(key) == 0:
        return []
    if not len(cut):
        whole = made.get((which, 0, len(key)))
        if whole is None:
            whole = made[(which, 0, len(key))] = (x, st, None, True, int(duration(x, hw)))
        return None if whole[4] >= room else [(int(key[0]), whole)]
    starts = [0, *cut.tolist()]
    out: list[tuple[int, Item]] = []
    for a, b, v in zip(starts, [*starts[1:], len(key)], key[starts].tolist(), strict=True):
        piece = made.get((which, a, b))
        if piece is None:
            if rows:
                y = evolve(x, sram_base=x.sram_base + a * x.x_size,
                           dram_base=x.dram_base + a * x.x_stride, y_size=b - a)
            else:
                y = evolve(x, sram_base=x.sram_base + a, dram_base=x.dram_base + a,
                           x_size=b - a)
            piece = made[(which, a, b)] = (y, st, "tail piece", True,
                                               int(duration(y, hw)))
        room -= piece[4]
        if room <= 0:
            return None
        out.append((v, piece))
    return out


def _backlog(head: list[Insn], unit: Unit, hw: HwConfig) -> float:
    """How long the store module may still be busy with earlier STOREs when the last
    instruction starts (time 0): each earlier STORE is taken to start when the instructions of
    ``unit`` after it in program order would start if ``unit`` never waited, the latest its
    producer can finish, so the backlog is never underestimated (a split that only queues
    behind it is not made)."""
    span = 0.0  # the ``unit`` work between a position and time 0
    stores: list[tuple[float, int]] = []  # (its producer's latest end, duration), latest first
    for ins in reversed(head):
        if definition_of(ins.insn).role == "store":
            stores.append((-span, _duration(ins, hw)))
        elif module_of(ins.insn, hw) is unit:
            span += _duration(ins, hw)
            if stores and span >= sum(t for _, t in stores):
                break  # every earlier store would have left before time 0
    free = float("-inf")
    for ready, t in reversed(stores):
        free = max(free, ready) + t
    return max(0.0, free)


def _finish(tail: list[Item], hw: HwConfig, before: int, busy: float) -> float:
    """When ``tail`` ends, from the start of its first instruction: the parts back to back,
    each store piece when its part is done and the store module has finished the previous
    piece (and its ``busy`` backlog of earlier STOREs), with the durations of the
    instructions' definitions; plus one fetch of the instruction words it adds to the
    ``before`` it replaces, latency included (fetched on the shared port they delay a transfer,
    and the last words may be fetched late, when a module already waits for them)."""
    return _timed(iter(tail), len(tail), sum(x[4] for x in tail if x[3]), hw, before, busy)


def _timed(items: Iterator[Item], n: int, stored: int, hw: HwConfig, before: int, busy: float,
           beat: float = math.inf, kept: list[Item] | None = None) -> float:
    """``_finish`` of the ``n`` items of ``items`` (their pieces' durations adding up to
    ``stored``), each added to ``kept`` as it is read; stopped, with a lower bound of the
    finish that is ``beat`` or later, at the first item after which the tail cannot end before
    ``beat``: the compute module's time so far, or the store module's plus the pieces still to
    store one after another (a plan that cannot be the best so far makes no more parts:
    ``_items``; C1-C11's distinct tails on pynq make 2,600 of their 7,200 parts). Every value
    is an integral float: the bound is exact."""
    extra = _fetched(hw, n, before)
    compute, store = extra, extra + busy
    if store + stored >= beat:
        return store + stored
    for item in items:
        if kept is not None:
            kept.append(item)
        t = item[4]
        if item[3]:
            store = max(store, compute) + t
            stored -= t
        else:
            compute += t
        if compute >= beat or store + stored >= beat:
            return max(compute, store + stored)
    return max(compute, store)


def _fetched(hw: HwConfig, n: int, before: int) -> float:
    """The fetch of the instruction words a tail of ``n`` adds to the ``before`` it replaces
    (``_finish``)."""
    return float(fetch_cycles(hw, n - before)) if n > before else 0.0


def _duration(ins: Insn, hw: HwConfig) -> int:
    x: Any = ins.insn  # every instruction is a frozen dataclass: hashable
    return _insn_duration(x, hw)


@functools.lru_cache(maxsize=16384)
def _insn_duration(insn: Any, hw: HwConfig) -> int:
    """An instruction's duration (its definition's), memoised: the instructions before the
    tail (``_backlog``) are flatten's shared objects, met again and again. The parts and
    pieces of a tail are made once each (``Made``) and new objects every time, so they ask
    their definition directly: a memo would only hash them (every field, in Python)."""
    return int(definition_of(insn).duration(insn, hw))
