"""Layers on the GPU targets (``vta.run.layer.run_layer`` with ``CudaEmuTarget`` or
``CudaTarget``) and ``vta run --target cuda|cuda-emu``."""

from __future__ import annotations

import pytest

from vta import cli
from vta.compiler.ops.workloads import resolve
from vta.errors import GpuUnavailableError
from vta.gpu.runtime import gpu_available
from vta.run.layer import run_layer
from vta.run.targets import CudaEmuTarget, CudaTarget


@pytest.mark.parametrize("workload", ["resnet18:C4", "matmul", "dense"])
def test_emulated_run_passes(workload: str) -> None:
    r = run_layer(resolve(workload), CudaEmuTarget())
    assert r.passed and r.check.line().startswith("PASS: bit-exact against numpy (")


def test_emit_cuda_prints_the_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--target", "cuda-emu", "--emit-cuda", "resnet18:C7"]) == 0
    out = capsys.readouterr().out
    assert "wmma::mma_sync" in out and "__global__" in out and "PASS" in out
    assert "on the SIMT emulator" in out


def test_fp16_matmul_is_within_tolerance_not_bit_exact(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    r = run_layer(resolve("matmul"), CudaEmuTarget(), dtype="float16")
    assert r.passed and r.check.line().startswith("PASS: within 0.001 against numpy")
    assert cli.main(["run", "--target", "cuda-emu", "--dtype", "float16", "matmul"]) == 0
    out = capsys.readouterr().out
    assert "PASS: within 0.001" in out and "bit-exact" not in out


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_cuda_target_without_gpu_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpuUnavailableError, match="cuda-emu"):
        CudaTarget()
    assert cli.main(["run", "--target", "cuda", "matmul"]) == 2
    assert "cuda-emu" in capsys.readouterr().err


@pytest.mark.gpu
def test_cuda_target_on_gpu() -> None:
    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
    assert run_layer(resolve("conv2d"), CudaTarget()).passed


def test_cli_run_on_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--target", "cuda-emu", "resnet18:C10"]) == 0
    assert "PASS: bit-exact against numpy" in capsys.readouterr().out
