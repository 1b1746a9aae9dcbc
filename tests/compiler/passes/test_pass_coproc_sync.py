"""coproc_sync: dependency tokens between the load, compute and store modules."""

import pytest
from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes.coproc_sync import insert_tokens
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError

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
