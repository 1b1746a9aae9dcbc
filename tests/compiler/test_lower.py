"""Lowering: the loop nests ``lower`` emits follow docs/ir.md, and running them with the
interpreter gives numpy's bits for tiled matmuls, packed conv2d (pad, stride, epilogue, VTA-style
scratchpad staging and tensorize) and GPU-style shared/local staging with thread binding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.intrin import TensorIntrinsic, gemm_decl
from vta.compiler.ir.lower import _Lowering, lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.structural import assert_structural_equal
from vta.compiler.ir.tensor import Tensor, TensorRead, compute, placeholder, reduce_axis, sum_
from vta.compiler.ir.verify import verify
from vta.errors import LowerError, RegionError, ScheduleError

RNG = np.random.default_rng(7)


def _rand(t: Tensor) -> np.ndarray:
    if t.dtype.startswith("float"):
        return RNG.standard_normal(t.shape).astype(t.dtype)
    info = np.iinfo(t.dtype)
    return RNG.integers(info.min, info.max + 1, t.shape).astype(t.dtype)


def _walk_stmts(s: S.Stmt):
    yield s
    for c in E.children(s):
        if isinstance(c, S.Stmt):
            yield from _walk_stmts(c)


def matmul(m: int, n: int, k: int, dtype: str = "int8", acc: str = "int32"):
    A = placeholder((m, k), dtype, "A")
    B = placeholder((n, k), dtype, "B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r].astype(acc) * B[j, r].astype(acc), r), "C")
    return A, B, C


def vta_matmul_schedule(A, B, C, ti: int, tj: int, tk: int):
    """(a): tiled, cache_read into inp/wgt, cache_write into acc, compute_at."""
    s = create_schedule(C)
    CL = s.cache_write(C, "acc")
    AL = s.cache_read(A, "inp", [CL])
    BL = s.cache_read(B, "wgt", [CL])
    _io, jo, _ii, _ji = s[C].tile(*s[C].axis, ti, tj)
    s[CL].compute_at(s[C], jo)
    ko, ki = s[CL].split(s[CL].reduce_axis[0], tk)
    s[CL].reorder(ko, *s[CL].axis, ki)
    s[AL].compute_at(s[CL], ko)
    s[BL].compute_at(s[CL], ko)
    return s


def run(func: S.PrimFunc, tensors: list[Tensor], inputs: dict[str, np.ndarray]) -> dict:
    arrays = {}
    for t in tensors:
        arrays[t.name] = inputs[t.name] if t.name in inputs else np.zeros(t.shape, t.dtype)
    run_func(verify(func), arrays)
    return arrays


# --------------------------------------------------------------------------- matmul


def test_matmul_printed_ir() -> None:
    A, B, C = matmul(32, 32, 32)
    f = lower(vta_matmul_schedule(A, B, C, 16, 16, 8), [A, B, C], "gemm")
    text = str(f)
    expected = [
        "def gemm(A: int8[32, 32], B: int8[32, 32], C: int32[32, 32]):",
        "  # attr stage = C",
        "  for i_o in range(2):",
        "    for j_o in range(2):",
        "      C_acc = alloc((16, 16), int32, scope=acc)",
        "      # attr stage = C_acc",
        "          C_acc[i, j] = 0",
        "      for k_o in range(4):",
        "        A_inp = alloc((16, 8), int8, scope=inp)",
        "        B_wgt = alloc((16, 8), int8, scope=wgt)",
        "            A_inp[ax0, ax1] = A[i_o * 16 + ax0, k_o * 8 + ax1]",
        "            B_wgt[ax0_1, ax1_1] = B[j_o * 16 + ax0_1, k_o * 8 + ax1_1]",
        "              C_acc[i_1, j_1] = C_acc[i_1, j_1] + int32(A_inp[i_1, k_i]) * "
        "int32(B_wgt[j_1, k_i])",
        "          C[i_o * 16 + i_i, j_o * 16 + j_i] = C_acc[i_i, j_i]",
    ]
    lines = text.splitlines()
    pos = [lines.index(e) for e in expected]  # each line present...
    assert pos == sorted(pos)  # ...in this order


def test_matmul_default_schedule() -> None:
    A, B, C = matmul(8, 8, 8)
    f = lower(create_schedule(C), [A, B, C])
    a, b = _rand(A), _rand(B)
    out = run(f, [A, B, C], {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b.astype(np.int32).T)


def _tile(data: st.DataObject, extent: int) -> int:
    """A tile factor giving at most 6 tiles (keeps the interpreted outer loops short)."""
    return data.draw(st.integers(-(-extent // 6), extent + 2))


@settings(max_examples=25)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40), data=st.data())
def test_matmul_tilings_match_numpy(m: int, n: int, k: int, data: st.DataObject) -> None:
    ti, tj, tk = _tile(data, m), _tile(data, n), _tile(data, k)
    A, B, C = matmul(m, n, k)
    f = lower(vta_matmul_schedule(A, B, C, ti, tj, tk), [A, B, C])
    a, b = _rand(A), _rand(B)
    out = run(f, [A, B, C], {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b.astype(np.int32).T)


def test_wrapping_accumulation_is_exact() -> None:
    A, B, C = matmul(4, 4, 64, "int32", "int32")
    f = lower(vta_matmul_schedule(A, B, C, 2, 2, 16), [A, B, C])
    a = np.full((4, 64), 2 ** 20, np.int32)
    b = np.full((4, 64), 2 ** 12, np.int32)
    out = run(f, [A, B, C], {"A": a, "B": b})
    want = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)  # wraps mod 2^32
    assert np.array_equal(out["C"], want)


def test_fuse_unroll_vthread_lower_and_run() -> None:
    A, B, C = matmul(12, 10, 6)
    s = create_schedule(C)
    i, j = s[C].axis
    f = s[C].fuse(i, j)
    fo, fi = s[C].split(f, 7)
    _vt, _ = s[C].virtual_thread(fo, 2)
    s[C].unroll(fi)
    func = lower(s, [A, B, C])
    kinds = [x.kind for x in _walk_stmts(func.body) if isinstance(x, S.For)]
    assert S.ForKind.VTHREAD in kinds and S.ForKind.UNROLLED in kinds
    a, b = _rand(A), _rand(B)
    out = run(func, [A, B, C], {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b.astype(np.int32).T)


def test_split_guard_is_emitted_only_when_needed() -> None:
    A, B, C = matmul(10, 8, 4)
    s = create_schedule(C)
    s[C].split(s[C].axis[0], 4)  # 4 does not divide 10
    s[C].split(s[C].axis[1], 4)  # divides 8
    f = lower(s, [A, B, C])
    ifs = [x for x in _walk_stmts(f.body) if isinstance(x, S.IfThenElse)]
    assert len(ifs) == 2  # the init store and the update store, each guarded once
    assert all(str(x.cond).endswith("< 10") for x in ifs)


# --------------------------------------------------------------------------- packed conv2d


def packed_conv(n, ic, oc, h, w, b, kh, stride, pad, shift=3):
    """VTA's packed conv2d: NCHWnc data and OIHWoi kernel, padding as a compute stage,
    int32 accumulation and a shift / clip / cast epilogue."""
    hp, wp = h + 2 * pad, w + 2 * pad
    oh, ow = (hp - kh) // stride + 1, (wp - kh) // stride + 1
    data = placeholder((n, ic, h, w, 1, b), "int8", "data")
    kern = placeholder((oc, ic, kh, kh, b, b), "int8", "kernel")
    dpad = compute((n, ic, hp, wp, 1, b), lambda i, c, y, x, bn, bc: E.select(
        (y >= pad) & (y < h + pad) & (x >= pad) & (x < w + pad),
        data[i, c, y - pad, x - pad, bn, bc], 0), "data_pad")
    ric, rkh, rkw, rb = (reduce_axis(ic, "ic"), reduce_axis(kh, "kh"), reduce_axis(kh, "kw"),
                         reduce_axis(b, "bic"))
    res = compute((n, oc, oh, ow, 1, b), lambda i, o, y, x, bn, bo: sum_(
        dpad[i, ric, y * stride + rkh, x * stride + rkw, bn, rb].astype("int32")
        * kern[o, ric, rkh, rkw, bo, rb].astype("int32"), [ric, rkh, rkw, rb]), "res")
    shr = compute(res.shape, lambda i, o, y, x, bn, bo: res[i, o, y, x, bn, bo] >> shift,
                  "res_shr")
    clip = compute(res.shape, lambda i, o, y, x, bn, bo: E.min_(
        E.max_(shr[i, o, y, x, bn, bo], -128), 127), "res_clip")
    out = compute(res.shape, lambda i, o, y, x, bn, bo: clip[i, o, y, x, bn, bo].astype("int8"),
                  "out")
    return data, kern, dpad, res, (shr, clip), out


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int, shift: int = 3):
    n, _ic, h, wd, _, b = x.shape
    oc, _, kh, kw, _, _ = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    acc = np.zeros((n, oc, oh, ow, 1, b), np.int64)
    for r in range(kh):
        for q in range(kw):
            win = xp[:, :, r:r + stride * (oh - 1) + 1:stride, q:q + stride * (ow - 1) + 1:stride]
            acc += np.einsum("ncyxzb,ocdb->noyxzd", win, w[:, :, r, q].astype(np.int64))
    return np.clip(acc.astype(np.int32) >> shift, -128, 127).astype(np.int8)


def vta_conv_schedule(tensors, t_oc: int, t_oh: int, t_ow: int, t_ic: int,
                      intrin: TensorIntrinsic | None = None):
    """(b): pad inlined into the inp copy, kernel into wgt, conv into acc with the epilogue at
    the same tile loop, tiles over (oc, oh, ow) and an outer ic loop; GEMM region tensorized."""
    _data, kern, dpad, res, epilogue, out = tensors
    s = create_schedule(out)
    racc = s.cache_write(res, "acc")
    s[res].compute_inline()
    dl = s.cache_read(dpad, "inp", [racc])
    kl = s.cache_read(kern, "wgt", [racc])
    s[dpad].compute_inline()
    n, oc, oh, ow, bn, bc = s[out].axis
    oco, oci = s[out].split(oc, t_oc)
    oho, ohi = s[out].split(oh, t_oh)
    owo, owi = s[out].split(ow, t_ow)
    s[out].reorder(n, oco, oho, owo, oci, ohi, owi, bn, bc)
    s[racc].compute_at(s[out], owo)
    for t in epilogue:
        s[t].set_scope("acc")
        s[t].compute_at(s[out], owo)
    a = s[racc]
    ric, rkh, rkw, rb = a.reduce_axis
    ico, ici = a.split(ric, t_ic)
    an, aoc, aoh, aow, abn, abc = a.axis
    a.reorder(ico, rkh, rkw, an, aoc, aoh, aow, ici, abn, abc, rb)
    s[dl].compute_at(a, ico)
    s[kl].compute_at(a, ico)
    if intrin is not None:
        a.tensorize(abn, intrin)
    return s


def _gemm(b: int) -> TensorIntrinsic:
    return TensorIntrinsic(f"test.gemm{b}", "vta", gemm_decl(1, b, b, "int8", "int8", "int32"))


def _divide(tensors, t_oc: int, t_oh: int, t_ow: int, t_ic: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether the tiles cover the packed conv exactly (a tensorized region cannot be guarded
    against a partial tile, so ``lower`` refuses to tensorize otherwise)."""
    data, _kern, _pad, res, *_ = tensors
    _n, oc, oh, ow, _, _ = res.shape
    ic = data.shape[1]
    return all(e % t == 0 for e, t in ((oc, t_oc), (ic, t_ic), (oh, t_oh), (ow, t_ow)))


