"""The oracle's parts that need no sources: finding the sources (and saying which variable is
missing), the layout check, the comparison, the corner constructs, the command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.vta_oracle import oracle
from tools.vta_oracle import run as oracle_run
from tools.vta_oracle.build import (
    _VTA_FILES,
    ENV_AP_INT,
    ENV_TVM_VTA,
    Driver,
    check_layout,
    parse_layout,
)
from tools.vta_oracle.errors import OracleBuildError, OracleConfigError, OracleSourceError
from tools.vta_oracle.macros import vta_macros
from tools.vta_oracle.probes import (
    PROBES,
    Probe,
    decode_readout,
    readout_bytes,
    token_chain,
    vta_cc_shift,
)
from tools.vta_oracle.run import ROUND_LIMIT, corner_uses, differences, run_program, vta_rounds
from vta.config import HwConfig
from vta.isa import assemble, layout, uop_layout
from vta.sim import run_reference

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------- sources


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_TVM_VTA, raising=False)
    monkeypatch.delenv(ENV_AP_INT, raising=False)


def _fake_tvm_vta(root: Path) -> Path:
    for rel in _VTA_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    return root


def test_missing_tvm_vta_names_the_variable(no_env: None) -> None:
    with pytest.raises(OracleSourceError, match=f"--tvm-vta DIR or set {ENV_TVM_VTA}"):
        oracle.locate_sources()


def test_missing_ap_int_names_the_variable(no_env: None, tmp_path: Path) -> None:
    with pytest.raises(OracleSourceError, match=f"--ap-int DIR or set {ENV_AP_INT}"):
        oracle.locate_sources(_fake_tvm_vta(tmp_path))


def test_a_folder_that_is_not_tvm_vta_names_the_file_and_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_TVM_VTA, str(tmp_path))
    with pytest.raises(OracleSourceError, match=rf"\${ENV_TVM_VTA}.*hardware/xilinx/src/vta\.cc"):
        oracle.locate_sources(None, tmp_path)


def test_ap_int_folder_without_the_header(no_env: None, tmp_path: Path) -> None:
    vta = _fake_tvm_vta(tmp_path / "vta")
    (tmp_path / "ap").mkdir()
    with pytest.raises(OracleSourceError, match=rf"{ENV_AP_INT}.*ap_int\.h"):
        oracle.locate_sources(vta, tmp_path / "ap")


def test_ap_int_repository_or_its_include_folder(no_env: None, tmp_path: Path) -> None:
    vta = _fake_tvm_vta(tmp_path / "vta")
    (tmp_path / "ap" / "include").mkdir(parents=True)
    (tmp_path / "ap" / "include" / "ap_int.h").write_text("")
    for given in (tmp_path / "ap", tmp_path / "ap" / "include"):
        assert oracle.locate_sources(vta, given).ap_int == (tmp_path / "ap" / "include").resolve()


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_TVM_VTA, str(tmp_path / "nowhere"))
    (tmp_path / "ap").mkdir()
    (tmp_path / "ap" / "ap_int.h").write_text("")
    monkeypatch.setenv(ENV_AP_INT, str(tmp_path / "ap"))
    src = oracle.locate_sources(_fake_tvm_vta(tmp_path / "vta"))
    assert src.tvm_vta == (tmp_path / "vta").resolve()


def test_cli_without_sources_exits_2_naming_the_variable(
        no_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert oracle.main(["matmul", "16", "16", "16"]) == 2
    assert ENV_TVM_VTA in capsys.readouterr().err


def test_cli_refuses_two_things_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert oracle.main(["matmul", "--probes"]) == 2
    assert "give one thing to run" in capsys.readouterr().err


# ---------------------------------------------------------------------------- layout check

_VTA_NAMES = {"pop_prev": "pop_prev_dep", "pop_next": "pop_next_dep",
              "push_prev": "push_prev_dep", "push_next": "push_next_dep", "mem": "memory_type",
              "pad_y0": "y_pad_0", "pad_y1": "y_pad_1", "pad_x0": "x_pad_0",
              "pad_x1": "x_pad_1", "reset": "reset_reg", "op": "alu_opcode"}


def _layout_text(hw: HwConfig, move: tuple[str, str] | None = None) -> str:
    """What ``driver layout`` prints for a design laid out as vta's encoding (``move``: one
    field put one bit higher)."""
    lines = []
    for struct, name in (("mem", "LOAD"), ("gemm", "GEMM"), ("alu", "ALU.ADD")):
        for f, pos, width in layout(hw, name):
            if f.startswith("_"):
                continue
            pos += (struct, f) == move
            lines.append(f"field {struct} {_VTA_NAMES.get(f, f)} {pos} {width}")
    u = {n: (p, w) for n, p, w in uop_layout(hw)}
    for insn, fields in (("GEM", ("dst", "src", "wgt")), ("ALU", ("dst", "src"))):
        for k, f in enumerate(fields):
            p, w = u[f]
            lines += [f"macro VTA_UOP_{insn}_{k}_0 {p}", f"macro VTA_UOP_{insn}_{k}_1 {p + w - 1}"]
    for kind in ("uop", "inp", "wgt", "acc", "out"):
        lines.append(f"macro VTA_{kind.upper()}_ELEM_BYTES {hw.elem_bytes(kind)}")
        lines.append(f"macro VTA_{kind.upper()}_BUFF_DEPTH {hw.depth(kind)}")
    return "\n".join(lines)


def test_layout_check_accepts_vtas_own_layout() -> None:
    hw = HwConfig.load("pynq")
    check_layout(hw, parse_layout(_layout_text(hw)))


def test_layout_check_names_a_moved_field() -> None:
    hw = HwConfig.load("pynq")
    with pytest.raises(OracleBuildError, match=r"GEMM field wgt_factor_in: .* bit 119"):
        check_layout(hw, parse_layout(_layout_text(hw, ("gemm", "wgt_factor_in"))))


# ---------------------------------------------------------------------------- comparing


def test_differences_names_allocation_entry_element_and_count() -> None:
    hw = HwConfig.load("pynq")
    program = assemble(".alloc A acc 3\n.alloc B out 4\nFINISH\n", hw)
    want = run_reference(program, hw)
    got = {k: v.copy() for k, v in want.items()}
    got["B"][2, 0, 5] = 7
    got["B"][3, 0, 0] = -1
    (d,) = differences(program, got, want)
    assert (d.allocation, d.kind, d.entry, d.index, d.got, d.want, d.entries, d.total) == \
        ("B", "out", 2, (0, 5), 7, 0, 2, 4)
    assert d.describe() == ("allocation 'B' (out) entry 2[0, 5]: vta.cc 7, the simulator 0 "
                            "(2 of 4 entries differ)")
    assert differences(program, want, want) == []


def test_corner_uses() -> None:
    hw = HwConfig.load("pynq_mul")
    text = """.alloc X acc 1
