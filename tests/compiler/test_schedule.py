"""Schedule primitives: what each one records, and each refusal with its reason."""

from __future__ import annotations

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir.intrin import TensorIntrinsic, gemm_decl
from vta.compiler.ir.schedule import INLINE, AttachAt, create_schedule
from vta.compiler.ir.stmt import ForKind
from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_
from vta.errors import ScheduleError


def mm(m: int = 16, n: int = 16, k: int = 16):
    A = placeholder((m, k), "int8", "A")
    B = placeholder((n, k), "int8", "B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r].astype("int32") * B[j, r].astype("int32"), r),
                "C")
    return A, B, C


def test_default_stages_and_lookup() -> None:
    A, _B, C = mm()
    D = compute(C.shape, lambda i, j: C[i, j] + 1, "D")
    s = create_schedule(D)
    assert [st.name for st in s.stages] == ["C", "D"]
    assert s[D].is_output and not s[C].is_output
    assert [iv.name for iv in s[C].leaf_iter_vars] == ["i", "j", "k"]
    with pytest.raises(ScheduleError, match="A has no stage: it is an input"):
        s[A]


def test_split_factor_and_nparts() -> None:
    *_, C = mm(10)
    s = create_schedule(C)
    i, j = s[C].axis
    io, ii = s[C].split(i, 4)
    assert (io.extent, ii.extent) == (3, 4)
    jo, ji = s[C].split(j, nparts=3)
    assert (jo.extent, ji.extent) == (3, 6)
    assert [iv.name for iv in s[C].leaf_iter_vars] == ["i_o", "i_i", "j_o", "j_i", "k"]


@pytest.mark.parametrize("kw,msg", [({"factor": 0}, "factor must be a positive integer, got 0"),
                                    ({"factor": -2}, "factor must be a positive integer"),
                                    ({"nparts": 1.5}, "nparts must be a positive integer"),
                                    ({}, "give exactly one of"),
                                    ({"factor": 2, "nparts": 2}, "give exactly one of")])
def test_split_refusals(kw, msg) -> None:
    *_, C = mm()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match=f"split on stage C axis i: {msg}"):
        s[C].split(s[C].axis[0], **kw)


def test_split_of_an_already_split_axis_is_refused() -> None:
    *_, C = mm()
    s = create_schedule(C)
    i = s[C].axis[0]
    s[C].split(i, 4)
    with pytest.raises(ScheduleError, match="already split or fused; use its leaves"):
        s[C].split(i, 2)
    other = reduce_axis(3, "z")
    with pytest.raises(ScheduleError, match="z: not an axis of this stage"):
        s[C].split(other, 2)


def test_tile_and_reorder_of_reduction_is_legal() -> None:
    *_, C = mm()
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*s[C].axis, 4, 8)
    k = s[C].reduce_axis[0]
    s[C].reorder(k, io, jo, ii, ji)  # sum is commutative: any order of k is fine
    assert s[C].leaf_iter_vars == [k, io, jo, ii, ji]
    with pytest.raises(ScheduleError, match="listed twice"):
        s[C].reorder(io, io)


def test_fuse_adjacent_only_and_same_kind() -> None:
    *_, C = mm()
    s = create_schedule(C)
    i, j = s[C].axis
    k = s[C].reduce_axis[0]
    with pytest.raises(ScheduleError, match="fuse on stage C axis i: i and k are not adjacent"):
        s[C].fuse(i, k)
    with pytest.raises(ScheduleError, match="not adjacent with j directly outside"):
        s[C].fuse(j, i)
    with pytest.raises(ScheduleError, match="cannot fuse a spatial axis with a reduce axis"):
        s[C].fuse(j, k)
    f = s[C].fuse(i, j)
    assert f.extent == 256 and s[C].leaf_iter_vars == [f, k]


def test_bind_unroll_vthread() -> None:
    *_, C = mm()
    s = create_schedule(C)
    i, j = s[C].axis
    s[C].bind(i, "blockIdx.x")
    assert s[C].iter_attrs[i].kind is ForKind.THREAD_BINDING
    assert s[C].iter_attrs[i].thread == "blockIdx.x"
    vt, inner = s[C].virtual_thread(j, 2)
    assert s[C].iter_attrs[vt].kind is ForKind.VTHREAD and vt.extent == 2
    s[C].unroll(inner)
    assert s[C].iter_attrs[inner].kind is ForKind.UNROLLED
    with pytest.raises(ScheduleError, match="already bound, unrolled"):
        s[C].split(i, 2)


