"""``GpuTarget`` (one home of the device's limits, read by every GPU layer) and ptxas's resource
report (``vta.gpu.nvcc``): parsing, the refusals, and the calibrated register estimate against
ptxas on a shipped kernel."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import GpuLoweringError, GpuTargetError, KernelResourceError, NvccError
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import REGISTERS
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.kernels.gemm import MmaKnobs, mma_gemm
from vta.gpu.nvcc import (
    KernelResources,
    check_kernel,
    check_resources,
    find_nvcc,
    kernel_resources,
    parse_ptxas,
)
from vta.gpu.passes.check_registers import REGISTER_OVERHEAD
from vta.gpu.target import DEFAULT_TARGET, GPU_TARGET, TARGETS, GpuTarget, gpu_target, target_of

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------- the target


def test_targets_carry_nvidias_limits() -> None:
    assert DEFAULT_TARGET.arch == "sm_80"
    assert TARGETS["sm_80"].max_dynamic_shared == 163 * 1024
    assert TARGETS["sm_90"].max_dynamic_shared == TARGETS["sm_90a"].max_dynamic_shared \
        == 227 * 1024
    for t in TARGETS.values():
        assert (t.warp_size, t.max_threads, t.static_shared, t.max_registers,
                t.registers_per_sm) == (32, 1024, 48 * 1024, 255, 65536)
    assert gpu_target("sm_90a").compute_capability == 90
    assert gpu_target(None) is DEFAULT_TARGET
    assert gpu_target(TARGETS["sm_86"]) is TARGETS["sm_86"]


def test_bad_targets_are_named_errors() -> None:
    with pytest.raises(GpuTargetError, match="unknown GPU arch 'sm_99'"):
        gpu_target("sm_99")
    with pytest.raises(GpuTargetError, match="arch must look like sm_80"):
        GpuTarget("volta")
    with pytest.raises(GpuTargetError, match="sm_80: warp_size must be positive, got 0"):
        GpuTarget("sm_80", warp_size=0)
    with pytest.raises(GpuTargetError, match="max_threads 1000 is not a whole number"):
        GpuTarget("sm_80", max_threads=1000)
    with pytest.raises(GpuTargetError, match="below static_shared"):
        GpuTarget("sm_80", max_dynamic_shared=1024)


def test_no_literal_warp_size_in_the_gpu_back_end() -> None:
    """The warp is ``GpuTarget.warp_size`` (or ``WARP_LANES`` where an instruction fixes it):
    no ``% 32``, ``// 32``, ``* 32`` of lanes or threads, no ``arange(32)``."""
    bad = re.compile(r"(tid|lane|threads?|T|warps?)\s*(%|//|\*)\s*32\b|arange\(32\)"
                     r"|reshape\([^)]*\b32\b[^)]*\)|\b32\s*\*\s*self\.warps")
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for p in sorted((ROOT / "vta" / "gpu").rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if bad.search(line)]
    assert hits == []


def _copy_kernel(smem_elems: int, target: GpuTarget | str | None) -> S.PrimFunc:
    a = S.Buffer("A", (64,), "float32")
    sh = S.Buffer("sh", (smem_elems,), "float32", scope="shared")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        return alloc([sh], S.IfThenElse(tid < 64, S.BufferStore(a, E.FloatImm(1.0, "float32"),
                                                                (tid,))))

    return finish("copy", (a,), body, (1, 1), 64, target=target)


def test_kernel_frame_checks_and_records_its_target() -> None:
    # 180 KiB of shared memory: refused on sm_80 (163 KiB), fine on sm_90 (227 KiB)
    with pytest.raises(GpuLoweringError, match=r"copy: 184320 B of shared memory per block "
                                               r"exceed the sm_80 limit of 166912 B"):
        _copy_kernel(180 * 256, "sm_80")
    f = _copy_kernel(180 * 256, "sm_90")
    assert target_of(f) is TARGETS["sm_90"] and f.attr(GPU_TARGET) is TARGETS["sm_90"]
    assert render_cuda(f).dynamic_shared == 180 * 1024
    with pytest.raises(GpuLoweringError, match=r"48 threads per block \(whole 32-lane warps"):
        finish("odd", (), lambda t, x, y: S.Evaluate(E.IntImm(0)), (1, 1), 48)


