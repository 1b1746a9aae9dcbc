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


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(batch: int = 1):  # type: ignore[no-untyped-def]
        return models.resnet18(batch=batch, **SMALL)

    monkeypatch.setitem(models.MODELS, "resnet18", build)


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
                              "DRAM", "bytes", "check"]
    rows = out[2:25]
    assert rows[0].split()[1:4] == ["conv1_relu", "vta", "conv2d+requantize+relu"]
    assert sum("conv2d+requantize+add+relu" in r for r in rows) == 8
    assert all(r.endswith("ok") for r in rows)
    assert out[25].startswith("total ") and "frames/s" in out[25]
    assert out[26].startswith("MACs on the accelerator: 100.0%")
    assert "host layout transforms: pack image, unpack logits" in out[27]
    assert out[-2].startswith("PASS: the outputs and all 23 stored tensors bit-exact")
    assert json.loads(trace.read_text())["otherData"]["graph"] == "resnet18"


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
    assert main(["run", "--hw", PYNQ, "--onnx", str(path)]) == 0
    out = capsys.readouterr().out
    assert "qdq on pynq (fusion: full)" in out and "PASS" in out
    assert main(["run", "--onnx", str(path), "--target", "cuda-emu"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.slow
def test_full_resnet18(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", PYNQ, "resnet18", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["mac_share"] == 1.0 and s["kernels"] == 23
    assert s["of_machine_bound"] >= 0.85
