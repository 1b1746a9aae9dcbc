"""Each hardware fact has one home (issue 20): the tests here tie the homes to VTA's source and
to each other, so that a second copy cannot drift unnoticed."""

from __future__ import annotations

import math

import pytest

from vta import words
from vta.config import BUFFER_KINDS, DATA_KINDS, ENTRY_DIMS, HwConfig
from vta.errors import HwConfigError
from vta.isa import MemType, Unit
from vta.isa.defs import HEAD_FLAGS, check_layouts
from vta.isa.insn import DEP_FLAGS, POP_FLAGS, PUSH_FLAGS, Deps
from vta.sim.dram import entry_spec
from vta.sim.stats import UNITS


def test_word_widths_are_hw_spec_consts() -> None:
    # include/vta/hw_spec_const.h (apache/tvm-vta@d4a15f6) lines 29, 33, 111, 113
    assert (words.INSN_BITS, words.UOP_BITS, words.OPCODE_BITS, words.ALU_OPCODE_BITS) == (
        128, 32, 3, 3)
    assert words.INSN_BYTES * 8 == words.INSN_BITS == 2 * words.INSN_HALF_BITS


def test_config_reads_the_word_widths() -> None:
    hw = HwConfig.load("pynq")
    assert hw.isa.opcode == words.OPCODE_BITS and hw.isa.alu_opcode == words.ALU_OPCODE_BITS
    assert hw.elem_bytes("uop") * 8 == words.UOP_BITS


def test_buffer_kinds_are_the_memory_types() -> None:
    assert sorted(m.kind for m in MemType) == sorted(BUFFER_KINDS) == sorted(ENTRY_DIMS)
    assert set(DATA_KINDS) == set(BUFFER_KINDS) - {"uop"}


@pytest.mark.parametrize("kind", BUFFER_KINDS)
def test_one_entry_definition(kind: str) -> None:
    """The entry size, the depth and the simulators' DRAM view all come from HwConfig.entry."""
    hw = HwConfig.load("pynq")
    e = hw.entry(kind)
    dtype, shape = entry_spec(hw, kind)
    assert shape == e.shape and dtype.itemsize * 8 == e.bits
    assert hw.elem_bytes(kind) == e.nbytes == dtype.itemsize * math.prod(shape)
    assert hw.depth(kind) == getattr(hw.scratchpad, kind) // e.nbytes


def test_dependency_flags_are_deps_fields() -> None:
    assert DEP_FLAGS == HEAD_FLAGS == ("pop_prev", "pop_next", "push_prev", "push_next")
    assert POP_FLAGS + PUSH_FLAGS == DEP_FLAGS
    assert Deps(**dict.fromkeys(DEP_FLAGS, True))


def test_unit_names_come_from_the_unit_enum() -> None:
    assert set(UNITS) == {"fetch"} | {u.label for u in Unit}


def test_layout_problems_name_what_they_blame() -> None:
    """check_layouts says which definitions a problem concerns and which scratchpads' depths
    widened its fields (the config check and vta.intrinsics read those, not the text)."""
    hw = HwConfig.load("pynq")
    assert check_layouts(hw) == []
    with pytest.raises(HwConfigError, match=r"scratchpad\.uop"):
        hw.with_changes(**{"scratchpad.uop": 1 << 28})
