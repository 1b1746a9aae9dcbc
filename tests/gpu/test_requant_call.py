"""ONNX Runtime's arithmetic on the GPU path: the scalar intrinsic ``requant_f32``
(vta.gpu.requant, registered through vta.gpu.intrinsic.register_gpu_call) and the table add
(vta.gpu.window.lut2_func).

The emulator's answer is judged against numpy's float32 (what MLAS and the rendered CUDA
compute: ``float32(acc) * float32 scale``, rounded half to even, saturated to int32), not
against the integer form it runs (vta.float_scale.scale_mul), on random accumulators, ties,
24-bit conversion ties, tiny and large scales and saturation; the kernels calling it compile to
PTX for sm_80 and sm_90 with the float32 instructions that arithmetic needs."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import compute, placeholder
from vta.compiler.ops.chain import CHANNEL, Chain, ChainOperand, clip_stage, exact_requant_stage
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import CudaRenderError, EmulatorError, IntrinError
from vta.float_scale import scale_word
from vta.gpu import cuda, emulator
from vta.gpu import schedules as G
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.intrinsic import GpuCall, gpu_call, register_gpu_call
from vta.gpu.kernels.gemm import MmaKnobs, mma_gemm
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.nvcc import compile_ptx, find_nvcc
from vta.gpu.requant import DEVICE_FUNCTION, REQUANT_F32_CALL
from vta.gpu.window import lut2_func
from vta.resources import REQUANT_F32

from .conftest import ARCHES

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
BIAS_ONLY = Epilogue(shift=0, bias=True, clip=False)


def float32_requant(acc: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """numpy's float32: ``rint(float32(acc) * float32(ratio))`` (half to even), saturated to
    int32 (int64 result)."""
    p = acc.astype(np.float32) * ratio.astype(np.float32)
    return np.clip(np.rint(p.astype(np.float64)), I32_MIN, I32_MAX).astype(np.int64)


def call_kernel(n: int, name: str = REQUANT_F32, dtypes: tuple[str, str] = ("int32", "int32")
                ) -> object:
    """``out[i] = name(acc[i], word[i])``, one element a thread, lowered for the GPU."""
    acc = placeholder((n,), dtypes[0], "acc")
    word = placeholder((n,), dtypes[1], "word")
    out = compute((n,), lambda i: E.Call(name, (acc[i], word[i])), "out")
    sch = create_schedule(out)
    s = sch[out]
    bx, tx = s.split(s.axis[0], 128)
    s.bind(bx, "blockIdx.x")
    s.bind(tx, "threadIdx.x")
    return lower_for_gpu(lower(sch, [acc, word, out], "requant_call"))


def cases() -> tuple[np.ndarray, np.ndarray]:
    """Accumulators and float32 ratios: random over int32 and small ranges with ratios from
    1e-7 to 10; exact ties of the product (0.5, 0.25, 0.75 on the right residues); ties of
    the int32 -> float32 conversion (2**24 + 1, 2**25 + 2, ...); saturation both ways; ratios
    so small the scale is subnormal or the product underflows."""
    rng = np.random.default_rng(21)
    n = 30000
    acc = np.concatenate([rng.integers(I32_MIN, I32_MAX, n, endpoint=True),
                          rng.integers(-(1 << 20), 1 << 20, n)])
    ratio = np.concatenate([10.0 ** rng.uniform(-7, 1, 2 * n)])
    ties_acc = np.arange(-4001, 4002, 2)  # odd: x * 0.5 is k + 1/2
    quarter = np.arange(-4002, 4003, 4)  # 2 mod 4: x * 0.25 is k + 1/2
    three = np.arange(-6002, 6003, 4)  # 2 mod 4: x * 0.75 is k + 1/2
    conv = np.array([(1 << 24) + 1, (1 << 24) + 3, (1 << 25) + 2, (1 << 25) + 6,
                     -(1 << 24) - 1, -(1 << 25) - 2, (1 << 30) + 64, I32_MAX, I32_MIN])
    sat = np.array([I32_MAX, I32_MIN, 1 << 30, -(1 << 30), 123456789, -987654321])
    tiny = rng.integers(I32_MIN, I32_MAX, 64, endpoint=True)
    acc = np.concatenate([acc, ties_acc, quarter, three, conv, sat, sat, tiny, tiny])
    ratio = np.concatenate([ratio, np.full(ties_acc.size, 0.5), np.full(quarter.size, 0.25),
                            np.full(three.size, 0.75), np.ones(conv.size),
                            np.full(sat.size, 3.0), np.full(sat.size, 1e6),
                            np.full(tiny.size, 2.0 ** -140), np.full(tiny.size, 1e-30)])
    return acc.astype(np.int64), ratio.astype(np.float32)


def test_the_emulated_call_is_numpys_float32_on_ties_and_saturation() -> None:
    acc, ratio = cases()
    words = np.array([scale_word(float(r)) for r in ratio], dtype=np.int64)
    func = call_kernel(acc.size)
    out = np.zeros(acc.size, np.int32)
    Emulator(func).run(acc.astype(np.int32), words.astype(np.uint32).view(np.int32), out)
    want = float32_requant(acc, ratio)
    assert np.array_equal(out.astype(np.int64), want)
    # the cases hold what they claim: ties, saturation both ways, underflow to 0
    assert set(out[acc.size - 128:].tolist()) <= {0, -1, 1}
    assert I32_MAX in out.tolist() and I32_MIN in out.tolist()


def test_the_call_renders_its_device_function_once_and_compiles() -> None:
    src = render_cuda(call_kernel(256)).source
    assert src.count(f"__device__ __forceinline__ int {DEVICE_FUNCTION}(") == 1
    assert f"{DEVICE_FUNCTION}(acc[" in src
    # no fast-math forms, no FMA contraction: each step is its own correctly rounded op
    assert "__int2float_rn" in src and "__fmul_rn" in src and "__float2int_rn" in src
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: rendered kernels cannot be compiled to PTX")
    for arch in ARCHES:
        ptx = compile_ptx(src, arch)
        # int32 -> float32 half to even, one rounded product, float32 -> int32 half to even
        assert re.search(r"cvt\.rn\.f32\.s32", ptx), arch
        assert re.search(r"mul\.rn\.f32", ptx), arch
        assert re.search(r"cvt\.rni\.s32\.f32", ptx), arch
        assert "fma" not in ptx, arch


def test_the_call_is_registered_through_the_one_definition() -> None:
    assert gpu_call(REQUANT_F32) is REQUANT_F32_CALL
    assert cuda.CALLS[REQUANT_F32] is REQUANT_F32_CALL is emulator.CALLS[REQUANT_F32]
    with pytest.raises(IntrinError, match="already registered"):
        register_gpu_call(GpuCall(REQUANT_F32, ("int32", "int32"), "int32", "f",
                                  "int f(int a, int b);", lambda a, b: a))
    with pytest.raises(IntrinError, match="no GPU call named 'nope'"):
        gpu_call("nope")
    with pytest.raises(IntrinError, match="does not define g"):
        GpuCall("x", ("int32",), "int32", "g", "int f(int a);", lambda a: a)


def test_an_unknown_or_mistyped_call_is_a_named_error() -> None:
    func = call_kernel(128, name="no_such_call")
    with pytest.raises(CudaRenderError, match=r"no CUDA form for call no_such_call\(\).*"
                                              r"requant_f32"):
        render_cuda(func)
    with pytest.raises(EmulatorError, match=r"no emulation for call no_such_call\(\)"):
        Emulator(func).run(np.zeros(128, np.int32), np.zeros(128, np.int32),
                           np.zeros(128, np.int32))
    bad = call_kernel(128, dtypes=("int8", "int32"))
    with pytest.raises(CudaRenderError, match=r"requant_f32\(int8, int32\) -> int32: the GPU "
                                              r"intrinsic takes \(int32, int32\)"):
        render_cuda(bad)
    with pytest.raises(EmulatorError, match=r"requant_f32\(int8, int32\)"):
        Emulator(bad).run(np.zeros(128, np.int8), np.zeros(128, np.int32),
                          np.zeros(128, np.int32))


# ------------------------------------------------------------------------ in a fused chain


def exact_chain(zero: int, lo: int, hi: int) -> Chain:
    """The graph's exact requantize: per-channel scale words, the zero point, the clip."""
    return Chain((exact_requant_stage(0, zero, lo, hi),), (ChainOperand("opnd0", CHANNEL),))