.alloc U uop 2
LOAD.UOP sram=0 dram=U+0 y=2 x=1 stride=1
ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=24
ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=8
ALU.MUL reset uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=3
LOAD.ACC sram=0 dram=X+0 y=0 x=1 stride=1 pad=1,0,0,0
FINISH
"""
    assert corner_uses(assemble(text, hw)) == ["ALU with reset", "ALU.MUL",
                                               "LOAD.UOP with y_size 2", "SHR by 24",
                                               "an empty LOAD with pads"]


def test_run_refuses_an_instruction_vta_cc_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load("pynq")
    monkeypatch.setattr(oracle_run, "VTA_CC_INSTRUCTIONS", ("LOAD",))
    with pytest.raises(OracleConfigError, match="instruction 0: FINISH is not an instruction"):
        run_program(None, assemble("FINISH\n", hw))  # type: ignore[arg-type]


def test_run_refuses_a_config_vta_cc_is_built_differently_for() -> None:
    """A program built for a variant runs on a driver only where vta.cc's macros agree: the
    MUL variant of pynq shares pynq's build, research_32x32 does not."""
    pynq = HwConfig.load("pynq")
    driver = Driver(Path("/nonexistent"), pynq, vta_macros(pynq), "")
    assert oracle_run._same_build(driver, pynq.with_mul()) == pynq.with_mul()
    program = assemble("FINISH\n", HwConfig.load("research_32x32"))
    with pytest.raises(OracleConfigError, match=r"research_32x32: vta\.cc is compiled differently"):
        run_program(driver, program, hw=HwConfig.load("research_32x32"))


# ---------------------------------------------------------------------------- vta()'s loop


def test_vta_rounds_of_a_token_chain() -> None:
    """One link of the chain per round: 1000 links and the tail fit vta()'s 1001 rounds,
    1001 links do not (the model's boundary is vta.cc's, test_oracle_runs checks it)."""
    hw = HwConfig.load("pynq")
    fits = vta_rounds(assemble(token_chain(ROUND_LIMIT - 1), hw))
    assert fits.done and fits.rounds == ROUND_LIMIT and fits.dispatched == 2 * 1000 + 5
    over = vta_rounds(assemble(token_chain(ROUND_LIMIT), hw))
    assert not over.done and over.rounds == ROUND_LIMIT


def test_vta_rounds_of_an_example() -> None:
    # alu_relu.asm: round 1 runs the compute queue to the ALU.MIN (pushing to store) and the
    # store (pushing back); FINISH (pop_next) then runs in round 2
    hw = HwConfig.load("pynq")
    r = vta_rounds(assemble((ROOT / "examples" / "alu_relu.asm").read_text(), hw))
    assert (r.rounds, r.done, r.dispatched) == (2, True, 7)


# ---------------------------------------------------------------------------- probes


def test_readout_round_trips() -> None:
    hw = HwConfig.load("pynq")
    acc = np.random.default_rng(0).integers(-2**31, 2**31, size=(3, 1, 16))
    assert np.array_equal(decode_readout(hw, readout_bytes(hw, acc), 3), acc)


def test_vta_cc_shift_by_hand() -> None:
    hw = HwConfig.load("pynq")
    x = np.int64(0x12345678)
    assert vta_cc_shift(x, 4, hw) == 0x1234567
    assert vta_cc_shift(x, 16, hw) == 0x56780000  # 16 = -16: left by 16
    assert vta_cc_shift(x, 24, hw) == 0x34567800  # 24 = -8: left by 8
    assert vta_cc_shift(x, 32, hw) == x  # low 5 bits 0
    assert vta_cc_shift(x, -17, hw) == 0x12345678 >> 15  # -17 = 0b01111: right by 15
    assert vta_cc_shift(np.int64(-256), 4, hw) == -16


@pytest.mark.parametrize("p", PROBES, ids=[p.name for p in PROBES])
def test_probes_assemble_and_expect_on_their_inputs(p: Probe) -> None:
    hw = HwConfig.load("pynq")
    program, inputs = p.program(hw), p.draw(hw)
    expected = p.expect(hw, inputs)
    for name, want in expected.items():
        a = program.allocation(name)
        assert a.kind == "out" and want.shape == (a.elems, 1, 16)
