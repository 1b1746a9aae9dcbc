"""The batch encoders (issue 22: a compiled network ships tens of thousands of instructions
between processes) give exactly the word-by-word encoding, and refuse what it refuses with
its message: ``encode_program`` builds every definition's words column by column,
``encode_uops`` every field of the micro-ops at once, ``check_fields`` compares all of an
instruction's fields in one pass and names the first that does not fit in layout order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_isa import CONFIGS, PYNQ, _u, insn_strategy

from vta.isa import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    IsaError,
    Load,
    MemType,
    Store,
    Uop,
    check_fields,
    encode,
    encode_program,
    encode_uop,
    encode_uops,
)


def _word_by_word(insns: list[Instruction], hw: object) -> np.ndarray:
    """``encode`` of each instruction, split into the (low, high) uint64 halves."""
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    for i, insn in enumerate(insns):
        w = encode(insn, hw)  # type: ignore[arg-type]
        out[i] = (w & (1 << 64) - 1, w >> 64)
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_encode_program_is_encode_of_each(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    insns = data.draw(st.lists(insn_strategy(hw), max_size=40))
    got = encode_program(insns, hw)
    assert got.dtype == np.uint64 and got.shape == (len(insns), 2)
    assert np.array_equal(got, _word_by_word(insns, hw))


def _error(fn: object, *args: object) -> str:
    with pytest.raises(IsaError) as exc:
        fn(*args)  # type: ignore[operator]
    return str(exc.value)


@pytest.mark.parametrize("bad,message", [
    (Gemm(False, 0, 1, 1 << 14, 1, 0, 0, 0, 0, 0, 0),
     "instruction 3: GEMM: field iter_out=16384 does not fit in 14 bits (allowed 0..16383)"),
    (Gemm(False, 5, 4, 1, 1, 0, 0, 0, 0, 0, 0),
     "instruction 3: GEMM: uop_end=4 is before uop_bgn=5"),
    (Alu(AluOp.ADD, False, 0, 1, 1, 1, 0, 0, 0, 0, True, -40000),
     "instruction 3: ALU: field imm=-40000 does not fit in 16 bits (allowed -32768..32767)"),
    (Load(MemType.INP, 0, 1 << 70, 1, 1, 1),  # beyond int64: numpy cannot hold it
     "instruction 3: LOAD: field dram_base=1180591620717411303424 does not fit in 32 bits"),
    (Store(MemType.INP, 0, 0, 1, 1, 1), "instruction 3: STORE: field mem=INP is not a valid"),
])
def test_encode_program_refuses_as_encode_does(bad: Instruction, message: str) -> None:
    """A bad instruction among good ones of the same kinds: the first bad one is named, with
    ``encode``'s message, also when a later one is bad too."""
    good: list[Instruction] = [Load(MemType.INP, 0, 0, 1, 1, 1), Gemm(False, 0, 1, 1, 1, 0, 0, 0,
                                                                      0, 0, 0),
                               Alu(AluOp.ADD, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 3)]
    later = Load(MemType.INP, 1 << 20, 0, 1, 1, 1)
    got = _error(encode_program, [*good, bad, *good, later], PYNQ)
    assert got.startswith(message), got


def test_encode_program_empty_and_unregistered() -> None:
    assert encode_program([], PYNQ).shape == (0, 2)
    with pytest.raises(Exception, match="not a registered instruction class"):
        encode_program([Finish(), Uop(0, 0, 0)], PYNQ)  # type: ignore[list-item]


def test_check_fields_names_the_first_field_in_layout_order() -> None:
    """Two fields out of range: the one laid out first is named (sram_base before y_size),
    as does a flag that is not a bool but out of its 1-bit range."""
    two = Load(MemType.INP, 1 << 20, 0, 1 << 17, 1, 1)
    assert _error(check_fields, two, PYNQ).startswith("LOAD: field sram_base=1048576")
    flag = Load(MemType.INP, 0, 0, 1, 1, 1, deps=Deps(pop_prev=2))  # type: ignore[arg-type]
    assert _error(check_fields, flag, PYNQ) == \
        "LOAD: field pop_prev=2 does not fit in 1 bits (allowed 0..1)"
    text = Load(MemType.INP, 0, "7", 1, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # compared field by field, as int() reads it: "7" -> 7
        check_fields(Load(MemType.INP, 0, "x", 1, 1, 1), PYNQ)  # type: ignore[arg-type]
    check_fields(text, PYNQ)


@settings(max_examples=60, deadline=None)
@given(uops=st.lists(st.builds(Uop, _u(11), _u(11), _u(10)), max_size=50))
def test_encode_uops_is_encode_uop_of_each(uops: list[Uop]) -> None:
    got = encode_uops(uops, PYNQ)
    assert got.dtype == np.uint32
    assert got.tolist() == [encode_uop(u, PYNQ) for u in uops]


def test_encode_uops_refuses_as_encode_uop_does() -> None:
    uops = [Uop(1, 2, 3), Uop(4, 1 << 11, 0), Uop(1 << 11, 0, 0)]
    assert _error(encode_uops, uops, PYNQ) == _error(encode_uop, uops[1], PYNQ) == \
        "UOP: field src=2048 does not fit in 11 bits (allowed 0..2047)"
    assert _error(encode_uops, [Uop(-1, 0, 0)], PYNQ).startswith("UOP: field dst=-1")