@pytest.mark.parametrize(("m", "n", "k", "zero", "lo", "hi"), [
    (37, 24, 70, 0, -128, 127), (1, 10, 64, -5, -128, 127), (33, 40, 48, 7, 0, 127)])
def test_gemm_with_the_exact_requantize_is_bit_exact(m: int, n: int, k: int, zero: int,
                                                    lo: int, hi: int,
                                                    nvcc_check: Callable) -> None:
    """The task-mapping GEMM (batch >= 16) and the SIMT GEMM (a batch of 1) with the exact
    requantize fused: numpy's float32 requantize of the int32 GEMM, per output channel."""
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, n, dtype=np.int32)
    ratio = (10.0 ** rng.uniform(-4, -2, n)).astype(np.float32)
    words = np.array([scale_word(float(r)) for r in ratio], dtype=np.int64).astype(np.int32)
    acc = x.astype(np.int64) @ w.astype(np.int64).T + bias
    want = np.clip(float32_requant(acc, np.broadcast_to(ratio, acc.shape)) + zero, lo, hi)
    chain = exact_chain(zero, lo, hi)
    ms = MatmulSpec(m, n, k)
    func = mma_gemm(ms, "int8", BIAS_ONLY, MmaKnobs(32, 16, 0, 2, 1, 2), chain=chain) \
        if m >= 16 else lower_for_gpu(G.matmul_simt(ms, "int8", BIAS_ONLY, chain=chain))
    y = np.zeros((m, n), np.int8)
    Emulator(func).run(x, w, bias, words, y)
    assert np.array_equal(y.astype(np.int64), want)
    nvcc_check([render_cuda(func).source])