@pytest.mark.parametrize("kh,stride,pad", [(1, 1, 0), (3, 1, 1), (3, 2, 1), (7, 2, 3)])
def test_packed_conv2d_matches_numpy(kh: int, stride: int, pad: int) -> None:
    tensors = packed_conv(1, 2, 4, 9, 9, 4, kh, stride, pad)
    data, kern, *_, out = tensors
    oh = tensors[3].shape[2]
    s = vta_conv_schedule(tensors, 2, next(t for t in (3, 2, 1) if oh % t == 0),
                          3 if oh % 3 == 0 else 1, 1, _gemm(4))
    f = lower(s, [data, kern, out])
    x, w = _rand(data), _rand(kern)
    got = run(f, [data, kern, out], {"data": x, "kernel": w})["out"]
    assert np.array_equal(got, conv_reference(x, w, stride, pad))


@settings(max_examples=20)
@given(kh=st.sampled_from([1, 3, 7]), stride=st.sampled_from([1, 2]), pad=st.integers(0, 3),
       h=st.integers(1, 10), ic=st.integers(1, 3), oc=st.integers(1, 3),
       b=st.sampled_from([2, 4]), data=st.data())
def test_packed_conv2d_tilings(kh, stride, pad, h, ic, oc, b, data) -> None:
    h = max(h, kh - 2 * pad)
    tensors = packed_conv(1, ic, oc, h, h, b, kh, stride, pad)
    oh = tensors[3].shape[2]
    t = [data.draw(st.integers(1, x)) for x in (oc, ic)]
    t[1:1] = [_tile(data, oh), _tile(data, oh)]
    s = vta_conv_schedule(tensors, *t, intrin=_gemm(b) if _divide(tensors, *t) else None)
    dt, kern, *_, out = tensors
    f = lower(s, [dt, kern, out])
    x, w = _rand(dt), _rand(kern)
    got = run(f, [dt, kern, out], {"data": x, "kernel": w})["out"]
    assert np.array_equal(got, conv_reference(x, w, stride, pad))


