"""Every shipped config that claims to be stock VTA (``stock: true``) is VTA's ISA: it enables
VTA's ALU functions alone and no intrinsic, its resource estimate charges no ALU multiplier,
instruction selection can pick nothing else, and what the compiler emits for it (the whole
small ResNet-18 and a ResNet-18 layer) is VTA's instructions alone (LOAD, STORE, GEMM, ALU
MIN/MAX/ADD/SHR, FINISH; ``vta.isa.builtins.VTA_INSTRUCTIONS``), every SHR amount one VTA's SHR
honours (its HLS design reads the low 5 bits as a signed number: -16..15). The full network on
pynq is in tests/graph/test_cli_graph.py (``slow``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.select import candidates
from vta.compiler.ops.workloads import resolve
from vta.config import VTA_ALU_OPS, HwConfig, shipped_configs
from vta.errors import AsmError
from vta.graph.compile import compile_graph
from vta.graph.models import random_image, resnet18
from vta.isa import Alu, AluOp, Program, assemble, definition_of
from vta.isa.builtins import VTA_INSTRUCTIONS, is_vta_instruction, non_vta_instructions, shift_range
from vta.resources import breakdown
from vta.run.graph import run_graph

SHIPPED = {name: HwConfig.from_yaml(path) for name, path in shipped_configs().items()}
STOCK = sorted(name for name, hw in SHIPPED.items() if hw.stock)
SMALL = {"width": 16, "image": 32, "classes": 10}


def test_which_shipped_configs_claim_stock_vta() -> None:
    assert STOCK == ["de10nano", "pynq", "pynq_tsim", "ultra96", "zcu104"]
    assert not SHIPPED["pynq_mul"].stock and "mul" in SHIPPED["pynq_mul"].alu.ops
    assert [d.name for d in VTA_INSTRUCTIONS] == [
        "LOAD", "STORE", "GEMM", "ALU.MIN", "ALU.MAX", "ALU.ADD", "ALU.SHR", "FINISH"]


@pytest.mark.parametrize("name", STOCK)
def test_stock_config_enables_vtas_instructions_and_pays_for_no_mul(name: str) -> None:
    hw = SHIPPED[name]
    assert set(hw.alu.ops) <= set(VTA_ALU_OPS) and hw.intrinsics == ()
    rows = breakdown(hw)
    assert not any(comp == "ALU multipliers" for _, comp, _, _ in rows)
    g = hw.gemm
    gemm_dsp = g.batch * g.block_in * g.block_out // 2  # two int8 multipliers per DSP48
    assert hw.resource_estimate()["dsp"] == gemm_dsp
    # instruction selection chooses among these alone
    assert all(is_vta_instruction(c.instruction) for c in candidates(hw))


def _vta_only(prog: Program, hw: HwConfig) -> Iterator[str]:
    """What in ``prog`` VTA's hardware would not run: a foreign instruction, an SHR amount
    outside what its SHR honours."""
    lo, hi = shift_range(hw)
    for i in prog.instructions:
        if not is_vta_instruction(definition_of(i)):
            yield f"{definition_of(i).name} is not VTA's"
        elif isinstance(i, Alu) and i.op is AluOp.SHR and i.use_imm and not lo <= i.imm <= hi:
            yield f"SHR by {i.imm}"


@pytest.mark.parametrize("name", STOCK)
def test_what_the_compiler_emits_for_a_stock_config_is_vta(name: str) -> None:
    """The small ResNet-18 (every operator; shift requantization) and layer C2 (the calibrated
    epilogue) compile to VTA's instructions alone, and the network runs bit-exact."""
    hw = SHIPPED[name]
    g = resnet18(**SMALL)
    cg = compile_graph(g, hw, refine=1)
    assert not cg.host_ops
    bad = [f"{k.group.output.name}: {why}" for k, p in zip(cg.steps, cg.programs, strict=True)
           if p is not None for why in _vta_only(p, hw)]
    assert bad == [], bad
    c2 = driver.compile_workload(resolve("resnet18:C2"), hw)
    assert list(_vta_only(c2.program, hw)) == []
    if name == "pynq":
        image = random_image(11, g.inputs[0].type.shape)
        s = run_graph(cg, image).summary()
        assert s["passed"] and s["non_vta_instructions"] == {}


def test_the_assembler_refuses_mul_on_a_stock_config() -> None:
    text = (".alloc X acc 1\n.alloc U uop 1\n.uop U 0 0 0\n"
            "ALU.MUL uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=3\nFINISH\n")
    with pytest.raises(AsmError, match=r"ALU function MUL is not enabled in pynq's alu\.ops "
                                       r"\(min, max, add, shr\)"):
        assemble(text, SHIPPED["pynq"])
    prog = assemble(text, SHIPPED["pynq_mul"])
    assert non_vta_instructions(prog) == {"ALU.MUL": 1}
