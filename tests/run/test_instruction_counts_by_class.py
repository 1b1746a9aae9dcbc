"""``isa.builtins.instruction_counts`` (the run report's instructions by definition) counts by
class: a class that stands for one definition alone (LOAD, STORE, GEMM, FINISH) has one of its
instructions looked up, a class whose instances are told apart by a field
(``isa.defs.function_field``: the ALU's ``op``) one for each value of that field. The counts
are those of looking every instruction up, and an unregistered instruction is still
refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.isa import Program, builtins, defs
from vta.isa.defs import DefinitionError, definition_of, function_field
from vta.isa.insn import Alu, Gemm, Load

ROOT = Path(__file__).resolve().parents[2]


def _one_by_one(program: Program) -> dict[str, int]:
    """The counts as every instruction's definition gives them."""
    return dict(sorted(Counter(definition_of(i).name for i in program.instructions).items()))


def test_the_field_telling_a_class_apart() -> None:
    assert function_field(Alu) == "op"  # ALU.ADD, ALU.MAX, ... are all Alu
    assert function_field(Load) is None and function_field(Gemm) is None
    assert function_field(int) is None  # not an instruction class


def test_counted_by_class_and_value_as_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    program = driver.compile_workload(resolve("resnet18:C11", [], height=7, in_channels=64,
                                              out_channels=64), hw).program
    want = _one_by_one(program)
    looked_up: list[object] = []

    def counted(insn: object) -> defs.InstructionDef:
        looked_up.append(insn)
        return definition_of(insn)

    monkeypatch.setattr(builtins, "definition_of", counted)
    assert builtins.instruction_counts(program) == want
    kinds = {(type(i), getattr(i, "op", None)) for i in program.instructions}
    assert len(looked_up) == len(kinds) < len(program.instructions)
    assert {k for k, n in want.items() if k.startswith("ALU.")} and len(kinds) == len(want)


def test_an_unregistered_instruction_is_still_refused() -> None:
    with pytest.raises(DefinitionError):
        builtins.instruction_counts(Program((object(),), ()))