def test_tensorize_refuses_partial_tiles_naming_the_split() -> None:
    """A tensorized region is one instruction per tile: a tile that does not divide its axis
    (here the output's 3 channel blocks in tiles of 2, a split outside the region) is refused
    when lowering, naming the split and the factors that divide."""
    tensors = packed_conv(1, 2, 3, 9, 9, 4, 3, 1, 1)
    data, kern, *_, out = tensors
    s = vta_conv_schedule(tensors, 2, 1, 1, 1, _gemm(4))
    with pytest.raises(ScheduleError, match=r"tensorize with test\.gemm4 on stage res_acc .*"
                       r"computed inside stage out's tiles, and the split of o by factor 2 in "
                       r"stage out does not divide its extent 3 \(2 tiles of 2 cover 4\); "
                       r"factors that divide 3: 1, 3"):
        lower(s, [data, kern, out])
    # the reduction's split is known at schedule time: tensorize itself refuses it
    tensors = packed_conv(1, 3, 2, 6, 6, 4, 3, 1, 1)
    with pytest.raises(ScheduleError, match=r"the split of ic by factor 2 in stage res_acc does "
                       r"not divide its extent 3 .*factors that divide 3: 1, 3"):
        vta_conv_schedule(tensors, 1, 1, 1, 2, _gemm(4))


