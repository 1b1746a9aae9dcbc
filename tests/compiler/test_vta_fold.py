"""Reduction folding for few-channel convolutions (``ops.fold``): the im2col-style repacking
is exact, every folded layout compiles and simulates bit-exact against the plain numpy
reference on every shipped config, the model picks a fold only for channels below
``block_in``, and the bounds count the true MACs."""

import numpy as np
import pytest
from _vta_helpers import HWCONFIGS, hw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vta.compiler.accel.ops.fold import ConvFold, fold_candidates
from vta.compiler.accel.ops.packing import fold_data, fold_kernel
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import Workload, resnet18_layer, resolve
from vta.config import HwConfig
from vta.errors import ShapeError
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget

CONFIGS = {p.stem: HwConfig.from_yaml(p) for p in HWCONFIGS}


@st.composite
def small_ic_specs(draw, max_hw: int = 12):  # type: ignore[no-untyped-def]
    kh = draw(st.sampled_from([3, 5, 7]))
    kw = draw(st.sampled_from([kh, kh, 1, 3, 5, 7]))
    pad = draw(st.integers(0, min(3, max(kh, kw) - 1)))
    stride = draw(st.sampled_from([1, 2]))
    h = draw(st.integers(max(1, kh - 2 * pad), max_hw))
    w = draw(st.integers(max(1, kw - 2 * pad), max_hw))
    return Conv2dSpec(n=draw(st.integers(1, 2)), ic=draw(st.integers(1, 6)), h=h, w=w,
                      oc=draw(st.integers(1, 20)), kh=kh, kw=kw, stride=stride, pad=pad)


@settings(max_examples=80, deadline=None)
@given(spec=small_ic_specs(max_hw=16), kind=st.sampled_from(["kw", "khkw"]),
       stride=st.sampled_from([1, 2, 3]), seed=st.integers(0, 1000))
def test_folded_reference_equals_plain(spec: Conv2dSpec, kind: str, stride: int,
                                       seed: int) -> None:
    from dataclasses import replace

    try:
        spec = replace(spec, stride=stride)
    except ShapeError:
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (spec.n, spec.ic, spec.h, spec.w), dtype=np.int8)
    k = rng.integers(-128, 128, (spec.oc, spec.ic, spec.kh, spec.kw), dtype=np.int8)
    f = ConvFold(spec, kind)
    dev = f.device
    xf, kf = fold_data(x, f), fold_kernel(k, f)
    assert xf.shape == (dev.n, dev.ic, dev.h, dev.w)
    assert kf.shape == (dev.oc, dev.ic, dev.kh, dev.kw)
    assert (dev.oh, dev.ow) == (spec.oh, spec.ow)
    epi = Epilogue(shift=0, bias=False, clip_lo=-128, clip_hi=127)
    assert np.array_equal(conv2d_reference(xf, kf, None, dev, epi),
                          conv2d_reference(x, k, None, spec, epi))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_ic_specs(), cfg=st.sampled_from(sorted(CONFIGS)),
       fold=st.sampled_from([None, "kw", "khkw"]), lh=st.booleans(), seed=st.integers(0, 1000))
def test_folded_conv_bit_exact(spec: Conv2dSpec, cfg: str, fold: str | None, lh: bool,
                               seed: int) -> None:
    r = run_layer(Workload("conv2d", spec), AccelTarget(CONFIGS[cfg]), seed=seed, latency_hiding=lh,
                     check_reference=True, fold=fold)
    assert r.mismatches == 0 and r.reference_agrees, r.summary()
    if fold is not None:
        assert r.compiled.fold_kind == fold
    assert r.roofline["ops"] == spec.ops  # the true MACs, whatever the layout


