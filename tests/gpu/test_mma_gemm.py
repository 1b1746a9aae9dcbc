"""The task-mapping tensor-core GEMM (vta.gpu.kernels.gemm): bit-exact int8 (fused requantizing
epilogue) and fp16 within the fp32 summation bound over hypothesis-drawn shapes and tiles
(sizes that are not multiples of any tile included), zero bank conflicts and the minimum global
sectors on row-aligned shapes, every kernel compiled to PTX for sm_80 and sm_90."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import GpuLoweringError
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import KNOBS, LAUNCH, REGISTERS
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.gemm import MmaKnobs, mma_gemm
from vta.gpu.mma import CpAsync, LdMatrix, MmaSync
from vta.gpu.profile import Profile
from vta.testing import epilogues


@st.composite
def knobs(draw: st.DrawFn) -> MmaKnobs:
    wm, wn = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    return MmaKnobs(16 * wm * draw(st.sampled_from([1, 2])),
                    8 * wn * draw(st.sampled_from([1, 2, 4])), 0, wm, wn,
                    draw(st.sampled_from([2, 3, 4])))


dims = st.integers(1, 90)


def run_int8(spec: MatmulSpec, epi: Epilogue | None, kb: MmaKnobs, seed: int,
             profile: bool = False) -> tuple[S.PrimFunc, Profile | None]:
    func = mma_gemm(spec, "int8", epi, kb)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (spec.m, spec.k), dtype=np.int8)
    w = rng.integers(-128, 128, (spec.n, spec.k), dtype=np.int8)
    acc = (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    if epi is None:
        y, want, args = np.zeros_like(acc), acc, [x, w]
    else:
        bias = rng.integers(-(1 << 10), 1 << 10, spec.n, dtype=np.int32)
        want = apply_epilogue(acc, bias if epi.bias else None, epi, 1)
        y, args = np.zeros_like(want), [x, w] + ([bias] if epi.bias else [])
    em = Emulator(func, profile=profile)
    em.run(*args, y)
    assert np.array_equal(y, want), f"int8 GEMM {spec} {kb} differs from numpy"
    return func, em.profile


def run_fp16(spec: MatmulSpec, kb: MmaKnobs, seed: int, out: str = "float32",
             profile: bool = False) -> tuple[S.PrimFunc, Profile | None]:
    func = mma_gemm(spec, "float16", None, kb, out_dtype=out)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((spec.m, spec.k)).astype(np.float16)
    w = rng.standard_normal((spec.n, spec.k)).astype(np.float16)
    y = np.zeros((spec.m, spec.n), out)
    em = Emulator(func, profile=profile)
    em.run(x, w, y)
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    ax, aw = np.abs(x).astype(np.float64), np.abs(w).astype(np.float64)
    bound = 2 * spec.k * 2.0 ** -24 * (ax @ aw.T)
    if out == "float16":  # one more rounding to half precision: half an ulp, relative for
        # normal values, absolute (2**-25, half the subnormal spacing) below 2**-14
        bound = bound + np.maximum(np.abs(exact) * 2.0 ** -11, 2.0 ** -25)
    assert np.all(np.abs(y.astype(np.float64) - exact) <= bound + 1e-30), \
        f"fp16 GEMM {spec} {kb} outside the error bound"
    return func, em.profile


def variant(func: S.PrimFunc, spec: MatmulSpec, item: int, out_item: int) -> tuple:
    """What decides a kernel's code paths (not its sizes): knobs, types, how K's rows and
    Y's rows are aligned. The tests compile one kernel per variant (nvcc's time dominates)."""
    from vta.gpu.kernels.copy import vector_bytes

    return (func.name, func.attr(KNOBS), tuple(b.dtype for b in func.params),
            vector_bytes(spec.k * item, 16), vector_bytes(spec.n * out_item, 16))


def test_int8_bit_exact(nvcc_check: Callable) -> None:
    sources: dict[tuple, str] = {}

    @settings(max_examples=25)
    @given(st.builds(MatmulSpec, dims, dims, dims), st.one_of(st.none(), epilogues()), knobs(),
           st.integers(0, 1 << 16))
    def case(spec: MatmulSpec, epi: Epilogue | None, kb: MmaKnobs, seed: int) -> None:
        func, _ = run_int8(spec, epi, kb, seed)
        out_item = 1 if epi is not None else 4
        sources.setdefault(variant(func, spec, 1, out_item), render_cuda(func).source)

    case()
    nvcc_check(list(sources.values())[:4])


def test_fp16_within_bound(nvcc_check: Callable) -> None:
    sources: dict[tuple, str] = {}

    @settings(max_examples=15)
    @given(st.builds(MatmulSpec, dims, dims, dims), knobs(),
           st.sampled_from(["float32", "float16"]), st.integers(0, 1 << 16))
    def case(spec: MatmulSpec, kb: MmaKnobs, out: str, seed: int) -> None:
        func, _ = run_fp16(spec, kb, seed, out)
        sources.setdefault(variant(func, spec, 2, 4 if out == "float32" else 2),
                           render_cuda(func).source)

    case()
    nvcc_check(list(sources.values())[:4])


ALIGNED: list[tuple[str, MatmulSpec, MmaKnobs]] = [
    ("int8", MatmulSpec(128, 96, 192), MmaKnobs(64, 64, 0, 2, 2, 3)),
    ("int8", MatmulSpec(100, 70, 128), MmaKnobs(64, 32, 0, 2, 1, 2)),   # M, N past the tile
    ("float16", MatmulSpec(96, 128, 96), MmaKnobs(64, 64, 0, 2, 2, 3)),
    ("float16", MatmulSpec(50, 40, 48), MmaKnobs(32, 32, 0, 1, 2, 4)),  # K not a tile multiple
]


@pytest.mark.parametrize("dtype,spec,kb", ALIGNED)
def test_zero_bank_conflicts_and_minimum_sectors(dtype: str, spec: MatmulSpec, kb: MmaKnobs
                                                 ) -> None:
    """Rows of X and W (K) and of Y (N) whole 16-byte multiples: every shared access is
    conflict-free and no sector of a tile is fetched or written twice."""
    if dtype == "int8":
        _, prof = run_int8(spec, Epilogue(), kb, 1, profile=True)
    else:
        _, prof = run_fp16(spec, kb, 1, "float16", profile=True)
    assert prof is not None
    assert prof.bank_conflicts == 0
    for name in ("X", "W", "Y") + (("bias",) if dtype == "int8" else ()):
        c = prof.buffers[name]
        assert c.load_sectors == c.load_min_sectors, name
        assert c.store_sectors == c.store_min_sectors, name
    kinds = prof.instructions
    assert kinds["mma.sync"] > 0 and kinds["ldmatrix"] > 0 and kinds["cp.async"] > 0
    k_stages = -(-spec.k // (kb.resolved(dtype).bk))
    # one barrier per K stage after the prologue's, plus the epilogue's
    assert prof.barriers / prof.blocks == 1 + (k_stages - 1) + 1 + 2 * (kb.bm // kb.warps_m // 16)


def test_kernel_structure_and_ptx(nvcc_check: Callable) -> None:
    """The benchmark kernels (4096^3: fp16 -> fp16, int8 -> int32, int8 with the epilogue) use
    cp.async, ldmatrix and mma.sync, keep their registers out of local memory and compile."""
    funcs = [mma_gemm(MatmulSpec(4096, 4096, 4096), "float16", None, out_dtype="float16"),
             mma_gemm(MatmulSpec(4096, 4096, 4096), "int8", None, out_dtype="int32"),
             mma_gemm(MatmulSpec(4096, 4096, 4096), "int8", Epilogue())]
    for f in funcs:
        nodes = list(E.walk(f.body))
        assert any(isinstance(n, CpAsync) and n.nbytes == 16 for n in nodes)
        assert any(isinstance(n, LdMatrix) and n.num == 4 for n in nodes)
        assert sum(isinstance(n, MmaSync) for n in nodes) == 2 * 4 * 8  # 2 k-chunks x 4 x 8
        assert f.attr(REGISTERS) <= 255
        k = render_cuda(f)
        smem = f.attr(LAUNCH).shared_bytes
        if smem > 48 * 1024:  # beyond the static limit: carved out of dynamic shared memory
            assert k.dynamic_shared == smem and "extern __shared__" in k.source
        else:
            assert k.dynamic_shared == 0
    # the rings (2 x 3 x 128 x 32 halves or 2 x 3 x 128 x 64 bytes): fp16 -> fp16 stages its
    # output in the A ring's bytes; int8 -> int32 needs its own staging tile (2 warp rows x 16
    # rows x a 136-word pitch); int8 -> int8 aliases it and stages the bias (128 words)
    assert [f.attr(LAUNCH).shared_bytes for f in funcs] == [49152, 49152 + 2 * 16 * 136 * 4,
                                                           49152 + 128 * 4]
    nvcc_check([render_cuda(f).source for f in funcs])


def test_bad_knobs_are_named_errors() -> None:
    with pytest.raises(GpuLoweringError, match="bm=24"):
        mma_gemm(MatmulSpec(32, 32, 32), "int8", None, MmaKnobs(24, 32, 0, 1, 1, 2))
    with pytest.raises(GpuLoweringError, match="stages=1"):
        mma_gemm(MatmulSpec(32, 32, 32), "int8", None, MmaKnobs(32, 32, 0, 1, 1, 1))
    with pytest.raises(GpuLoweringError, match="float32"):
        mma_gemm(MatmulSpec(32, 32, 32), "float32")
    with pytest.raises(GpuLoweringError, match="shared memory"):
        mma_gemm(MatmulSpec(32, 32, 32), "float16", None, MmaKnobs(256, 256, 128, 2, 2, 4))


@pytest.mark.gpu
def test_on_gpu() -> None:
    """The same kernels on a GPU (CuPy): int8 bit-exact, fp16 within the bound, the benchmark
    size included."""
    from vta.gpu.runtime import run_kernel

    from .conftest import gpu_or_skip

    gpu_or_skip()
    rng = np.random.default_rng(5)
    for spec, kb in [(MatmulSpec(77, 130, 200), MmaKnobs(64, 64, 0, 2, 2, 3)),
                     (MatmulSpec(512, 384, 1024), MmaKnobs()),
                     (MatmulSpec(4096, 4096, 4096), MmaKnobs())]:
        epi = Epilogue()
        x = rng.integers(-128, 128, (spec.m, spec.k), dtype=np.int8)
        w = rng.integers(-128, 128, (spec.n, spec.k), dtype=np.int8)
        b = rng.integers(-(1 << 10), 1 << 10, spec.n, dtype=np.int32)
        acc = (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64).astype(np.int32)
        y = run_kernel(render_cuda(mma_gemm(spec, "int8", epi, kb)),
                       [x, w, b, np.zeros((spec.m, spec.n), np.int8)])[-1]
        assert np.array_equal(y, apply_epilogue(acc, b, epi, 1)), spec
        xh = rng.standard_normal((spec.m, spec.k)).astype(np.float16)
        wh = rng.standard_normal((spec.n, spec.k)).astype(np.float16)
        yh = run_kernel(render_cuda(mma_gemm(spec, "float16", None, kb, out_dtype="float32")),
                        [xh, wh, np.zeros((spec.m, spec.n), np.float32)])[-1]
        exact = xh.astype(np.float64) @ wh.astype(np.float64).T
        mag = np.abs(xh).astype(np.float64) @ np.abs(wh).astype(np.float64).T
        assert np.all(np.abs(yh - exact) <= 2 * spec.k * 2.0 ** -24 * mag + 1e-30), spec
