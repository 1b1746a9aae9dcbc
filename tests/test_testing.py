"""vta.testing itself: its strategies draw valid things, and assert_same_on_targets passes on
agreeing layers and reports the first differing element of a planted difference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import vta
import vta.testing as vt
from vta.compiler import schedule_packed
from vta.errors import VtaError
from vta.gpu.implicit_gemm import simt


def dense(M: int, N: int, K: int, shift: int = 5) -> list:  # type: ignore[type-arg]
    return vt.logical_dense(M, N, K, shift)


@settings(max_examples=30, deadline=None)
@given(hw=vt.random_hw(), h8=vt.hw_configs(dtypes=vt.INT8), spec=vt.conv2d_specs(),
       mm=vt.matmul_shapes(), knobs=vt.simt_knobs(), wk=vt.wmma_knobs(), epi=vt.epilogues(),
       wl=vt.workload_knobs())
def test_strategies_draw_valid_values(hw, h8, spec, mm, knobs, wk, epi, wl) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(hw, vta.HwConfig) and hw.gemm.block_in in (2, 4, 8)
    assert (h8.gemm.inp_dtype, h8.gemm.wgt_dtype, h8.gemm.out_dtype) == vt.INT8
    assert spec.oh >= 1 and spec.pad < spec.kh
    assert all(1 <= d <= 80 for d in mm)
    knobs.check()
    wk.check()
    assert epi.clip_lo <= epi.clip_hi
    assert set(wl) <= {"vthreads", "th", "vt_axis"}


def test_shipped_configs_and_inputs() -> None:
    names = {h.name for h in vt.shipped_hw()}
    assert {"pynq", "ultra96", "zcu104", "de10nano", "research_32x32"} <= names
    ins = vt.random_inputs(dense(3, 4, 5), seed=1)
    assert set(ins) == {"x", "w", "bias"} and ins["x"].dtype == np.int8
    assert ins["x"].shape == (3, 5) and np.abs(ins["bias"]).max() <= 1024
    again = vt.random_inputs(dense(3, 4, 5), seed=1)
    assert all(np.array_equal(ins[k], again[k]) for k in ins)


def test_first_difference() -> None:
    a = np.arange(12).reshape(3, 4)
    b = a.copy()
    assert vt.first_difference(a, b) is None
    b[1, 2] += 1
    b[2, 0] -= 1
    assert vt.first_difference(a, b) == ((1, 2), 6, 7, 2)
    f = a.astype(np.float32)
    assert vt.first_difference(f, f + 1e-4, atol=1e-3) is None
    with pytest.raises(vt.Mismatch, match=r"shape \[3, 4\] where \[4, 3\] was expected"):
        vt.first_difference(a, a.T)


def on_vta(P, hw):  # type: ignore[no-untyped-def]
    return schedule_packed(P, hw)


def on_gpu(args, hw):  # type: ignore[no-untyped-def]
    return simt(args)


def test_same_on_targets_returns_every_layer(pynq: vta.HwConfig) -> None:
    runs = vt.assert_same_on_targets(lambda: dense(4, 32, 40), {"vta": on_vta, "cuda": on_gpu},
                                     hw=pynq, seed=2, gpu=False)
    assert set(runs) == {"vta", "vta/reference", "vta/interp", "cuda"}
    assert runs["vta"].cycles > 0 and runs["cuda"].module.cuda


def test_a_planted_difference_is_reported_with_its_indices(pynq: vta.HwConfig) -> None:
    """A GPU schedule of a compute with another shift: the comparison names the label, the
    output, the first differing element and how many differ."""
    def wrong(args, hw):  # type: ignore[no-untyped-def]
        return simt(dense(4, 32, 40, shift=6))

    with pytest.raises(vt.Mismatch, match=r"cuda: output res\[\d+, \d+\] = -?\d+, the "
                                          r"interpreter on the unscheduled compute gives -?\d+ "
                                          r"\(\d+ of 128 elements differ\)"):
        vt.assert_same_on_targets(lambda: dense(4, 32, 40), {"cuda": wrong}, gpu=False)
    with pytest.raises(vt.Mismatch, match="the tensor-IR interpreter: output res"):
        vt.assert_same_on_targets(lambda: dense(4, 32, 40), {},
                                  expected=lambda ins: {"res": np.zeros((4, 32), np.int8)})


def test_same_on_targets_refusals(pynq: vta.HwConfig) -> None:
    with pytest.raises(VtaError, match="start it with 'vta'"):
        vt.assert_same_on_targets(lambda: dense(2, 16, 16), {"tpu": on_gpu})
    with pytest.raises(VtaError, match="is for the accelerator: pass hw="):
        vt.assert_same_on_targets(lambda: dense(2, 16, 16), {"vta": on_vta})


def test_hypothesis_profiles_live_in_vta_testing() -> None:
    """The issue-25 case: the profiles were in tests/conftest.py, out of users' reach, and a
    failing property test spent minutes shrinking a compile-heavy example."""
    from hypothesis import Phase
    from hypothesis import settings as hs

    vt.register_profiles()
    fast = hs.get_profile("fast")
    assert Phase.shrink not in fast.phases and fast.max_examples == 10
    assert fast.deadline is None
    assert hs.get_profile("default").max_examples == 60
    assert hs.get_profile("thorough").max_examples == 1000
    with pytest.raises(VtaError, match="no hypothesis profile 'quick'"):
        vt.register_profiles("quick")
