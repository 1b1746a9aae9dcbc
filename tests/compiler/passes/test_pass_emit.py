"""emit: the synchronised stream becomes a ``Program`` (DRAM allocations, micro-op blocks,
absolute DRAM offsets, FINISH). Its output is a program, so the expected form is assembly."""

import pytest
from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes.emit import emit_program
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.errors import CompileError
from vta.isa import disassemble

A = buf("A", (2, 1, 16), "int8")
W = buf("W", (1, 16, 16), "int8")
RES = buf("res", (2, 1, 16), "int8")


def test_blocks_are_shared_and_loaded_once_offsets_made_absolute() -> None:
    li, lw, g, st = isa("LOAD.INP sram=0 dram=0 y=1 x=2 stride=2\n"
                        "LOAD.WGT sram=0 dram=0 y=1 x=1 stride=1 | push_next\n"
                        "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev\n"
                        "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1 | pop_prev")
    (g2,) = isa("GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next")
    block = uops((0, 0, 0), (1, 1, 0))
    f = stream([A, W, RES], [], Insn(li, A), Insn(lw, W), Insn(g, None, block),
               Insn(g2, None, uops((0, 0, 0), (1, 1, 0))), Insn(st, RES))
    assert disassemble(emit_program(f, PYNQ)) == """\
.alloc A inp 2
.alloc W wgt 1
.alloc res out 2
.alloc uops uop 2
.uop uops 0 0 0
.uop uops 1 1 0
LOAD.UOP sram=0 dram=uops+0 y=1 x=2 stride=2
LOAD.INP sram=0 dram=A+0 y=1 x=2 stride=2
LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 | push_next
GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev
GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=res+1 y=1 x=1 stride=1 | pop_prev
FINISH
"""


def test_one_instruction_placed_alike_is_one_object() -> None:
    """Two uses of one GEMM instruction object (flatten and token insertion share them among
    tiles) running one block become one placed instruction object; an equal GEMM that is
    another object is placed on its own, and the program is the same either way."""
    li, g, st = isa("LOAD.INP sram=0 dram=0 y=1 x=2 stride=2\n"
                    "GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n"
                    "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1")
    (other,) = isa("GEMM uop=0:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0")
    block = uops((0, 0, 0), (1, 1, 0))
    f = stream([A, RES], [], Insn(li, A), Insn(g, None, block), Insn(g, None, block),
               Insn(other, None, block), Insn(st, RES))
    program = emit_program(f, PYNQ)
    gemms = [i for i in program.instructions if type(i) is type(g)]
    assert len(gemms) == 3 and gemms[0] is gemms[1] and gemms[2] is not gemms[0]
    assert gemms[0] == gemms[2]


def test_an_out_of_range_immediate_is_named_at_its_program_position() -> None:
    """emit checks immediates with the definitions it looked up for placing (one per
    instruction): the error names the SHR at its place in the program, after the LOAD.UOP."""
    li, shr, st = isa("LOAD.INP sram=0 dram=0 y=1 x=2 stride=2\n"
                      "ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=16\n"
                      "STORE.OUT sram=0 dram=1 y=1 x=1 stride=1")
    f = stream([A, RES], [], Insn(li, A), Insn(shr, None, uops((0, 0, 0))), Insn(st, RES))
    with pytest.raises(CompileError, match=r"instruction 2 \(ALU.SHR .*imm=16\): ALU.SHR's "
                                           r"imm=16 is outside -16..15"):
        emit_program(f, PYNQ)


def test_a_buffer_moved_as_two_kinds_is_refused() -> None:
    li, lw = isa("LOAD.INP sram=0 dram=0 y=1 x=1 stride=1\n"
                 "LOAD.WGT sram=0 dram=0 y=1 x=1 stride=1")
    f = stream([A], [], Insn(li, A), Insn(lw, A))
    with pytest.raises(CompileError, match="f: global buffer A is moved as both inp and wgt"):
        emit_program(f, PYNQ)


def test_an_unflattened_body_is_refused() -> None:
    f = func("f", [A], alloc(buf("t", (2, 1, 16), "int8", "inp"), loop(2, lambda i: A.store(
        0, i, 0, 0))))
    with pytest.raises(CompileError, match="f: emit needs the flattened instruction stream"):
        emit_program(f, PYNQ)


def test_a_copied_block_is_viewed_once_and_a_lookalike_on_its_own() -> None:
    """``_Views``: a tuple of the same micro-op objects as one met before (flatten's copies)
    gets that one's content without computing it again; a tuple with the same first micro-op
    and length but another content gets its own; per ``used`` fields alike."""
    from vta.compiler.accel.passes import emit

    block = uops((0, 0, 0), (1, 1, 0), (2, 5, 0))
    view = emit._Views()
    first = view(block)
    assert first == ((0, 0, 0), (1, 1, 0), (2, 5, 0))
    copy = tuple(list(block))
    assert view(copy) is first  # the content made for ``block``
    lookalike = (block[0], *uops((1, 1, 0), (2, 6, 0)))
    assert view(lookalike) == ((0, 0, 0), (1, 1, 0), (2, 6, 0))
    dst = view(block, ("dst",))
    assert dst == (0, 1, 2) and view(copy, ("dst",)) is dst
    assert view(lookalike, ("dst",)) == (0, 1, 2)
