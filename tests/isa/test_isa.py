"""ISA: VTA's bit positions on pynq, exact encode/decode and asm round trips for every valid
instruction (hypothesis, every shipped config), and named errors for values that do not fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.config import HwConfig
from vta.isa import (
    Alu,
    AluOp,
    AsmError,
    Deps,
    Finish,
    Gemm,
    Instruction,
    IsaError,
    Load,
    MemType,
    Opcode,
    Program,
    ProgramBuilder,
    Store,
    Unit,
    Uop,
    assemble,
    decode,
    decode_program,
    decode_uop,
    decode_uops,
    disassemble,
    encode,
    encode_program,
    encode_uop,
    encode_uops,
    format_insn,
    layout,
    module_of,
    pops_of,
    pushes_of,
)
from vta.isa.timing import chisel_refusal

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {p.stem: HwConfig.from_yaml(p) for p in sorted((ROOT / "hwconfigs").glob("*.yaml"))}
PYNQ = CONFIGS["pynq"]


# ----------------------------------------------------------------- VTA's layout, bit for bit

def test_pynq_positions_match_vta_hw_spec() -> None:
    mem = {n: (pos, w) for n, pos, w in layout(PYNQ, Opcode.LOAD)}
    assert mem["opcode"] == (0, 3) and mem["pop_prev"] == (3, 1) and mem["push_next"] == (6, 1)
    assert mem["mem"] == (7, 3) and mem["sram_base"] == (10, 16) and mem["dram_base"] == (26, 32)
    assert mem["y_size"] == (64, 16) and mem["x_size"] == (80, 16) and mem["x_stride"] == (96, 16)
    assert [mem[p] for p in ("pad_y0", "pad_y1", "pad_x0", "pad_x1")] == [
        (112, 4), (116, 4), (120, 4), (124, 4)]
    g = {n: (pos, w) for n, pos, w in layout(PYNQ, Opcode.GEMM)}
    assert g["reset"] == (7, 1) and g["uop_bgn"] == (8, 13) and g["uop_end"] == (21, 14)
    assert g["iter_out"] == (35, 14) and g["iter_in"] == (49, 14)
    assert g["dst_factor_out"] == (64, 11) and g["dst_factor_in"] == (75, 11)
    assert g["src_factor_out"] == (86, 11) and g["src_factor_in"] == (97, 11)
    assert g["wgt_factor_out"] == (108, 10) and g["wgt_factor_in"] == (118, 10)
    a = {n: (pos, w) for n, pos, w in layout(PYNQ, Opcode.ALU)}
    assert a["src_factor_out"] == (86, 11) and a["src_factor_in"] == (97, 11)
    assert a["op"] == (108, 3) and a["use_imm"] == (111, 1) and a["imm"] == (112, 16)


def test_known_words() -> None:
    # LOAD.INP with every field distinct, checked against a hand-packed word
    insn = Load(MemType.INP, sram_base=5, dram_base=7, y_size=3, x_size=2, x_stride=9,
                pad_y0=1, pad_y1=2, pad_x0=3, pad_x1=4, deps=Deps(pop_next=True, push_next=True))
    want = (0 | (1 << 4) | (1 << 6) | (2 << 7) | (5 << 10) | (7 << 26) | (3 << 64) | (2 << 80)
            | (9 << 96) | (1 << 112) | (2 << 116) | (3 << 120) | (4 << 124))
    assert encode(insn, PYNQ) == want
    alu = Alu(AluOp.SHR, False, 0, 1, 2, 3, 4, 5, 6, 7, True, -8)
    word = encode(alu, PYNQ)
    assert word & 7 == 4 and (word >> 108) & 7 == 3 and (word >> 111) & 1 == 1
    assert (word >> 112) & 0xFFFF == 0xFFF8  # -8 in two's complement
    assert decode(word, PYNQ) == alu
    assert encode(Finish(), PYNQ) == 3
    assert encode_uop(Uop(dst=1, src=2, wgt=3), PYNQ) == 1 | (2 << 11) | (3 << 22)


def test_opcode_4_is_mul_and_documented() -> None:
    assert AluOp(4) is AluOp.MUL
    import vta.isa.insn as insn_mod

    assert "opcode 4 is MUL" in insn_mod.__doc__


# ----------------------------------------------------------------- hypothesis round trips

def _u(bits: int) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << bits) - 1)


deps_st = st.builds(Deps, st.booleans(), st.booleans(), st.booleans(), st.booleans())


def insn_strategy(hw: HwConfig) -> st.SearchStrategy:
    w = hw.isa
    load = st.builds(Load, st.sampled_from([MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC]),
                     _u(w.sram_addr), _u(w.dram_addr), _u(16), _u(16), _u(16), _u(4), _u(4),
                     _u(4), _u(4), deps_st)
    store = st.builds(Store, st.just(MemType.OUT), _u(w.sram_addr), _u(w.dram_addr), _u(16),
                      _u(16), _u(16), deps_st)

    @st.composite
    def loop(draw: st.DrawFn, alu: bool) -> Gemm | Alu:
        bgn = draw(_u(w.uop_idx))
        end = draw(st.integers(bgn, (1 << (w.uop_idx + 1)) - 1))
        common: dict[str, Any] = dict(
            reset=draw(st.booleans()), uop_bgn=bgn, uop_end=end,
            iter_out=draw(_u(14)), iter_in=draw(_u(14)),
            dst_factor_out=draw(_u(w.acc_idx)), dst_factor_in=draw(_u(w.acc_idx)),
            deps=draw(deps_st))
        if alu:
            half = 1 << (w.imm - 1)
            ops = [op for op in AluOp if op.name.lower() in hw.alu.ops]  # what hw enables
            return Alu(op=draw(st.sampled_from(ops)), use_imm=draw(st.booleans()),
                       imm=draw(st.integers(-half, half - 1)),
                       src_factor_out=draw(_u(w.acc_idx)), src_factor_in=draw(_u(w.acc_idx)),
                       **common)
        return Gemm(src_factor_out=draw(_u(w.inp_idx)), src_factor_in=draw(_u(w.inp_idx)),
                    wgt_factor_out=draw(_u(w.wgt_idx)), wgt_factor_in=draw(_u(w.wgt_idx)),
                    **common)

    # VTA's Chisel design cannot run an empty micro-op loop or a DMA of zero rows but some
    # columns (``vta.isa.timing.chisel_refusal``): its configs refuse them
    return st.one_of(load, store, loop(False), loop(True), st.builds(Finish, deps_st)).filter(
        lambda i: chisel_refusal(i, hw) is None)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_encode_decode_round_trip(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    insn = data.draw(insn_strategy(hw))
    word = encode(insn, hw)
    assert 0 <= word < 1 << 128
    assert decode(word, hw) == insn
    assert assemble(format_insn(insn), hw).instructions == (insn,)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_program_binary_and_text_round_trip(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    w = hw.isa
    insns = data.draw(st.lists(insn_strategy(hw), max_size=12))
    words = encode_program(insns, hw)
    assert words.dtype == np.uint64 and words.shape == (len(insns), 2)
    assert decode_program(words, hw) == insns
    uops = data.draw(st.lists(st.builds(Uop, _u(w.acc_idx), _u(w.uop_src), _u(w.wgt_idx)),
                              max_size=8))
    for u in uops:
        assert decode_uop(encode_uop(u, hw), hw) == u
    packed = encode_uops(uops, hw)
    assert packed.dtype == np.uint32 and decode_uops(packed, hw) == uops
    b = ProgramBuilder(hw)
    b.alloc("A", "inp", 64)
    b.alloc("U", "uop", len(uops))
    b.add_uops("U", uops)
    b.alloc("C", "out", 32)
    b.extend(insns)
    prog = b.build()
    text = disassemble(prog)
    assert assemble(text, hw) == prog


# ----------------------------------------------------------------- errors name insn and field

@pytest.mark.parametrize("insn,message", [
    (Gemm(False, 0, 1, 1 << 14, 1, 0, 0, 0, 0, 0, 0),
     "GEMM: field iter_out=16384 does not fit in 14 bits"),
    (Gemm(False, 0, 1, 1, 1, 2048, 0, 0, 0, 0, 0),
     "GEMM: field dst_factor_out=2048 does not fit in 11 bits"),
    (Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 1024, 0),
     "GEMM: field wgt_factor_out=1024 does not fit in 10 bits"),
    (Gemm(False, 5, 4, 1, 1, 0, 0, 0, 0, 0, 0), "GEMM: uop_end=4 is before uop_bgn=5"),
    (Alu(AluOp.ADD, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 40000),
     "ALU: field imm=40000 does not fit in 16 bits (allowed -32768..32767)"),
    (Load(MemType.INP, 0, 1 << 32, 1, 1, 1),
     "LOAD: field dram_base=4294967296 does not fit in 32 bits"),
    (Load(MemType.INP, 0, 0, 1, 1, 1, pad_x1=16), "LOAD: field pad_x1=16 does not fit in 4 bits"),
    (Load(MemType.OUT, 0, 0, 1, 1, 1), "LOAD: field mem=OUT is not a valid target"),
    (Store(MemType.INP, 0, 0, 1, 1, 1), "STORE: field mem=INP is not a valid target"),
    (Load(MemType.INP, -1, 0, 1, 1, 1), "LOAD: field sram_base=-1 does not fit"),
])
def test_out_of_range_fields(insn: Instruction, message: str) -> None:
    with pytest.raises(IsaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        encode(insn, PYNQ)


def test_program_error_names_index() -> None:
    bad: list[Instruction] = [Finish(), Gemm(False, 0, 1, 1 << 14, 1, 0, 0, 0, 0, 0, 0)]
    with pytest.raises(IsaError, match="instruction 1: GEMM: field iter_out"):
        encode_program(bad, PYNQ)


def test_decode_program_names_the_word_it_cannot_decode() -> None:
    """The batch decoder (fields extracted a definition at a time) refuses what ``decode``
    refuses, naming the word's index and ``decode``'s reason."""
    good = encode_program([Finish(), Load(MemType.INP, 0, 0, 1, 1, 1)], PYNQ)
    for word, reason in ((5, "unknown opcode 5"), (7 << 7, "unknown memory type 7"),
                         (4 | (6 << 108), "unknown ALU opcode 6")):
        bad = np.array([[word & ((1 << 64) - 1), word >> 64]], dtype=np.uint64)
        with pytest.raises(IsaError, match=f"instruction 2: .*{reason}"):
            decode_program(np.concatenate([good, bad]), PYNQ)


def test_decode_rejects_unknown_codes() -> None:
    with pytest.raises(IsaError, match="unknown opcode 5"):
        decode(5, PYNQ)
    with pytest.raises(IsaError, match="unknown memory type 7"):
        decode(7 << 7, PYNQ)
    with pytest.raises(IsaError, match="unknown ALU opcode 6"):
        decode(4 | (6 << 108), PYNQ)
    with pytest.raises(IsaError, match="not a 128-bit value"):
        decode(1 << 128, PYNQ)
    with pytest.raises(IsaError, match=r"uop: field|UOP: field dst=2048"):
        encode_uop(Uop(2048, 0, 0), PYNQ)


# ----------------------------------------------------------------- modules and tokens

def test_routing_and_token_queues() -> None:
    assert module_of(Load(MemType.INP, 0, 0, 1, 1, 1)) is Unit.LOAD
    assert module_of(Load(MemType.WGT, 0, 0, 1, 1, 1)) is Unit.LOAD
    assert module_of(Load(MemType.UOP, 0, 0, 1, 1, 1)) is Unit.COMPUTE
    assert module_of(Load(MemType.ACC, 0, 0, 1, 1, 1)) is Unit.COMPUTE
    assert module_of(Store(MemType.OUT, 0, 0, 1, 1, 1)) is Unit.STORE
    assert module_of(Finish()) is Unit.COMPUTE
    ld = Load(MemType.INP, 0, 0, 1, 1, 1, deps=Deps(pop_next=True, push_next=True))
    assert pops_of(ld) == [(Unit.COMPUTE, Unit.LOAD)]
    assert pushes_of(ld) == [(Unit.LOAD, Unit.COMPUTE)]
    g = Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, Deps(True, True, True, True))
    assert pops_of(g) == [(Unit.LOAD, Unit.COMPUTE), (Unit.STORE, Unit.COMPUTE)]
    assert pushes_of(g) == [(Unit.COMPUTE, Unit.LOAD), (Unit.COMPUTE, Unit.STORE)]
    st_ = Store(MemType.OUT, 0, 0, 1, 1, 1, Deps(pop_prev=True, push_prev=True))
    assert pops_of(st_) == [(Unit.COMPUTE, Unit.STORE)]
    assert pushes_of(st_) == [(Unit.STORE, Unit.COMPUTE)]
    with pytest.raises(ValueError, match="pop_prev has no token queue on the load module"):
        pops_of(Load(MemType.INP, 0, 0, 1, 1, 1, deps=Deps(pop_prev=True)))


# ----------------------------------------------------------------- assembler errors

@pytest.mark.parametrize("line,message", [
    ("FOO 1 2", "unknown instruction 'FOO'"),
    ("LOAD.BAR sram=0 dram=0 y=1 x=1 stride=1", "unknown memory type 'BAR'"),
    ("LOAD.INP sram=0 dram=0 y=1 x=1", "missing operand(s) stride"),
    ("LOAD.INP sram=0 dram=0 y=1 x=1 stride=1 color=3", "unknown operand 'color'"),
    ("LOAD.INP sram=zero dram=0 y=1 x=1 stride=1", "sram: expected an integer, got 'zero'"),
    ("LOAD.INP sram=0 dram=Q+1 y=1 x=1 stride=1", "dram: no allocation named 'Q'"),
    ("LOAD.INP sram=0 dram=O+0 y=1 x=1 stride=1", "allocation 'O' holds out elements"),
    ("LOAD.INP sram=0 dram=0 y=1 x=1 stride=1 pad=1,2", "pad: expected four integers"),
    ("STORE.OUT sram=0 dram=0 y=1 x=1 stride=1 pad=1,1,1,1", "unknown operand 'pad'"),
    ("GEMM uop=0 iter=1,1 dst=0,0 src=0,0 wgt=0,0", "uop: expected 'begin:end'"),
    ("GEMM uop=0:1 iter=1 dst=0,0 src=0,0 wgt=0,0", "iter: expected two integers"),
    ("GEMM uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_now",
     "unknown dependency flag 'pop_now'"),
    ("ALU.SHL uop=0:1 iter=1,1 dst=0,0 src=0,0", "unknown ALU op 'SHL'"),
    ("ALU.ADD uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=70000", "imm=70000 does not fit in 16 bits"),
    ("FINISH now", "FINISH takes no operands"),
    (".alloc X inp", ".alloc takes NAME KIND COUNT"),
    (".alloc X vec 4", "kind must be one of"),
    (".alloc O out 4", "allocation 'O' is declared twice"),
    (".uop Z 0 0 0", "no uop allocation named 'Z'"),
    (".data X", "unknown directive '.data'"),
])
def test_asm_errors_name_line(line: str, message: str) -> None:
    text = ".alloc O out 4\n" + line + "\n"
    with pytest.raises(AsmError) as exc:
        assemble(text, PYNQ, source="prog.asm")
    assert str(exc.value).startswith("prog.asm:2: ")
    assert message in str(exc.value)


def test_asm_comments_symbols_and_numeric_dram() -> None:
    text = """
    # a comment
    .alloc A inp 8   ; trailing comment
    LOAD.INP sram=0 dram=A+3 y=1 x=2 stride=2 | push_next
    LOAD.INP sram=0 dram=3 y=1 x=2 stride=2
    FINISH
    """
    p = assemble(text, PYNQ)
    first, second = p.instructions[0], p.instructions[1]
    assert isinstance(first, Load) and isinstance(second, Load)
    assert first.dram_base == second.dram_base == 3
    assert p.instructions[0].deps == Deps(push_next=True)
    assert isinstance(p, Program) and p.allocation("A").kind == "inp"
    assert "dram=A+3" in disassemble(p)
