"""vta.build and Module: one call from a schedule to results on each target, arrays by the
placeholders' names in their logical layouts, every artifact reachable, bad calls named."""

from __future__ import annotations

import numpy as np
import pytest

import vta
import vta.testing as vt
from vta.compiler import (
    ScheduleError,
    compute,
    create_schedule,
    max_,
    min_,
    placeholder,
    reduce_axis,
    schedule_packed,
    sum_,
    vta_gemm_intrinsic,
)
from vta.compiler.ir.lower import lower
from vta.errors import GpuUnavailableError, ImplicitGemmError
from vta.gpu.implicit_gemm import simt, tensorcore
from vta.gpu.runtime import gpu_available


def dense(M: int = 16, N: int = 32, K: int = 48) -> list:  # type: ignore[type-arg]
    return vt.logical_dense(M, N, K, 7)


def numpy_dense(ins: dict[str, np.ndarray]) -> np.ndarray:
    acc = (ins["x"].astype(np.int64) @ ins["w"].astype(np.int64).T).astype(np.int32)
    return np.clip((acc >> 7) + ins["bias"], -128, 127).astype(np.int8)


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return vt.random_inputs(dense(), 5)


def test_vta_module_runs_and_exposes_everything(pynq: vta.HwConfig, inputs) -> None:  # type: ignore[no-untyped-def]
    P = vta.pack(dense(), pynq)
    mod = vta.build(schedule_packed(P, pynq), P, "vta", hw=pynq)
    assert mod.inputs == ["x", "w", "bias"] and mod.outputs == ["res"]
    want = numpy_dense(inputs)
    r = mod(**inputs)
    assert r.target == "vta" and r.cycles == r.stats.cycles > 0
    assert np.array_equal(r["res"], want) and np.array_equal(r.output, want)
    assert r.module is mod and "per-unit" in r.report()
    # the same names everywhere: the program's DRAM allocations are the placeholders
    assert [a.name for a in mod.program.allocations if a.kind != "uop"] == \
        ["x", "w", "bias", "res"]
    assert "tensorize" in mod.compiled.ir and mod.func.params[0].name == "x"
    for run in (mod.reference, mod.interpret):
        assert np.array_equal(run(inputs)["res"], want)
    # by position, by a mapping of names or of tensors
    assert np.array_equal(mod(inputs["x"], inputs["w"], inputs["bias"])["res"], want)
    x, w, b, _ = P.logical
    assert np.array_equal(mod({x: inputs["x"], w: inputs["w"], b: inputs["bias"]})["res"], want)
    # integer arrays of another dtype are taken when every value fits
    wide = {k: v.astype(np.int64) for k, v in inputs.items()}
    assert np.array_equal(mod(wide)["res"], want)
    assert "vta" in repr(mod)
    with pytest.raises(vta.BuildError, match="no CUDA kernel"):
        _ = mod.cuda


@pytest.mark.parametrize("schedule", [simt, tensorcore])
def test_gpu_modules_take_the_same_arrays(schedule, inputs) -> None:  # type: ignore[no-untyped-def]
    mod = vta.build(schedule(dense()), target="cuda-emu")
    r = mod(inputs)
    assert np.array_equal(r["res"], numpy_dense(inputs))
    assert isinstance(r.stats, vta.GpuLaunch) and r.stats.threads > 0
    assert "grid" in r.report()
    # the emulator's counters: every block profiled, global loads at least the tiles' footprint
    p = r.stats.profile
    grid = r.stats.grid
    assert p.blocks == grid[0] * grid[1] * grid[2]
    ld, ld_min = p.sectors(False)
    assert ld >= ld_min > 0
    assert p.instructions and all(v > 0 for v in p.instructions.values())
    assert f"global load sectors {ld:,}" in r.report()
    # without counters (a timing comparison), the same integers and no profile
    quiet = vta.build(schedule(dense()), target="cuda-emu", profile=False)(inputs)
    assert quiet.stats.profile is None and np.array_equal(quiet["res"], r["res"])
    assert [b.name for b in mod.kernel.params] == ["x", "w", "bias", "res"]
    assert mod.gpu_func is not None and "__global__" in mod.cuda
    with pytest.raises(vta.BuildError, match="no accelerator program"):
        _ = mod.program
    with pytest.raises(vta.BuildError, match="ISA reference interpreter runs accelerator"):
        mod.reference(inputs)
    assert np.array_equal(mod.interpret(inputs)["res"], numpy_dense(inputs))


def test_cuda_target_needs_a_gpu() -> None:
    if gpu_available():
        pytest.skip("a GPU is present: the cuda target builds")
    with pytest.raises(GpuUnavailableError, match=r"CuPy|GPU"):
        vta.build(simt(dense()), target="cuda")


