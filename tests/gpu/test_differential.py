"""Differential tests: the accelerator simulator, the GPU path and numpy agree.

Hypothesis draws op shapes (matmul; conv2d with stride 1/2, 1x1 and 3x3 kernels, padding,
sizes that are not multiples of any tile), the fused epilogue, hardware configs (accelerator
side) and schedule knobs (GPU side: SIMT tiles or the tensor-core schedule). int8 results must
be identical integers; fp16 GEMMs (fp32 accumulation) must lie within the summation error bound
``2 * K * 2^-24 * (|A| @ |B|^T)`` of the float64 product. The GPU path is the SIMT emulator by
default; the ``gpu``-marked variants run the same cases on a real GPU through CuPy. Every kernel
rendered here is compiled to PTX for sm_80 and sm_90 (in one nvcc run per test and arch).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.config import HwConfig
from vta.errors import VtaError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.schedules import (
    SimtKnobs,
    conv2d_simt,
    conv2d_wmma,
    matmul_simt,
    matmul_wmma,
)
from vta.run.targets import AccelTarget

from .conftest import gpu_or_skip

_HW: dict[str, HwConfig] = {h.name: h for h in vt.shipped_hw()}
HW_NAMES = tuple(sorted(_HW))


def hwconfig(name: str) -> HwConfig:
    return _HW[name]


# ---------------------------------------------------------------------------- strategies
# (vta.testing: the public strategies, shared with users' own differential tests)

conv_specs = vt.conv2d_specs(kernels=(1, 3), max_pad=1, min_hw=3, max_hw=11)
schedules = st.one_of(st.tuples(st.just("simt"), vt.simt_knobs()),
                      st.tuples(st.just("wmma"), vt.wmma_knobs()))

Runner = Callable[..., None]


def run_emulated(func, *arrays: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    Emulator(func).run(*arrays)


def run_on_gpu(func, *arrays: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    from vta.gpu.runtime import run_kernel

    out = run_kernel(render_cuda(func), list(arrays))
    arrays[-1][...] = out[-1]


# ---------------------------------------------------------------------------- the checks


def _fallback(spec: Conv2dSpec | MatmulSpec, kind: str, knobs: object) -> tuple[str, object]:
    """Problems smaller than one 16x16 tile have no tensor-core schedule: use SIMT."""
    m, n = ((spec.n * spec.oh * spec.ow, spec.oc) if isinstance(spec, Conv2dSpec)
            else (spec.m, spec.n))
    if kind == "wmma" and min(m, n) < 16:
        return "simt", SimtKnobs()
    return kind, knobs


def accelerator_result(spec: Conv2dSpec | MatmulSpec, epi: Epilogue, hw_name: str, seed: int
                       ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray] | None:
    """(user inputs, numpy reference, simulator output) from the accelerator's driver, or None
    when the accelerator compiler refuses the case (the GPU side is still checked)."""
    from vta.compiler.ops.workloads import Workload
    from vta.run.layer import AccelLayer, layer_inputs, layer_reference

    hw = hwconfig(hw_name)
    w = Workload("case", spec)
    target = AccelTarget(hw)
    try:
        c = target.compile_layer(w, epilogue=epi)
    except VtaError:
        return None
    layer = AccelLayer(c)
    user = layer_inputs(spec, c.epilogue, seed)
    got = layer.unpack(target.execute(c, layer.pack(user)).outputs)
    want, _ = layer_reference(spec, user, c.epilogue)
    return user, want, got


def check_int8(spec: Conv2dSpec | MatmulSpec, epi: Epilogue, hw_name: str,
               schedule: tuple[str, object], seed: int, run: Runner, sources: list[str]) -> None:
    acc = accelerator_result(spec, epi, hw_name, seed)
    if acc is None:
        from vta.run.layer import layer_inputs, layer_reference

        user = layer_inputs(spec, epi, seed)
        want, _ = layer_reference(spec, user, epi)
    else:
        user, want, got_acc = acc
        assert np.array_equal(got_acc, want), "accelerator simulator differs from numpy"
    kind, knobs = schedule
    conv = isinstance(spec, Conv2dSpec)
    kind, knobs = _fallback(spec, kind, knobs)
    if kind == "simt":
        func = (conv2d_simt if conv else matmul_simt)(spec, "int8", epi, knobs)  # type: ignore[arg-type]
    else:
        func = (conv2d_wmma if conv else matmul_wmma)(spec, "int8", epi, knobs)  # type: ignore[arg-type]
    func = lower_for_gpu(func)
    sources.append(render_cuda(func).source)
    wt = user["kernel"].reshape(user["kernel"].shape[0], -1)
    arrays = [user["data"], np.ascontiguousarray(wt)]
    if epi.bias:
        arrays.append(user["bias"])
    arrays.append(np.zeros(want.shape, np.int8))
    run(func, *arrays)
    assert np.array_equal(arrays[-1], want), f"GPU path differs from numpy ({kind} {knobs})"


def check_fp16(spec: MatmulSpec, schedule: tuple[str, object], seed: int, run: Runner,
               sources: list[str]) -> None:
    kind, knobs = _fallback(spec, *schedule)
    func = lower_for_gpu(matmul_simt(spec, "float16", None, knobs) if kind == "simt"  # type: ignore[arg-type]
                         else matmul_wmma(spec, "float16", None, knobs))  # type: ignore[arg-type]
    sources.append(render_cuda(func).source)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((spec.m, spec.k)).astype(np.float16)
    w = rng.standard_normal((spec.n, spec.k)).astype(np.float16)
    y = np.zeros((spec.m, spec.n), np.float32)
    run(func, x, w, y)
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    ax, aw = np.abs(x).astype(np.float64), np.abs(w).astype(np.float64)
    bound = 2 * spec.k * 2.0 ** -24 * (ax @ aw.T)
    assert np.all(np.abs(y - exact) <= bound + 1e-30), "fp16 GEMM outside the fp32 error bound"


# ---------------------------------------------------------------------------- tests

def _conv_test(run: Runner, nvcc_check: Callable | None) -> None:
    sources: list[str] = []

    @given(spec=conv_specs, epi=vt.epilogues(), hw=st.sampled_from(HW_NAMES), sched=schedules,
           seed=st.integers(0, 2 ** 16))
    def case(spec: Conv2dSpec, epi: Epilogue, hw: str, sched: tuple[str, object],
             seed: int) -> None:
        check_int8(spec, epi, hw, sched, seed, run, sources)

    case()
    if nvcc_check is not None:
        nvcc_check(sources)


def _matmul_test(run: Runner, nvcc_check: Callable | None) -> None:
    sources: list[str] = []

    @given(spec=vt.matmul_specs(), epi=vt.epilogues(), hw=st.sampled_from(HW_NAMES),
           sched=schedules,
           seed=st.integers(0, 2 ** 16))
    def case(spec: MatmulSpec, epi: Epilogue, hw: str, sched: tuple[str, object],
             seed: int) -> None:
        check_int8(spec, epi, hw, sched, seed, run, sources)

    case()
    if nvcc_check is not None:
        nvcc_check(sources)


def _fp16_test(run: Runner, nvcc_check: Callable | None) -> None:
    sources: list[str] = []
    sched16 = st.one_of(st.tuples(st.just("simt"), vt.simt_knobs()),
                        st.tuples(st.just("wmma"), vt.wmma_knobs()))

    @given(spec=vt.matmul_specs(), sched=sched16, seed=st.integers(0, 2 ** 16))
    def case(spec: MatmulSpec, sched: tuple[str, object], seed: int) -> None:
        check_fp16(spec, sched, seed, run, sources)

    case()
    if nvcc_check is not None:
        nvcc_check(sources)


def test_conv2d_accelerator_emulator_numpy(nvcc_check) -> None:
    _conv_test(run_emulated, nvcc_check)


def test_matmul_accelerator_emulator_numpy(nvcc_check) -> None:
    _matmul_test(run_emulated, nvcc_check)


def test_matmul_fp16_emulator_within_bound(nvcc_check) -> None:
    _fp16_test(run_emulated, nvcc_check)


@pytest.mark.gpu
def test_conv2d_accelerator_gpu_numpy() -> None:
    gpu_or_skip()
    _conv_test(run_on_gpu, None)


@pytest.mark.gpu
def test_matmul_accelerator_gpu_numpy() -> None:
    gpu_or_skip()
    _matmul_test(run_on_gpu, None)


@pytest.mark.gpu
def test_matmul_fp16_gpu_within_bound() -> None:
    gpu_or_skip()
    _fp16_test(run_on_gpu, None)


def test_default_workload_schedules_render(nvcc_check) -> None:  # type: ignore[no-untyped-def]
    """The CLI's default kernels (tensor-core conv2d C2, both GEMMs of the benchmark) compile."""
    from vta.run.gpu_workloads import build_func, make_workload

    srcs = [render_cuda(lower_for_gpu(build_func(make_workload(n, dt), s))).source
            for n, dt, s in [("conv2d", "int8", "wmma"), ("conv2d", "int8", "simt"),
                             ("resnet18:C11", "int8", "wmma"), ("matmul", "float16", "wmma"),
                             ("matmul", "int8", "wmma")]]
    nvcc_check(srcs)
