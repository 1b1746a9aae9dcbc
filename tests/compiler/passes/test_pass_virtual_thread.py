"""virtual_thread: a vthread loop becomes one copy of each stage per thread, interleaved."""

from _accel_ir import PYNQ

from vta.compiler.accel.passes.virtual_thread import inject_virtual_thread
from vta.compiler.accel.vta_ir import DmaLoad
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, attr, buf, func, loop, seq, stage
from vta.compiler.ir.structural import assert_structural_equal

A = buf("A", (12, 1, 16), "int8")
T = buf("a_inp", (4, 1, 16), "int8", "inp")
Z = E.IntImm(0)


def _load(sram: E.ExprLike, dram: E.ExprLike) -> DmaLoad:
    i = E.IntImm
    return DmaLoad("inp", T, E.as_expr(sram), A, E.as_expr(dram), i(1), i(2), i(2), Z, Z, Z, Z)


def test_threads_are_copied_per_stage_inside_the_tile_loop() -> None:
    """The tile loop does not depend on the thread: the thread loop moves inside it and each
    thread gets its own copy of the load (its half of the buffer, its rows of A)."""
    before = func("f", [A], alloc(T, loop(2, lambda vt: loop(3, lambda t: stage(
        "a_inp", _load(vt * 2, t * 4 + vt * 2))), kind=S.ForKind.VTHREAD)))
    expected = func("f", [A], alloc(T, loop(3, lambda t: seq(
        attr("vthread", 0, stage("a_inp", _load(0, t * 4))),
        attr("vthread", 1, stage("a_inp", _load(2, t * 4 + 2)))))))
    assert_structural_equal(inject_virtual_thread(before, PYNQ), expected)


def test_a_stage_no_thread_uses_stays_one_copy() -> None:
    before = func("f", [A], alloc(T, loop(2, lambda vt: stage("a_inp", _load(0, 0)),
                                          kind=S.ForKind.VTHREAD)))
    expected = func("f", [A], alloc(T, stage("a_inp", _load(0, 0))))
    assert_structural_equal(inject_virtual_thread(before, PYNQ), expected)
