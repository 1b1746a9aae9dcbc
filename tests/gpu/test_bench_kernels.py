"""The benchmarks' kernels (the serious tensor-core GEMM at 4096^3/8192^3, fused ResNet-18
convolutions) are rendered and compiled to PTX for sm_80 and sm_90 here, so they are known to
build on machines without a GPU."""

from __future__ import annotations

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
