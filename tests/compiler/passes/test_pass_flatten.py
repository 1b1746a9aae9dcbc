"""flatten: tile loops evaluated into one flat stream of concrete instructions."""

import pytest
from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes.flatten import flatten
from vta.compiler.accel.vta_ir import ComputeInsn, DmaLoad, Insn, Offsets, UopTable
from vta.compiler.ir import expr as E
from vta.compiler.ir.builder import alloc, attr, buf, func, loop, seq
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError
from vta.isa.builtins import GEMM

A = buf("A", (4, 1, 16), "int8")
T = buf("a_inp", (2, 1, 16), "int8", "inp")
Z = E.IntImm(0)


def test_loops_evaluate_into_instructions_with_concrete_micro_ops() -> None:
    def tile(o: E.Var) -> object:
        load = DmaLoad("inp", T, Z, A, o * 2, E.IntImm(1), E.IntImm(2), E.IntImm(2), Z, Z, Z, Z)
        gemm = ComputeInsn(GEMM, False, UopTable((o * 2, Z, Z), Offsets(((0, 0, 0), (1, 1, 0)))),
                           1, 1, (("dst", 0, 0), ("src", 0, 0), ("wgt", 0, 0)))
        return attr("vthread", 1, alloc(T, seq(load, gemm)))

    before = func("f", [A], loop(2, tile))
    ld0, ld1, gemm = isa("LOAD.INP sram=0 dram=0 y=1 x=2 stride=2\n"
                         "LOAD.INP sram=0 dram=2 y=1 x=2 stride=2\n"
                         "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0")
    expected = stream([A], [T],
                      Insn(ld0, A, (), 1), Insn(gemm, None, uops((0, 0, 0), (1, 1, 0)), 1),
                      Insn(ld1, A, (), 1), Insn(gemm, None, uops((2, 0, 0), (3, 1, 0)), 1))
    assert_structural_equal(flatten(before, PYNQ), expected)


def test_a_dma_of_no_rows_is_dropped() -> None:
    empty = DmaLoad("inp", T, Z, A, Z, Z, E.IntImm(2), E.IntImm(2), Z, Z, Z, Z)
    (ld,) = isa("LOAD.INP sram=0 dram=0 y=1 x=2 stride=2")
    full = DmaLoad("inp", T, Z, A, Z, E.IntImm(1), E.IntImm(2), E.IntImm(2), Z, Z, Z, Z)
    got = flatten(func("f", [A], alloc(T, seq(empty, full))), PYNQ)
    assert_structural_equal(got, stream([A], [T], Insn(ld, A)))


def test_an_unlowered_statement_is_refused_naming_it() -> None:
    f = func("f", [A], A.store(0, 0, 0, 0))
    with pytest.raises(CompileError, match=r"f: flatten cannot execute BufferStore \(a pass "
                                           r"before it left an unlowered statement: A\[0, 0, 0\] "
                                           r"= 0\)"):
        flatten(f, PYNQ)


def test_a_statement_no_loop_reaches_is_never_executed() -> None:
    """Flatten builds every statement once before running the loops, and still refuses an
    unlowered statement only where the loops reach it (a loop of no iterations, here)."""
    f = func("f", [A], loop(0, lambda _i: A.store(0, 0, 0, 0)))
    assert_structural_equal(flatten(f, PYNQ), stream([A], []))


def test_blocks_of_one_offsets_and_bases_share_their_micro_ops() -> None:
    """Two instructions whose tables share offsets and whose bases evaluate alike get blocks
    of the same ``Uop`` objects (made once), each block a tuple of its own (the emitter tells
    instructions' blocks apart by identity)."""
    offs = Offsets(((0, 0, 0), (1, 1, 0)))
    facs = (("dst", 0, 0), ("src", 0, 0), ("wgt", 0, 0))

    def tile(o: E.Var) -> object:
        first = ComputeInsn(GEMM, False, UopTable((Z, Z, Z), offs), 1, 1, facs)
        second = ComputeInsn(GEMM, False, UopTable((o * 0, Z, Z), offs), 1, 1, facs)
        return seq(first, second)

    out = [x for x in flatten(func("f", [A], loop(2, tile)), PYNQ).body.stmts  # type: ignore[attr-defined]
           if isinstance(x, Insn)]
    assert len(out) == 4 and all(x.uops == out[0].uops for x in out)
    assert all(a is b for x in out for a, b in zip(x.uops, out[0].uops, strict=True))
    assert len({id(x.uops) for x in out}) == 2  # each table's own tuple, reused by its loop
