"""``vta.build``'s dtype rules (issue 25): a bool array is not an int8 one; a float64 array is
not silently rounded into a float32 or float16 parameter; a float compute, and an int32
output (a bare GEMM), on the accelerator are refused at build time saying where they run."""

from __future__ import annotations

import numpy as np
import pytest

import vta
import vta.testing as vt
from vta.compiler import (
    ScheduleError,
    compute,
    create_schedule,
    placeholder,
    reduce_axis,
    schedule_packed,
    sum_,
)
from vta.gpu.implicit_gemm import simt


@pytest.fixture(scope="module")
def int_module() -> vta.Module:
    return vta.build(simt(vt.logical_dense(16, 32, 48, 7)), target="cuda-emu")


@pytest.fixture(scope="module")
def float_module() -> vta.Module:
    x = placeholder((4, 8), "float32", "x")
    y = compute((4, 8), lambda i, j: x[i, j] + x[i, j], "y")
    return vta.build(create_schedule(y), [x, y], "cuda-emu")


def test_a_bool_array_is_not_int8(int_module: vta.Module) -> None:
    ins = vt.random_inputs(vt.logical_dense(16, 32, 48, 7), 5)
    with pytest.raises(vta.InputError, match=r"input x: expected dtype int8, got bool: a bool "
                                             r"is not a number here; convert it yourself"):
        int_module(**{**ins, "x": ins["x"] > 0})
    with pytest.raises(vta.InputError, match="input x: expected dtype int8, got float32"):
        int_module(**{**ins, "x": ins["x"].astype(np.float32)})
    assert int_module(**{**ins, "x": ins["x"].astype(np.int64)}).output.dtype == np.int8


def test_float64_is_not_narrowed_silently(float_module: vta.Module) -> None:
    with pytest.raises(vta.InputError, match=r"input x: expected dtype float32, got float64, "
                                             r"which float32 would round; convert it yourself "
                                             r"\(np.asarray\(...\).astype\(np.float32\)\)"):
        float_module(x=np.full((4, 8), 0.1))
    # widening is exact: float16 into float32; so are integers that float32 holds exactly
    assert np.array_equal(float_module(x=np.full((4, 8), 0.5, np.float16)).output,
                          np.full((4, 8), 1.0, np.float32))
    assert float_module(x=np.full((4, 8), 2**24, np.int64)).output[0, 0] == 2**25
    with pytest.raises(vta.InputError, match="some of its int64 values are not exact in float32"):
        float_module(x=np.full((4, 8), 2**25 + 1, np.int64))
    # the explicit cast is the caller's, and accepted
    float_module(x=np.full((4, 8), 0.1).astype(np.float32))


def _gemm(dtype: str, narrow: bool) -> list:  # type: ignore[type-arg]
    acc_dt = "int32" if dtype == "int8" else dtype
    x = placeholder((16, 32), dtype, "x")
    w = placeholder((32, 32), dtype, "w")
    k = reduce_axis(32, "k")
    acc = compute((16, 32), lambda i, j: sum_(x[i, k].astype(acc_dt) * w[j, k].astype(acc_dt),
                                              k), "acc")
    if not narrow:
        return [x, w, acc]
    return [x, w, compute((16, 32), lambda *i: acc[i].astype(dtype), "res")]


def test_a_float_compute_on_the_accelerator_says_floats_run_on_the_gpu(
        pynq: vta.HwConfig) -> None:
    """The issue's case: refused with "the output res is not the end of the GEMM's
    epilogue"."""
    args = _gemm("float32", narrow=False)
    with pytest.raises(ScheduleError, match=r"x, w, acc are floating point; the accelerator "
                                            r"computes integers: floats run on the GPU \(build "
                                            r"for 'cuda-emu' or 'cuda'\)"):
        schedule_packed(vta.pack(args, pynq), pynq)
    with pytest.raises(vta.BuildError, match=r"build\(target='vta'\): x, w, acc are floating "
                                             r"point; .* floats run on the GPU: build for "
                                             r"'cuda-emu' \(no GPU needed\) or 'cuda'"):
        vta.build(create_schedule(args[-1]), args, "vta", hw=pynq)
    mod = vta.build(simt(args), target="cuda-emu")  # where it runs
    ones = np.ones((16, 32), np.float32)
    assert np.array_equal(mod(x=ones, w=np.ones((32, 32), np.float32)).output,
                          np.full((16, 32), 32, np.float32))


def test_an_int32_output_on_the_accelerator_names_the_narrowing_stage(
        pynq: vta.HwConfig) -> None:
    """The issue's case: a bare GEMM (int32 out) failed with "flatten cannot execute
    BufferStore" or a LayoutError; now a refusal at build time saying what to do, and the
    same GEMM narrowed builds and is bit-exact."""
    args = _gemm("int8", narrow=False)
    with pytest.raises(ScheduleError, match=r"the output acc is the GEMM's int32 accumulator; "
                                            r"the accelerator stores its out dtype: end the "
                                            r"compute with a narrowing stage"):
        schedule_packed(vta.pack(args, pynq), pynq)
    with pytest.raises(vta.BuildError, match=r"output acc is int32; the accelerator's STORE "
                                             r"writes int8 values .*lambda \*i: "
                                             r"acc\[i\]\.astype\('int8'\)"):
        vta.build(create_schedule(args[-1]), args, "vta", hw=pynq)
    narrowed = _gemm("int8", narrow=True)
    P = vta.pack(narrowed, pynq)
    mod = vta.build(schedule_packed(P, pynq), P, "vta", hw=pynq)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32), dtype=np.int8)
    want = (x.astype(np.int32) @ w.astype(np.int32).T).astype(np.int8)
    assert np.array_equal(mod(x=x, w=w).output, want)
    # the int32 output itself is had on the GPU path
    gpu = vta.build(simt(args), target="cuda-emu")
    assert np.array_equal(gpu(x=x, w=w).output, x.astype(np.int32) @ w.astype(np.int32).T)