def test_parallel_reduction_is_refused() -> None:
    *_, C = mm()
    s = create_schedule(C)
    k = s[C].reduce_axis[0]
    with pytest.raises(ScheduleError, match=r"bind to threadIdx\.x on stage C axis k: a reduction "
                                            "axis carries the accumulation"):
        s[C].bind(k, "threadIdx.x")
    with pytest.raises(ScheduleError, match="virtual_thread on stage C axis k"):
        s[C].virtual_thread(k)
    with pytest.raises(ScheduleError, match=r"unknown thread 'warp\.x'"):
        s[C].bind(s[C].axis[0], "warp.x")


def test_compute_at_and_its_refusals() -> None:
    _A, _B, C = mm()
    D = compute(C.shape, lambda i, j: C[i, j] >> 2, "D")
    F = compute(C.shape, lambda i, j: D[i, j] + 1, "F")
    s = create_schedule(F)
    s[C].compute_at(s[F], s[F].axis[0])  # F reads C through D
    assert isinstance(s[C].attach, AttachAt) and s[C].attach.stage is s[F]
    with pytest.raises(ScheduleError, match="i is not a leaf axis of D"):
        s[C].compute_at(s[D], s[F].axis[0])
    with pytest.raises(ScheduleError, match="an output stage is computed at the root"):
        s[F].compute_at(s[D], s[D].axis[0])
    with pytest.raises(ScheduleError, match="cannot attach a stage to itself"):
        s[D].compute_at(s[D], s[D].axis[0])
    with pytest.raises(ScheduleError, match="C does not read D"):
        s[D].compute_at(s[C], s[C].axis[0])


def test_compute_inline_refusals() -> None:
    *_, C = mm()
    D = compute(C.shape, lambda i, j: C[i, j] + 1, "D")
    F = compute(C.shape, lambda i, j: D[i, j] * 2, "F")
    s = create_schedule(F)
    with pytest.raises(ScheduleError, match="a reduction cannot be inlined"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match="an output must be computed"):
        s[F].compute_inline()
    s[C].compute_at(s[D], s[D].axis[1])
    with pytest.raises(ScheduleError, match="stage C is computed at one of its loops"):
        s[D].compute_inline()
    s[C].compute_root()
    s[D].compute_inline()
    assert s[D].attach == INLINE


def test_cache_read_rewrites_readers() -> None:
    A, B, C = mm()
    s = create_schedule(C)
    AL = s.cache_read(A, "inp", [C])
    assert AL.name == "A_inp" and s[AL].scope == "inp"
    assert [st.name for st in s.stages] == ["A_inp", "C"]
    reads = {n.tensor.name for n in E.walk(s[C].op.body) if hasattr(n, "tensor")}
    assert reads == {"A_inp", "B"}
    with pytest.raises(ScheduleError, match="stage C does not read A"):
        s.cache_read(A, "inp", [C])
    with pytest.raises(ScheduleError, match="unknown scope 'sram'"):
        s.cache_read(B, "sram", [C])


def test_cache_write_moves_the_computation() -> None:
    _A, _B, C = mm()
    s = create_schedule(C)
    CL = s.cache_write(C, "acc")
    assert [st.name for st in s.stages] == ["C_acc", "C"]
    assert s[CL].reduce_axis and not s[C].reduce_axis and s[CL].scope == "acc"
    s2 = create_schedule(mm()[2])
    out = s2.outputs[0]
    s2[out].split(s2[out].axis[0], 2)
    with pytest.raises(ScheduleError, match="apply cache_write before scheduling"):
        s2.cache_write(out, "acc")


def test_set_scope() -> None:
    *_, C = mm()
    D = compute(C.shape, lambda i, j: C[i, j] + 1, "D")
    s = create_schedule(D)
    s[C].set_scope("acc")
    assert s[C].scope == "acc"
    with pytest.raises(ScheduleError, match="an output lives in global memory"):
        s[D].set_scope("acc")


