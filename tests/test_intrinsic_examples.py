"""The two worked examples of examples/intrinsics/: a fused requantize ALU function and a
depthwise multiply-accumulate unit, each registered from a user script. Compiled programs that
use them run bit-exact on the cycle-level simulator, the reference interpreter and numpy, with
and without the new instruction in the hardware config (the fixed-point requantization's
baseline on pynq_mul: VTA's own ALU has no MUL)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ops.depthwise import DepthwiseSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.isa import assemble, decode, disassemble, encode, layout

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "intrinsics"))

import depthwise_mac  # noqa: E402
import requant  # noqa: E402

from vta.run.targets import AccelTarget  # noqa: E402

PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs/pynq.yaml")
#: the fixed-point epilogue's baseline: pynq with ALU MUL (VTA's own ALU has none)
MUL = HwConfig.from_yaml(ROOT / "hwconfigs/pynq_mul.yaml")
requant.define()
depthwise_mac.define()
RQ = MUL.with_changes(**{"intrinsics.requant": {}})


def test_examples_live_outside_the_package() -> None:
    # the examples' own names (the package's ALU.REQUANT_F32 is another instruction)
    for path in (ROOT / "vta").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"\b(REQUANT|DWMAC)\b", text), path


# ------------------------------------------------------------------ ALU.REQUANT

def test_requant_encoding_shares_the_alu_opcode() -> None:
    pos = {n: (p, w) for n, p, w in layout(RQ, requant.NAME)}
    alu = {n: (p, w) for n, p, w in layout(RQ, "ALU.ADD")}
    assert pos["op"] == alu["op"] == (108, 3) and pos["mult"] == (111, 17)
    insn = requant.Requant(False, 1, 3, 7, 9, 11, 13, -1234, 9, -100, 120)
    word = encode(insn, RQ)
    assert (word >> 108) & 7 == 5 and word & 7 == 4  # ALU opcode, function 5
    assert decode(word, RQ) == insn


@given(mult=st.integers(-(1 << 16), (1 << 16) - 1), shift=st.integers(0, 31),
       lo=st.integers(-128, 127), hi=st.integers(-128, 127), f=st.integers(0, 2047))
@settings(max_examples=40)
def test_requant_round_trips(mult: int, shift: int, lo: int, hi: int, f: int) -> None:
    insn = requant.Requant(False, 0, 1, 2, 3, f, 2047 - f, mult, shift, lo, hi)
    assert decode(encode(insn, RQ), RQ) == insn
    text = f".alloc O out 1\n{disassemble_one(insn)}\nFINISH\n"
    p = assemble(text, RQ)
    assert p.instructions[0] == insn and assemble(disassemble(p), RQ) == p


def disassemble_one(insn: object) -> str:
    from vta.isa.asm import format_insn

    return format_insn(insn)  # type: ignore[arg-type]


def _run(w: Workload, hw: HwConfig, epi: Epilogue):  # type: ignore[no-untyped-def]
    from vta.run.layer import run_layer

    return run_layer(w, AccelTarget(hw), epilogue=epi, check_reference=True)


@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 48),
       shift=st.integers(1, 15), mult=st.integers(-(1 << 15), (1 << 15) - 1).filter(bool),
       bias=st.booleans(), seed=st.integers(0, 3))
@settings(max_examples=12)
def test_requant_matmul_bit_exact_with_and_without(m: int, n: int, k: int, shift: int,
                                                   mult: int, bias: bool, seed: int) -> None:
    epi = Epilogue(shift=shift, bias=bias, clip_lo=-128, clip_hi=127, kind="fixed_point",
                   mult=mult)
    w = Workload("mm", MatmulSpec(m, n, k))
    fused, base = _run(w, RQ, epi), _run(w, MUL, epi)
    for r in (fused, base):
        assert r.passed and r.reference_agrees and r.mismatches == 0
    used = fused.stats.insn_counts
    assert (requant.NAME in used) == (mult != 1)  # a multiplier of 1 folds away: no pattern
    assert requant.NAME not in base.stats.insn_counts


def test_requant_replaces_four_alu_passes_on_c2() -> None:
    from vta.compiler.ops.workloads import resolve

    w = resolve("resnet18:C2")
    epi = requant.calibrated(w.spec)
    fused, base = _run_quick(w, RQ, epi), _run_quick(w, MUL, epi)
    assert fused.passed and base.passed
    alu = lambda r: sum(v for x, v in r.stats.insn_counts.items() if x.startswith("ALU"))  # noqa: E731
    per_tile_base = {x for x in base.stats.insn_counts if x.startswith("ALU")}
    assert per_tile_base == {"ALU.ADD", "ALU.MUL", "ALU.SHR", "ALU.MAX", "ALU.MIN"}
    assert set(x for x in fused.stats.insn_counts if x.startswith("ALU")) == {
        "ALU.ADD", requant.NAME}
    assert alu(fused) < alu(base)
    # informative outputs: the calibrated scale leaves most outputs unsaturated
    out = fused.sim.outputs["res"]
    assert np.mean((out == -128) | (out == 127)) < 0.05


def _run_quick(w, hw, epi):  # type: ignore[no-untyped-def]
    from vta.run.layer import run_layer

    return run_layer(w, AccelTarget(hw), epilogue=epi)


# ------------------------------------------------------------------ DWMAC

dw_specs = st.builds(
    lambda c, h, k, stride, pad: DepthwiseSpec(1, c, h, h + 1, k, stride, min(pad, k - 1)),
    st.sampled_from([16, 32, 48]), st.integers(4, 12), st.sampled_from([1, 3]),
    st.sampled_from([1, 2]), st.integers(0, 1))


@given(spec=dw_specs, seed=st.integers(0, 3))
@settings(max_examples=10)
def test_depthwise_bit_exact_on_stock_and_dwmac(spec: DepthwiseSpec, seed: int) -> None:
    hw = depthwise_mac.with_dwmac(PYNQ, vectors=2)
    custom = depthwise_mac.run_layer(spec, hw, custom=True, seed=seed, check_reference=True)
    stock = depthwise_mac.run_layer(spec, PYNQ, custom=False, seed=seed, check_reference=True)
    for r in (custom, stock):
        assert r.passed and r.reference_agrees and r.mismatches == 0
    assert depthwise_mac.NAME in custom.stats.insn_counts
    assert "GEMM" in stock.stats.insn_counts and depthwise_mac.NAME not in stock.stats.insn_counts


def test_dwmac_on_hardware_without_it_is_refused_by_name() -> None:
    from vta.errors import VtaError

    spec = DepthwiseSpec(1, 16, 6, 6, 3, 1, 1)
    with pytest.raises(VtaError, match=r"DWMAC is not implemented by pynq: its intrinsics do "
                                       r"not list 'dwmac'"):
        depthwise_mac.run_layer(spec, PYNQ, custom=True)


def test_dwmac_timing_follows_its_parameter() -> None:
    """100 micro-ops in one loop entry at II 1, depth 4, and the compute call's 2 control
    cycles (vta.isa.timing, HLS): 100 + 4 + 2; four vectors an issue: 25 + 4 + 2."""
    from vta.compiler.accel.cost import microop_instruction_cycles

    one, four = (depthwise_mac.with_dwmac(PYNQ, v) for v in (1, 4))
    assert microop_instruction_cycles(depthwise_mac.DWMAC, 100, one) == 100 + 4 + 2
    assert microop_instruction_cycles(depthwise_mac.DWMAC, 100, four) == 25 + 4 + 2
