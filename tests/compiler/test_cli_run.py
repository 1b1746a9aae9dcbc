"""``vta run``: success, mismatch-free output, and the exit-2 error paths."""

import json
from pathlib import Path

import pytest
from _vta_helpers import ROOT

from vta.cli import main

PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")


def test_run_matmul_prints_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", PYNQ, "matmul", "32", "48", "24"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "roofline" in out and "GEMM utilization" in out


def test_run_json_and_shape_flags(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "--hw", PYNQ, "resnet18:C4", "--height", "8", "--in-channels", "20",
               "--out-channels", "24", "--json", "--no-latency-hiding", "--seed", "3"])
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["schedule"]["vthreads"] == 1
    assert s["shape"].startswith("conv2d N=1 20x8x8")
    assert set(s["units"]) >= {"load", "compute", "store"}


def test_run_dump_ir(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.json"
    assert main(["run", "--hw", PYNQ, "dense", "4", "32", "32", "--dump-ir", "uop_gen",
                 "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "# after uop_gen" in out and trace.exists()


def test_run_plot_draws_a_png(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--plot``: the roofline with the layer against both bounds, and the units' shares; drawn
    headless (Agg), for one layer and for a network's layers."""
    png = tmp_path / "roof.png"
    assert main(["run", "--hw", PYNQ, "matmul", "16", "32", "16", "--plot", str(png)]) == 0
    assert f"plot written to {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    net = tmp_path / "net.png"
    assert main(["run", "--hw", PYNQ, "resnet18", "--layers", "C10,C11", "--plot",
                 str(net)]) == 0
    assert net.stat().st_size > 10_000


@pytest.mark.parametrize("argv, msg", [
    (["run", "--hw", PYNQ, "matmul", "16", "16", "16", "--plot", "/nonexistent/dir/x.png"],
     "no directory /nonexistent/dir"),
    (["run", "--hw", PYNQ, "resnet18:C99"], "unknown ResNet-18 layer"),
    (["run", "--hw", PYNQ, "nonsense"], "unknown workload"),
    (["run", "--hw", PYNQ, "matmul", "0", "4", "4"], "M must be >= 1"),
    (["run", "--hw", PYNQ, "conv2d", "--tco", "4", "--tci", "4", "--th", "56", "--tw", "56"],
     "does not fit the inp scratchpad"),
    (["run", "--hw", PYNQ, "conv2d", "--dump-ir", "bogus"], "unknown pass"),
    (["run", "--hw", "missing.yaml", "conv2d"], "cannot read file"),
])
def test_run_errors_exit_2(argv, msg, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error:") and msg in err and err.count("\n") == 1


def test_a_plot_path_that_cannot_be_written_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``--plot`` path that passes the early check (its directory exists, its suffix is a
    format) but cannot be written (it is a directory) is still one line with exit 2."""
    target = tmp_path / "x.png"
    target.mkdir()
    assert main(["run", "--hw", PYNQ, "matmul", "16", "16", "16", "--plot", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error:") and "cannot write the picture" in err
    assert err.count("\n") == 1
