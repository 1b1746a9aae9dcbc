"""One logical compute, every target: a dense layer and an NCHW convolution with their
requantizing epilogue, written once, packed for the accelerator (``vta.pack`` + the default
schedule) and viewed as an implicit GEMM on the GPU (SIMT and tensor-core schedules), on drawn
shapes, hardware configs and schedule knobs (``vta.testing``). Every layer - the cycle-level
simulator, the ISA reference interpreter, the IR interpreter, the SIMT emulator, and the GPU
when CuPy finds one - must give the integers of the tensor-IR interpreter on the unscheduled
compute; every kernel rendered is compiled to PTX for sm_80 and sm_90."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler import compute, placeholder, reduce_axis, schedule_packed, sum_
from vta.compiler.ir.expr import select
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.gpu.implicit_gemm import simt, tensorcore
from vta.gpu.schedules import SimtKnobs, WmmaKnobs


def epilogue_stages(acc, bias, epi: Epilogue, channel: int):  # type: ignore[no-untyped-def]
    """``epi``'s element-wise stages over ``acc`` (the bias indexed by axis ``channel``) and
    the int8 output: the same statement of each form the built-in ops use."""
    cur = acc
    for name, fn in epi.stages(with_bias=bias is not None):
        prev = cur
        cur = compute(acc.shape, lambda *i, prev=prev, fn=fn: fn(
            prev[i], bias[i[channel]] if bias is not None else None), name)
    last = cur
    return compute(acc.shape, lambda *i: last[i].astype("int8"), "res")


def dense(m: int, n: int, k: int, epi: Epilogue) -> list:  # type: ignore[type-arg]
    x = placeholder((m, k), "int8", "x")
    w = placeholder((n, k), "int8", "w")
    bias = placeholder((n,), "int32", "bias") if epi.bias else None
    r = reduce_axis(k, "k")
    acc = compute((m, n), lambda i, j: sum_(x[i, r].astype("int32") * w[j, r].astype("int32"),
                                            r), "acc")
    return [x, w, *([bias] if bias is not None else []), epilogue_stages(acc, bias, epi, 1)]


def conv2d(s: Conv2dSpec, epi: Epilogue) -> list:  # type: ignore[type-arg]
    data = placeholder((s.n, s.ic, s.h, s.w), "int8", "data")
    kern = placeholder((s.oc, s.ic, s.kh, s.kw), "int8", "kernel")
    bias = placeholder((s.oc,), "int32", "bias") if epi.bias else None
    p = s.pad
    pad = compute((s.n, s.ic, s.h + 2 * p, s.w + 2 * p), lambda n, c, y, x: select(
        (y >= p) & (y < s.h + p) & (x >= p) & (x < s.w + p), data[n, c, y - p, x - p], 0),
        "data_pad")
    ic, kh, kw = reduce_axis(s.ic, "ic"), reduce_axis(s.kh, "kh"), reduce_axis(s.kw, "kw")
    acc = compute((s.n, s.oc, s.oh, s.ow), lambda n, o, y, x: sum_(
        pad[n, ic, y * s.stride + kh, x * s.stride + kw].astype("int32")
        * kern[o, ic, kh, kw].astype("int32"), [ic, kh, kw]), "conv")
    return [data, kern, *([bias] if bias is not None else []),
            epilogue_stages(acc, bias, epi, 1)]


#: epilogues whose immediates fit every drawn config's ALU (8-bit immediates at least)
shift_epilogues = st.builds(lambda sh, bias, lo, span: Epilogue(sh, bias, lo, min(127, lo + span)),
                            st.integers(0, 12), st.booleans(), st.integers(-128, 20),
                            st.integers(0, 255))


def _schedules(knobs: SimtKnobs, wk: WmmaKnobs, big: bool) -> dict[str, Callable]:  # type: ignore[type-arg]
    out: dict[str, Callable] = {  # type: ignore[type-arg]
        "vta": lambda P, hw: schedule_packed(P, hw),
        "cuda-simt": lambda args, hw: simt(args, knobs)}
    if big:  # the tensor-core schedule takes M, N >= 16 (one tile)
        out["cuda-wmma"] = lambda args, hw: tensorcore(args, wk)
    return out


def _sources(runs: dict) -> Iterable[str]:  # type: ignore[type-arg]
    return [r.module.cuda for label, r in runs.items() if label.startswith("cuda")
            and not label.endswith("/gpu")]


def test_dense_on_every_target(nvcc_check) -> None:  # type: ignore[no-untyped-def]
    sources: list[str] = []

    @settings(max_examples=20, deadline=None)
    @given(shape=vt.matmul_shapes(24, 40, 40), epi=shift_epilogues,
           hw=vt.hw_configs(dtypes=vt.INT8), knobs=vt.simt_knobs(), wk=vt.wmma_knobs(),
           seed=vt.seeds())
    def case(shape, epi, hw, knobs, wk, seed) -> None:  # type: ignore[no-untyped-def]
        m, n, _ = shape
        runs = vt.assert_same_on_targets(lambda: dense(*shape, epi),
                                         _schedules(knobs, wk, min(m, n) >= 16), hw=hw,
                                         seed=seed)
        sources.extend(_sources(runs))

    case()
    nvcc_check(sources)


def test_conv2d_on_every_target(nvcc_check) -> None:  # type: ignore[no-untyped-def]
    sources: list[str] = []

    @settings(max_examples=15, deadline=None)
    @given(spec=vt.conv2d_specs(kernels=(1, 3), max_pad=1, max_hw=7, max_channels=24),
           epi=shift_epilogues, hw=vt.hw_configs(dtypes=vt.INT8),
           knobs=vt.simt_knobs(), wk=vt.wmma_knobs(), seed=vt.seeds())
    def case(spec, epi, hw, knobs, wk, seed) -> None:  # type: ignore[no-untyped-def]
        big = min(spec.n * spec.oh * spec.ow, spec.oc) >= 16
        runs = vt.assert_same_on_targets(lambda: conv2d(spec, epi),
                                         _schedules(knobs, wk, big), hw=hw, seed=seed)
        sources.extend(_sources(runs))

    case()
    nvcc_check(sources)
