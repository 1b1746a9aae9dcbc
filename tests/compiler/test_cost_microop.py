"""``cost.microop_instruction_cycles`` (the schedule model's price of a micro-op instruction,
its instance copied from one prototype per instruction and fields) against the definition's
duration of the instruction made whole (``cost.prototype``), on every shipped config: sizes
within one block, at its limit and folded into inner iterations."""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.compiler.accel import cost
from vta.config import HwConfig
from vta.isa import AluOp
from vta.isa.builtins import ALU, GEMM

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "hwconfigs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_microop_cycles_equal_the_whole_prototype(path: Path) -> None:
    hw = HwConfig.from_yaml(str(path))
    block = cost.max_block_uops(hw)
    kinds = [(GEMM, {}), (GEMM, {"reset": True}),
             (ALU[AluOp.ADD], {"use_imm": True, "imm": 0}), (ALU[AluOp.MAX], {})]
    for defn, fields in kinds:
        for n in (1, 7, 100, block - 1, block, block + 1, 3 * block + 5, 70_000):
            per = max(1, min(n, block))
            whole = cost.prototype(defn, iter_out=1, iter_in=-(-n // per), uop_end=per,
                                   **fields)
            assert cost.microop_instruction_cycles(defn, n, hw, **fields) == \
                cost.instruction_cycles(whole, hw), (defn.name, n, fields)
