"""coproc_sync: dependency tokens between the load, compute and store modules."""

import pytest
from _accel_ir import PYNQ, isa, stream, uops
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.passes.coproc_sync import _Tokens, conflicts, insert_tokens
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError
from vta.isa import Unit

A = buf("A", (2, 1, 16), "int8")
W = buf("W", (1, 16, 16), "int8")
RES = buf("res", (2, 1, 16), "int8")
TEXT = """\
LOAD.INP sram=0 dram=0 y=1 x=2 stride=2 {}
LOAD.WGT sram=0 dram=0 y=1 x=1 stride=1 {}
GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0 {}
STORE.OUT sram=0 dram=0 y=1 x=2 stride=2 {}
LOAD.INP sram=0 dram=0 y=1 x=2 stride=2 {}
"""


def _stream(*deps: str) -> object:
    li, lw, g, st, li2 = isa(TEXT.format(*deps))
    return stream([A, W, RES], [], Insn(li, A), Insn(lw, W), Insn(g, None, uops((0, 0, 0),
                  (1, 1, 0))), Insn(st, RES), Insn(li2, A))


def test_raw_and_war_conflicts_get_push_pop_pairs() -> None:
    """The GEMM waits for the second load (RAW on inp/wgt), the store for the GEMM (RAW on
    acc/out); the next load of the input buffer waits for the GEMM that reads it (WAR)."""
    before = _stream("", "", "", "", "")
    expected = _stream("", "| push_next", "| pop_prev push_prev push_next", "| pop_prev",
                       "| pop_next")
    assert_structural_equal(insert_tokens(before, PYNQ), expected)


def test_an_unflattened_body_is_refused() -> None:
    f = func("f", [A], alloc(buf("t", (2, 1, 16), "int8", "inp"), loop(2, lambda i: A.store(
        0, i, 0, 0))))
    with pytest.raises(CompileError, match="f: token insertion needs the flattened instruction "
                                           "stream"):
        insert_tokens(f, PYNQ)


def _conflicts_by_entry(stream: list[tuple[int, list[tuple[str, int, int, bool]]]],
                        depth: dict[str, int], rows: int) -> list[list[int]]:
    """``conflicts`` by its definition: per memory, per module row, the latest instruction
    writing and reading each entry, updated instruction by instruction."""
    last_w = {m: [[-1] * d for _ in range(rows)] for m, d in depth.items()}
    last_r = {m: [[-1] * d for _ in range(rows)] for m, d in depth.items()}
    out = []
    for t, (row, acc) in enumerate(stream):
        latest = [-1] * rows
        for mem, lo, hi, wr in acc:
            for r in range(rows):
                for e in range(lo, min(hi, depth[mem])):
                    latest[r] = max(latest[r], last_w[mem][r][e],
                                    last_r[mem][r][e] if wr else -1)
        for mem, lo, hi, wr in acc:
            for e in range(lo, min(hi, depth[mem])):
                (last_w if wr else last_r)[mem][row][e] = t
        out.append(latest)
    return out


_ACCESS = st.tuples(st.sampled_from(["inp", "acc", "uop"]), st.integers(0, 20),
                    st.integers(0, 8), st.booleans()).map(
    lambda a: (a[0], a[1], a[1] + a[2], a[3]))  # (memory, lo, hi, writes); some empty


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(_ACCESS, max_size=4)), max_size=30))
def test_conflicts_match_a_table_updated_instruction_by_instruction(
        stream: list[tuple[int, list[tuple[str, int, int, bool]]]]) -> None:
    """``conflicts`` (a running maximum over the segments between the ranges' boundaries,
    per memory) gives the answers of per-entry tables updated one instruction at a time: the
    latest earlier conflicting instruction of every module, on overlapping, nested, repeated
    and empty ranges, ranges past the memory's end, and several accesses of one memory in one
    instruction."""
    depth = {"inp": 24, "acc": 16, "uop": 32}
    got = conflicts(stream, depth, 4).tolist()
    assert got == _conflicts_by_entry(stream, depth, 4)


def test_clocks_are_worked_out_only_where_a_relay_may_be_due() -> None:
    """On VTA's chain every module pair that conflicts shares a queue: no relay is ever due,
    so the tokens are worked out a queue at a time (``_by_queue``) and no instruction's clock
    (what it knows complete) is computed; one by one (``_one_by_one``, the path of hardware
    that may need relays), the tokens are the same and the clocks are still made only on
    demand."""
    insns = list(_stream("", "", "", "", "").body.stmts)  # type: ignore[attr-defined]
    expected = _stream("", "| push_next", "| pop_prev push_prev push_next", "| pop_prev",
                       "| pop_next")
    tokens = _Tokens(PYNQ)
    out = tokens.run(insns)
    assert tokens.done == [] and tokens.made_of == [] and len(out) == 5
    assert_structural_equal(S.seq(*out), expected.body)  # type: ignore[attr-defined]
    tokens = _Tokens(PYNQ)
    rows, table = tokens._table(insns)
    tokens._one_by_one(insns, rows, table.tolist())
    assert tokens.done == [] and len(tokens.made_of) == 5
    assert_structural_equal(S.seq(*tokens._given()), expected.body)  # type: ignore[attr-defined]
    tokens._known()  # worked out on demand: each module's latest known complete instruction
    assert [c[Unit.COMPUTE] for c in tokens.done] == [-1, -1, 2, 2, 2]


def test_flag_sets_are_bits_of_the_instruction_word_order() -> None:
    """The pass keeps each instruction's flags as a set of bits (``_BIT``, in ``DEP_FLAGS``
    order), one ``Deps`` per distinct set at the end; a retargeted push moves its bit."""
    from vta.compiler.accel.passes.coproc_sync import _BIT, _deps
    from vta.isa import Deps
    from vta.isa.insn import DEP_FLAGS

    assert [_BIT[n] for n in DEP_FLAGS] == [1, 2, 4, 8]
    assert _deps(_BIT["pop_prev"] | _BIT["push_next"]) == Deps(pop_prev=True, push_next=True)
    assert _deps(0) == Deps()
    tokens = _Tokens(PYNQ)
    q = (Unit.LOAD, Unit.COMPUTE)
    tokens.pending = [_BIT["push_next"], 0, 0]
    tokens.push_at[q] = [0]
    tokens._retarget(q, 1)
    assert tokens.pending == [0, _BIT["push_next"], 0] and tokens.push_at[q] == [1]


def test_extremes_of_a_copied_block_come_from_the_memo() -> None:
    """flatten gives each instruction its own tuple of a block made before, of the same micro-op
    objects: its extremes are the original's, without a new entry; a tuple with the same first
    micro-op and length but other contents gets its own."""
    from vta.compiler.accel.passes import coproc_sync as C

    block = uops((5, 1, 0), (2, 7, 0), (9, 3, 0))
    assert C._extremes(block, "dst") == (2, 9)
    n = len(C._EXTREMES)
    copy = tuple(list(block))
    assert copy is not block
    assert C._extremes(copy, "dst") == (2, 9)
    assert len(C._EXTREMES) == n
    other = (block[0], *uops((0, 0, 0), (12, 0, 0)))
    assert C._extremes(other, "dst") == (0, 12)
    assert C._extremes(block, "src") == (1, 7)
