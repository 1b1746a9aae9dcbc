"""``vta.run.codec``: a compiled kernel as bytes (``isa.encoding``'s words); a program with a
value that does not fit its field is not packed (None), as ``encode`` refuses it, and never
comes back as another program."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import IsaError
from vta.isa.encoding import decode_program, encode_program, encode_uops
from vta.run.codec import decode_distinct, pack_compiled, unpack_compiled

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled() -> tuple[driver.Compiled, HwConfig]:
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    w = resolve("resnet18:C11", [], height=7, in_channels=64, out_channels=64)
    return driver.compile_workload(w, hw), hw


def test_a_round_trip_gives_the_program(compiled: tuple[driver.Compiled, HwConfig]) -> None:
    c, hw = compiled
    blob = pack_compiled(c, hw)
    assert blob is not None
    back = unpack_compiled(blob, hw)
    assert back.program == c.program and back.schedule == c.schedule


def test_a_value_out_of_its_field_is_not_packed(
        compiled: tuple[driver.Compiled, HwConfig]) -> None:
    """An SRAM base, an immediate or a micro-op index one past its field: ``encode`` refuses
    the instruction and the codec packs nothing (the masked word would decode to another)."""
    c, hw = compiled
    prog = c.program
    i = next(k for k, x in enumerate(prog.instructions) if hasattr(x, "sram_base"))
    j = next(k for k, x in enumerate(prog.instructions) if hasattr(x, "imm"))
    for k, change in ((i, {"sram_base": 1 << 16}), (j, {"imm": 1 << 15}),
                      (j, {"imm": -(1 << 15) - 1})):
        bad = list(prog.instructions)
        bad[k] = replace(bad[k], **change)
        with pytest.raises(IsaError):
            encode_program(bad, hw)
        broken = replace(c, result=replace(c.result, program=replace(
            prog, instructions=tuple(bad))))
        assert pack_compiled(broken, hw) is None
    name, uops = next(iter(prog.uops.items()))
    wide = (replace(uops[0], dst=1 << hw.isa.acc_idx), *uops[1:])
    with pytest.raises(IsaError):
        encode_uops(wide, hw)
    broken = replace(c, result=replace(c.result, program=replace(
        prog, uops={**prog.uops, name: wide})))
    assert pack_compiled(broken, hw) is None


def test_equal_words_decode_to_one_shared_instruction(
        compiled: tuple[driver.Compiled, HwConfig]) -> None:
    """``decode_distinct`` gives ``decode_program``'s instructions, in order, each distinct word
    decoded once: every repeat of a word is the same object (what linking's relocation memo and
    the simulator key on)."""
    c, hw = compiled
    words = encode_program(c.program.instructions, hw)
    got = decode_distinct(words, hw)
    assert list(got) == decode_program(words, hw)
    assert got == c.program.instructions
    rows = [tuple(r) for r in words.tolist()]
    assert len(rows) > len(set(rows))  # a tiled program repeats instructions
    first: dict[tuple[int, ...], object] = {}
    for row, insn in zip(rows, got, strict=True):
        assert first.setdefault(row, insn) is insn
    assert len({id(x) for x in got}) == len(set(rows))
    assert decode_distinct(words[:0], hw) == ()
