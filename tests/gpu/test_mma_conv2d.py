"""The task-mapping implicit-GEMM conv2d (vta.gpu.kernels.conv2d): bit-exact int8 with the fused
requantizing epilogue and fp16 within the fp32 summation bound over hypothesis-drawn shapes
(strides, padding, 1x1 and 3x3 kernels, channel and pixel counts that fill no tile), zero bank
conflicts and the minimum global sectors on ResNet-18-shaped layers (fewer channels, so the
emulator stays quick; bench/gpu_profile.py runs C2-C11 whole), PTX for sm_80 and sm_90."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import resnet18_layer
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import PATCH
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.conv2d import conv_knobs, mma_conv2d, ohwi_weight
from vta.gpu.kernels.gemm import MmaKnobs
from vta.gpu.profile import Profile
from vta.testing import epilogues

from .test_differential import conv_specs


@st.composite
def knobs(draw: st.DrawFn) -> MmaKnobs:
    wm, wn = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    return MmaKnobs(32 * wm, 8 * wn * draw(st.sampled_from([1, 2])), 0, wm, wn,
                    draw(st.sampled_from([2, 3])))


def run_int8(spec: Conv2dSpec, epi: Epilogue, kb: MmaKnobs | None, seed: int,
             profile: bool = False) -> tuple[str, Profile | None]:
    func = mma_conv2d(spec, "int8", epi, kb)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
    bias = rng.integers(-(1 << 10), 1 << 10, spec.oc, dtype=np.int32)
    want = conv2d_reference(x, w, bias if epi.bias else None, spec, epi)
    y = np.zeros_like(want)
    em = Emulator(func, profile=profile)
    em.run(x, ohwi_weight(w), *([bias] if epi.bias else []), y)
    assert np.array_equal(y, want), f"int8 conv2d {spec.describe()} {kb} differs from numpy"
    return render_cuda(func).source, em.profile


def test_int8_bit_exact(nvcc_check: Callable) -> None:
    sources: dict[tuple, str] = {}

    @settings(max_examples=25)
    @given(conv_specs, epilogues(), knobs(), st.integers(0, 1 << 16))
    def case(spec: Conv2dSpec, epi: Epilogue, kb: MmaKnobs, seed: int) -> None:
        src, _ = run_int8(spec, epi, kb, seed)
        # one kernel per code path: knobs, how rows align, the patch's copy mode
        sources.setdefault((kb, spec.w % 16, spec.ic % 16, spec.kh, spec.stride), src)

    case()
    nvcc_check(list(sources.values())[:4])


def test_fp16_within_bound(nvcc_check: Callable) -> None:
    sources: list[str] = []

    @settings(max_examples=12)
    @given(conv_specs, knobs(), st.integers(0, 1 << 16))
    def case(spec: Conv2dSpec, kb: MmaKnobs, seed: int) -> None:
        func = mma_conv2d(spec, "float16", None, kb, out_dtype="float32")
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((spec.n, spec.ic, spec.h, spec.w)).astype(np.float16)
        w = rng.standard_normal((spec.oc, spec.ic, spec.kh, spec.kw)).astype(np.float16)
        y = np.zeros((spec.n, spec.oc, spec.oh, spec.ow), np.float32)
        Emulator(func).run(x, ohwi_weight(w), y)
        exact = _conv64(x.astype(np.float64), w.astype(np.float64), spec)
        mag = _conv64(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), spec)
        k = spec.ic * spec.kh * spec.kw
        assert np.all(np.abs(y - exact) <= 2 * k * 2.0 ** -24 * mag + 1e-30)
        if len(sources) < 3:
            sources.append(render_cuda(func).source)

    case()
    nvcc_check(sources)


def _conv64(x: np.ndarray, w: np.ndarray, s: Conv2dSpec) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)))
    out = np.zeros((s.n, s.oc, s.oh, s.ow))
    for r in range(s.kh):
        for t in range(s.kw):
            win = xp[:, :, r: r + s.stride * (s.oh - 1) + 1: s.stride,
                     t: t + s.stride * (s.ow - 1) + 1: s.stride]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, r, t])
    return out


def _small(layer: str, ic: int, oc: int) -> Conv2dSpec:
    """ResNet-18 layer ``layer`` with ``ic``/``oc`` channels (same spatial shape, kernel,
    stride and padding: the same tiling and copy paths, less emulation)."""
    from dataclasses import replace

    return replace(resnet18_layer(layer), ic=ic, oc=oc)


RESNET_SHAPED = [("C2", 64, 32), ("C3", 32, 32), ("C4", 32, 32), ("C7", 64, 64),
                 ("C9", 64, 64), ("C10", 64, 64), ("C11", 64, 64)]


@pytest.mark.parametrize("layer,ic,oc", RESNET_SHAPED)
def test_resnet_layers_zero_conflicts_minimum_sectors(layer: str, ic: int, oc: int) -> None:
    spec = _small(layer, ic, oc)
    _, prof = run_int8(spec, Epilogue(), conv_knobs(spec), 7, profile=True)
    assert prof is not None
    assert prof.bank_conflicts == 0, {k: (c.load_conflicts, c.store_conflicts)
                                      for k, c in prof.buffers.items()}
    for name in ("data", "weight", "bias", "out"):
        c = prof.buffers[name]
        assert (c.load_sectors, c.store_sectors) == (c.load_min_sectors, c.store_min_sectors), \
            name
    assert prof.instructions["cp.async"] > 0 and prof.instructions["ldmatrix"] > 0


def test_resnet_kernels_compile(nvcc_check: Callable) -> None:
    """The benchmark's kernels at full size, int8 with the epilogue: one layer per code path
    (whole input rows in column tiles, whole rows at stride 2, a 1x1 stride-2 patch keeping
    only the taps' rows, whole planes of a 7x7 image)."""
    funcs = {layer: mma_conv2d(resnet18_layer(layer), "int8", Epilogue())
             for layer in ("C2", "C3", "C4", "C11")}
    assert [funcs[x].attr(PATCH) for x in funcs] == ["rows", "rows", "segments", "planes"]
    nvcc_check([render_cuda(f).source for f in funcs.values()])


@pytest.mark.gpu
def test_resnet_layers_on_gpu() -> None:
    """ResNet-18 C2..C11 whole, on a GPU (CuPy), bit-exact against numpy."""
    from vta.gpu.runtime import run_kernel

    from .conftest import gpu_or_skip

    gpu_or_skip()
    epi = Epilogue()
    rng = np.random.default_rng(11)
    for i in range(2, 12):
        s = resnet18_layer(f"C{i}")
        x = rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8)
        w = rng.integers(-128, 128, (s.oc, s.ic, s.kh, s.kw), dtype=np.int8)
        b = rng.integers(-(1 << 10), 1 << 10, s.oc, dtype=np.int32)
        want = conv2d_reference(x, w, b, s, epi)
        got = run_kernel(render_cuda(mma_conv2d(s, "int8", epi)),
                         [x, ohwi_weight(w), b, np.zeros_like(want)])[-1]
        assert np.array_equal(got, want), f"C{i}"


def test_bad_requests_are_named_errors() -> None:
    from vta.errors import GpuLoweringError

    s = Conv2dSpec(1, 8, 6, 6, 8, 3, 3, 1, 1)
    with pytest.raises(GpuLoweringError, match="requantizing epilogue is for int8"):
        mma_conv2d(s, "float16", Epilogue())
    with pytest.raises(GpuLoweringError, match=r"no mma\.sync shape for float32"):
        mma_conv2d(s, "float32")
    with pytest.raises(GpuLoweringError, match="bm=96 pixels must be a multiple of the 64"):
        mma_conv2d(s, "int8", Epilogue(), MmaKnobs(96, 16, 0, 2, 1, 2))
