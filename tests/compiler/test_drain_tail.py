"""drain_tail: the last tile's store overlaps its epilogue's last instruction; emit's shared
micro-op blocks (a reset and the immediate ALU instructions of the same tile)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from _vta_helpers import hw

from vta.compiler.accel.passes import drain_tail as DT
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ops.workloads import Workload, resnet18_layer
from vta.isa import Alu, AluOp, Gemm, Load, MemType, Store, Uop
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget


def _c10() -> Workload:
    return Workload("resnet18:C10", resnet18_layer("C10"))


def _alu(op: AluOp, uops: tuple[Uop, ...], *, iter_in: int = 1, dst_in: int = 0,
         src_in: int = 0, imm: bool = True) -> Insn:
    insn = Alu(op, False, 0, len(uops), 1, iter_in, 0, dst_in, 0, src_in, imm,
               127 if imm else 0)
    return Insn(insn, uops=uops)  # flatten's convention: the range counts within the block


def _big_tail() -> Insn:
    """A MIN over 1,024 entries, micro-op k writing entries 8k..8k+7."""
    return _alu(AluOp.MIN, tuple(Uop(8 * k, 8 * k, 0) for k in range(128)), iter_in=8, dst_in=1)


def _store(base: int, y: int, x: int) -> Insn:
    return Insn(Store(MemType.OUT, base, base, y, x, x))


def test_c10_tail_is_split_and_stays_bit_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """On pynq, C10's last MIN is split into parts sharing its micro-op block, its tile's
    STORE into pieces in between; the result is bit-exact and the layer ends earlier than
    with the pass switched off (the same program otherwise)."""
    h = hw("pynq")
    r = run_layer(_c10(), AccelTarget(h))
    assert r.passed and r.mismatches == 0
    insns = r.compiled.program.instructions
    tail_mins = []
    for i in reversed(insns[:-1]):  # before FINISH
        if isinstance(i, Alu):
            if i.op is not AluOp.MIN:
                break
            tail_mins.append(i)
    assert len(tail_mins) > 1
    # the parts cover one block, back to back, without a gap or an overlap
    ranges = sorted((i.uop_bgn, i.uop_end) for i in tail_mins)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    stores_after_first_part = [i for i in insns[insns.index(tail_mins[-1]):]
                               if isinstance(i, Store)]
    assert len(stores_after_first_part) >= len(tail_mins)
    # the pieces store every output entry exactly once (row by row)
    covered = sorted((s.dram_base + y * s.x_stride, s.dram_base + y * s.x_stride + s.x_size)
                     for s in insns if isinstance(s, Store) for y in range(s.y_size))
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
    assert covered[-1][1] - covered[0][0] == 512 // 16 * 7 * 7

    monkeypatch.setattr(DT, "_drained", lambda insns, hw: None)  # the pass, switched off
    off = run_layer(_c10(), AccelTarget(h))
    assert off.passed
    assert r.cycles < off.cycles
    # the pass cut the last tile's STORE into pieces
    assert sum(isinstance(i, Store) for i in off.compiled.program.instructions) \
        < sum(isinstance(i, Store) for i in insns)


def test_split_refused_when_an_entry_is_written_twice() -> None:
    """Two executions on one entry: their order would change with a split."""
    twice = _alu(AluOp.MIN, (Uop(0, 0, 0), Uop(1, 1, 0)), iter_in=2, dst_in=0)
    assert not DT._splittable(twice, hw("pynq"))
    once = _alu(AluOp.MIN, (Uop(0, 0, 0), Uop(1, 1, 0)), iter_in=2, dst_in=2)
    assert DT._splittable(once, hw("pynq"))


def test_split_refused_when_an_operand_reads_another_destination() -> None:
    """``acc[1] += acc[0]`` beside ``acc[0] += ...``: a part reads what another part writes."""
    chained = _alu(AluOp.ADD, (Uop(0, 2, 0), Uop(1, 0, 0)), imm=False)
    assert not DT._splittable(chained, hw("pynq"))
    own = _alu(AluOp.ADD, (Uop(0, 2, 0), Uop(1, 3, 0)), imm=False)
    assert DT._splittable(own, hw("pynq"))


def test_resets_and_gemm_are_never_split() -> None:
    h = hw("pynq")
    reset = Insn(Alu(AluOp.ADD, True, 0, 1, 1, 1, 0, 0, 0, 0, True, 0), uops=(Uop(0, 0, 0),))
    assert not DT._splittable(reset, h)
    gemm = Insn(Gemm(False, 0, 2, 1, 1, 0, 0, 0, 0, 0, 0), uops=(Uop(0, 0, 0), Uop(1, 0, 0)))
    assert not DT._splittable(gemm, h)


def _tail(last: Insn, stores: list[Insn], m: int) -> list[Insn] | None:
    """The tail ``drain_tail`` plans with ``m`` parts, built."""
    plan = DT._plan(last, stores, DT._last_writers(DT._dst_entries(last), stores), m,
                    hw("pynq"))
    return None if plan is None else [DT._made(item) for item in plan]


def test_pieces_follow_the_part_that_completes_them() -> None:
    """A 4-row store of 4-entry rows over an instruction writing entries 0..15 in uop order:
    with 4 parts, row k follows part k; a one-row store is cut by columns."""
    last = _alu(AluOp.MIN, tuple(Uop(k, k, 0) for k in range(16)))
    plan = _tail(last, [_store(0, 4, 4)], 4)
    assert plan is not None
    kinds = ["A" if isinstance(p.insn, Alu) else "S" for p in plan]
    assert kinds == ["A", "S"] * 4
    rows = [(p.insn.sram_base, p.insn.y_size) for p in plan if isinstance(p.insn, Store)]
    assert rows == [(0, 1), (4, 1), (8, 1), (12, 1)]
    parts = [(p.insn.uop_bgn, p.insn.uop_end) for p in plan if isinstance(p.insn, Alu)]
    assert parts == [(0, 4), (4, 8), (8, 12), (12, 16)]
    flat = _tail(last, [_store(0, 1, 16)], 2)
    assert flat is not None
    cols = [(p.insn.sram_base, p.insn.x_size) for p in flat if isinstance(p.insn, Store)]
    assert cols == [(0, 8), (8, 8)]


def test_parts_and_pieces_are_timed_once_when_made() -> None:
    """Every item of a plan carries its instruction's duration (its definition's) and whether
    it is a STORE, worked out when the part or piece is made: the plans of other part counts
    reuse them (``made``), and ``_finish`` reads nothing else of them."""
    from vta.isa import definition_of

    h = hw("pynq")
    last, stores = _big_tail(), [_store(0, 8, 128), _store(1024, 1, 64)]
    tops = DT._last_writers(DT._dst_entries(last), stores)
    made: DT.Made = {}
    plans = [DT._plan(last, stores, tops, m, h, made) for m in (1, 4, 8)]
    items = [item for plan in plans if plan is not None for item in plan]
    assert len(items) > 3 + 4 + 8
    for x, _ins, _note, is_store, t in items:
        d = definition_of(x)
        assert t == d.duration(x, h) and is_store == (d.role == "store")
    again = DT._plan(last, stores, tops, 4, h, made)
    assert again is not None and all(a is b for a, b in zip(again, plans[1], strict=True))
    # the run-length cut of a row of columns: one piece per run of one part
    key = np.array([-1, -1, 0, 0, 0, 2, 2, 1])
    pieces = DT._pieces(_store(0, 1, 8), key, h, {}, 0)
    assert pieces is not None
    assert [(v, p[0].sram_base, p[0].x_size) for v, p in pieces] == [
        (-1, 0, 2), (0, 2, 3), (2, 5, 2), (1, 7, 1)]


def test_a_store_the_last_instruction_does_not_write_goes_first() -> None:
    last = _alu(AluOp.MIN, tuple(Uop(k, k, 0) for k in range(8)))
    other = _store(100, 1, 8)
    plan = _tail(last, [other], 2)
    assert plan is not None and plan[0].insn == other.insn


def test_no_change_when_the_program_does_not_end_in_stores() -> None:
    h = hw("pynq")
    last = _big_tail()
    load = Insn(Load(MemType.INP, 0, 0, 1, 1, 1))
    assert DT._drained([last, load], h) is None
    assert DT._drained([last], h) is None
    # a big enough tail is split; a two-entry store is not worth a part
    assert DT._drained([last, _store(0, 1, 1024)], h) is not None
    tiny = _alu(AluOp.MIN, (Uop(0, 0, 0), Uop(1, 1, 0)))
    assert DT._drained([tiny, _store(0, 1, 2)], h) is None


def test_reset_shares_the_immediate_alu_block() -> None:
    """C10: a tile's GEMM reset (reads no operand) and its epilogue's immediate SHR/MAX/MIN
    (read only dst) run one micro-op block: same range in the uop buffer."""
    r = run_layer(_c10(), AccelTarget(hw("pynq")))
    insns = r.compiled.program.instructions
    resets = [(i.uop_bgn, i.uop_end) for i in insns if isinstance(i, Gemm) and i.reset]
    shr = [(i.uop_bgn, i.uop_end) for i in insns if isinstance(i, Alu) and i.op is AluOp.SHR]
    assert resets and resets == shr
    uop_loads = [i for i in insns if isinstance(i, Load) and i.mem is MemType.UOP]
    blocks = {(i.uop_bgn, i.uop_end) for i in insns if isinstance(i, (Gemm, Alu))
              and i.uop_end > i.uop_bgn}
    # one load of every distinct block's micro-ops (the split MIN's parts lie inside a block)
    assert sum(u.x_size for u in uop_loads) < sum(b - a for a, b in blocks)


def test_drained_program_disassembles_and_reassembles() -> None:
    from vta.isa import assemble, disassemble

    h = hw("pynq")
    p = run_layer(_c10(), AccelTarget(h)).compiled.program
    assert assemble(disassemble(p), h) == p


def test_part_is_what_runs() -> None:
    ins = _alu(AluOp.MIN, tuple(Uop(k, k, 0) for k in range(6)))
    assert ins.executed == ins.uops
    half = dataclasses.replace(ins, insn=dataclasses.replace(ins.insn, uop_bgn=2, uop_end=5))
    assert half.executed == ins.uops[2:5]


def test_backlog_of_earlier_stores() -> None:
    """An earlier STORE keeps the store module busy past the last instruction's start by its
    duration minus the compute work after it (never less: that work is taken as if it never
    waited)."""
    from vta.isa import Unit, definition_of

    h = hw("pynq")
    st = _store(100, 64, 1)
    d = definition_of(st.insn).duration(st.insn, h)
    assert DT._backlog([st], Unit.COMPUTE, h) == d
    work = _alu(AluOp.MAX, tuple(Uop(k, k, 0) for k in range(8)))
    w = definition_of(work.insn).duration(dataclasses.replace(work.insn, uop_end=8), h)
    assert DT._backlog([st, work], Unit.COMPUTE, h) == max(0, d - w)
    long_work = _alu(AluOp.MAX, tuple(Uop(k, k, 0) for k in range(8)), iter_in=256, dst_in=8)
    assert definition_of(long_work.insn).duration(
        dataclasses.replace(long_work.insn, uop_end=8), h) > d
    assert DT._backlog([st, long_work], Unit.COMPUTE, h) == 0


def test_a_tail_queued_behind_an_earlier_store_is_not_split() -> None:
    """Splitting only helps when the store module is free: behind a long earlier STORE the
    pieces would queue and each pay its latency (found on TC's tensordot planes, where the
    split made a 1,573-cycle program 10 cycles slower)."""
    h = hw("pynq")
    last = _big_tail()
    tail = _store(0, 1, 1024)
    assert DT._drained([last, tail], h) is not None
    earlier = _store(1024, 512, 1)  # 512 rows of one entry: long
    assert DT._drained([earlier, last, tail], h) is None


def test_a_tail_alike_is_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The choice of parts is memoised by the tail's values (``_chosen``): an equal tail made
    of other objects is not planned again, and its replacement is built from its own ``Insn``s
    (their thread and buffer carried), equal to the first one's."""
    h = hw("pynq")
    DT._chosen.cache_clear()
    first = DT._drained([_big_tail(), _store(0, 1, 1024)], h)
    assert first is not None

    def refused(*_args: object) -> None:
        raise AssertionError("planned again")

    monkeypatch.setattr(DT, "_plan", refused)
    store = dataclasses.replace(_store(0, 1, 1024), thread=1)
    again = DT._drained([_big_tail(), store], h)
    assert again is not None and again[0] == first[0]
    assert [x.insn for x in again[1]] == [x.insn for x in first[1]]
    assert {x.thread for x in again[1] if isinstance(x.insn, Store)} == {1}
    assert {x.thread for x in again[1] if isinstance(x.insn, Alu)} == {0}


