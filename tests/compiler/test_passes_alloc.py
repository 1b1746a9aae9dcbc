"""bound_inference and scratchpad_alloc: before/after and the named capacity error."""

import pytest
from _vta_helpers import hw, lowered, run_until

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes.bound_inference import BoundsError, infer_bounds
from vta.compiler.passes.scratchpad_alloc import ScratchpadOverflow, allocate_scratchpads


def test_bound_inference_records_full_tiles_and_keeps_body() -> None:
    f = lowered()
    g = infer_bounds(f, hw())
    assert g.body is f.body
    bounds = {b.name: r for b, r in g.attr("bounds")}
    assert bounds["data_inp"] == ((0, 1), (0, 4), (0, 7), (0, 0), (0, 15))
    assert bounds["res_acc"][:3] == ((0, 1), (0, 2), (0, 5))


def test_bound_inference_rejects_out_of_range_access() -> None:
    b = S.Buffer("t", (2, 1, 16), "int32", "acc")
    i = E.Var("i")
    body = S.Allocate(b, S.For(i, E.IntImm(0), E.IntImm(3), b.store(0, i, 0, 0)))
    with pytest.raises(BoundsError, match="t dimension 0 accessed over \\[0, 2\\]"):
        infer_bounds(S.PrimFunc("f", (), body), hw())


def test_scratchpad_alloc_duplicates_thread_buffers() -> None:
    f = run_until(lowered(), "scratchpad_alloc")
    table = {b.name: (base, n) for b, base, n in f.attr("sram")}
    # data_inp lives inside the vthread loop: base is 0 + vt * entries
    base, n = table["data_inp"]
    assert n == 2 * 5 * 8
    assert str(base) == f"vt * {n}" and E.free_vars(base)
    wbase, _ = table["kernel_wgt"]
    assert isinstance(wbase, E.IntImm)  # weights are shared by both threads


def test_scratchpad_overflow_names_buffer_bytes_available() -> None:
    big = S.Buffer("huge", (4096, 1, 16), "int8", "inp")
    i = E.Var("i")
    body = S.Allocate(big, S.For(i, E.IntImm(0), E.IntImm(1), big.store(0, i, 0, 0)))
    with pytest.raises(ScratchpadOverflow, match="huge \\(inp\\) needs 65536 bytes .*available "
                                                 "32768 bytes"):
        allocate_scratchpads(S.PrimFunc("f", (), body), hw())
