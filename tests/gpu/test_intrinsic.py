"""GPU intrinsics (vta.gpu.intrinsic): one typed definition whose registration teaches the CUDA
renderer and the SIMT emulator a statement. The built-ins are registered that way; a user's
intrinsic defined in this file renders, compiles with nvcc and runs bit-exact in the emulator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import Expr
from vta.compiler.ir.stmt import Buffer, Stmt
from vta.errors import CudaRenderError, EmulatorError, IntrinError
from vta.gpu import cuda, emulator
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import WmmaFill, WmmaLoad, WmmaMma, WmmaStore, flat_index
from vta.gpu.emulator import Emulator
from vta.gpu.intrinsic import (
    GpuIntrinsic,
    for_pattern,
    gpu_intrinsic,
    gpu_intrinsics,
    register_gpu_intrinsic,
)
from vta.gpu.kernels.common import finish
from vta.gpu.mma import CpAsync, LdMatrix, MmaSync
from vta.gpu.wmma import WMMA_FP16, WMMA_INT8, WMMA_MMA_FP16, WMMA_MMA_INT8, wmma_reference


def test_builtins_are_registered_through_the_one_definition() -> None:
    names = {g.name for g in gpu_intrinsics()}
    assert {"wmma.fill", "wmma.load", "wmma.store", "wmma.m16n16k16.s8s8s32",
            "wmma.m16n16k16.f16f16f32", "cp.async", "cp.async.commit_group",
            "cp.async.wait_group", "ldmatrix", "mma.sync.m16n8k16.float16",
            "mma.sync.m16n8k32.int8"} <= names
    i8 = gpu_intrinsic("mma.sync.m16n8k32.int8")
    assert (i8.stmt, i8.shapes, i8.dtypes, i8.warp_wide) == (MmaSync, ((16, 8, 32),),
                                                            (("int8", "int32"),), True)
    assert WMMA_MMA_INT8.semantics is wmma_reference and WMMA_MMA_INT8.pattern is WMMA_INT8
    assert for_pattern(WMMA_FP16) is WMMA_MMA_FP16 and WMMA_MMA_FP16.shape == (16, 16, 16)
    # the tables hold each statement's registered rules, nothing hard-coded beside them
    for cls in (WmmaFill, WmmaLoad, WmmaMma, WmmaStore, CpAsync, LdMatrix, MmaSync):
        assert cls in cuda.STMT_RULES.rules and cls in emulator.STMT_RULES.rules
    assert cuda.STMT_RULES.rules[MmaSync] is MmaSync._render
    assert not any(hasattr(c, "cuda_lines") or hasattr(c, "emulate") for c in
                   (CpAsync, LdMatrix, MmaSync))


# ---------------------------------------------------------------------------- a user intrinsic


@dataclass(frozen=True, slots=True)
class Popc(Stmt):
    """``dst[index] = popcount(value)`` (CUDA's ``__popc``): a statement a user adds."""

    dst: Buffer
    index: tuple[Expr, ...]
    value: Expr

    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        return [f"{nm(self.dst, self.dst.name)}[{', '.join(r(i) for i in self.index)}] = "
                f"popc({r(self.value)})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.value)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.dst,)


def _render_popc(s: Popc, r: Any, ind: int) -> list[str]:
    return [f"{'  ' * ind}{r.name(s.dst)}[{r.expr(flat_index(s.dst, s.index))}] = "
            f"__popc((unsigned)({r.expr(s.value)}));"]


def _emulate_popc(s: Popc, em: Any) -> Callable[[Any, Any], None]:
    val, idx = em.expr(s.value), em.flat_index(s.dst, s.index)

    def run(ctx: Any, m: Any) -> None:
        v = np.broadcast_to(np.asarray(val(ctx, m)), (ctx.L,)).astype(np.int32).view(np.uint32)
        bits = np.unpackbits(v.view(np.uint8).reshape(-1, 4), axis=1).sum(axis=1)
        where = np.broadcast_to(np.asarray(idx(ctx, m), np.int64), (ctx.L,))
        sel = np.ones(ctx.L, bool) if m is None else m
        em.storage(ctx, s.dst)[where[sel]] = bits[sel].astype(np.int32)
    return run


POPC = register_gpu_intrinsic(GpuIntrinsic("test.popc", Popc, _render_popc, _emulate_popc,
                                           dtypes=(("int32", "int32"),),
                                           writes=lambda s: (s.dst,)),
                              replace_existing=True)


def _popc_kernel() -> S.PrimFunc:
    x = S.Buffer("X", (64,), "int32")
    y = S.Buffer("Y", (64,), "int32")
    return finish("popc", (x, y), lambda tid, bx, by: Popc(y, (tid,), S.BufferLoad(x, (tid,))),
                  (1, 1), 64)


def test_a_user_intrinsic_renders_compiles_and_emulates_bit_exact(nvcc_check) -> None:  # type: ignore[no-untyped-def]
    f = _popc_kernel()
    k = render_cuda(f)
    assert "__popc((unsigned)(X[" in k.source
    nvcc_check([k.source])
    xs = np.random.default_rng(0).integers(-2**31, 2**31, 64, dtype=np.int64).astype(np.int32)
    ys = np.zeros(64, np.int32)
    Emulator(f).run(xs, ys)
    want = np.array([bin(int(v) & 0xFFFFFFFF).count("1") for v in xs], np.int32)
    assert (ys == want).all()


def test_registration_errors_are_named() -> None:
    with pytest.raises(IntrinError, match=r"'test\.popc' is already registered"):
        register_gpu_intrinsic(GpuIntrinsic("test.popc", Popc, _render_popc, _emulate_popc))
    with pytest.raises(IntrinError, match=r"statement Popc already renders and emulates by "
                                          r"test\.popc's rules"):
        register_gpu_intrinsic(GpuIntrinsic("test.popc2", Popc, lambda s, r, i: [],
                                            _emulate_popc))
    with pytest.raises(IntrinError, match="stmt must be a Stmt subclass"):
        GpuIntrinsic("bad", int, _render_popc, _emulate_popc)  # type: ignore[arg-type]
    with pytest.raises(IntrinError, match="shape 0x8x16 must be positive"):
        GpuIntrinsic("bad", Popc, _render_popc, _emulate_popc, shapes=((0, 8, 16),))
    with pytest.raises(IntrinError, match="no GPU intrinsic named 'nope'"):
        gpu_intrinsic("nope")
    with pytest.raises(IntrinError, match="has 0 shapes, not one"):
        _ = POPC.shape


@dataclass(frozen=True, slots=True)
class Unregistered(Stmt):
    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        return ["unregistered()"]

    def exprs(self) -> tuple[Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()


def test_a_statement_no_intrinsic_registered_is_a_named_error() -> None:
    f = finish("lonely", (), lambda tid, bx, by: Unregistered(), (1, 1), 32)
    with pytest.raises(CudaRenderError, match="lonely: cannot render statement Unregistered"):
        render_cuda(f)
    with pytest.raises(EmulatorError, match="lonely: cannot emulate statement Unregistered"):
        Emulator(f)