def test_tensorize_match_and_refusals() -> None:
    _A, _B, C = mm(8, 16, 32)
    gemm = TensorIntrinsic("t.gemm", "vta", gemm_decl(1, 16, 16, "int8", "int8", "int32"))
    s = create_schedule(C)
    i, j = s[C].axis
    ko, ki = s[C].split(s[C].reduce_axis[0], 16)
    s[C].reorder(ko, i, j, ki)
    _ii, i1 = s[C].split(i, 1)
    s[C].tensorize(i1, gemm)
    assert s[C].tensorized[i1] is gemm

    s = create_schedule(C)
    i, j = s[C].axis
    ko, ki = s[C].split(s[C].reduce_axis[0], 8)
    s[C].reorder(ko, i, j, ki)
    _i0, i1 = s[C].split(i, 1)
    with pytest.raises(ScheduleError, match=r"tensorize with t\.gemm on stage C axis i_i: region "
                                            "loops .* do not access"):
        s[C].tensorize(i1, gemm)

    wrong = TensorIntrinsic("t.gemm16", "vta", gemm_decl(1, 16, 16, "int16", "int8", "int32"))
    s = create_schedule(C)
    i, j = s[C].axis
    ko, ki = s[C].split(s[C].reduce_axis[0], 16)
    s[C].reorder(ko, i, j, ki)
    _i0, i1 = s[C].split(i, 1)
    with pytest.raises(ScheduleError, match="dtype int8 in the stage where the intrinsic has "
                                            "int16"):
        s[C].tensorize(i1, wrong)
    # transposed weights: B[k, j] where the intrinsic reads wgt[j, k]
    A2 = placeholder((8, 16), "int8", "A")
    B2 = placeholder((16, 16), "int8", "B")
    r = reduce_axis(16, "k")
    C2 = compute((8, 16), lambda a, b: sum_(A2[a, r].astype("int32") * B2[r, b].astype("int32"),
                                             r), "C2")
    s = create_schedule(C2)
    _i0, i1 = s[C2].split(s[C2].axis[0], 1)
    with pytest.raises(ScheduleError, match="do not access the tensors as the intrinsic"):
        s[C2].tensorize(i1, gemm)


def test_reorder_that_breaks_a_dependence_is_refused() -> None:
    """The general dependence check: a stage whose body reads its own output at another index
    (a recurrence, only expressible by rewriting a definition) must keep its loop order."""
    from vta.compiler.ir.schedule import stage_dependences
    from vta.compiler.ir.tensor import ComputeOp, TensorRead

    A = placeholder((8, 8), "int32", "A")
    T = compute((8, 8), lambda i, j: A[i, j], "T")
    s = create_schedule(T)
    st = s[T]
    i, j = st.axis
    # T[i, j] = T[i - 1, j + 1] + A[i, j]  (flow dependence distance (1, -1); only the
    # dependence analysis sees this stage, so the border reads need no clamping)
    body = TensorRead(T, (i.var - 1, j.var + 1), "int32") + A[i, j]
    st.op = ComputeOp("T", st.op.axes, body, "int32")
    assert stage_dependences(st, exempt_reduction=True) is not None
    with pytest.raises(ScheduleError, match="reorder on stage T: the new loop order breaks"):
        st.reorder(j, i)
    with pytest.raises(ScheduleError, match="the loop carries a dependence"):
        st.bind(i, "threadIdx.x")
    st.bind(j, "threadIdx.x")  # the inner loop carries nothing: legal


def test_independent_agrees_with_isl() -> None:
    """``independent`` (no isl) answers only where isl finds no dependence: a reduction with
    its accumulation exempt, an element-wise stage, never the reduction unexempted nor a
    stage reading its own output (``stage_dependences`` computed the general way)."""
    from vta.compiler.ir.schedule import independent, stage_dependences
    from vta.compiler.ir.tensor import ComputeOp, TensorRead

    *_, C = mm(8, 8, 8)
    D = compute(C.shape, lambda i, j: C[i, j] + 1, "D")
    A = placeholder((8, 8), "int32", "A")
    T = compute((8, 8), lambda i, j: A[i, j], "T")
    s, t = create_schedule(D), create_schedule(T)
    st = t[T]
    i, j = st.axis
    st.op = ComputeOp("T", st.op.axes, TensorRead(T, (i.var - 1, j.var), "int32") + A[i, j],
                      "int32")
    seen = []
    for stage in (s[C], s[D], st):
        for exempt in (True, False):
            deps = stage_dependences(stage, exempt_reduction=exempt)
            empty = deps is None or deps.is_empty()
            seen.append((stage.name, exempt, independent(stage, exempt), empty))
            assert not independent(stage, exempt) or empty
    assert [x[2] for x in seen] == [True, False, True, True, False, False]
    assert [x[3] for x in seen] == [True, False, True, True, False, False]
