"""``run_gpu_workload``: the GPU side of ``vta run --target cuda|cuda-emu [--emit-cuda]``."""

from __future__ import annotations

import argparse

import pytest

from vta.errors import GpuUnavailableError
from vta.gpu.runtime import gpu_available
from vta.run.gpu_runner import run_gpu_workload


def ns(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"target": "cuda-emu", "emit_cuda": False, "seed": 0, **kw})


@pytest.mark.parametrize("workload", ["resnet18:C4", "matmul", "dense"])
def test_emulated_run_passes(workload: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_gpu_workload(ns(workload=workload)) == 0
    out = capsys.readouterr().out
    assert "SIMT emulator" in out and "PASS" in out


def test_emit_cuda_prints_the_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_gpu_workload(ns(workload="resnet18:C7", emit_cuda=True)) == 0
    out = capsys.readouterr().out
    assert "wmma::mma_sync" in out and "__global__" in out and "PASS" in out


def test_fp16_matmul(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_gpu_workload(ns(workload="matmul", dtype="float16")) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_cuda_target_without_gpu_is_a_clear_error() -> None:
    with pytest.raises(GpuUnavailableError, match="cuda-emu"):
        run_gpu_workload(ns(workload="matmul", target="cuda"))


@pytest.mark.gpu
def test_cuda_target_on_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
    assert run_gpu_workload(ns(workload="conv2d", target="cuda")) == 0
    assert "PASS" in capsys.readouterr().out


def test_cli_flags_when_run_command_exists(capsys: pytest.CaptureFixture[str]) -> None:
    from vta import cli

    try:
        rc = cli.main(["run", "--target", "cuda-emu", "resnet18:C10"])
    except SystemExit as e:  # the run subcommand or its --target option is not wired yet
        pytest.skip(f"vta run --target is not available yet (exit {e.code})")
    assert rc == 0
    assert "PASS" in capsys.readouterr().out
