"""The sm_90a path (vta.gpu.hopper, vta.gpu.kernels.wgmma_gemm): the emulator runs the TMA +
mbarrier + wgmma GEMM bit-exact against numpy (int8, with the requantizing epilogue) and
within the fp32 summation bound (fp16, bf16) on square and non-square shapes with edge tiles;
the swizzle, descriptor and fragment layouts against the PTX ISA's definitions; mbarrier
phases, deadlocks and pipeline races; every variant compiled with nvcc for sm_90a with
``-Xptxas -v`` (no spills) and, where cuobjdump is installed, HGMMA and UTMALDG in the SASS."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import EmulatorError, EmulatorRaceError, GpuLoweringError
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import KERNEL
from vta.gpu.emulator import Emulator
from vta.gpu.hopper import (
    ATOM_BYTES,
    TENSOR_MAPS,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    Wgmma,
    WgmmaWait,
    encode_tensor_maps,
    smem_descriptor,
    swizzle128,
    wgmma_fragment,
)
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.kernels.wgmma_gemm import WgmmaKnobs, wgmma_gemm
from vta.gpu.mma import FRAGMENTS
from vta.gpu.nvcc import find_nvcc

DEFAULT = WgmmaKnobs()
MAPS = np.zeros((2, 16), np.int64)  # the emulator reads the TENSOR_MAPS specs, not the bytes


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest even), as int16 bit patterns."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16).view(np.int16)


def bf16_values(b: np.ndarray) -> np.ndarray:
    return (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def run_float(m: int, n: int, k: int, dtype: str, kb: WgmmaKnobs = DEFAULT,
              out: str | None = None, seed: int = 0) -> None:
    """Emulate the kernel; compare with float64 numpy within the fp32 summation bound."""
    func = wgmma_gemm(MatmulSpec(m, n, k), dtype, None, kb, out)
    rng = np.random.default_rng(seed)
    xf, wf = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    if dtype == "bfloat16":
        x, w = bf16_bits(xf), bf16_bits(wf)
        xv, wv = bf16_values(x), bf16_values(w)
    else:
        x, w = xf.astype(np.float16), wf.astype(np.float16)
        xv, wv = x, w
    want = xv.astype(np.float64) @ wv.astype(np.float64).T
    y = np.zeros((m, n), np.dtype(func.params[2].dtype))
    Emulator(func).run(x, w, y, MAPS)
    # fp32 accumulation: one rounding per wgmma k-step, |error| <= steps * eps * sum |x w|
    bound = (k // 16 + 1) * 2.0 ** -23 * (np.abs(xv).astype(np.float64)
                                          @ np.abs(wv).astype(np.float64).T)
    if y.dtype == np.float16:
        bound = bound + np.abs(want) * 2.0 ** -11 + 2.0 ** -24
    assert np.all(np.abs(y.astype(np.float64) - want) <= bound), \
        f"{dtype} wgmma GEMM {m}x{n}x{k} {kb} outside the fp32 accumulation bound"


def run_int8(m: int, n: int, k: int, epi: Epilogue | None, kb: WgmmaKnobs = DEFAULT,
             seed: int = 0) -> None:
    func = wgmma_gemm(MatmulSpec(m, n, k), "int8", epi, kb)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    acc = (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    if epi is None:
        y, want, args = np.zeros_like(acc), acc, [x, w]
    else:
        bias = rng.integers(-(1 << 10), 1 << 10, n, dtype=np.int32)
        want = apply_epilogue(acc, bias if epi.bias else None, epi, 1)
        y, args = np.zeros_like(want), [x, w] + ([bias] if epi.bias else [])
    Emulator(func).run(*args, y, MAPS)
    assert np.array_equal(y, want), f"int8 wgmma GEMM {m}x{n}x{k} {kb} differs from numpy"


# ---------------------------------------------------------------------------- GEMMs


def test_fp16_square_and_non_square() -> None:
    run_float(128, 128, 128, "float16")
    run_float(256, 384, 192, "float16", WgmmaKnobs(2, 128, 4))  # 2x3 blocks, ring wraps


def test_fp16_edges_fp16_out_and_wide_tile() -> None:
    run_float(100, 72, 200, "float16", out="float16")  # M, N, K past the tiles: zero fill
    run_float(64, 256, 64 * 6, "float16", WgmmaKnobs(1, 256, 3))  # one warpgroup, n256


def test_bf16() -> None:
    run_float(128, 160, 320, "bfloat16", WgmmaKnobs(2, 80, 2))


@pytest.mark.parametrize("epi", [None, Epilogue(7, True, -100, 90),
                                 Epilogue(14, True, -128, 127, kind="fixed_point", mult=23171)])
def test_int8_bit_exact(epi: Epilogue | None) -> None:
    run_int8(200, 176, 128 * 7, epi, WgmmaKnobs(2, 96, 3))  # ring of 3 wraps over 7 stages


@pytest.mark.slow
def test_int8_wraps_like_s32() -> None:
    """Sums past 2^31 wrap as s32 accumulation does (K large, all products 2^14)."""
    m, n, k = 64, 16, (1 << 17) + 128
    func = wgmma_gemm(MatmulSpec(m, n, k), "int8", None, WgmmaKnobs(1, 16, 2))
    x = np.full((m, k), -128, np.int8)
    w = np.full((n, k), -128, np.int8)
    y = np.zeros((m, n), np.int32)
    Emulator(func).run(x, w, y, MAPS)
    total = (1 << 14) * k
    assert total > (1 << 31) - 1
    assert np.all(y == total - (1 << 32))


# ---------------------------------------------------------------------------- layouts (PTX ISA)


def test_swizzle_is_the_128b_pattern() -> None:
    """Unit ``u`` of row ``r`` (128-byte rows, 1024-byte aligned tile) lands at unit
    ``u ^ (r % 8)``; bytes inside a 16-byte unit stay in place."""
    r, u, b = np.meshgrid(np.arange(16), np.arange(8), np.arange(16), indexing="ij")
    phys = swizzle128(r * 128 + u * 16 + b)
    assert np.array_equal(phys, r * 128 + (u ^ (r % 8)) * 16 + b)


def test_descriptor_fields() -> None:
    d = smem_descriptor(0x1_2340)
    assert d & 0x3FFF == 0x1234                    # start address >> 4, bits 0-13
    assert (d >> 16) & 0x3FFF == 1                 # leading byte offset (unused with swizzle)
    assert (d >> 32) & 0x3FFF == ATOM_BYTES >> 4   # stride byte offset: 8 rows of 128 B
    assert (d >> 49) & 7 == 0                      # base offset
    assert d >> 62 == 1                            # 128-byte swizzle


def test_accumulator_fragment_extends_mma_sync() -> None:
    """Warp w of the warpgroup holds rows 16w..16w+15 exactly as mma.sync m16n8's C fragment,
    repeated every 8 columns (PTX ISA: wgmma D register fragment)."""
    rows, cols = wgmma_fragment(32)
    rc, cc = FRAGMENTS[("float16", "c")]
    for w in range(4):
        for j in range(4):
            sl = slice(4 * j, 4 * j + 4)
            assert np.array_equal(rows[32 * w:32 * w + 32, sl], rc + 16 * w)
            assert np.array_equal(cols[32 * w:32 * w + 32, sl], cc + 8 * j)
    cells = set(zip(rows.ravel().tolist(), cols.ravel().tolist(), strict=True))
    assert len(cells) == 64 * 32  # every element once


# ---------------------------------------------------------------------------- mbarrier, races


def _barrier_kernel(body: Callable[[S.Buffer, E.Var], S.Stmt]) -> S.PrimFunc:
    bar = S.Buffer("bar", (2,), "int64", "shared")
    out = S.Buffer("out", (32,), "int32")
    return finish("bars", (out,), lambda tid, bx, by: alloc([bar], S.seq(
        body(bar, tid), out.store(tid, tid))), (1, 1), 32)


def test_parity_one_passes_on_a_fresh_barrier_and_phases_advance() -> None:
    def body(bar: S.Buffer, tid: E.Var) -> S.Stmt:
        z = E.IntImm(0)
        return S.seq(S.IfThenElse(tid.eq(0), MbarrierInit(bar, z, 32)), S.Barrier(),
                     MbarrierWait(bar, z, E.IntImm(1)),      # the "previous" phase: at once
                     MbarrierArrive(bar, z), MbarrierWait(bar, z, E.IntImm(0)),   # phase 0
                     MbarrierArrive(bar, z), MbarrierWait(bar, z, E.IntImm(1)))   # phase 1
    out = np.zeros(32, np.int32)
    Emulator(_barrier_kernel(body)).run(out)
    assert np.array_equal(out, np.arange(32))


def test_wait_that_never_completes_is_a_named_deadlock() -> None:
    def body(bar: S.Buffer, tid: E.Var) -> S.Stmt:
        z = E.IntImm(0)
        return S.seq(S.IfThenElse(tid.eq(0), MbarrierInit(bar, z, 32)), S.Barrier(),
                     S.IfThenElse(tid < 31, MbarrierArrive(bar, z)),  # one arrival short
                     MbarrierWait(bar, z, E.IntImm(0)))
    with pytest.raises(EmulatorError, match=r"bar\[0\].*1 arrivals .*deadlock"):
        Emulator(_barrier_kernel(body)).run(np.zeros(32, np.int32))


def test_arrive_before_init_is_an_error() -> None:
    def body(bar: S.Buffer, tid: E.Var) -> S.Stmt:
        return MbarrierArrive(bar, E.IntImm(1))
    with pytest.raises(EmulatorError, match=r"before mbarrier\.init"):
        Emulator(_barrier_kernel(body)).run(np.zeros(32, np.int32))


def _drop(stmt: S.Stmt, pred: Callable[[S.Stmt], bool]) -> S.Stmt:
    """``stmt`` without the statements ``pred`` selects (an empty sequence in their place)."""
    if pred(stmt):
        return S.seq()
    if isinstance(stmt, S.SeqStmt):
        return S.seq(*[_drop(x, pred) for x in stmt.stmts])
    changes = {f.name: _drop(getattr(stmt, f.name), pred) for f in dataclasses.fields(stmt)
               if isinstance(getattr(stmt, f.name), S.Stmt)}
    return dataclasses.replace(stmt, **changes) if changes else stmt


def _mutated(pred: Callable[[S.Stmt], bool]) -> S.PrimFunc:
    func = wgmma_gemm(MatmulSpec(128, 128, 64 * 6), "float16", None, WgmmaKnobs(2, 128, 2))
    return dataclasses.replace(func, body=_drop(func.body, pred))


def _run16(func: S.PrimFunc) -> None:
    x = np.ones((128, 64 * 6), np.float16)
    Emulator(func).run(x, x[:128], np.zeros((128, 128), np.float32), MAPS)


def test_release_before_wgmma_retires_is_a_race() -> None:
    """Without ``wgmma.wait_group 1`` the slot is released (and refilled by TMA) while the
    wgmma group reading it may still run."""
    func = _mutated(lambda s: isinstance(s, WgmmaWait) and s.n == 1)
    with pytest.raises(EmulatorRaceError, match="wgmma still reads"):
        _run16(func)


def test_wgmma_before_the_full_barrier_is_a_race() -> None:
    func = _mutated(lambda s: isinstance(s, MbarrierWait) and s.bar.name == "full")
    with pytest.raises(EmulatorRaceError, match="before the copy into it completed"):
        _run16(func)


def test_wgmma_needs_whole_warpgroups() -> None:
    func = wgmma_gemm(MatmulSpec(64, 16, 64), "float16", None, WgmmaKnobs(1, 16, 2))

    lane = next(n.var for n in E.walk(func.body)
                if isinstance(n, S.LetStmt) and n.var.name == "lane")

    def guard_lane(s: S.Stmt) -> S.Stmt:  # the wgmma on lane 0 of each warp only
        if isinstance(s, Wgmma):
            return S.IfThenElse(lane.eq(0), s)
        if isinstance(s, S.SeqStmt):
            return S.seq(*[guard_lane(x) for x in s.stmts])
        ch = {f.name: guard_lane(getattr(s, f.name)) for f in dataclasses.fields(s)
              if isinstance(getattr(s, f.name), S.Stmt)}
        return dataclasses.replace(s, **ch) if ch else s
    bad = dataclasses.replace(func, body=guard_lane(func.body))
    x = np.ones((64, 64), np.float16)
    with pytest.raises(EmulatorError, match="part of a warpgroup"):
        Emulator(bad).run(x, x[:16], np.zeros((64, 16), np.float32), MAPS)


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("call, match", [
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float32"), "no wgmma shape for float32"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 12), "float16"), "K=12 .* 16 bytes"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float16", None, WgmmaKnobs(2, 100)),
     "bn=100"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float16", None, WgmmaKnobs(5)),
     "warpgroups=5"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float16", None, WgmmaKnobs(2, 128, 1)),
     "stages=1"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "int8", None, out_dtype="int8"),
     "int8 output needs the requantizing epilogue"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "bfloat16", None, out_dtype="float16"),
     "bfloat16 GEMM writes float32"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float16", Epilogue(3, False, -128, 127)),
     "requantizing epilogue is for int8"),
    (lambda: wgmma_gemm(MatmulSpec(64, 64, 64), "float16", None, WgmmaKnobs(2, 256, 8)),
     "shared memory"),
])
def test_bad_requests_name_the_problem(call: Callable[[], object], match: str) -> None:
    with pytest.raises(GpuLoweringError, match=match):
        call()


def test_kernel_attributes() -> None:
    func = wgmma_gemm(MatmulSpec(300, 200, 64), "int8", Epilogue(3, True, -128, 127))
    assert func.attr(KERNEL) == "wgmma"
    specs = func.attr(TENSOR_MAPS)
    assert [(s.src.name, s.rows, s.cols) for s in specs] == [("X", 128, 128), ("W", 128, 128)]
    assert [b.name for b in func.params] == ["X", "W", "bias", "Y", "maps"]


# ---------------------------------------------------------------------------- nvcc, SASS


VARIANTS: dict[str, Callable[[], S.PrimFunc]] = {
    "fp16": lambda: wgmma_gemm(MatmulSpec(4096, 4096, 4096), "float16"),
    "fp16_out16_n256": lambda: wgmma_gemm(MatmulSpec(4096, 4096, 4096), "float16", None,
                                          WgmmaKnobs(2, 256, 4), "float16"),
    "bf16": lambda: wgmma_gemm(MatmulSpec(1000, 1000, 1000), "bfloat16"),
    "int8_requant": lambda: wgmma_gemm(MatmulSpec(4096, 4096, 4096), "int8",
                                       Epilogue(9, True, -128, 127, kind="fixed_point",
                                                mult=3000)),
}


def _cuobjdump() -> str | None:
    """cuobjdump on PATH, or the one the ``nvidia-cuda-cuobjdump`` wheel ships (with
    ``nvidia-cuda-nvdisasm`` beside it: cuobjdump -sass runs nvdisasm)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for base in map(Path, sys.path):
        for cand in sorted(base.glob("nvidia/cu*/bin/cuobjdump")):
            if (cand.parent / "nvdisasm").exists():
                return str(cand)
    return None


