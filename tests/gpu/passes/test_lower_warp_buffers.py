"""lower_warp_buffers: a warp-scope buffer becomes one shared slice per warp."""

import pytest

from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, seq
from vta.compiler.ir.structural import assert_structural_equal
from vta.gpu.passes.warp_buffers import GpuLoweringError, lower_warp_buffers

A = buf("A", (64,), "float32")
B = buf("B", (64,), "float32")
T = S.ForKind.THREAD_BINDING


def _kernel(w: S.Buffer, lanes: int = 32) -> S.PrimFunc:
    warp = w.scope == "warp"

    def at(ty: object, i: object) -> tuple:
        return (i,) if warp else (ty, i)

    return func("k", [A, B], loop(2, lambda ty: alloc(w, loop(lanes, lambda tx: seq(
        w.store(A.load(ty * 32 + tx), *at(ty, tx)),
        B.store(w.load(*at(ty, 31 - tx)), ty * 32 + tx)), kind=T, thread="threadIdx.x")),
        kind=T, thread="threadIdx.y"))


def test_warp_buffer_gains_a_leading_dimension_per_warp_index() -> None:
    before = _kernel(buf("w", (32,), "float32", "warp"))
    expected = _kernel(buf("w", (2, 32), "float32", "shared"))
    assert_structural_equal(lower_warp_buffers(before), expected)


def test_lanes_other_than_32_are_refused() -> None:
    with pytest.raises(GpuLoweringError, match=r"k: warp-scope buffers need threadIdx.x bound "
                                               r"to exactly 32 lanes \(found \[16\]\)"):
        lower_warp_buffers(_kernel(buf("w", (32,), "float32", "warp"), lanes=16))


def test_without_warp_buffers_the_function_is_returned_unchanged() -> None:
    f = _kernel(buf("w", (2, 32), "float32", "shared"))
    assert lower_warp_buffers(f) is f