def test_conv_copy_stages_follow_the_contract() -> None:
    tensors = packed_conv(1, 2, 2, 8, 8, 4, 3, 2, 1)
    data, kern, *_, out = tensors
    f = lower(vta_conv_schedule(tensors, 1, 2, 2, 1, _gemm(4)), [data, kern, out])
    stages = {x.value: x.body for x in _walk_stmts(f.body)
              if isinstance(x, S.AttrStmt) and x.key is S.STAGE}
    assert set(stages) == {"out", "res_acc", "data_pad_inp", "kernel_wgt", "res_shr", "res_clip"}
    allocs = {x.buffer.name: x.buffer for x in _walk_stmts(f.body) if isinstance(x, S.Allocate)}
    # a 2x2 output tile at stride 2 with a 3x3 window reads a 5x5 halo of one channel block
    assert allocs["data_pad_inp"].shape == (1, 1, 5, 5, 1, 4)
    assert allocs["data_pad_inp"].scope == "inp"
    assert allocs["kernel_wgt"].shape == (1, 1, 3, 3, 4, 4)
    assert allocs["res_acc"].shape == allocs["res_shr"].shape == (1, 1, 2, 2, 1, 4)
    copy = [x for x in _walk_stmts(stages["data_pad_inp"]) if isinstance(x, S.BufferStore)]
    assert len(copy) == 1 and isinstance(copy[0].value, E.Select)
    assert isinstance(copy[0].value.t, S.BufferLoad) and copy[0].value.t.buffer.name == "data"
    tens = [x for x in _walk_stmts(f.body) if isinstance(x, S.AttrStmt) and x.key is S.TENSORIZE]
    assert len(tens) == 1 and isinstance(tens[0].body, S.For)


# --------------------------------------------------------------------------- GPU style


