"""hoist_resets: on a separate ALU pipeline each reset moves up to its last conflict."""

from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes.hoist_resets import hoist_resets
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import buf
from vta.compiler.ir.structural import assert_structural_equal
from vta.config import HwConfig

OVERLAP = HwConfig.load("pynq_overlap")
RES = buf("res", (4, 1, 16), "int8")
ACC = buf("c_acc", (4, 1, 16), "int32", "acc")

TEXT = """\
GEMM uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0
STORE.OUT sram=0 dram=0 y=1 x=1 stride=1
GEMM uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0
ALU.ADD uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=1
ALU.ADD reset uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=0
"""


def _program(hw: HwConfig) -> list[Insn]:
    """Thread 0 computes and stores entry 0; thread 1 computes entry 2 and adds 1 to it; then
    the reset of entry 0 for thread 0's next tile."""
    g0, st, g1, add, reset = isa(TEXT, hw)
    return [Insn(g0, None, uops((0, 0, 0))), Insn(st, RES), Insn(g1, None, uops((2, 1, 0))),
            Insn(add, None, uops((2, 2, 0))), Insn(reset, None, uops((0, 0, 0)))]


def test_reset_moves_to_just_after_the_store_it_must_follow() -> None:
    g0, st, g1, add, reset = _program(OVERLAP)
    before = stream([RES], [ACC], g0, st, g1, add, reset)
    expected = stream([RES], [ACC], g0, st, reset, g1, add)
    assert_structural_equal(hoist_resets(before, OVERLAP), expected)


def test_without_a_separate_alu_nothing_moves() -> None:
    f = stream([RES], [ACC], *_program(PYNQ))
    assert hoist_resets(f, PYNQ) is f
