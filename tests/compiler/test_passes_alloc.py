"""unit_loops, region_inference, acc_inplace and scratchpad_alloc: before/after on the lowered
conv2d, and the named errors."""

import pytest
from _vta_helpers import hw, lowered, run_until

from vta.compiler.accel.passes.acc_inplace import reuse_acc_buffers
from vta.compiler.accel.passes.region_inference import infer_regions
from vta.compiler.accel.passes.scratchpad_alloc import allocate_scratchpads
from vta.compiler.accel.passes.unit_loops import fold_unit_loops
from vta.compiler.accel.vta_ir import BOUNDS, SRAM
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import RegionError, ScratchpadOverflow


def _allocs(f: S.PrimFunc) -> dict[str, S.Buffer]:
    return {n.buffer.name: n.buffer for n in E.walk(f.body) if isinstance(n, S.Allocate)}


def test_unit_loops_pin_their_variable_to_zero() -> None:
    f = lowered()  # the oc tile loop runs once: lower leaves its variable in the indices
    one = [n.var for n in E.walk(f.body) if isinstance(n, S.For) and n.extent == E.IntImm(1)]
    assert any(v in E.free_vars(n) for v in one for n in E.walk(f.body)
               if isinstance(n, S.BufferLoad))
    g = fold_unit_loops(f, hw())
    assert [n.var for n in E.walk(g.body) if isinstance(n, S.For)] == \
        [n.var for n in E.walk(f.body) if isinstance(n, S.For)]  # the loops stay
    assert not any(v in E.free_vars(n) for v in one for n in E.walk(g.body)
                   if isinstance(n, (S.BufferLoad, S.BufferStore)))


def test_region_inference_records_full_tiles_and_keeps_body() -> None:
    f = run_until(lowered(), "unit_loops")
    g = infer_regions(f, hw())
    assert g.body is f.body
    bounds = {b.name: r for b, r in g.attr(BOUNDS)}
    # one image, 2 channel blocks, a 3-row tile with its 3x3 halo (5 x 8), one entry
    assert bounds["data_pad_inp"] == ((0, 0), (0, 1), (0, 4), (0, 7), (0, 0), (0, 15))
    assert bounds["conv_acc"][:4] == ((0, 0), (0, 1), (0, 2), (0, 5))


def test_acc_inplace_collapses_the_epilogue_onto_the_accumulator() -> None:
    f = run_until(lowered(), "region_inference")
    assert {"conv_acc", "res_shr", "res_bias", "res_clip"} <= _allocs(f).keys()
    g = reuse_acc_buffers(f, hw())
    allocs = _allocs(g)
    assert "conv_acc" in allocs and not {"res_shr", "res_bias", "res_clip"} & allocs.keys()
    stores = [n for n in E.walk(g.body) if isinstance(n, S.BufferStore)
              and n.buffer.scope == "acc" and not isinstance(n.value, E.IntImm)]
    # update, shr, bias add, clip: all write the accumulator they read
    assert {s.buffer.name for s in stores} == {"conv_acc", "bias_acc"}


def test_acc_inplace_refuses_when_the_producer_is_read_later() -> None:
    a = S.Buffer("a", (4, 1, 16), "int32", "acc")
    c = S.Buffer("c", (4, 1, 16), "int32", "acc")
    o = S.Buffer("o", (4, 1, 16), "int8")
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")

    def nest(store):  # type: ignore[no-untyped-def]
        return S.For(i, E.IntImm(0), E.IntImm(4), S.For(j, E.IntImm(0), E.IntImm(1), S.For(
            k, E.IntImm(0), E.IntImm(16), store)))

    fill = nest(a.store(7, i, j, k))
    shr = nest(c.store(a.load(i, j, k) >> 1, i, j, k))
    use_a = nest(o.store(E.Cast("int8", a.load(i, j, k) + c.load(i, j, k)), i, j, k))
    body = S.Allocate(a, S.Allocate(c, S.seq(fill, shr, use_a)))
    f = S.PrimFunc("f", (o,), body)
    assert reuse_acc_buffers(f, hw()) is f  # a is still read after c is computed
    ok = S.PrimFunc("f", (o,), S.Allocate(a, S.Allocate(c, S.seq(
        fill, shr, nest(o.store(E.Cast("int8", c.load(i, j, k)), i, j, k))))))
    assert set(_allocs(reuse_acc_buffers(ok, hw()))) == {"a"}


def test_region_inference_rejects_out_of_range_access() -> None:
    b = S.Buffer("t", (2, 1, 16), "int32", "acc")
    i = E.Var("i")
    body = S.Allocate(b, S.For(i, E.IntImm(0), E.IntImm(3), b.store(0, i, 0, 0)))
    with pytest.raises(RegionError, match="t dimension 0 accessed over \\[0, 2\\]"):
        infer_regions(S.PrimFunc("f", (), body), hw())


def test_scratchpad_alloc_duplicates_thread_buffers() -> None:
    f = run_until(lowered(), "scratchpad_alloc")
    table = {b.name: (base, n) for b, base, n in f.attr(SRAM)}
    # data_pad_inp lives inside the vthread loop: base is 0 + vt * entries
    base, n = table["data_pad_inp"]
    assert n == 2 * 5 * 8
    vt, = E.free_vars(base)
    assert base == vt * n
    wbase, _ = table["kernel_wgt"]
    assert isinstance(wbase, E.IntImm)  # weights are shared by both threads


def test_scratchpad_overflow_names_buffer_bytes_available() -> None:
    big = S.Buffer("huge", (4096, 1, 16), "int8", "inp")
    i = E.Var("i")
    body = S.Allocate(big, S.For(i, E.IntImm(0), E.IntImm(1), big.store(0, i, 0, 0)))
    with pytest.raises(ScratchpadOverflow, match=r"huge \(inp\) needs 65536 bytes .*available "
                                                 "32768 bytes"):
        allocate_scratchpads(S.PrimFunc("f", (), body), hw())