@pytest.mark.parametrize("name", list(VARIANTS))
def test_compiles_for_sm90a_without_spills(name: str) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed: the sm_90a kernels cannot be compiled")
    src = render_cuda(VARIANTS[name]()).source
    with tempfile.TemporaryDirectory(prefix="vta_wgmma_") as tmp:
        cu, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
        cu.write_text(src)
        proc = subprocess.run([nvcc, "-cubin", "-gencode", "arch=compute_90a,code=sm_90a",
                               "-Xptxas", "-v", "-std=c++17", "-O3", "-o", str(cubin), str(cu)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        log = proc.stderr
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
        regs = int(re.search(r"Used (\d+) registers", log).group(1))  # type: ignore[union-attr]
        assert regs <= 255
        assert "warning" not in log.lower(), f"ptxas warned (wgmma serialisation?):\n{log}"
        tool = _cuobjdump()
        if tool is None:
            pytest.skip("cuobjdump/nvdisasm not installed (pip: nvidia-cuda-cuobjdump, "
                        "nvidia-cuda-nvdisasm): SASS not inspected")
        env = {"PATH": f"{Path(tool).parent}:/usr/bin:/bin"}
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                              env=env, check=True).stdout
    mma = "IGMMA" if name.startswith("int8") else "HGMMA"
    for op in (mma, "UTMALDG.2D", "SYNCS.PHASECHK", "WARPGROUP.DEPBAR"):
        assert op in sass, f"{name}: no {op} in the SASS"
    assert "HMMA" not in sass.replace("HGMMA", "") and "LDSM" not in sass


# ---------------------------------------------------------------------------- the GPU check script


class _FakeEvent:
    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


def _fake_cupy() -> object:
    """numpy in CuPy's clothes: what bench/gpu_wgmma_check.py calls, without a GPU."""
    from types import SimpleNamespace

    runtime = SimpleNamespace(deviceSynchronize=lambda: None)
    cuda = SimpleNamespace(runtime=runtime, Event=_FakeEvent, get_elapsed_time=lambda a, b: 1.0)
    return SimpleNamespace(asarray=np.asarray, asnumpy=np.asarray, zeros=np.zeros,
                           matmul=np.matmul, abs=np.abs, max=np.max, float64=np.float64,
                           cuda=cuda)


@pytest.mark.parametrize("variant", ["fp16-fp32", "fp16-fp16", "bf16-fp32", "int8-int8"])
def test_check_script_runs_and_checks(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's build, launch, check and timing path, its kernel run by the emulator:
    a right result is timed, a corrupted one is reported wrong."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import gpu_wgmma_check as chk

    built: list[S.PrimFunc] = []
    corrupt = [False]

    def build(*a: object) -> S.PrimFunc:
        built.append(wgmma_gemm(*a))  # type: ignore[arg-type]
        return built[-1]

    def launch(grid: object, block: object, args: tuple, shared_mem: int) -> None:
        host = [np.ascontiguousarray(a) for a in args]
        Emulator(built[-1]).run(*host)
        args[-2][...] = host[-2]
        if corrupt[0]:
            args[-2].flat[7] += 1

    monkeypatch.setattr(chk, "wgmma_gemm", build)
    monkeypatch.setattr(chk, "compile_kernel", lambda cp, k: (launch, {"compiler": "fake"}))
    monkeypatch.setattr(chk, "tensor_maps", lambda cp, func, x, w: MAPS)
    monkeypatch.setattr(chk, "baseline", lambda cp, v, x, w: (lambda: None, "none"))
    cp = _fake_cupy()
    row = chk.run_one(cp, chk.VARIANTS[variant], 128, 2, 1)
    assert row["correct"], row
    assert row["ours_ms"] == 0.5 and row["ratio"] == 1.0
    corrupt[0] = True
    row = chk.run_one(cp, chk.VARIANTS[variant], 128, 2, 1)
    assert not row["correct"] and "ours_ms" not in row


def hopper_cupy() -> Any:
    """CuPy on a real compute-capability-9.0 GPU, else the calling test is skipped."""
    from vta.gpu.runtime import gpu_available, require_cupy

    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
    cp = require_cupy()
    if str(cp.cuda.Device().compute_capability) != "90":
        pytest.skip("wgmma and TMA need compute capability 9.0 (sm_90a)")
    return cp


def check_int8_on_gpu(cp: Any, func: S.PrimFunc, epi: Epilogue, rng: np.random.Generator,
                      what: str) -> None:
    """``func`` (an int8 wgmma GEMM with the requantizing epilogue ``epi`` and a bias) on the
    GPU, bit-exact against numpy's int64 GEMM and ``apply_epilogue``."""
    from vta.gpu.runtime import GpuKernel

    (m, k), (n, _) = func.params[0].shape, func.params[1].shape
    x = cp.asarray(rng.integers(-128, 128, (m, k), dtype=np.int8))
    w = cp.asarray(rng.integers(-128, 128, (n, k), dtype=np.int8))
    bias = rng.integers(-(1 << 10), 1 << 10, n, dtype=np.int32)
    acc = (cp.asnumpy(x).astype(np.int64) @ cp.asnumpy(w).astype(np.int64).T).astype(np.int32)
    want = apply_epilogue(acc, bias, epi, 1)
    y = cp.zeros((m, n), cp.int8)
    maps = cp.asarray(encode_tensor_maps(func.attr(TENSOR_MAPS), [x.data.ptr, w.data.ptr]))
    GpuKernel(render_cuda(func))(x, w, cp.asarray(bias), y, maps)
    assert np.array_equal(cp.asnumpy(y), want), f"int8 {what} on the GPU differs from numpy"


def check_fp16_on_gpu(cp: Any, func: S.PrimFunc, rng: np.random.Generator, what: str) -> None:
    """``func`` (an fp16 -> fp16 wgmma GEMM) on the GPU, within the fp32-accumulation bound of
    the float64 product plus the fp16 output's rounding."""
    from vta.gpu.runtime import GpuKernel

    (m, k), (n, _) = func.params[0].shape, func.params[1].shape
    xh = rng.standard_normal((m, k)).astype(np.float16)
    wh = rng.standard_normal((n, k)).astype(np.float16)
    x, w = cp.asarray(xh), cp.asarray(wh)
    y = cp.zeros((m, n), cp.float16)
    maps = cp.asarray(encode_tensor_maps(func.attr(TENSOR_MAPS), [x.data.ptr, w.data.ptr]))
    GpuKernel(render_cuda(func))(x, w, y, maps)
    exact = xh.astype(np.float64) @ wh.astype(np.float64).T
    bound = (k / 16 + 1) * 2.0 ** -23 * (np.abs(xh.astype(np.float64))
                                         @ np.abs(wh.astype(np.float64)).T)
    err = np.abs(cp.asnumpy(y).astype(np.float64) - exact)
    assert np.all(err <= bound + np.abs(exact) * 2.0 ** -11 + 2.0 ** -24), \
        f"fp16 {what} on the GPU: max error {err.max()}"


@pytest.mark.gpu
def test_on_a_hopper_gpu() -> None:
    """On a real sm_90 GPU: the int8 kernel (edges, the requantizing epilogue with bias)
    bit-exact against numpy, and fp16 -> fp16 within the fp32-accumulation bound."""
    cp = hopper_cupy()
    rng = np.random.default_rng(3)
    epi = Epilogue(9, True, -128, 127)
    check_int8_on_gpu(cp, wgmma_gemm(MatmulSpec(200, 176, 896), "int8", epi, DEFAULT, "int8"),
                      epi, rng, "wgmma GEMM")
    check_fp16_on_gpu(cp, wgmma_gemm(MatmulSpec(256, 384, 192), "float16", None, DEFAULT,
                                     "float16"), rng, "wgmma GEMM")
