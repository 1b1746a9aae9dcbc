"""emit's round-15 shortcuts (issue 22): the blocks' views are one memo for the emits of a
process (a candidate's blocks of micro-op objects met in an earlier candidate are not viewed
again), bounded; the definitions' roles and the immediates check read definitions by
themselves; and with every block resident each micro-op tuple's position is read once."""

from __future__ import annotations

from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes import emit
from vta.compiler.accel.passes._common import flat_stream
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import buf
from vta.isa import definition_of


def _gemm_stream(block: tuple) -> object:  # type: ignore[type-arg]
    a = buf("A", (2, 1, 16), "int8")
    res = buf("res", (2, 1, 16), "int8")
    li, g, st = isa("LOAD.INP sram=0 dram=1 y=1 x=1 stride=1\n"
                    "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                    "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1")
    return stream([a, res], [], Insn(li, a), Insn(g, None, block), Insn(g, None, block),
                  Insn(st, res))


def test_a_later_emit_reads_an_earlier_ones_views() -> None:
    """Two emits of blocks holding the same micro-op objects (flatten's ``_block`` copies
    across a layer's candidates) view them once: the second finds the first's view."""
    block = uops((0, 0, 0), (1, 1, 0))
    first = emit.emit_program(_gemm_stream(block), PYNQ)  # type: ignore[arg-type]
    view = emit._views()
    made = view(block)
    second = emit.emit_program(_gemm_stream(tuple(list(block))), PYNQ)  # type: ignore[arg-type]
    assert emit._views() is view and view(tuple(list(block))) is made
    assert first.instructions == second.instructions


def test_the_shared_views_are_replaced_once_they_hold_too_much(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(emit, "_VIEWS_UOPS", 3)
    old = emit._views()
    old(uops((0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)))
    assert emit._views() is not old
    fresh = emit._views()
    assert fresh.held == 0 and emit._views() is fresh


def test_definitions_and_roles_are_each_instructions() -> None:
    block = uops((0, 0, 0), (1, 1, 0))
    insns = flat_stream(_gemm_stream(block))[0]  # type: ignore[arg-type,index]
    defs, roles = emit._definitions(insns)
    assert defs == [definition_of(i.insn) for i in insns]
    assert roles == [definition_of(i.insn).role for i in insns]


def test_resident_blocks_are_placed_at_their_positions() -> None:
    """Two GEMMs over two blocks, all resident: each runs its block where the LOAD.UOP put it
    (the second block after the first), the shared instruction placed once per position."""
    a, b = uops((0, 0, 0), (1, 1, 0)), uops((5, 0, 0), (6, 1, 0))
    inp = buf("A", (2, 1, 16), "int8")
    li, g = isa("LOAD.INP sram=0 dram=1 y=1 x=1 stride=1\n"
                "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0")
    f = stream([inp], [], Insn(li, inp), Insn(g, None, a), Insn(g, None, b), Insn(g, None, a))
    program = emit.emit_program(f, PYNQ)
    gemms = [x for x in program.instructions if definition_of(x).role == "compute"]
    assert [(x.uop_bgn, x.uop_end) for x in gemms] == [(0, 2), (2, 4), (0, 2)]
    assert gemms[0] is gemms[2]


def test_a_bound_is_read_as_one_nonnegative_expression() -> None:
    """inject_dma's ``_as_nonnegative``: each order comparison as the ``lin`` of ``lin >= 0``
    (only that one built), as the table of all four read it."""
    from vta.compiler.accel.passes.inject_dma import _as_nonnegative
    from vta.compiler.ir import expr as E
    from vta.compiler.ir import poly

    x = E.Var("x")
    for c, want in ((x >= 2, x - 2), (x > 2, x - 2 - 1), (x <= 5, 5 - x), (x < 5, 5 - x - 1)):
        assert isinstance(c, E.Cmp)
        assert poly.linear_form(_as_nonnegative(c)) == poly.linear_form(want)
