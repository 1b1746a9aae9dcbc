"""The energy model (``vta.sim.energy``): a small program's energy derived by hand from
Horowitz's 45 nm table, the SRAM interpolation's anchor points, the config's ``energy``
section (defaults, scale, named errors) and its place in ``vta run``'s JSON."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vta.cli import main
from vta.config import DTYPE_BITS, HwConfig, HwConfigError
from vta.isa import Program, definition_of
from vta.sim import simulate
from vta.sim.energy import COMPONENTS, _additions, energy_of, energy_table, sram_pj_per_byte
from vta.sim.examples import matmul_program, pack_matmul


def energy_one_by_one(program: Program, moved: dict[str, int], hw: HwConfig) -> dict[str, float]:
    """The breakdown as a plain loop makes it: every instruction up to FINISH in program
    order, each of its additions added in its turn (the reference ``energy_of``'s faster
    paths are held to, here and in test_sim_lean_paths)."""
    t = energy_table(hw)
    lanes = hw.elem_bytes("acc") * 8 // DTYPE_BITS[hw.gemm.acc_dtype]
    eb = {k: hw.elem_bytes(k) for k in ("inp", "wgt", "acc", "out", "uop")}
    pj = dict.fromkeys(COMPONENTS, 0.0)
    for insn in program.instructions:
        d = definition_of(insn)
        if d.is_microop:
            for comp, add in _additions(insn, d, hw, t, eb, lanes):
                pj[comp] += add
        if d.drains:
            break
    for kind in ("inp", "wgt", "acc", "uop", "out"):
        pj["dram"] += moved.get(kind, 0) * t.dram_byte
        pj[f"sram_{kind}"] += moved.get(kind, 0) * t.sram[kind]
    pj["fetch"] = moved.get("insn", 0) * t.dram_byte
    return pj

ROOT = Path(__file__).resolve().parents[2]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"


def test_sram_points_are_horowitz() -> None:
    # 64-bit accesses: 10 pJ at 8 KB, 20 pJ at 32 KB, 100 pJ at 1 MB
    assert sram_pj_per_byte(8 << 10) == pytest.approx(10 / 8)
    assert sram_pj_per_byte(32 << 10) == pytest.approx(20 / 8)
    assert sram_pj_per_byte(1 << 20) == pytest.approx(100 / 8)
    assert sram_pj_per_byte(16 << 10) == pytest.approx(10 / 8 * math.sqrt(2))  # log-log


def test_small_matmul_by_hand() -> None:
    """C[16, 32] = A[16, 32] . W[32, 32]^T on pynq (1x16x16 GEMM): one LOAD.UOP of 3 micro-ops,
    LOAD WGT of 4 entries, LOAD INP of 32, a GEMM reset of 16 x 2 executions, a GEMM of
    2 x 16 x 2 = 64, a STORE of 32 entries, FINISH."""
    hw = HwConfig.from_yaml(PYNQ)
    prog = matmul_program(hw, 16, 32, 32, 16, 1)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32), dtype=np.int8)
    sim = simulate(prog, hw, pack_matmul(hw, a, w))
    moved = dict(sim.stats.bytes)
    assert {k: moved[k] for k in ("uop", "wgt", "inp", "out", "insn")} == \
        {"uop": 12, "wgt": 4 * 256, "inp": 32 * 16, "out": 32 * 16, "insn": 7 * 16}
    # pJ per byte: 32 KiB buffers (inp, out, uop) 2.5; wgt 256 KiB and acc 128 KiB along the
    # 32 KB -> 1 MB segment, whose slope is log(100/20) / log(1024/32)
    slope = math.log(5) / math.log(32)
    s32, s_wgt, s_acc = 2.5, 2.5 * 8 ** slope, 2.5 * 4 ** slope
    resets, gemms = 32, 64
    want = {
        "mac": gemms * 256 * (0.2 + 0.1),  # 8-bit multiply + 32-bit add per MAC
        "alu": 0.0,
        "sram_uop": (resets + gemms) * 4 * s32 + 12 * s32,
        "sram_inp": gemms * 16 * s32 + 512 * s32,
        "sram_wgt": gemms * 256 * s_wgt + 1024 * s_wgt,
        "sram_acc": resets * 64 * s_acc + gemms * 64 * 2 * s_acc,
        "sram_out": (resets + gemms) * 16 * s32 + 512 * s32,
        "dram": (12 + 1024 + 512 + 512) * 1300 / 8,  # 1.3 nJ per 64-bit DRAM access
        "fetch": 7 * 16 * 1300 / 8,
    }
    got = energy_of(prog, moved, hw)
    assert set(got.pj) == set(COMPONENTS)
    for k in COMPONENTS:
        assert got.pj[k] == pytest.approx(want[k], rel=1e-12), k
    assert got.total_pj == pytest.approx(sum(want.values()))
    # the scale multiplies every figure
    half = hw.with_changes(**{"energy.scale": 0.5, "energy.node_nm": 28})
    assert energy_of(prog, moved, half).total_pj == pytest.approx(got.total_pj / 2)


@pytest.mark.parametrize(("section", "message"), [
    ({"scale": 0}, "energy.scale: must be a positive factor"),
    ({"scale": -2.0}, "energy.scale: must be a positive factor"),
    ({"node_nm": 0}, "energy.node_nm: must be >= 1"),
    ({"nodes": 7}, "energy.nodes: unknown key"),
])
def test_bad_energy_section_is_named(section: dict[str, object], message: str) -> None:
    d = HwConfig.from_yaml(PYNQ).to_dict()
    with pytest.raises(HwConfigError, match=message.replace(".", r"\.")):
        HwConfig.from_dict({**d, "energy": section})


def test_configs_without_the_section_load_at_45nm() -> None:
    hw = HwConfig.from_yaml(PYNQ)
    assert (hw.energy.node_nm, hw.energy.scale) == (45, 1.0)


def test_vta_run_reports_energy(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--hw", str(PYNQ), "matmul", "16", "32", "32", "--no-cache"]
    assert main([*argv, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    e = s["energy"]
    assert e["node_nm"] == 45 and e["total_uj"] > 0
    assert e["total_uj"] == pytest.approx(sum(e["components_uj"].values()))
    assert main(argv) == 0
    assert "energy " in capsys.readouterr().out


def test_sequential_sums_add_in_order() -> None:
    """Each column is summed one value at a time, top to bottom (the bits a loop of ``+=``
    gives): 1e16 absorbs each later 1.0, which pairwise summation (``np.sum``) would first
    add together."""
    from vta.sim.energy import sequential_sums

    col = np.array([1e16] + [1.0] * 200)
    rows = np.stack([col, col[::-1]], axis=1)
    got = sequential_sums(rows)
    loop = [0.0, 0.0]
    for a, b in rows.tolist():
        loop[0] += a
        loop[1] += b
    assert got.tolist() == loop
    assert got[0] == 1e16 and got[0] != np.sum(col)
    assert sequential_sums(np.zeros((0, 9))).tolist() == [0.0] * 9


def test_energy_is_the_in_order_sum_of_each_instructions_additions() -> None:
    """``energy_of`` equals adding every executed instruction's ``_additions`` one by one in
    program order (its rows, shared by repeats of one instruction object, change no bit),
    on a program whose instructions repeat, with ALU ops that read acc (two additions to
    sram_acc from one instruction) and a reset."""
    from vta.compiler.ops.workloads import resolve
    from vta.run.targets import AccelTarget
    from vta.sim.machine import mnemonic

    hw = HwConfig.from_yaml(PYNQ)
    prog = AccelTarget(hw).compile_layer(resolve("resnet18:C11")).program
    # its body twice, as the same objects, then as equal copies, then what the FINISH
    # ends (never runs): repeats found by identity and by value
    *body, finish = prog.instructions
    copies = [copy.copy(x) for x in body]
    prog = replace(prog, instructions=(*body, *body, *copies, finish, *body))
    assert "ALU.ADD" in {mnemonic(x) for x in body}
    moved = {"inp": 1000, "wgt": 2000, "acc": 30, "uop": 50, "out": 700, "insn": 16 * 9}
    assert energy_of(prog, moved, hw).pj == energy_one_by_one(prog, moved, hw)