def test_bad_calls_are_named(pynq: vta.HwConfig, inputs) -> None:  # type: ignore[no-untyped-def]
    mod = vta.build(simt(dense()), target="cuda-emu")
    cases = [
        ((), {"x": inputs["x"], "w": inputs["w"]}, "missing input\\(s\\) bias"),
        ((), {**inputs, "y": inputs["x"]}, "no input named 'y' \\(inputs: bias, w, x\\)"),
        ((), {**inputs, "res": inputs["x"]}, "res is an output; the module allocates it"),
        ((inputs["x"],), {"x": inputs["x"]}, "input x given twice"),
        ((1, 2, 3, 4), {}, "takes 3 input arrays \\(x, w, bias\\), got 4"),
        ((), {**inputs, "x": inputs["x"][:3]}, "input x: expected shape \\[16, 48\\], got "
                                                "\\[3, 48\\]"),
        ((), {**inputs, "x": inputs["x"].astype(np.int32) * 9},
         "input x: values -1152..1143 do not fit its dtype int8"),
        ((), {**inputs, "x": inputs["x"].astype(np.float32)},
         "input x: expected dtype int8, got float32"),
    ]
    for args, kwargs, msg in cases:
        with pytest.raises(vta.InputError, match=msg):
            mod(*args, **kwargs)
    with pytest.raises(KeyError, match="no output named 'nope'"):
        mod(inputs)["nope"]


def test_bad_builds_are_named(pynq: vta.HwConfig) -> None:
    args = dense()
    s = create_schedule(args[-1])
    with pytest.raises(vta.BuildError, match="unknown target 'tpu'"):
        vta.build(s, args, "tpu")
    with pytest.raises(vta.BuildError, match="needs the hardware"):
        vta.build(s, args, "vta")
    with pytest.raises(vta.BuildError, match="expected a Schedule, got list"):
        vta.build(args, args, "cuda-emu")  # type: ignore[arg-type]
    with pytest.raises(vta.BuildError, match="give the parameters"):
        vta.build(s, None, "cuda-emu")
    x, _w, _bias, _res = dense()
    x2 = placeholder(x.shape, "int8", "x")
    k = reduce_axis(48, "k")
    twice = compute((16, 32), lambda i, j: sum_(x[i, k].astype("int32")
                                                * x2[j % 16, k].astype("int32"), k), "t")
    with pytest.raises(vta.BuildError, match="two parameters are named 'x'"):
        vta.build(create_schedule(twice), [x, x2, twice], "cuda-emu")
    # the hardware may be a YAML path
    P = vta.pack(dense(), pynq)
    assert vta.build(schedule_packed(P, pynq), P, "vta", hw="hwconfigs/pynq.yaml").hw is not None


def test_accelerator_needs_whole_tiles(pynq: vta.HwConfig) -> None:
    """A split that does not divide, on a stage the accelerator's pipeline runs, is refused
    when building for it, naming the split; under a tensorized region, whatever the target."""
    P = vta.pack(dense(16, 64, 48), pynq)
    x, w, bias, res = P
    s = create_schedule(res)
    A = s.cache_write(s["acc"].tensor, "acc")
    s["acc"].compute_inline()
    XL, WL = s.cache_read(x, "inp", [A]), s.cache_read(w, "wgt", [A])
    BL = s.cache_read(bias, "acc", [s["shr"]])
    for n in ("shr", "clip"):
        s[n].set_scope("acc")
    _i, j, _bi, _bj = s[res].axis
    jo, _ji = s[res].split(j, 3)  # 4 column blocks in tiles of 3
    for st in (s[A], s["shr"], s["clip"], s[BL]):
        st.compute_at(s[res], jo)
    a = s[A]
    ko, kl = a.reduce_axis
    s[XL].compute_at(a, ko)
    s[WL].compute_at(a, ko)
    with pytest.raises(ScheduleError, match=r"the split of i1_o by factor 3 in stage res does not "
                                            r"divide its extent 4 .* 1, 2, 4"):
        vta.build(s, P, "vta", hw=pynq)
    ai, aj, abi, abj = a.axis
    a.reorder(ko, ai, aj, abi, abj, kl)
    a.tensorize(abi, vta_gemm_intrinsic(pynq))
    with pytest.raises(ScheduleError, match=r"tensorize with vta\.gemm.* on stage acc_acc .*split "
                                            r"of i1_o by factor 3 in stage res"):
        lower(s, list(P.args))  # whatever the target: the region cannot be guarded


def test_implicit_gemm_refusals() -> None:
    x = placeholder((4, 8, 16), "int8", "x")
    w = placeholder((4, 8, 16), "int8", "w")
    k = reduce_axis(16, "k")
    bmm = compute((4, 8, 8), lambda b, i, j: sum_(x[b, i, k].astype("int32")
                                                  * w[b, j, k].astype("int32"), k), "bmm")
    with pytest.raises(ImplicitGemmError, match="axes b index both x and w \\(a batched GEMM\\)"):
        simt([x, w, bmm])
    with pytest.raises(ImplicitGemmError, match="one output"):
        simt([x, w])


