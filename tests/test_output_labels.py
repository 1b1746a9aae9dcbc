"""What ``vta run`` labels (issue 25): a changed shape is named by its shape, not as the
ResNet-18 layer it started from; the report says which throughput counts useful work; an
explicit ``--gpu-schedule wmma`` that cannot run is an error, not a silent SIMT run; a config
whose estimate exceeds its board is warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.cli import main
from vta.compiler.ops.workloads import resolve

ROOT = Path(__file__).resolve().parents[1]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")


def test_a_changed_shape_is_named_by_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert resolve("resnet18:C2").name == "resnet18:C2"
    assert resolve("resnet18:C2", [], height=56).name == "resnet18:C2"  # unchanged: the layer
    w = resolve("resnet18:C2", [], height=14, out_channels=32)
    assert w.name == "conv2d(64x14x14->32,k3,s1,p1)"
    assert resolve("resnet18:C4", [], batch=2).name.startswith("conv2d(N=2,")
    assert main(["run", "--hw", PYNQ, "resnet18:C11", "--height", "7", "--in-channels", "64",
                 "--out-channels", "64"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("conv2d(64x7x7->64,k3,s1,p1): conv2d N=1 64x7x7") and \
        "resnet18:C11" not in out
    # the report says which GOP/s counts useful work and which counts the padded tensor ops
    assert "useful GOP/s" in out and "the table's throughput counts padded tensor ops" in out


def test_an_explicit_wmma_schedule_that_cannot_run_is_an_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the CLI ran SIMT silently (the API refuses by name)."""
    argv = ["run", "--target", "cuda-emu", "matmul", "8", "8", "8"]
    assert main([*argv, "--gpu-schedule", "wmma"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: --gpu-schedule wmma: matmul's output is 8 x 8 (rows x "
                          "columns), smaller than one 16 x 16 tensor-core tile; use "
                          "--gpu-schedule simt"), err
    assert main(argv) == 0  # left out: wmma where a tile fits, else simt
    assert "PASS" in capsys.readouterr().out


def test_run_warns_when_the_config_exceeds_its_board(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = tmp_path / "tiny_board.yaml"
    small.write_text(Path(PYNQ).read_text().replace("name: pynq", "name: pynq_tiny_board", 1)
                     + "\n")
    text = small.read_text()
    assert "board:" in text
    small.write_text(text.replace("board:", "board:\n  dsp: 10", 1))
    assert main(["run", "--hw", str(small), "matmul", "16", "16", "16"]) == 0
    out, err = capsys.readouterr()
    assert "PASS" in out
    assert err.startswith("vta: warning: pynq_tiny_board does not fit its board (xc7z020): "
                          "estimated dsp ") and "> 10" in err, err
    assert main(["run", "--hw", PYNQ, "matmul", "16", "16", "16"]) == 0
    assert "warning" not in capsys.readouterr().err