def test_the_table_add_kernel_looks_up_every_pair(nvcc_check: Callable) -> None:
    """``lut2_func``: ``table[a + 128, b + 128]`` then its fused chain (a ReLU's clip), on
    every (a, b) pair once, over a 4-D shape the launch does not divide."""
    rng = np.random.default_rng(5)
    table = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    grid = np.stack(np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij"))
    a = grid[0].reshape(4, 64, 16, 16).astype(np.int8)  # 65,536 elements: every pair
    b = grid[1].reshape(4, 64, 16, 16).astype(np.int8)
    y = np.zeros(a.shape, np.int8)
    func = lower_for_gpu(lut2_func(a.shape, Chain((clip_stage(0, 127),))))
    assert [p.name for p in func.params][:3] == ["a", "b", "table"]
    Emulator(func).run(a, b, table, y)
    want = np.maximum(table[a.astype(np.int64) + 128, b.astype(np.int64) + 128], 0)
    assert np.array_equal(y, want)
    odd = (1, 3, 5, 7)
    a2, b2 = rng.integers(-128, 128, odd, dtype=np.int8), rng.integers(-128, 128, odd,
                                                                        dtype=np.int8)
    y2 = np.zeros(odd, np.int8)
    Emulator(lower_for_gpu(lut2_func(odd))).run(a2, b2, table, y2)
    assert np.array_equal(y2, table[a2.astype(np.int64) + 128, b2.astype(np.int64) + 128])
    nvcc_check([render_cuda(func).source])


@pytest.mark.gpu
def test_the_call_and_the_table_kernel_on_a_gpu() -> None:
    """On a real GPU: the device function's float32 arithmetic is numpy's on every case
    above (the emulator's integer form is checked against the same), and the exact chain in
    the task-mapping GEMM and the table kernel are bit-exact."""
    from vta.gpu.runtime import gpu_available, run_kernel

    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
    acc, ratio = cases()
    words = np.array([scale_word(float(r)) for r in ratio], dtype=np.int64)
    kernel = render_cuda(call_kernel(acc.size))
    got = run_kernel(kernel, [acc.astype(np.int32), words.astype(np.uint32).view(np.int32),
                              np.zeros(acc.size, np.int32)])[-1]
    assert np.array_equal(got.astype(np.int64), float32_requant(acc, ratio))
    m, n, k = 200, 136, 192
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, n, dtype=np.int32)
    r = (10.0 ** rng.uniform(-4, -2, n)).astype(np.float32)
    wd = np.array([scale_word(float(v)) for v in r], dtype=np.int64).astype(np.int32)
    want = np.clip(float32_requant(x.astype(np.int64) @ w.astype(np.int64).T + bias,
                                   np.broadcast_to(r, (m, n))) - 3, -128, 127)
    func = mma_gemm(MatmulSpec(m, n, k), "int8", BIAS_ONLY, MmaKnobs(),
                    chain=exact_chain(-3, -128, 127))
    y = run_kernel(render_cuda(func), [x, w, bias, wd, np.zeros((m, n), np.int8)])[-1]
    assert np.array_equal(y.astype(np.int64), want)
    table = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    a = rng.integers(-128, 128, (2, 64, 23, 17), dtype=np.int8)
    b = rng.integers(-128, 128, a.shape, dtype=np.int8)
    y4 = run_kernel(render_cuda(lower_for_gpu(lut2_func(a.shape))),
                    [a, b, table, np.zeros(a.shape, np.int8)])[-1]
    assert np.array_equal(y4, table[a.astype(np.int64) + 128, b.astype(np.int64) + 128])
