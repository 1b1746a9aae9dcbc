"""Fused chains in the task-mapping kernels and the channels-last conv2d (vta.gpu.kernels.gemm,
vta.gpu.kernels.conv2d ``layout="NHWC"``): bit-exact under the SIMT emulator against an
independent numpy statement of each stage (int32 wrapping, as the accelerator's ALU), over
hypothesis-drawn shapes, tiles and chain constants; zero bank conflicts and the minimum
global sectors on ResNet-18-shaped layers (fewer channels, so the emulator stays quick); PTX
for sm_80 and sm_90; named errors for what the kernels refuse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ops.chain import (
    CHANNEL,
    Chain,
    ChainOperand,
    EwStage,
    add_stage,
    clip_stage,
    requant_stage,
    round_clip_stage,
    scaled_operand,
)
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import resnet18_layer
from vta.errors import GpuLoweringError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.conv2d import mma_conv2d, nhwc_knobs, ohwi_weight
from vta.gpu.kernels.gemm import MmaKnobs, mma_gemm
from vta.testing import epilogues

from .test_differential import conv_specs

#: the graph path's anchor epilogue: the bias, nothing else (the chain requantizes)
BIAS_ONLY = Epilogue(shift=0, bias=True, clip=False)


def _wrap(a: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 (two's complement), kept as int64."""
    return (a + (1 << 31)) % (1 << 32) - (1 << 31)


def _rounding(x: np.ndarray, pre: int, post: int) -> np.ndarray:
    return _wrap(_wrap(x >> pre) + (1 << (post - 1))) >> post


@st.composite
def chains(draw: st.DrawFn) -> tuple[Chain, tuple[int, ...]]:
    """ResNet's residual block tail (requantize, add a scaled residual, round, ReLU) and a
    per-channel add: the chain and its constants (for the numpy statement)."""
    mult, pre, post = draw(st.integers(1, 300)), draw(st.integers(0, 6)), draw(st.integers(1, 8))
    lo = draw(st.integers(-128, 0))
    mine, other = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pre2, post2 = draw(st.integers(0, 2)), draw(st.integers(1, 3))
    consts = (mult, pre, post, lo, mine, other, pre2, post2)
    return make_chain(consts), consts


def make_chain(k: tuple[int, ...]) -> Chain:
    """``chains``' chain for constants ``k`` (the order ``chain_reference`` reads them)."""
    mult, pre, post, lo, mine, other, pre2, post2 = k
    stages = (requant_stage(mult, pre, post, lo, 127), add_stage(mine, 0),
              EwStage("chan", lambda x, c: x + c, (1,), label="addc"),
              round_clip_stage(pre2, post2, -128, 127), clip_stage(0, 127))
    ops = (scaled_operand("opnd0", other), ChainOperand("chan0", CHANNEL))
    return Chain(stages, ops)


def chain_reference(acc: np.ndarray, bias: np.ndarray, res: np.ndarray, chan: np.ndarray,
                    k: tuple[int, ...]) -> np.ndarray:
    """``chains``' chain after ``BIAS_ONLY`` on int32 ``acc`` (M, N): channels on axis 1."""
    mult, pre, post, lo, mine, other, pre2, post2 = k
    x = _wrap(acc.astype(np.int64) + bias)
    x = np.clip(_rounding(_wrap(x * mult), pre, post), lo, 127)
    x = _wrap(_wrap(x * mine) + res.astype(np.int64) * other)
    x = _wrap(x + chan)
    x = np.clip(_rounding(x, pre2, post2), -128, 127)
    return np.clip(x, 0, 127).astype(np.int8)


