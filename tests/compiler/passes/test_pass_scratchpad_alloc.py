"""scratchpad_alloc: an SRAM base per on-chip buffer, one copy per virtual thread."""

import pytest
from _accel_ir import PYNQ, sram

from vta.compiler.accel.passes.scratchpad_alloc import ScratchpadOverflow, allocate_scratchpads
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError

A = buf("A", (4, 1, 16), "int8")


def test_buffers_laid_out_per_scope_and_per_thread() -> None:
    inp = buf("a_inp", (3, 1, 16), "int8", "inp")
    inp2 = buf("b_inp", (2, 1, 16), "int8", "inp")
    acc = buf("c_acc", (2, 1, 16), "int32", "acc")
    vt = []

    def body(v: object) -> object:
        vt.append(v)
        return alloc(acc, A.store(0, 0, 0, 0))

    before = func("f", [A], alloc(inp, alloc(inp2, loop(2, body, kind=S.ForKind.VTHREAD))))
    (v,) = vt
    expected = func("f", [A], before.body,
                    sram=sram((inp, 0, 3), (inp2, 3, 2), (acc, v * 2, 2)))
    assert_structural_equal(allocate_scratchpads(before, PYNQ), expected)


def test_overflow_names_buffer_bytes_and_threads() -> None:
    big = buf("a_inp", (1024, 1, 16), "int8", "inp")  # pynq: 2048 entries of 16 bytes
    f = func("f", [A], loop(4, lambda v: alloc(big, A.store(0, 0, 0, 0)),
                            kind=S.ForKind.VTHREAD))
    with pytest.raises(ScratchpadOverflow, match=r"buffer a_inp \(inp\) needs 65536 bytes "
                                                 r"\(1024 entries x 4 virtual threads\), "
                                                 r"available 32768 bytes"):
        allocate_scratchpads(f, PYNQ)


def test_out_scope_and_a_wrong_entry_shape_are_refused() -> None:
    out = buf("o", (2, 1, 16), "int8", "out")
    with pytest.raises(CompileError, match="scope out is managed by the pipeline"):
        allocate_scratchpads(func("f", [A], alloc(out, A.store(0, 0, 0, 0))), PYNQ)
    odd = buf("w", (2, 8, 16), "int8", "wgt")
    with pytest.raises(CompileError, match=r"w \(wgt\) must end in one entry \(16, 16\) of "
                                           r"pynq, got shape \(2, 8, 16\)"):
        allocate_scratchpads(func("f", [A], alloc(odd, A.store(0, 0, 0, 0))), PYNQ)
