"""Hand-written example programs (built with ``ProgramBuilder``), used by tests and benchmarks.

``pipelined`` lays out a tiled loop the way VTA's runtime does: per tile, a group of load-unit
instructions, a group of compute instructions and a group of stores, with ``nbuf`` sets of
on-chip buffers and dependency tokens making the overlap safe (RAW load->compute and
compute->store, WAR compute->load and store->compute). With ``nbuf=1`` the tiles run one after
another; with ``nbuf=2`` tile t+1 loads while tile t computes and tile t-1 stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from vta.config import HwConfig
from vta.isa import (
    Deps,
    Finish,
    Gemm,
    Instruction,
    Load,
    MemType,
    Program,
    ProgramBuilder,
    Store,
    Uop,
)
from vta.isa.insn import DEP_FLAGS

__all__ = ["with_deps", "pipelined", "matmul_program", "pack_matmul", "unpack_matmul",
           "matmul_expected"]


def with_deps(insn: Instruction, **flags: bool) -> Instruction:
    """``insn`` with the given dependency flags set (or-ed into the existing ones)."""
    d = insn.deps
    merged = {f: getattr(d, f) or flags.get(f, False)
              for f in DEP_FLAGS}
    return replace(cast(Any, insn), deps=Deps(**merged))  # type: ignore[no-any-return]


def _mark(group: list[Instruction], first: dict[str, bool], last: dict[str, bool]) -> None:
    group[0] = with_deps(group[0], **first)
    group[-1] = with_deps(group[-1], **last)


def pipelined(b: ProgramBuilder, prologue: Sequence[Instruction],
              tiles: Sequence[tuple[list[Instruction], list[Instruction], list[Instruction]]],
              nbuf: int) -> Program:
    """Emit ``prologue`` (compute-unit instructions, e.g. LOAD.UOP), then every tile's
    (loads, computes, stores) with tokens for ``nbuf`` buffer sets, then FINISH."""
    b.extend(prologue)
    n = len(tiles)
    for t, (loads, computes, stores) in enumerate(tiles):
        loads, computes, stores = list(loads), list(computes), list(stores)
        _mark(loads, {"pop_next": t >= nbuf}, {"push_next": True})
        _mark(computes, {"pop_prev": True, "pop_next": t >= nbuf},
              {"push_prev": t + nbuf < n, "push_next": True})
        _mark(stores, {"pop_prev": True}, {"push_prev": t + nbuf < n or t == n - 1})
        b.extend(loads + computes + stores)
    b.emit(Finish(Deps(pop_next=n > 0)))
    return b.build()


def matmul_program(hw: HwConfig, m: int, n: int, k: int, tile_m: int, nbuf: int) -> Program:
    """``C[m, n] = A[m, k] . W[n, k]^T`` tiled over rows of ``tile_m``, with ``nbuf`` buffers.

    Layouts (entries): A ``(m/batch, k/block_in)``, W ``(n/block_out, k/block_in)``, C
    ``(m/batch, n/block_out)``. All of W is loaded once, with the first tile.
    """
    g = hw.gemm
    if m % tile_m or tile_m % g.batch or n % g.block_out or k % g.block_in:
        raise ValueError("matmul_program: shapes must divide into tiles and GEMM blocks")
    rows, nb, kb = tile_m // g.batch, n // g.block_out, k // g.block_in
    b = ProgramBuilder(hw)
    a_al, w_al = b.alloc("A", "inp", m // g.batch * kb), b.alloc("W", "wgt", nb * kb)
    c_al, u_al = b.alloc("C", "out", m // g.batch * nb), b.alloc("U", "uop", 0)
    uop_base = []
    for buf in range(nbuf):
        first = b.add_uops("U", [Uop(buf * rows * nb, 0, 0)])  # reset
        # uops over output blocks; loops: k blocks (out), rows (in). The reduction is the
        # outer loop so that consecutive ops write different acc entries (no RAW hazard).
        b.add_uops("U", [Uop(buf * rows * nb + j, buf * rows * kb, j * kb) for j in range(nb)])
        uop_base.append(first)
    n_uops = uop_base[-1] + 1 + nb
    prologue = [Load(MemType.UOP, 0, u_al.base, 1, n_uops, n_uops)]
    tiles = []
    for t in range(m // tile_m):
        buf, u = t % nbuf, uop_base[t % nbuf]
        loads: list[Instruction] = []
        if t == 0:
            loads.append(Load(MemType.WGT, 0, w_al.base, 1, nb * kb, nb * kb))
        loads.append(Load(MemType.INP, buf * rows * kb, a_al.base + t * rows * kb, rows, kb, kb))
        computes: list[Instruction] = [
            Gemm(True, u, u + 1, rows, nb, nb, 1, 0, 0, 0, 0),
            Gemm(False, u + 1, u + 1 + nb, kb, rows, 0, nb, 1, kb, 1, 0),
        ]
        stores: list[Instruction] = [
            Store(MemType.OUT, buf * rows * nb, c_al.base + t * rows * nb, 1, rows * nb, rows * nb)]
        tiles.append((loads, computes, stores))
    return pipelined(b, prologue, tiles, nbuf)


def pack_matmul(hw: HwConfig, a: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Inputs for ``matmul_program`` from row-major ``a (m, k)`` and ``w (n, k)``."""
    g = hw.gemm
    m, k = a.shape
    n = w.shape[0]
    pa = a.reshape(m // g.batch, g.batch, k // g.block_in, g.block_in).transpose(0, 2, 1, 3)
    pw = w.reshape(n // g.block_out, g.block_out, k // g.block_in, g.block_in).transpose(0, 2, 1, 3)
    return {"A": pa.reshape(-1, g.batch, g.block_in), "W": pw.reshape(-1, g.block_out, g.block_in)}


def unpack_matmul(hw: HwConfig, c: np.ndarray, m: int, n: int) -> np.ndarray:
    """Row-major ``(m, n)`` from the packed out allocation of ``matmul_program``."""
    g = hw.gemm
    return c.reshape(m // g.batch, n // g.block_out, g.batch, g.block_out) \
        .transpose(0, 2, 1, 3).reshape(m, n)


def matmul_expected(hw: HwConfig, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy's answer: int32-wrapped sums of products, narrowed to the out dtype."""
    acc = (a.astype(np.int64) @ w.astype(np.int64).T).astype(hw.gemm.acc_dtype)
    return acc.astype(hw.gemm.out_dtype)
