"""The micro-op base field (``gemm.uop_base``, an ISA extension in the GEMM/ALU words' gap at
bit 63): encoding, assembly, the same meaning in both simulators, refusal where the hardware
lacks it, and the compiler sharing a virtual thread's micro-op blocks through it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import AsmError, IsaError
from vta.isa import Alu, AluOp, Gemm, assemble, decode, encode, format_insn, layout
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget
from vta.sim import run_reference, simulate

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.load("pynq")
BASE = HwConfig.load("pynq_uop_base")

PROGRAM = """
.alloc A inp 64
.alloc W wgt 4
.alloc C acc 64
.alloc O out 64
.alloc U uop 2
.uop U 0 0 0
.uop U 1 1 0
LOAD.UOP sram=0 dram=U+0 y=1 x=2 stride=2
LOAD.INP sram=0 dram=A+0 y=1 x=64 stride=64
LOAD.WGT sram=0 dram=W+0 y=1 x=4 stride=4 | push_next
LOAD.ACC sram=0 dram=C+0 y=1 x=64 stride=64
GEMM uop=0:2 iter=1,3 dst=8,2 src=16,2 wgt=1,0 base={b} | pop_prev
ALU.ADD uop=0:2 iter=1,2 dst=4,2 src=8,1 base={b}
ALU.MAX uop=0:2 iter=1,2 dst=4,2 src=8,1 base={b} imm=3 | push_next
STORE.OUT sram=0 dram=O+0 y=1 x=64 stride=64 | pop_prev
FINISH
"""


def test_field_sits_in_the_gap_and_round_trips() -> None:
    """pynq's GEMM/ALU low half is 63 bits (opcode, flags, reset, uop 13 + 14, iter 14 + 14):
    the base takes bit 63; pynq itself has no such field."""
    assert ("uop_base", 63, 1) in layout(BASE, "GEMM")
    assert ("uop_base", 63, 1) in layout(BASE, "ALU.ADD")
    assert not any(f[0] == "uop_base" for f in layout(PYNQ, "GEMM"))
    g = Gemm(False, 0, 4, 1, 3, 8, 2, 16, 2, 1, 0, uop_base=1)
    a = Alu(AluOp.MAX, False, 0, 2, 1, 2, 4, 2, 8, 1, True, 3, uop_base=1)
    for insn in (g, a):
        assert decode(encode(insn, BASE), BASE) == insn
        assert assemble(format_insn(insn), BASE).instructions == (insn,)
    assert "base=1" in format_insn(g) and "base" not in format_insn(Gemm(False, 0, 4, 1, 3, 8,
                                                                          2, 16, 2, 1, 0))


def test_refused_without_the_field() -> None:
    with pytest.raises(IsaError, match=r"uop_base=1 needs a micro-op base field.*pynq"):
        encode(Gemm(False, 0, 4, 1, 3, 8, 2, 16, 2, 1, 0, uop_base=1), PYNQ)
    with pytest.raises(AsmError, match=r"gemm\.uop_base: false"):
        assemble(PROGRAM.format(b=1), PYNQ)


@pytest.mark.parametrize("b", [0, 1])
def test_both_simulators_offset_by_one_outer_iteration(b: int) -> None:
    """The GEMM writes acc 0..5 (micro-ops 0, 1; iter_in 3, step 2) with base 0 and 8..13 with
    base 1 (one dst_factor_out of 8 further); the ALU 0..3 or 4..7 (dst_factor_out 4). The
    machine and the reference interpreter agree, and out holds exactly those entries."""
    p = assemble(PROGRAM.format(b=b), BASE)
    r = simulate(p, BASE, seed=3)
    ref = run_reference(p, BASE, r.inputs)
    assert all(np.array_equal(r.outputs[k], ref[k]) for k in ref)
    written = set(np.nonzero((ref["O"] != 0).any(axis=(1, 2)))[0].tolist())
    assert written == (set(range(6)) | set(range(4)) if b == 0
                       else set(range(8, 14)) | set(range(4, 8)))


def test_compiler_shares_thread_blocks() -> None:
    """C10 (two virtual threads over output channels) on pynq_uop_base: the second thread's
    instructions run the first thread's blocks with base 1, the layer loads fewer micro-ops
    than the same schedule on pynq and stays bit-exact."""
    w = resolve("resnet18:C10")
    shared = run_layer(w, AccelTarget(BASE))
    assert shared.passed and shared.mismatches == 0
    insns = shared.compiled.program.instructions
    assert any(getattr(i, "uop_base", 0) == 1 for i in insns)
    knobs = shared.compiled.schedule
    stock = run_layer(w, AccelTarget(PYNQ), tco=knobs.tco, tci=knobs.tci, th=knobs.th,
                      tw=knobs.tw, vthreads=knobs.vthreads, vt_axis=knobs.vt_axis)
    assert stock.passed
    uops = {name: r.stats.bytes["uop"] for name, r in (("base", shared),
                                                        ("stock", stock))}
    assert uops["base"] < uops["stock"], uops
