"""drain_tail: the last ALU instruction is split so the tile's store overlaps it."""

from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes.drain_tail import drain_tail
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import buf
from vta.compiler.ir.structural import assert_structural_equal

RES = buf("res", (64, 1, 16), "int8")
ACC = buf("c_acc", (64, 1, 16), "int32", "acc")
ROWS = uops(*((k, k, 0) for k in range(64)))  # one micro-op per entry


def test_last_alu_instruction_splits_into_parts_each_followed_by_its_rows() -> None:
    """64 entries, 8 rows of 8: four parts of 16 micro-ops (the count whose tail ends first on
    pynq's timing), each followed by the store of the two rows it completes."""
    g, alu, st = isa("GEMM uop=0:64 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                     "ALU.MAX uop=0:64 iter=1,1 dst=0,0 src=0,0 imm=0\n"
                     "STORE.OUT sram=0 dram=0 y=8 x=8 stride=8")
    before = stream([RES], [ACC], Insn(g, None, ROWS), Insn(alu, None, ROWS), Insn(st, RES))
    parts = isa("\n".join(f"ALU.MAX uop={a}:{a + 16} iter=1,1 dst=0,0 src=0,0 imm=0\n"
                          f"STORE.OUT sram={a} dram={a} y=2 x=8 stride=8"
                          for a in (0, 16, 32, 48)))
    tail = [Insn(x, None, ROWS) if k % 2 == 0 else Insn(x, RES, note="tail piece")
            for k, x in enumerate(parts)]
    expected = stream([RES], [ACC], Insn(g, None, ROWS), *tail)
    assert_structural_equal(drain_tail(before, PYNQ), expected)


def test_a_gemm_before_the_store_is_not_split() -> None:
    """An accumulating instruction's executions do not commute: the stream is kept."""
    g, st = isa("GEMM uop=0:64 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                "STORE.OUT sram=0 dram=0 y=8 x=8 stride=8")
    f = stream([RES], [ACC], Insn(g, None, ROWS), Insn(st, RES))
    assert drain_tail(f, PYNQ) is f


def test_an_alu_reading_entries_others_write_is_not_split() -> None:
    """Each micro-op adds the next entry into its own: splitting could read a written one."""
    shifted = uops(*((k, (k + 1) % 64, 0) for k in range(64)))
    alu, st = isa("ALU.ADD uop=0:64 iter=1,1 dst=0,0 src=0,0\n"
                  "STORE.OUT sram=0 dram=0 y=8 x=8 stride=8")
    f = stream([RES], [ACC], Insn(alu, None, shifted), Insn(st, RES))
    assert drain_tail(f, PYNQ) is f


def test_parts_and_pieces_are_timed_by_their_definition_not_the_memo(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every part and piece is a new instruction made once per tail: it is timed by its
    definition directly, never through ``_insn_duration``'s memo (which would only hash it),
    and the split is the same."""
    from vta.compiler.accel.passes import drain_tail as D

    g, alu, st = isa("GEMM uop=0:64 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                     "ALU.MAX uop=0:64 iter=1,1 dst=0,0 src=0,0 imm=0\n"
                     "STORE.OUT sram=0 dram=0 y=8 x=8 stride=8")
    before = stream([RES], [ACC], Insn(g, None, ROWS), Insn(alu, None, ROWS), Insn(st, RES))
    expected = drain_tail(before, PYNQ)
    asked: list[object] = []
    memo = D._insn_duration

    def counted(insn: object, hw: object) -> int:
        asked.append(insn)
        return memo(insn, hw)  # type: ignore[arg-type]

    monkeypatch.setattr(D, "_insn_duration", counted)
    assert_structural_equal(drain_tail(before, PYNQ), expected)
    assert asked == [g]  # the backlog's GEMM only