def chained_gemm_case(m: int, n: int, kk: int, consts: tuple[int, ...], seed: int
                      ) -> tuple[list[np.ndarray], np.ndarray]:
    """Random operands of the chained GEMM (X, W, bias, residual, channel) and numpy's answer."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (m, kk), dtype=np.int8)
    w = rng.integers(-128, 128, (n, kk), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, n, dtype=np.int32)
    res = rng.integers(-128, 128, (m, n), dtype=np.int8)
    chan = rng.integers(-64, 64, n, dtype=np.int32)
    acc = (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    return [x, w, bias, res, chan], chain_reference(acc, bias, res, chan, consts)


@st.composite
def knobs(draw: st.DrawFn) -> MmaKnobs:
    wm, wn = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    return MmaKnobs(16 * wm * draw(st.sampled_from([1, 2])),
                    8 * wn * draw(st.sampled_from([1, 2])), 0, wm, wn,
                    draw(st.sampled_from([2, 3])))


def test_gemm_chain_bit_exact(nvcc_check: Callable) -> None:
    sources: list[str] = []

    @settings(max_examples=10, deadline=None)
    @given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 90), knobs(), chains(),
           st.integers(0, 1 << 16))
    def case(m: int, n: int, kk: int, kb: MmaKnobs, ch: tuple[Chain, tuple[int, ...]],
             seed: int) -> None:
        chain, consts = ch
        func = mma_gemm(MatmulSpec(m, n, kk), "int8", BIAS_ONLY, kb, chain=chain)
        assert [b.name for b in func.params] == ["X", "W", "bias", "opnd0", "chan0", "Y"]
        args, want = chained_gemm_case(m, n, kk, consts, seed)
        y = np.zeros((m, n), np.int8)
        Emulator(func).run(*args, y)
        assert np.array_equal(y, want), f"GEMM {m}x{n}x{kk} {kb} with a chain"
        if len(sources) < 2:
            sources.append(render_cuda(func).source)

    case()
    nvcc_check(sources)


def _nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def run_nhwc(spec: Conv2dSpec, epi: Epilogue, kb: MmaKnobs | None, seed: int,
             profile: bool = False) -> Emulator:
    """The channels-last kernel on random data, checked against numpy's NCHW conv2d."""
    func = mma_conv2d(spec, "int8", epi, kb, layout="NHWC")
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
    bias = rng.integers(-(1 << 10), 1 << 10, spec.oc, dtype=np.int32)
    want = conv2d_reference(x, w, bias if epi.bias else None, spec, epi)
    y = np.zeros((spec.n * spec.oh * spec.ow, spec.oc), np.int8)
    em = Emulator(func, profile=profile)
    em.run(_nhwc(x), ohwi_weight(w), *([bias] if epi.bias else []), y)
    got = y.reshape(spec.n, spec.oh, spec.ow, spec.oc).transpose(0, 3, 1, 2)
    assert np.array_equal(got, want), f"NHWC conv2d {spec.describe()} {kb} differs from numpy"
    return em


def test_nhwc_int8_bit_exact(nvcc_check: Callable) -> None:
    sources: dict[tuple[int, int], str] = {}

    @settings(max_examples=20, deadline=None)
    @given(conv_specs, epilogues(), st.one_of(st.none(), knobs()), st.integers(0, 1 << 16))
    def case(spec: Conv2dSpec, epi: Epilogue, kb: MmaKnobs | None, seed: int) -> None:
        run_nhwc(spec, epi, kb, seed)
        # one kernel per A-copy path: 16/8/4-byte cp.async chunks or element copies
        key = (spec.ic % 16, spec.kh)
        if key not in sources:
            sources[key] = render_cuda(mma_conv2d(spec, "int8", epi, kb, layout="NHWC")).source

    case()
    nvcc_check(list(sources.values())[:4])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv_chain_bit_exact(layout: str) -> None:
    """A residual block's tail fused into either layout's kernel (operands like ``out``)."""
    @settings(max_examples=4, deadline=None)
    @given(conv_specs, chains(), st.integers(0, 1 << 16))
    def case(spec: Conv2dSpec, ch: tuple[Chain, tuple[int, ...]], seed: int) -> None:
        chain, consts = ch
        func = mma_conv2d(spec, "int8", BIAS_ONLY, layout=layout, chain=chain)
        rng = np.random.default_rng(seed)
        x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
        w = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
        bias = rng.integers(-(1 << 12), 1 << 12, spec.oc, dtype=np.int32)
        oshape = (spec.n, spec.oc, spec.oh, spec.ow)
        res = rng.integers(-128, 128, oshape, dtype=np.int8)
        chan = rng.integers(-64, 64, spec.oc, dtype=np.int32)
        acc = _acc(x, w, spec)
        flat = lambda a: a.transpose(0, 2, 3, 1).reshape(-1, spec.oc)  # noqa: E731
        want = chain_reference(flat(acc), bias, flat(res), chan, consts)
        if layout == "NHWC":
            y = np.zeros(want.shape, np.int8)
            Emulator(func).run(_nhwc(x), ohwi_weight(w), bias, flat(res).copy(), chan, y)
            got = y
        else:
            y4 = np.zeros(oshape, np.int8)
            Emulator(func).run(x, ohwi_weight(w), bias, res, chan, y4)
            got = flat(y4)
        assert np.array_equal(got, want), f"{layout} conv2d {spec.describe()} with a chain"

    case()


