"""``vta run resnet18`` (the whole graph) from the command line: the report, JSON, trace,
fusion levels, the GPU path, ONNX models, and every flag that does not apply refused by name.
The default-suite tests swap in the small ResNet-18 (same structure); the full network runs
under the ``slow`` marker (and in bench/resnet18_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vta.cli import main
from vta.graph import models

from .conftest import ROOT, SMALL

PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
PYNQ_MUL = str(ROOT / "hwconfigs" / "pynq_mul.yaml")


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(batch: int = 1):  # type: ignore[no-untyped-def]
        return models.resnet18(batch=batch, **SMALL)

    def build_fixed(batch: int = 1):  # type: ignore[no-untyped-def]
        return models.resnet18_fixed(batch=batch, **SMALL)

    monkeypatch.setitem(models.MODELS, "resnet18", build)
    monkeypatch.setitem(models.MODELS, "resnet18_fixed", build_fixed)


def test_report(small: None, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace, png = tmp_path / "t.json", tmp_path / "net.png"
    assert main(["run", "--hw", PYNQ, "resnet18", "--trace", str(trace), "--plot",
                 str(png)]) == 0
    out = capsys.readouterr().out.splitlines()
    # --plot: every GEMM kernel against both bounds, the units' shares over every kernel
    assert out[-1] == f"plot written to {png}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = out[:-1]
    assert out[0] == "resnet18 on pynq (fusion: full): 23 kernels, 0 host fallbacks"
    assert out[1].split() == ["#", "op", "on", "fused", "cycles", "util", "%bound",
                              "DRAM", "bytes", "uJ", "check"]
    rows = out[2:25]
    assert rows[0].split()[1:4] == ["conv1_relu", "vta", "conv2d+requantize+relu"]
    assert sum("conv2d+requantize+add+relu" in r for r in rows) == 8
    assert all(r.endswith("ok") for r in rows)
    assert out[25].startswith("total ") and "frames/s" in out[25]
    assert out[26].startswith("MACs on the accelerator: 100.0%")
    assert out[27].startswith("ALU instructions: ADD ") and "MUL" not in out[27]
    assert out[27].endswith("; VTA instructions only")
    assert "host layout transforms: pack image, unpack logits" in out[28]
    assert out[-2].startswith("PASS: the outputs and all 23 stored tensors bit-exact")
    assert json.loads(trace.read_text())["otherData"]["graph"] == "resnet18"


def test_fixed_point_variant_needs_mul(small: None, capsys: pytest.CaptureFixture[str]) -> None:
    """resnet18 requantizes by shifts (VTA's ALU: no MUL anywhere); resnet18_fixed's
    fixed-point multipliers need ALU MUL: refused on pynq naming the multiplier and pynq_mul,
    bit-exact on pynq_mul."""
    assert main(["run", "--hw", PYNQ, "resnet18", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["non_vta_instructions"] == {}
    assert all("ALU.MUL" not in row["instructions"] for row in s["steps"])
    assert main(["run", "--hw", PYNQ, "resnet18_fixed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vta: error: graph resnet18_fixed: requantize "
                                               "conv1_q: its multiplier "), err
    assert "needs ALU MUL" in err[0] and "run it on pynq_mul (pynq with ALU MUL" in err[0]
    assert main(["run", "--hw", PYNQ_MUL, "resnet18_fixed", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    assert f["passed"] and f["graph"] == "resnet18_fixed" and f["kernels"] == 23
    assert f["non_vta_instructions"]["ALU.MUL"] > 0
    assert main(["run", "resnet18_fixed", "--layers", "C2"]) == 2
    assert "--layers does not apply to resnet18_fixed" in capsys.readouterr().err


def test_json_unfused(small: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", PYNQ, "resnet18", "--fusion", "requant", "--json",
                 "--seed", "3"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["fusion"] == "requant" and s["kernels"] == 48
    assert {r["placement"] for r in s["steps"]} == {"vta"}


@pytest.mark.parametrize("argv, culprit", [
    (["resnet18", "--tco", "2"], "--tco does not apply to the network resnet18"),
    (["resnet18", "--pad", "0"], "--pad does not apply to the network"),
    (["resnet18", "--dump-ir", "tensorize"], "--dump-ir does not apply"),
    (["resnet18", "--epilogue", "none"], "--epilogue none does not apply"),
    (["resnet18", "16"], "resnet18 takes no sizes"),
    (["resnet18", "--batch", "0"], "--batch must be >= 1"),
    (["conv2d", "--fusion", "full"], "--fusion does not apply to conv2d"),
    (["resnet18", "--layers", "C2", "--fusion", "full"], "--fusion does not apply"),
    (["--onnx", "/nonexistent.onnx"], "/nonexistent.onnx: cannot read an ONNX model"),
    (["matmul", "--onnx", "x.onnx"], "give either a workload (matmul) or --onnx"),
])
def test_refused_by_name(argv: list[str], culprit: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", PYNQ, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vta: error: ") and culprit in err[0], err


def test_gpu_target_without_a_gpu(small: None, capsys: pytest.CaptureFixture[str]) -> None:
    from vta.gpu.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present: --target cuda runs instead of failing")
    assert main(["run", "resnet18", "--target", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vta: error: ") and "cupy" in err[0].lower()


def test_onnx_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnx")
    import onnx

    from .test_onnx import qdq_model

    path = tmp_path / "m.onnx"
    onnx.save(qdq_model(), str(path))
    assert main(["run", "--hw", PYNQ, "--onnx", str(path)]) == 2  # its scales need MUL
    assert "needs ALU MUL" in capsys.readouterr().err
    assert main(["run", "--hw", PYNQ_MUL, "--onnx", str(path)]) == 0
    out = capsys.readouterr().out
    assert "qdq on pynq_mul (fusion: full)" in out and "PASS" in out
    assert main(["run", "--onnx", str(path), "--target", "cuda-emu"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.slow
def test_full_resnet18(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole network on VTA's own pynq: every tensor bit-exact, VTA's instructions alone
    (no ALU MUL in any kernel)."""
    assert main(["run", "--hw", PYNQ, "resnet18", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["mac_share"] == 1.0 and s["kernels"] == 23
    assert s["of_machine_bound"] >= 0.85
    assert s["non_vta_instructions"] == {} and "ALU.SHR" in s["instructions"]


@pytest.mark.slow
def test_full_resnet18_fixed_on_pynq_mul(capsys: pytest.CaptureFixture[str]) -> None:
    """The fixed-point variant: refused on pynq, bit-exact on pynq_mul (ALU MUL in its
    kernels)."""
    assert main(["run", "--hw", PYNQ, "resnet18_fixed"]) == 2
    assert "needs ALU MUL" in capsys.readouterr().err
    assert main(["run", "--hw", PYNQ_MUL, "resnet18_fixed", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["mac_share"] == 1.0 and s["kernels"] == 23
    assert set(s["non_vta_instructions"]) == {"ALU.MUL"}
