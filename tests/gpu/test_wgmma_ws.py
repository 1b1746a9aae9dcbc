"""The warp-specialised sm_90a GEMM (``WgmmaKnobs(producer=True, persistent=...)``): the
emulator runs its producer and consumer warpgroups as concurrent warp roles
(``vta.gpu.emulator_roles``) bit-exact against numpy (int8, with the requantizing epilogue)
and within the fp32 summation bound (fp16, bf16) on square, ragged and persistent launches;
role scheduling errors (deadlock, a role condition splitting a warp, nested roles); refused
knob combinations; nvcc for sm_90a with ptxas's registers against the ``setmaxnreg`` budget
and, where cuobjdump is installed, HGMMA/IGMMA, UTMALDG and USETMAXREG in the SASS."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.int_eval import evaluate
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import EmulatorError, GpuLoweringError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.emulator_roles import WARP_ROLES, role_branches, warp_roles
from vta.gpu.hopper import (
    CONSUMER_REGISTERS,
    PRODUCER_REGISTERS,
    MbarrierArrive,
    MbarrierInit,
    MbarrierWait,
    SetMaxNReg,
)
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.kernels.wgmma_gemm import WgmmaKnobs, wgmma_gemm
from vta.gpu.nvcc import find_nvcc
from vta.gpu.target import TARGETS

from .test_wgmma import (
    _cuobjdump,
    check_fp16_on_gpu,
    check_int8_on_gpu,
    hopper_cupy,
    run_float,
    run_int8,
)

WS = WgmmaKnobs(2, 128, 4, producer=True)


# ---------------------------------------------------------------------------- GEMMs


@pytest.mark.parametrize("m, n, k, kb", [
    (128, 128, 128, WS),                                                   # one tile
    (256, 384, 64 * 7, WgmmaKnobs(2, 128, 3, producer=True)),               # ring wraps
    (100, 72, 200, WgmmaKnobs(1, 48, 2, producer=True)),                    # ragged M, N, K
    (300, 200, 64 * 5, WgmmaKnobs(2, 64, 3, producer=True, persistent=4)),  # 3x4 tiles, 4 blocks
    (200, 330, 64 * 3, WgmmaKnobs(1, 128, 4, producer=True, persistent=5, group=2)),
])
def test_fp16(m: int, n: int, k: int, kb: WgmmaKnobs) -> None:
    run_float(m, n, k, "float16", kb)


def test_fp16_out_and_wide_tile() -> None:
    run_float(130, 256, 64 * 3, "float16", WgmmaKnobs(2, 256, 2, producer=True, persistent=1),
              out="float16")  # one block walks both tiles


def test_bf16() -> None:
    run_float(192, 160, 320, "bfloat16", WgmmaKnobs(2, 80, 2, producer=True, persistent=2))


@pytest.mark.parametrize("epi, kb", [
    (None, WgmmaKnobs(2, 96, 3, producer=True)),
    (None, WgmmaKnobs(2, 96, 3, producer=True, persistent=3, group=1)),
    (Epilogue(7, True, -100, 90), WgmmaKnobs(1, 64, 2, producer=True, persistent=7)),
    (Epilogue(14, True, -128, 127, kind="fixed_point", mult=23171),
     WgmmaKnobs(2, 112, 4, producer=True, persistent=2, group=3)),
])
def test_int8_bit_exact(epi: Epilogue | None, kb: WgmmaKnobs) -> None:
    run_int8(200, 176, 128 * 5 + 32, epi, kb)


@pytest.mark.parametrize("m, n, k, kb", [
    (256, 192, 64 * 5, WgmmaKnobs(2, 96, 3, producer=True, cluster=2)),
    (330, 176, 64 * 3 + 16, WgmmaKnobs(1, 64, 2, producer=True, persistent=2, cluster=2,
                                       group=1)),   # 6 tile rows: 3 cluster rows, ragged K
    (200, 130, 64 * 4, WgmmaKnobs(2, 64, 4, producer=True, persistent=4, cluster=2)),
])
def test_cluster_multicast_fp16(m: int, n: int, k: int, kb: WgmmaKnobs) -> None:
    run_float(m, n, k, "float16", kb)


def test_cluster_multicast_int8_and_bf16() -> None:
    # 5 tile rows of 64: the last cluster's second block computes rows past M (zero-filled A,
    # guarded stores) but still loads and multicasts its half of B
    run_int8(300, 200, 128 * 3, Epilogue(9, True, -128, 127, kind="fixed_point", mult=3000),
             WgmmaKnobs(1, 112, 3, producer=True, persistent=6, cluster=2))
    run_float(128, 96, 64 * 3, "bfloat16", WgmmaKnobs(1, 48, 2, producer=True, cluster=2))


def test_cluster_batches_hold_whole_clusters() -> None:
    """The emulator batches blocks by whole clusters (here two blocks a batch)."""
    func = wgmma_gemm(MatmulSpec(256, 128, 128), "int8", None,
                      WgmmaKnobs(1, 64, 2, producer=True, cluster=2))
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (256, 128), dtype=np.int8)
    w = rng.integers(-128, 128, (128, 128), dtype=np.int8)
    y = np.zeros((256, 128), np.int32)
    Emulator(func, max_lanes=3 * 256).run(x, w, y, np.zeros((2, 16), np.int64))
    assert np.array_equal(y, (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32))


def test_cluster_without_the_peer_release_deadlocks() -> None:
    """A consumer that releases a slot only in its own block: the peer's producer waits for
    ever (its "empty" barrier counts both blocks' consumer warps)."""
    func = wgmma_gemm(MatmulSpec(256, 64, 64 * 4), "float16", None,
                      WgmmaKnobs(1, 64, 2, producer=True, cluster=2))

    def walk(st: S.Stmt) -> S.Stmt:
        if isinstance(st, MbarrierArrive) and st.cta is not None:
            return st if isinstance(st.cta, E.IntImm) and st.cta.value == 0 else S.seq()
        if isinstance(st, S.SeqStmt):
            return S.seq(*[walk(x) for x in st.stmts])
        ch = {f.name: walk(getattr(st, f.name)) for f in dataclasses.fields(st)
              if isinstance(getattr(st, f.name), S.Stmt)}
        return dataclasses.replace(st, **ch) if ch else st
    bad = dataclasses.replace(func, body=walk(func.body))
    x = np.ones((256, 256), np.float16)
    with pytest.raises(EmulatorError, match=r"deadlock.*empty\["):
        Emulator(bad).run(x, x[:64], np.zeros((256, 64), np.float32), np.zeros((2, 16),
                                                                                np.int64))


def test_tile_order_visits_every_tile_once() -> None:
    """The grouped order is a permutation of the tiles, ``group`` tile rows at a time."""
    from vta.gpu.kernels.wgmma_gemm import _Body

    for tiles_m, tiles_n, group in [(5, 3, 2), (7, 4, 8), (4, 6, 1), (9, 2, 4)]:
        kb = WgmmaKnobs(1, 16, 2, producer=True, group=group)
        func = wgmma_gemm(MatmulSpec(64 * tiles_m, 16 * tiles_n, 64), "float16", None, kb)
        body = _Body(64 * tiles_m, 16 * tiles_n, 64, "float16", kb, *func.params[:2], None,
                     func.params[2], func.params[3], None)
        t = E.Var("t")
        tm, tn = body.tile(t)
        seen = []
        for i in range(tiles_m * tiles_n):
            env = {t: i}
            seen.append((evaluate(tm, env), evaluate(tn, env)))
        assert sorted(seen) == [(a, b) for a in range(tiles_m) for b in range(tiles_n)]
        g = min(group, tiles_m)
        assert [a for a, _ in seen[:g * tiles_n]] == [a for _ in range(tiles_n) for a in range(g)]


# ---------------------------------------------------------------------------- warp roles


def _roles_kernel(producer: Callable[[S.Buffer, E.Var], S.Stmt],
                  consumer: Callable[[S.Buffer, E.Var], S.Stmt],
                  split: Callable[[E.Var], E.Expr] = lambda tid: tid < 32) -> S.PrimFunc:
    """Two warps: ``producer`` on warp 0 (by default), ``consumer`` on warp 1, sharing the
    mbarrier array ``bar`` (2 barriers, counts 1 and 32) and writing ``out``."""
    bar = S.Buffer("bar", (2,), "int64", "shared")
    out = S.Buffer("out", (64,), "int32")
    z = E.IntImm(0)

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        return alloc([bar], S.seq(
            S.IfThenElse(tid.eq(0), S.seq(MbarrierInit(bar, z, 1), MbarrierInit(bar, E.IntImm(1),
                                                                                32))),
            S.Barrier(),
            warp_roles([(split(tid), producer(bar, tid)), (None, consumer(bar, tid))])))
    return finish("roles", (out,), body, (1, 1), 64)


def test_roles_hand_over_at_waits() -> None:
    """Warp 1 waits for warp 0's arrival, which comes after warp 0 waits for warp 1's: no
    single program order runs it, the scheduler does."""
    z, one = E.IntImm(0), E.IntImm(1)
    out = S.Buffer("out", (64,), "int32")

    def producer(bar: S.Buffer, tid: E.Var) -> S.Stmt:
        return S.seq(MbarrierWait(bar, one, z), S.IfThenElse(tid.eq(0), MbarrierArrive(bar, z)))

    def consumer(bar: S.Buffer, tid: E.Var) -> S.Stmt:
        return S.seq(MbarrierArrive(bar, one), MbarrierWait(bar, z, z))
    func = _roles_kernel(producer, consumer)
    func = dataclasses.replace(func, params=(out,))
    y = np.zeros(64, np.int32)
    Emulator(func).run(y)  # completes: each wait was satisfied by the other role
    with pytest.raises(EmulatorError, match="never completes in program order"):
        # the same two bodies in one instruction stream deadlock
        flat = _drop_roles(func)
        Emulator(flat).run(y)


def _drop_roles(func: S.PrimFunc) -> S.PrimFunc:
    def walk(s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.AttrStmt) and s.key is WARP_ROLES:
            return s.body
        if isinstance(s, S.SeqStmt):
            return S.seq(*[walk(x) for x in s.stmts])
        ch = {f.name: walk(getattr(s, f.name)) for f in dataclasses.fields(s)
              if isinstance(getattr(s, f.name), S.Stmt)}
        return dataclasses.replace(s, **ch) if ch else s
    return dataclasses.replace(func, body=walk(func.body))


def test_roles_deadlock_names_every_wait() -> None:
    z, one = E.IntImm(0), E.IntImm(1)
    func = _roles_kernel(lambda bar, tid: MbarrierWait(bar, one, z),
                         lambda bar, tid: MbarrierWait(bar, z, z))
    with pytest.raises(EmulatorError, match=r"deadlock.*role 0 waits on bar\[1\] parity 0; "
                                            r"role 1 waits on bar\[0\] parity 0"):
        Emulator(func).run(np.zeros(64, np.int32))


def test_role_condition_must_not_split_a_warp() -> None:
    func = _roles_kernel(lambda bar, tid: S.seq(), lambda bar, tid: S.seq(),
                         split=lambda tid: tid < 16)
    with pytest.raises(EmulatorError, match="differs between the lanes of a warp"):
        Emulator(func).run(np.zeros(64, np.int32))


def test_nested_roles_are_refused() -> None:
    inner = warp_roles([(E.IntImm(1).eq(1), S.seq()), (None, S.seq())])
    func = _roles_kernel(lambda bar, tid: inner, lambda bar, tid: S.seq())
    with pytest.raises(EmulatorError, match="nested"):
        Emulator(func).run(np.zeros(64, np.int32))


def test_role_errors_propagate() -> None:
    """An error inside a role (here: an arrival past the count) ends the run with it."""
    z = E.IntImm(0)
    func = _roles_kernel(lambda bar, tid: S.seq(MbarrierArrive(bar, z), MbarrierArrive(bar, z)),
                         lambda bar, tid: S.seq())
    with pytest.raises(EmulatorError, match="more arrivals than the count"):
        Emulator(func).run(np.zeros(64, np.int32))


def test_warp_roles_shape() -> None:
    a, b = E.Var("a"), E.Var("b")
    st = warp_roles([(a.eq(0), S.seq()), (b.eq(0), S.seq()), (None, S.seq())])
    assert isinstance(st, S.AttrStmt) and st.value == 3
    assert [c is None for c, _ in role_branches(st)] == [False, False, True]
    with pytest.raises(EmulatorError, match="only the last without a condition"):
        warp_roles([(None, S.seq()), (a.eq(0), S.seq())])


def test_setmaxnreg_needs_whole_warpgroups_and_a_valid_count() -> None:
    with pytest.raises(GpuLoweringError, match=r"multiple of 8 in 24 \.\. 256"):
        SetMaxNReg(233, True)
    out = S.Buffer("out", (32,), "int32")
    func = finish("nreg", (out,), lambda tid, bx, by: SetMaxNReg(40, False), (1, 1), 32)
    with pytest.raises(EmulatorError, match="whole warpgroups"):
        Emulator(func).run(np.zeros(32, np.int32))


# ---------------------------------------------------------------------------- knobs


@pytest.mark.parametrize("kb, match", [
    (WgmmaKnobs(2, 128, 4, persistent=132), "persistent needs producer=True"),
    (WgmmaKnobs(2, 128, 4, producer=True, persistent=-1), "persistent=-1"),
    (WgmmaKnobs(2, 128, 4, producer=True, group=0), "group=0"),
    (WgmmaKnobs(5, 64, 2, producer=True), "warpgroups=5"),  # a TMA box of 320 rows
    (WgmmaKnobs(4, 256, 2, producer=True), "112 registers a thread, too few for 128"),
    (WgmmaKnobs(3, 256, 2, producer=True), "152 registers a thread, too few"),
    (WgmmaKnobs(2, 256, 5, producer=True), "shared memory"),
    (WgmmaKnobs(2, 128, 4, cluster=2), "cluster=2 needs producer=True"),
    (WgmmaKnobs(2, 128, 4, producer=True, cluster=4), "cluster=4 must be 1 or 2"),
    (WgmmaKnobs(2, 128, 4, producer=True, persistent=1, cluster=2), "cannot hold a cluster"),
])
def test_bad_knobs_are_refused(kb: WgmmaKnobs, match: str) -> None:
    with pytest.raises(GpuLoweringError, match=match):
        wgmma_gemm(MatmulSpec(256, 256, 256), "float16", None, kb)


def test_register_budget() -> None:
    """Producer and consumers together fit the SM's register file (CUTLASS's 40 / 232)."""
    sm = TARGETS["sm_90a"]
    for wgs in (1, 2, 3):
        kb = WgmmaKnobs(wgs, 64, 2, producer=True)
        assert kb.consumer_registers % 8 == 0
        assert 128 * PRODUCER_REGISTERS + 128 * wgs * kb.consumer_registers \
            <= sm.registers_per_sm
    assert WgmmaKnobs(2, 256, 4, producer=True).consumer_registers == CONSUMER_REGISTERS


# ---------------------------------------------------------------------------- nvcc, SASS


VARIANTS: dict[str, Callable[[], S.PrimFunc]] = {
    "fp16_256_persistent": lambda: wgmma_gemm(
        MatmulSpec(4096, 4096, 4096), "float16", None,
        WgmmaKnobs(2, 256, 4, producer=True, persistent=132), "float16"),
    "fp16_128_s7": lambda: wgmma_gemm(MatmulSpec(4096, 4096, 4096), "float16", None,
                                      WgmmaKnobs(2, 128, 7, producer=True)),
    "bf16_ragged": lambda: wgmma_gemm(MatmulSpec(1000, 1000, 1000), "bfloat16", None,
                                      WgmmaKnobs(2, 256, 4, producer=True, persistent=132)),
    "int8_requant": lambda: wgmma_gemm(MatmulSpec(4096, 4096, 4096), "int8",
                                       Epilogue(9, True, -128, 127, kind="fixed_point",
                                                mult=3000),
                                       WgmmaKnobs(2, 256, 4, producer=True, persistent=132)),
    "fp16_cluster2": lambda: wgmma_gemm(
        MatmulSpec(4096, 4096, 4096), "float16", None,
        WgmmaKnobs(2, 256, 4, producer=True, persistent=128, cluster=2), "float16"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_compiles_for_sm90a_within_the_register_budget(name: str) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed: the sm_90a kernels cannot be compiled")
    k = render_cuda(VARIANTS[name]())
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in k.source
    with tempfile.TemporaryDirectory(prefix="vta_wgmma_ws_") as tmp:
        cu, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
        cu.write_text(k.source)
        proc = subprocess.run([nvcc, "-cubin", "-gencode", "arch=compute_90a,code=sm_90a",
                               "-Xptxas", "-v", "-std=c++17", "-O3", "-o", str(cubin), str(cu)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        log = proc.stderr
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
        # ptxas's warnings (a serialised wgmma) only: the 1-D grid leaves blockIdx.y's
        # variable unused, which the front end mentions
        warned = [ln for ln in log.splitlines() if "ptxas" in ln and "warning" in ln.lower()]
        assert not warned, f"ptxas warned:\n{log}"
        regs = int(re.search(r"Used (\d+) registers", log).group(1))  # type: ignore[union-attr]
        # the launch's allocation fits the register file (one block an SM), so setmaxnreg can
        # move the producer's registers to the consumers
        assert regs * k.block[0] <= TARGETS["sm_90a"].registers_per_sm
        tool = _cuobjdump()
        if tool is None:
            pytest.skip("cuobjdump/nvdisasm not installed (pip: nvidia-cuda-cuobjdump, "
                        "nvidia-cuda-nvdisasm): SASS not inspected")
        env = {"PATH": f"{Path(tool).parent}:/usr/bin:/bin"}
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                              env=env, check=True).stdout
    mma = "IGMMA" if name.startswith("int8") else "HGMMA"
    ops = [mma, "UTMALDG.2D", "SYNCS.PHASECHK", "USETMAXREG"]
    if "cluster" in name:  # multicast copies, the cluster barrier, remote arrivals
        ops += ["UTMALDG.2D.MULTICAST", "UCGABAR_ARV", "UCGABAR_WAIT"]
        assert "__cluster_dims__(2, 1, 1)" in k.source
    for op in ops:
        assert op in sass, f"{name}: no {op} in the SASS"


# ---------------------------------------------------------------------------- on a Hopper GPU


@pytest.mark.gpu
@pytest.mark.parametrize("kb", [
    WgmmaKnobs(2, 256, 4, producer=True, persistent=7),
    WgmmaKnobs(2, 128, 6, producer=True, persistent=8, group=2, cluster=2),
    WgmmaKnobs(1, 64, 3, producer=True, cluster=2),
])
def test_on_a_hopper_gpu(kb: WgmmaKnobs) -> None:
    """On a real sm_90 GPU, each knob combination the bench ships (persistent, clusters of
    two with multicast): the int8 kernel with the requantizing epilogue bit-exact against
    numpy on a ragged shape, and fp16 -> fp16 within the fp32-accumulation bound."""
    cp = hopper_cupy()
    rng = np.random.default_rng(5)
    epi = Epilogue(9, True, -128, 127, kind="fixed_point", mult=3000)
    check_int8_on_gpu(cp, wgmma_gemm(MatmulSpec(1000, 1100, 1056), "int8", epi, kb, "int8"),
                      epi, rng, str(kb))
    check_fp16_on_gpu(cp, wgmma_gemm(MatmulSpec(520, 390, 320), "float16", None, kb,
                                     "float16"), rng, str(kb))