@pytest.mark.parametrize("ic", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("k,stride,pad", [(3, 1, 1), (5, 2, 2), (7, 2, 3)])
def test_every_fold_of_small_ic_shapes_is_bit_exact(ic: int, k: int, stride: int,
                                                    pad: int) -> None:
    spec = Conv2dSpec(n=1, ic=ic, h=13, w=11, oc=24, kh=k, kw=k, stride=stride, pad=pad)
    cycles = {}
    for fold in ("none", "kw", "khkw"):
        r = run_layer(Workload("c", spec), AccelTarget(hw()), seed=ic, fold=fold)
        assert r.passed, (fold, r.summary())
        cycles[fold] = r.cycles
    auto = AccelTarget(hw()).compile_layer(Workload("c", spec))
    assert auto.fold_kind in cycles


def test_c1_folds_on_every_config_and_beats_the_plain_layout() -> None:
    """C1 folds on every shipped config; against the plain layout (checked bit-exact too) on
    one config per timing model (the plain layout's 49 micro-ops per entry make it the
    slowest program to simulate)."""
    w = resolve("resnet18:C1")
    for name, h in CONFIGS.items():
        auto = run_layer(w, AccelTarget(h))
        assert auto.passed and auto.compiled.fold_kind != "none", name
        if name in ("pynq", "pynq_tsim"):
            plain = run_layer(w, AccelTarget(h), fold="none")
            assert plain.passed
            assert auto.cycles < 0.5 * plain.cycles, name
            # the bounds describe the user's layer: the same for both layouts
            assert auto.roofline["machine_cycles"] == plain.roofline["machine_cycles"]
        s = auto.summary()
        assert s["useful_utilization"] == pytest.approx(
            auto.roofline["compute_cycles"] / auto.cycles)
        assert s["useful_utilization"] <= s["utilization"] <= 1
        assert s["of_machine_bound"] <= 1


def test_candidates_only_below_block_in() -> None:
    h = hw()
    c1 = resnet18_layer("C1")
    assert [f.kind for f in fold_candidates(c1, h)] == ["none", "kw", "khkw"]
    assert [f.kind for f in fold_candidates(
        Conv2dSpec(1, 3, 8, 8, 16, 3, 1, 1, 0), h)] == ["none", "khkw"]  # no columns to fold
    for spec in (Conv2dSpec(1, 16, 8, 8, 32, 3, 3, 1, 1),  # a full block: plain code
                 Conv2dSpec(1, 3, 8, 8, 16, 1, 1, 1, 0)):  # a 1x1 window: nothing to fold
        assert [f.kind for f in fold_candidates(spec, h)] == ["none"]
        assert AccelTarget(h).compile_layer(Workload("c", spec)).fold_kind == "none"
    assert AccelTarget(h).compile_layer(resolve("matmul", [16, 16, 16])).fold_kind == "none"


def test_folded_shapes() -> None:
    c1 = resnet18_layer("C1")
    kw, full = ConvFold(c1, "kw").device, ConvFold(c1, "khkw").device
    assert (kw.ic, kw.h, kw.w, kw.kh, kw.kw, kw.stride, kw.pad) == (42, 115, 112, 4, 1, 1, 0)
    assert (full.ic, full.h, full.w, full.kh, full.kw) == (147, 112, 112, 1, 1)
    assert ConvFold(c1).device == c1


def test_forced_knobs_and_bad_fold() -> None:
    spec = Conv2dSpec(n=1, ic=3, h=10, w=10, oc=16, kh=3, kw=3, stride=1, pad=1)
    r = run_layer(Workload("c", spec), AccelTarget(hw()), fold="khkw", tco=1, tci=1, th=5, tw=10,
                     vthreads=2)
    assert r.passed and r.compiled.fold_kind == "khkw"
    r = run_layer(Workload("c", spec), AccelTarget(hw()), tco=1, tci=1, th=5, tw=10)
    assert r.passed and r.compiled.fold_kind == "none"  # forced knobs: the plain layout
    with pytest.raises(ShapeError, match="fold"):
        AccelTarget(hw()).compile_layer(Workload("c", spec), fold="rows")