def test_gpu_shared_local_bind() -> None:
    """(c): blocks and threads bound, cooperative copies into shared, accumulation in local."""
    m, n, k = 32, 24, 20
    A = placeholder((m, k), "int8", "A")
    B = placeholder((k, n), "int8", "B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r].astype("int32") * B[r, j].astype("int32"), r),
                "C")
    s = create_schedule(C)
    CL = s.cache_write(C, "local")
    AS = s.cache_read(A, "shared", [CL])
    BS = s.cache_read(B, "shared", [CL])
    by, bx, ii, ji = s[C].tile(*s[C].axis, 16, 8)
    ty, yi = s[C].split(ii, nparts=4)
    tx, xi = s[C].split(ji, nparts=4)
    s[C].reorder(by, bx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                    (tx, "threadIdx.x")):
        s[C].bind(ax, tag)
    s[CL].compute_at(s[C], tx)
    ko, ki = s[CL].split(s[CL].reduce_axis[0], 8)
    s[CL].reorder(ko, ki, *s[CL].axis)
    for sh in (AS, BS):
        s[sh].compute_at(s[CL], ko)
        _fo, fi = s[sh].split(s[sh].fuse(*s[sh].axis), 16)
        t1, t2 = s[sh].split(fi, 4)
        s[sh].bind(t1, "threadIdx.y")
        s[sh].bind(t2, "threadIdx.x")
    f = lower(s, [A, B, C])
    allocs = {x.buffer.name: x.buffer for x in _walk_stmts(f.body) if isinstance(x, S.Allocate)}
    # shared tiles cover the whole block (thread loops relaxed); local is per thread
    assert allocs["A_shared"].shape == (16, 8) and allocs["A_shared"].scope == "shared"
    assert allocs["B_shared"].shape == (8, 8)
    assert allocs["C_local"].shape == (4, 2) and allocs["C_local"].scope == "local"
    threads = {x.thread for x in _walk_stmts(f.body) if isinstance(x, S.For) and x.thread}
    assert threads == {"blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"}
    a, b = _rand(A), _rand(B)
    out = run(f, [A, B, C], {"A": a, "B": b})
    assert np.array_equal(out["C"], a.astype(np.int32) @ b.astype(np.int32))


# --------------------------------------------------------------------------- refusals


def test_lower_refuses_missing_args_and_outside_readers() -> None:
    A, B, C = matmul(8, 8, 8)
    with pytest.raises(LowerError, match="output C is missing"):
        lower(create_schedule(C), [A, B])
    with pytest.raises(LowerError, match="reads input B, which is not in args"):
        lower(create_schedule(C), [A, C])
    D = compute((8, 8), lambda i, j: C[i, j] + 1, "D")
    E2 = compute((8, 8), lambda i, j: C[i, j] * 2, "E")
    s = create_schedule([D, E2])
    s[C].compute_at(s[D], s[D].axis[0])
    with pytest.raises(RegionError, match=r"stage C is computed at D\.i but stage E reads it"):
        lower(s, [A, B, D, E2])


def test_tensorize_mismatch_at_lower() -> None:
    """The region's extents come from bound inference: a tile too small for the intrinsic is
    refused when lowering."""
    tensors = packed_conv(1, 1, 1, 4, 4, 4, 1, 1, 0)
    data, kern, *_, out = tensors
    s = vta_conv_schedule(tensors, 1, 1, 1, 1, _gemm(4))
    f = lower(s, [data, kern, out])
    assert any(isinstance(x, S.AttrStmt) and x.key is S.TENSORIZE for x in _walk_stmts(f.body))
    with pytest.raises(ScheduleError, match="tensorize"):
        vta_conv_schedule(tensors, 1, 1, 1, 1, _gemm(2))


def _value_two_rewrites(self, e: E.Expr, roots) -> E.Expr:  # type: ignore[no-untyped-def]
    """``_Lowering._value`` as two rewrites (the variables everywhere, then the reads as
    loads): the reference its single rewrite must equal."""
    e = E.substitute(e, dict(roots))

    def fn(n: object) -> E.Expr | None:
        if isinstance(n, TensorRead):
            idx = tuple(E.substitute(i, fn) for i in n.indices)
            return self._load(TensorRead(n.tensor, idx, n.dtype))
        return None

    return E.substitute(e, fn)


@pytest.mark.parametrize("kh,stride,pad", [(1, 1, 0), (3, 1, 1), (3, 2, 1), (7, 2, 3)])
def test_value_one_rewrite_equals_two(kh: int, stride: int, pad: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage values ``lower`` builds in one rewrite (roots and loads at once) are the IR
    the two rewrites made: a staged, padded, strided conv with its epilogue and a tiled matmul
    lower to equal functions either way (inlined pads put reads inside selects, staged copies
    put base offsets on the indices)."""
    tensors = packed_conv(1, 2, 4, 9, 9, 4, kh, stride, pad)
    data, kern, *_, out = tensors
    oh = tensors[3].shape[2]

    def both():  # type: ignore[no-untyped-def]
        s = vta_conv_schedule(tensors, 2, next(t for t in (3, 2, 1) if oh % t == 0),
                              3 if oh % 3 == 0 else 1, 1)
        A, B, C = matmul(8, 12, 6)
        return (lower(s, [data, kern, out]),
                lower(vta_matmul_schedule(A, B, C, 4, 3, 2), [A, B, C]))

    one = both()
    monkeypatch.setattr(_Lowering, "_value", _value_two_rewrites)
    for got, want in zip(one, both(), strict=True):  # fresh loop variables each lowering
        assert_structural_equal(got, want)
