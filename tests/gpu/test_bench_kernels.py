"""The benchmarks' kernels (the serious tensor-core GEMM at 4096^3/8192^3, fused ResNet-18
convolutions) are rendered and compiled to PTX for sm_80 and sm_90 here, so they are known to
build on machines without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import resnet18_layer
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import LAUNCH, WmmaMma
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.schedules import conv2d_wmma, matmul_wmma


def test_benchmark_kernels_compile(nvcc_check) -> None:  # type: ignore[no-untyped-def]
    funcs = [lower_for_gpu(matmul_wmma(MatmulSpec(n, n, n), dt, None,
                                       out_dtype="float16" if dt == "float16" else "int32"))
             for dt in ("float16", "int8") for n in (4096, 8192)]
    funcs += [lower_for_gpu(conv2d_wmma(resnet18_layer(f"C{i}"), "int8", Epilogue()))
              for i in range(2, 12)]
    gemm = funcs[0]
    launch = gemm.attr(LAUNCH)
    assert launch.grid == (32, 32, 1) and launch.block == (32, 4, 2)
    assert launch.shared_bytes <= 48 * 1024
    assert sum(isinstance(n, WmmaMma) for n in E.walk(gemm.body)) == 1  # fm x fn unrolled
    ko = next(n for n in E.walk(gemm.body) if isinstance(n, S.For) and n.var.name == "k_o")
    assert sum(isinstance(n, S.Barrier) for n in E.walk(ko.body)) == 1  # double buffered
    src = render_cuda(gemm).source
    assert "int4" in src and "wmma::load_matrix_sync" in src
    nvcc_check([render_cuda(f).source for f in funcs])


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["gpu_gemm.py", "gpu_conv2d.py"])
def test_gpu_benches_say_no_gpu(script: str) -> None:
    """Where there is no GPU (or no CuPy) each GPU bench says so and exits 2: nothing measured."""
    from vta.gpu.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    cmd = [sys.executable, str(ROOT / "bench" / script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert f"{script}: no GPU benchmark run" in proc.stderr


def test_gpu_all_without_a_gpu_exits_2() -> None:
    from vta.gpu.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    env = {**os.environ, "GPU_ALL_NO_INSTALL": "1", "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_all.sh")], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "gpu_all: no GPU/CuPy" in proc.stdout
