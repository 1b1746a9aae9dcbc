"""Schedule-time errors name the schedule: the split, its factor and what would fit."""

from __future__ import annotations

import pytest

import vta
import vta.testing as vt
from vta.compiler import (
    ScheduleError,
    compute,
    create_schedule,
    placeholder,
    reduce_axis,
    sum_,
    vta_gemm_intrinsic,
)
from vta.compiler.ir.intrin import TensorIntrinsic, gemm_decl

GEMM = TensorIntrinsic("t.gemm4", "vta", gemm_decl(1, 4, 4, "int8", "int8", "int32"))


def packed_mm(mb: int, nb: int, kb: int):  # type: ignore[no-untyped-def]
    x = placeholder((mb, kb, 1, 4), "int8", "x")
    w = placeholder((nb, kb, 4, 4), "int8", "w")
    ko, ki = reduce_axis(kb, "ko"), reduce_axis(4, "ki")
    c = compute((mb, nb, 1, 4), lambda m, n, i, j: sum_(
        x[m, ko, i, ki].astype("int32") * w[n, ko, j, ki].astype("int32"), [ko, ki]), "c")
    return x, w, c


def test_reduction_split_refused_at_tensorize() -> None:
    _, _, c = packed_mm(2, 2, 6)
    s = create_schedule(c)
    st = s[c]
    m, n, i, j = st.axis
    ko, ki = st.reduce_axis
    k1, k2 = st.split(ko, 4)
    st.reorder(k1, m, n, k2, i, j, ki)
    with pytest.raises(ScheduleError, match=r"tensorize with t\.gemm4 on stage c axis i: the "
                       r"split of ko by factor 4 in stage c does not divide its extent 6 \(2 tiles"
                       r" of 4 cover 8\); factors that divide 6: 1, 2, 3, 6"):
        st.tensorize(i, GEMM)


def test_split_after_tensorize_refused_and_undone() -> None:
    _, _, c = packed_mm(3, 2, 2)
    s = create_schedule(c)
    st = s[c]
    m, n, i, j = st.axis
    ko, ki = st.reduce_axis
    st.reorder(ko, m, n, i, j, ki)
    st.tensorize(i, GEMM)
    before = list(st.leaf_iter_vars)
    with pytest.raises(ScheduleError, match=r"split after tensorize with t\.gemm4 on stage c "
                       r"axis m: the split of m by factor 2 .* extent 3"):
        st.split(m, 2)  # an output stays at the root: its extents are exact
    assert st.leaf_iter_vars == before and not st.relations
    mo, mi = st.split(m, 3)  # a dividing split is fine
    assert st.leaf_iter_vars[1:3] == [mo, mi]


def test_fused_axis_in_a_region_says_so() -> None:
    _, _, c = packed_mm(2, 2, 2)
    s = create_schedule(c)
    st = s[c]
    m, n, i, j = st.axis
    ko, ki = st.reduce_axis
    st.reorder(ko, m, n, i, j, ki)
    f = st.fuse(i, j)
    with pytest.raises(ScheduleError, match=r"axis i_j_f fuses i and j \(1 x 4\), where the "
                       r"intrinsic needs separate loops \(i:1, j:4, k:4\): fuse outside the "
                       r"region or not at all"):
        st.tensorize(f, GEMM)


def test_overflowing_tile_names_its_splits() -> None:
    """On a 64-entry wgt scratchpad, a weight tile of 8 x 16 blocks is refused naming both
    splits that size it and the largest factors that fit."""
    hw = vt.small_hw(block=4, depth=64)
    x = placeholder((4, 64), "int8", "x")
    w = placeholder((32, 64), "int8", "w")
    k = reduce_axis(64, "k")
    acc = compute((4, 32), lambda i, j: sum_(x[i, k].astype("int32") * w[j, k].astype("int32"),
                                             k), "acc")
    res = compute((4, 32), lambda i, j: acc[i, j].astype("int8"), "res")
    P = vta.pack([x, w, res], hw)
    xp, wp, rp = P
    s = create_schedule(rp)
    A = s.cache_write(s["acc"].tensor, "acc")
    s["acc"].compute_inline()
    XL, WL = s.cache_read(xp, "inp", [A]), s.cache_read(wp, "wgt", [A])
    i, j, bi, bj = s[rp].axis
    jo, ji = s[rp].split(j, 8)
    s[rp].reorder(i, jo, ji, bi, bj)
    s[A].compute_at(s[rp], jo)
    a = s[A]
    ai, aj, abi, abj = a.axis
    ko, kl = a.reduce_axis
    k1, k2 = a.split(ko, 16)
    a.reorder(k1, k2, ai, aj, abi, abj, kl)
    s[XL].compute_at(a, k1)
    s[WL].compute_at(a, k1)
    a.tensorize(abi, vta_gemm_intrinsic(hw))
    with pytest.raises(ScheduleError) as e:
        vta.build(s, P, "vta", hw=hw)
    msg = str(e.value)
    assert "buffer w_wgt (wgt) needs" in msg and "(128 entries)" in msg
    assert ("dimension 0 of w_wgt (8) comes from the split of j_o by factor 8 in stage res: a "
            "factor up to 4 fits, dividing j_o's extent 8: 1, 2, 4") in msg
    assert ("dimension 1 of w_wgt (16) comes from the split of k_o by factor 16 in stage "
            "acc_acc: a factor up to 8 fits, dividing k_o's extent 16: 1, 2, 4, 8") in msg