def _acc(x: np.ndarray, w: np.ndarray, s: Conv2dSpec) -> np.ndarray:
    """The int32 accumulators of the convolution (NCHW), exact in int64."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)))
    out = np.zeros((s.n, s.oc, s.oh, s.ow), np.int64)
    for r in range(s.kh):
        for t in range(s.kw):
            win = xp[:, :, r: r + s.stride * (s.oh - 1) + 1: s.stride,
                     t: t + s.stride * (s.ow - 1) + 1: s.stride]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, r, t].astype(np.int64))
    return out.astype(np.int32)


@pytest.mark.parametrize("layer,ic,oc", [("C2", 64, 32), ("C5", 64, 64), ("C8", 64, 64),
                                         ("C11", 64, 64)])
def test_nhwc_resnet_layers_zero_conflicts_minimum_sectors(layer: str, ic: int, oc: int
                                                           ) -> None:
    spec = replace(resnet18_layer(layer), ic=ic, oc=oc)
    prof = run_nhwc(spec, Epilogue(), nhwc_knobs(spec), 5, profile=True).profile
    assert prof is not None
    assert prof.bank_conflicts == 0
    for name in ("data", "weight", "bias", "out"):
        c = prof.buffers[name]
        assert (c.load_sectors, c.store_sectors) == (c.load_min_sectors, c.store_min_sectors), \
            name
    assert prof.instructions["cp.async"] > 0 and prof.instructions["ldmatrix"] > 0


def test_nhwc_resnet_kernels_compile(nvcc_check: Callable) -> None:
    """Full-size channels-last layers: the 3-channel first layer (element copies of A) and a
    16-byte-chunk layer of each kernel size and stride."""
    funcs = [mma_conv2d(resnet18_layer(x), "int8", Epilogue(), layout="NHWC")
             for x in ("C1", "C2", "C4", "C11")]
    nvcc_check([render_cuda(f).source for f in funcs])


def test_refusals_are_named() -> None:
    s = Conv2dSpec(1, 8, 6, 6, 8, 3, 3, 1, 1)
    chain = Chain((clip_stage(0, 127),))
    with pytest.raises(GpuLoweringError, match="layout must be one of NCHW, NHWC, got 'NCWH'"):
        mma_conv2d(s, "int8", Epilogue(), layout="NCWH")
    with pytest.raises(GpuLoweringError, match="a fused chain needs int8 operands and an int8 "
                                               "output, got int8 -> int32"):
        mma_conv2d(s, "int8", None, out_dtype="int32", chain=chain)
    with pytest.raises(GpuLoweringError, match="mma_gemm: a fused chain needs int8 operands"):
        mma_gemm(MatmulSpec(16, 16, 16), "float16", None, out_dtype="float32", chain=chain)


def test_residual_operand_coalesced() -> None:
    """The chain's residual operand comes through shared memory with the output's vector
    mapping: its sectors at the minimum, no bank conflicts (a C5-like layer, fewer channels)."""
    spec = replace(resnet18_layer("C5"), ic=32, oc=64)
    consts = (181, 3, 6, -128, 2, 1, 1, 2)
    chain = make_chain(consts)
    func = mma_conv2d(spec, "int8", BIAS_ONLY, layout="NHWC", chain=chain)
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, spec.oc, dtype=np.int32)
    m = spec.n * spec.oh * spec.ow
    res = rng.integers(-128, 128, (m, spec.oc), dtype=np.int8)
    chan = rng.integers(-64, 64, spec.oc, dtype=np.int32)
    want = chain_reference(_acc(x, w, spec).transpose(0, 2, 3, 1).reshape(m, spec.oc), bias,
                           res, chan, consts)
    y = np.zeros((m, spec.oc), np.int8)
    em = Emulator(func, profile=True)
    em.run(_nhwc(x), ohwi_weight(w), bias, res, chan, y)
    assert np.array_equal(y, want)
    prof = em.profile
    assert prof is not None and prof.bank_conflicts == 0
    c = prof.buffers["opnd0"]
    assert c.load_sectors == c.load_min_sectors == m * spec.oc // 32


@pytest.mark.gpu
def test_nhwc_conv_and_chained_gemm_on_a_gpu() -> None:
    """On a real GPU: the channels-last conv kernels of four ResNet-18 layers (the graph's
    convolutions) and a GEMM with a full chain, bit-exact against numpy."""
    from vta.gpu.runtime import gpu_available, run_kernel

    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
    for layer in ("C2", "C5", "C8", "C11"):
        spec = resnet18_layer(layer)
        epi = Epilogue(10, True, -128, 127)
        rng = np.random.default_rng(7)
        x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
        w = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
        bias = rng.integers(-(1 << 10), 1 << 10, spec.oc, dtype=np.int32)
        want = conv2d_reference(x, w, bias, spec, epi)
        kernel = render_cuda(mma_conv2d(spec, "int8", epi, layout="NHWC"))
        y = np.zeros((spec.n * spec.oh * spec.ow, spec.oc), np.int8)
        got = run_kernel(kernel, [_nhwc(x), ohwi_weight(w), bias, y])[-1]
        got = got.reshape(spec.n, spec.oh, spec.ow, spec.oc).transpose(0, 3, 1, 2)
        assert np.array_equal(got, want), f"NHWC conv2d {layer} on the GPU differs from numpy"
    consts = (181, 3, 6, -20, 2, 3, 1, 2)   # (mult, pre, post, lo, mine, other, pre2, post2)
    chain = make_chain(consts)
    m, n, kk = 200, 136, 192
    func = mma_gemm(MatmulSpec(m, n, kk), "int8", BIAS_ONLY, MmaKnobs(), chain=chain)
    args, want = chained_gemm_case(m, n, kk, consts, 11)
    got = run_kernel(render_cuda(func), [*args, np.zeros((m, n), np.int8)])[-1]
    assert np.array_equal(got, want), "GEMM with a chain on the GPU differs from numpy"
