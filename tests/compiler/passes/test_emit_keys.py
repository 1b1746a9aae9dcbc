"""emit's block keys and DMA rebasing (issue 22, round 12): a view of a block is interned, so
its id (``_Views.key``) tells views apart exactly as their contents do; a DMA of the buffer
placed first (DRAM base 0) is placed as the instruction itself, any other as a rebased copy."""

from __future__ import annotations

from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes import emit as emit_module
from vta.compiler.accel.passes.emit import _Views, emit_program
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import buf


def test_equal_views_share_a_key_and_unequal_ones_do_not() -> None:
    view = _Views()
    a = uops((0, 0, 0), (1, 1, 0))
    b = uops((0, 0, 0), (1, 1, 0))  # equal micro-ops, other objects
    c = uops((0, 5, 0), (1, 6, 0))  # the same dst, other src
    assert a[0] is not b[0]
    assert view.key(a) == view.key(b) != view.key(c)
    assert view(a) is view(b) and view(a) == ((0, 0, 0), (1, 1, 0))
    assert view.key(a, ("dst",)) == view.key(c, ("dst",)) != view.key(a)
    assert view(c, ("dst",)) == (0, 1)


def test_a_dma_at_base_zero_is_kept_and_others_are_rebased() -> None:
    a = buf("A", (2, 1, 16), "int8")
    res = buf("res", (2, 1, 16), "int8")
    li, g, st = isa("LOAD.INP sram=0 dram=1 y=1 x=1 stride=1\n"
                    "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                    "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1")
    f = stream([a, res], [], Insn(li, a), Insn(g, None, uops((0, 0, 0), (1, 1, 0))),
               Insn(st, res))
    program = emit_program(f, PYNQ)
    load, store = program.instructions[1], program.instructions[-2]
    assert program.allocations[0].base == 0 and load is li
    assert store is not st and store.dram_base == st.dram_base + program.allocations[1].base


def test_a_partial_block_is_matched_among_blocks_of_its_length_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An ALU immediate needs only ``dst``: it runs the earlier GEMM block of its length whose
    ``dst`` agree, and no ``dst`` view of a block of another length is made."""
    a = buf("A", (2, 1, 16), "int8")
    res = buf("res", (2, 1, 16), "int8")
    li, g3, g2, mx, st = isa("LOAD.INP sram=0 dram=0 y=1 x=1 stride=1\n"
                             "GEMM uop=0:3 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                             "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                             "ALU.MAX uop=0:2 iter=1,1 dst=0,0 src=0,0 imm=0\n"
                             "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1")
    made: list[tuple[int, object]] = []
    real = emit_module._view

    def counting(block, used):  # type: ignore[no-untyped-def]
        made.append((len(block), used))
        return real(block, used)

    monkeypatch.setattr(emit_module, "_view", counting)
    f = stream([a, res], [], Insn(li, a),
               Insn(g3, None, uops((0, 0, 0), (1, 1, 0), (2, 2, 0))),
               Insn(g2, None, uops((5, 0, 0), (6, 1, 0))),
               Insn(mx, None, uops((5, 0, 0), (6, 0, 0))), Insn(st, res))
    program = emit_program(f, PYNQ)
    gemm2, alu = program.instructions[3], program.instructions[4]
    assert (alu.uop_bgn, alu.uop_end) == (gemm2.uop_bgn, gemm2.uop_end) == (3, 5)
    assert (3, ("dst",)) not in made and (2, ("dst",)) in made
