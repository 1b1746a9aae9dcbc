"""The emulator's counters (vta.gpu.profile): the bank-conflict and sector models on direct
address patterns, and on kernels - a conflicting shared layout against the padded one, a
strided global load against a coalesced one, barriers and instructions by kind."""

from __future__ import annotations

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.common import finish
from vta.gpu.profile import bank_conflicts, request_sectors, shared_wavefronts
from vta.gpu.taskmap import repeat, spatial

LANES = np.arange(32)


# ---------------------------------------------------------------------------- the models


def test_bank_model_on_classic_patterns() -> None:
    assert bank_conflicts(LANES * 4, 4) == 0               # consecutive words
    assert bank_conflicts(np.zeros(32, int), 4) == 0        # broadcast: one word
    assert bank_conflicts(LANES * 8, 4) == 1                # stride 2 words: 2-way
    assert bank_conflicts(LANES * 128, 4) == 31             # a column of a 32x32 int tile
    assert bank_conflicts(LANES * 132, 4) == 0              # ... padded by one word
    assert bank_conflicts(LANES, 1) == 0                    # bytes of 8 words
    # 16-byte accesses: 4 phases of 8 lanes, each ideal when its 8 chunks cover 32 banks
    assert tuple(x[0] for x in shared_wavefronts(LANES * 16, 16)) == (4, 4)
    assert bank_conflicts(LANES * 64, 16) == 12             # 4 words a bank in each phase
    # 8-byte accesses: 2 phases of 16 lanes
    assert bank_conflicts(LANES * 8, 8) == 0
    inactive = np.where(LANES < 8, LANES * 128, -1)
    assert tuple(x[0] for x in shared_wavefronts(inactive, 4)) == (8, 1)


def test_sector_model() -> None:
    assert request_sectors(LANES * 4, 4)[0] == 4            # 128 contiguous bytes
    assert request_sectors(LANES * 4 + 16, 4)[0] == 5       # misaligned by 16
    assert request_sectors(LANES * 128, 4)[0] == 32         # strided: a sector per lane
    assert request_sectors(LANES * 16, 16)[0] == 16
    assert request_sectors(np.where(LANES < 4, LANES, -1), 1)[0] == 1


# ---------------------------------------------------------------------------- kernels


def transpose_kernel(pad: int) -> S.PrimFunc:
    """A 32x32 int32 tile transposed through shared memory with 32 threads: rows written,
    columns read. Without padding the column read hits one bank 32 times."""
    X = S.Buffer("X", (32, 32), "int32")
    Y = S.Buffer("Y", (32, 32), "int32")
    sh = S.Buffer("T", (32, 32 + pad), "int32", "shared")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        rows = repeat(32, 1) * spatial(1, 32)     # each step: one row, a column per lane
        load = rows.emit(tid, lambda t: sh.store(X.load(t[0], t[1]), t[0], t[1]))
        store = rows.emit(tid, lambda t: Y.store(sh.load(t[1], t[0]), t[0], t[1]), name="s")
        return S.Allocate(sh, S.seq(load, S.Barrier(), store))

    return finish(f"transpose_pad{pad}", (X, Y), body, (1, 1), 32)


def test_padding_removes_the_conflicts_of_a_transpose() -> None:
    x = np.arange(1024, dtype=np.int32).reshape(32, 32)
    results = {}
    for pad in (0, 1):
        y = np.zeros_like(x)
        em = Emulator(transpose_kernel(pad), profile=True)
        em.run(x, y)
        np.testing.assert_array_equal(y, x.T)
        assert em.profile is not None
        results[pad] = em.profile
    conflicted, padded = results[0].buffers["T"], results[1].buffers["T"]
    assert conflicted.store_conflicts == 0 and conflicted.load_conflicts == 32 * 31
    assert padded.load_conflicts == 0 and padded.store_conflicts == 0
    assert results[0].bank_conflicts > 0 and results[1].bank_conflicts == 0
    p = results[1]
    assert p.barriers == 1 and p.instructions["bar.sync"] == 1
    assert p.instructions["ld.global"] == 32 and p.instructions["st.global"] == 32
    assert p.instructions["ld.shared"] == 32 and p.instructions["st.shared"] == 32


def copy_kernel(strided: bool) -> S.PrimFunc:
    """64 threads copy a 64x64 int32 matrix: consecutive lanes take consecutive columns
    (coalesced) or consecutive rows (strided by 256 bytes)."""
    X = S.Buffer("X", (64, 64), "int32")
    Y = S.Buffer("Y", (64, 64), "int32")
    tm = repeat(64, 1) * spatial(1, 64) if not strided else repeat(1, 64) * spatial(64, 1)

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        return tm.emit(tid, lambda t: Y.store(X.load(t[0], t[1]), t[0], t[1]))

    return finish(f"copy_{'strided' if strided else 'coalesced'}", (X, Y), body, (1, 1), 64)


def test_strided_global_load_touches_more_sectors_than_a_coalesced_one() -> None:
    x = np.arange(4096, dtype=np.int32).reshape(64, 64)
    counts = {}
    for strided in (False, True):
        y = np.zeros_like(x)
        em = Emulator(copy_kernel(strided), profile=True)
        em.run(x, y)
        np.testing.assert_array_equal(y, x)
        assert em.profile is not None
        counts[strided] = em.profile.buffers["X"]
    co, st = counts[False], counts[True]
    assert co.load_requests == st.load_requests == 128
    assert co.load_sectors == 128 * 4 == co.load_min_sectors        # 4 sectors a request
    assert st.load_sectors == 128 * 32                               # one per lane
    assert st.load_min_sectors == 512 and st.load_sectors > co.load_sectors