def test_a_hand_packed_compute_takes_its_own_layout(pynq: vta.HwConfig) -> None:
    """A compute written in the packed layout (as TVM's VTA tutorials do) builds from a plain
    argument list: the arrays are then in that layout, entry dims last."""
    x = placeholder((2, 3, 1, 16), "int8", "x")
    w = placeholder((2, 3, 16, 16), "int8", "w")
    ko, ki = reduce_axis(3, "ko"), reduce_axis(16, "ki")
    acc = compute((2, 2, 1, 16), lambda m, n, i, j: sum_(
        x[m, ko, i, ki].astype("int32") * w[n, ko, j, ki].astype("int32"), [ko, ki]), "acc")
    res = compute(acc.shape, lambda *i: acc[i].astype("int8"), "res")
    s = create_schedule(res)
    A = s.cache_write(acc, "acc")
    s[acc].compute_inline()
    XL, WL = s.cache_read(x, "inp", [A]), s.cache_read(w, "wgt", [A])
    n = s[res].axis[1]
    s[A].compute_at(s[res], n)
    a = s[A]
    am, an, ai, aj = a.axis
    rko, rki = a.reduce_axis
    a.reorder(rko, am, an, ai, aj, rki)
    s[XL].compute_at(a, rko)
    s[WL].compute_at(a, rko)
    a.tensorize(ai, vta_gemm_intrinsic(pynq))
    mod = vta.build(s, [x, w, res], "vta", hw=pynq)
    ins = vt.random_inputs([x, w, res], 4)
    want = np.einsum("mkiq,nkjq->mnij", ins["x"].astype(np.int64),
                     ins["w"].astype(np.int64)).astype(np.int32).astype(np.int8)
    assert np.array_equal(mod(ins)["res"], want)
    assert np.array_equal(mod.interpret(ins)["res"], want)


@pytest.mark.parametrize("stride,h", [(2, 7), (3, 10), (2, 12)])
def test_a_strided_one_row_logical_conv_fits_its_schedule(stride: int, h: int) -> None:
    """A logical 1x1 strided convolution keeps every input row in its own padding stage (no
    strided row view as ``ops.conv2d`` has): ``schedule_packed`` sizes the input tile for
    those rows, so the schedule it picks fits the scratchpad and runs bit-exact (found by
    test_logical_targets on small_hw: a tile of 3 rows sized as 2 overflowed inp)."""
    from vta.compiler.accel.pack import pack
    from vta.compiler.ops.conv2d import Conv2dSpec

    hw = vt.small_hw()
    s = Conv2dSpec(n=1, ic=13, h=h, w=3, oc=5, kh=1, kw=1, stride=stride, pad=0)
    data = placeholder((s.n, s.ic, s.h, s.w), "int8", "data")
    kern = placeholder((s.oc, s.ic, 1, 1), "int8", "kernel")
    ic = reduce_axis(s.ic, "ic")
    acc = compute((s.n, s.oc, s.oh, s.ow), lambda n, o, y, x: sum_(
        data[n, ic, y * stride, x * stride].astype("int32")
        * kern[o, ic, 0, 0].astype("int32"), ic), "conv")
    shr = compute(acc.shape, lambda *i: acc[i] >> 4, "shr")
    clip = compute(acc.shape, lambda *i: min_(max_(shr[i], -128), 127), "clip")
    res = compute(acc.shape, lambda *i: clip[i].astype("int8"), "res")
    args = [data, kern, res]
    P = pack(args, hw)
    mod = vta.build(schedule_packed(P, hw), P, "vta", hw=hw)
    ins = vt.random_inputs(args, 3)
    x = ins["data"].astype(np.int64)[:, :, ::stride, ::stride]
    want = np.einsum("nchw,oc->nohw", x, ins["kernel"].astype(np.int64)[:, :, 0, 0])
    want = np.clip(want.astype(np.int32) >> 4, -128, 127).astype(np.int8)
    assert np.array_equal(mod(ins)["res"], want)


def test_an_epilogue_written_inside_the_narrowing_runs_on_the_accelerator(
        pynq: vta.HwConfig) -> None:
    """The whole epilogue in the output's one expression (``min_(max_((acc >> 7) + bias,
    -128), 127).astype("int8")``): ``pack`` gives the value a stage of its own, so the ALU
    computes it and the out STORE narrows (it reached flatten unlowered before)."""
    from vta.compiler.accel.pack import pack

    M, N, K = 16, 32, 48
    x, w, bias, acc = vt.dense_acc(M, N, K)
    res = compute((M, N), lambda i, j: min_(max_((acc[i, j] >> 7) + bias[j], -128),
                                            127).astype("int8"), "res")
    args = [x, w, bias, res]
    P = pack(args, pynq)
    assert [t.name for t in P.args] == ["x", "w", "bias", "res"]
    mod = vta.build(schedule_packed(P, pynq), P, "vta", hw=pynq)
    ins = vt.random_inputs(args, 6)
    want = numpy_dense(ins)
    assert np.array_equal(mod(ins)["res"], want)
    assert np.array_equal(mod.interpret(ins)["res"], want)