def test_emulator_groups_lanes_by_the_targets_warp() -> None:
    """A hypothetical 16-lane target: the emulator's warps follow the function's target."""
    narrow = dataclasses.replace(DEFAULT_TARGET, arch="sm_80", warp_size=16)
    f = _copy_kernel(64, narrow)
    em = Emulator(f)
    assert em.target.warp_size == 16
    a = np.zeros(64, np.float32)
    em.run(a)
    assert (a == 1).all()


# ---------------------------------------------------------------------------- ptxas

REPORT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_spills' for 'sm_80'
ptxas info    : Function properties for k_spills
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'k_ok' for 'sm_80'
ptxas info    : Function properties for k_ok
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 64 registers, 368 bytes cmem[0]
"""


def test_ptxas_report_is_parsed_per_kernel() -> None:
    res = parse_ptxas(REPORT)
    assert res == {
        "k_spills": KernelResources("k_spills", "sm_80", 255, 40, 36, 48, 2048, 1),
        "k_ok": KernelResources("k_ok", "sm_80", 64),
    }
    assert res["k_spills"].spills and not res["k_ok"].spills


def test_resource_refusals_name_kernel_resource_and_limit() -> None:
    res = parse_ptxas(REPORT)
    with pytest.raises(KernelResourceError, match=r"k_spills on sm_80: ptxas spills registers "
                                                  r"\(40 B stores, 36 B loads at 255"):
        check_resources(res["k_spills"], 128)
    ok = res["k_ok"]
    assert check_resources(ok, 1024) is ok  # 64 x 1024 = 65536: exactly one SM's file
    with pytest.raises(KernelResourceError, match=r"64 registers x 1056 threads = 67584 exceed "
                                                  r"the 65536 registers of an SM"):
        check_resources(ok, 1056)
    with pytest.raises(KernelResourceError, match=r"300 registers per thread exceed 255"):
        check_resources(dataclasses.replace(ok, registers=300), 32)
    with pytest.raises(KernelResourceError, match=r"k_ok on sm_80: 204800 B of shared memory "
                                                  r"per block exceed 166912 B"):
        check_resources(ok, 128, 200 * 1024, "sm_80")
    assert check_resources(ok, 128, 200 * 1024, "sm_90") is ok


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_ptxas_resources_of_the_shipped_gemm_and_the_calibrated_estimate() -> None:
    """The task-mapping fp16 GEMM at 4096^3: ptxas allocates no spills and fits sm_80; the
    calibrated estimate (``check_registers``: tiles + REGISTER_OVERHEAD) is within the stated
    calibration error (ptxas minus estimate -22..-1 on seven of the eight calibration
    kernels) of ptxas's count."""
    f = mma_gemm(MatmulSpec(4096, 4096, 4096), "float16", None, out_dtype="float16")
    k = render_cuda(f)
    res = check_kernel(k, target_of(f))
    assert res.name == k.name and not res.spills and res.registers <= 255
    assert -22 <= res.registers - f.attr(REGISTERS) <= 5
    assert kernel_resources(k.source, "sm_80")[k.name] is res  # memoised per (source, arch)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_nvcc_errors_are_named() -> None:
    with pytest.raises(NvccError, match="nvcc -cubin -arch=sm_80 failed"):
        kernel_resources('extern "C" __global__ void k() { undefined_name; }', "sm_80")


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_a_tuning_point_that_spills_is_refused_by_ptxas() -> None:
    """One warp with a 64x80 tile: its register tiles (233) pass the IR-level check, but ptxas
    spills at 255 registers, so ``check_kernel`` (what a GPU tuning trial calls) refuses it."""
    f = mma_gemm(MatmulSpec(256, 320, 256), "float16", None, MmaKnobs(64, 80, 0, 1, 1, 2),
                 out_dtype="float16")
    assert f.attr(REGISTERS) - REGISTER_OVERHEAD <= 255
    with pytest.raises(KernelResourceError, match=r"gemm_mma_float16 on sm_80: ptxas spills "
                                                  r"registers \(\d+ B stores"):
        check_kernel(render_cuda(f), target_of(f))
