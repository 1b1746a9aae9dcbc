"""The compiler never emits an SHR that stock VTA computes differently: one SHR shifts by the low
``alu.shift_bits`` bits of its immediate, signed (vta.cc ``alu()`` line 376: -16..15 on every
shipped config), so a larger shift is several SHRs within that range (instruction selection,
``vta.compiler.accel.select``), and emit refuses a program that would still hold one
(``passes.emit.check_immediates``)."""

from __future__ import annotations

import math

import pytest
from _vta_helpers import ROOT
from hypothesis import given
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler.accel.ops.chain_plan import chain_plan
from vta.compiler.accel.ops.epilogue_plan import epilogue_plan
from vta.compiler.accel.passes.emit import check_immediates
from vta.compiler.ops.chain import Chain, EwStage
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import Alu, AluOp, Finish, Program, assemble
from vta.isa.builtins import shift_range
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget

PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
#: pynq, and the variant that reads 6 bits of a shift amount (-32..31)
CONFIGS = [PYNQ, PYNQ.with_changes(**{"alu.shift_bits": 6})]


def _shrs(program: Program) -> list[int]:
    return [i.imm for i in program.instructions
            if isinstance(i, Alu) and i.op == AluOp.SHR and i.use_imm]


@pytest.mark.parametrize("hw", CONFIGS, ids=["pynq", "shift_bits6"])
@pytest.mark.parametrize("shift", range(32))
def test_epilogue_shift_is_the_fewest_shrs_in_range(hw: HwConfig, shift: int) -> None:
    """``x >> shift`` as right shifts within the range, largest first, as few as the range
    allows: on pynq 16 = 15 + 1, 24 = 15 + 9, 31 = 15 + 15 + 1 (``Epilogue.none(8p)``, what
    ``vta run --epilogue none`` reads the accumulator slices with)."""
    lo, hi = shift_range(hw)
    imms = [s.fields["imm"] for s in epilogue_plan(Epilogue.none(shift), hw)]
    assert all(lo <= i <= hi for i in imms) and sum(imms) == shift
    assert len(imms) == math.ceil(shift / hi)
    if hw is PYNQ and shift in (16, 24, 31):
        assert imms == {16: [15, 1], 24: [15, 9], 31: [15, 15, 1]}[shift]


def test_left_and_wide_shifts_of_a_chain() -> None:
    """A fused stage's ``x << 20`` is SHR -16 then SHR -4 (left shifts wrap alike); ``x >> 40``
    is ``x >> 31`` on the int32 accumulator (numpy fills with the sign, as the IR's
    interpreter does), three SHRs."""
    chain = Chain((EwStage("shl", lambda x: x << 20, label="shl20"),
                   EwStage("shr", lambda x: x >> 40, label="shr40")))
    imms = [s.fields["imm"] for s in chain_plan(chain, PYNQ)]
    assert imms == [-16, -4, 15, 15, 1]


def test_emit_refuses_an_out_of_range_shr() -> None:
    """The program-level check names the instruction: SHR 16 shifts left by 16 on VTA."""
    p = assemble("ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=16\nFINISH", PYNQ)
    with pytest.raises(CompileError, match=r"instruction 0 \(ALU.SHR .*imm=16\): ALU.SHR's "
                                           r"imm=16 is outside -16..15"):
        check_immediates(p, PYNQ)
    check_immediates(p, CONFIGS[1])  # 6 bits: 16 is a right shift
    ok = Program((Alu(AluOp.SHR, False, 0, 1, 1, 1, 0, 0, 0, 0, False, 16), Finish()), (), {})
    check_immediates(ok, PYNQ)  # a register operand: the immediate field is not read


@st.composite
def _layers(draw: st.DrawFn) -> Workload:
    spec = draw(st.one_of(vt.matmul_specs(24, 24, 64),
                          vt.conv2d_specs(kernels=(1, 3), max_hw=6, max_channels=20,
                                          max_batch=1)))
    return Workload("random", spec)


@st.composite
def _epilogues(draw: st.DrawFn) -> Epilogue:
    """The shift form over every shift 0..31 (clipped or wrapping, with or without bias), the
    raw slices, and the fixed-point form (whose rounding term keeps its shift within 15)."""
    kind = draw(st.sampled_from(["shift", "none", "fixed"]))
    if kind == "none":
        return Epilogue.none(8 * draw(st.integers(0, 3)))
    lo = draw(st.integers(-128, 20))
    hi = min(127, lo + draw(st.integers(0, 255)))
    if kind == "fixed":
        mult = draw(st.integers(-(1 << 15), (1 << 15) - 1).filter(bool))
        return Epilogue(draw(st.integers(1, 15)), draw(st.booleans()), lo, hi,
                        kind="fixed_point", mult=mult)
    return Epilogue(draw(st.integers(0, 31)), draw(st.booleans()), lo, hi,
                    clip=draw(st.booleans()))


@given(w=_layers(), epi=_epilogues(), hw=st.sampled_from(CONFIGS), seed=vt.seeds())
def test_random_layers_emit_only_shifts_in_range(w: Workload, epi: Epilogue, hw: HwConfig,
                                                 seed: int) -> None:
    """Random matmuls and convolutions under random epilogues compile to programs whose every
    SHR immediate lies in the config's range, and run bit-exact against numpy."""
    if epi.kind == "fixed_point":  # its multiplier needs ALU MUL: a variant of the config
        hw = hw.with_mul()
    r = run_layer(w, AccelTarget(hw), seed=seed, epilogue=epi, refine=1)
    assert r.passed
    lo, hi = shift_range(hw)
    imms = _shrs(r.compiled.program)
    assert all(lo <= i <= hi for i in imms), imms
    assert bool(imms) == (epi.shift > 0 and epi.kind == "shift") or epi.kind == "fixed_point"