def test_a_plan_that_cannot_beat_the_best_stops_making_parts() -> None:
    """``_timed`` with a finish to beat: where the tail's fetch, the store backlog and its
    pieces one after another already reach it, no part is made; where the compute module's
    time reaches it, no later part is made; either way the value returned is a lower bound of
    the plan's finish, never below ``beat``; with a ``beat`` above the finish, the finish and
    the whole plan."""
    h = hw("pynq")
    last, stores = _big_tail(), [_store(0, 8, 128), _store(1024, 1, 64)]
    tops = DT._last_writers(DT._dst_entries(last), stores)
    plan = DT._plan(last, stores, tops, 8, h)
    assert plan is not None
    t = DT._finish(plan, h, 1 + len(stores), 0.0)

    def timed(beat: float) -> tuple[float, DT.Made, list[DT.Item]]:
        made: DT.Made = {}
        layout = DT._layout(last, stores, tops, 8, h, made)
        assert layout is not None
        kept: list[DT.Item] = []
        got = DT._timed(DT._items(last, layout, h, made), layout[2], layout[3], h,
                        1 + len(stores), 0.0, beat, kept)
        return got, made, kept

    pieces = sum(p[4] for p in plan if p[3])
    got, made, kept = timed(float(pieces))
    assert pieces <= got <= t and not kept and all(k[0] >= 0 for k in made)  # no part
    start = DT._fetched(h, len(plan), 1 + len(stores)) + pieces  # the bound before any part
    got, made, kept = timed(start + 1)
    assert start + 1 <= got <= t and 0 < sum(k[0] < 0 for k in made) < 8
    got, made, kept = timed(t + 1)
    assert got == t and [p[:2] + p[3:] for p in kept] == [p[:2] + p[3:] for p in plan]
