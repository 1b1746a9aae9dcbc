"""Bound inference's closed box (``regions._closed_box``): an attached stage's box computed from
the readers' affine forms equals ``poly.set_box`` of the isl text ``regions._reader_pieces``
writes for it, on every attached stage of ResNet-18's candidates; where the text is not
box-shaped (a fused reader) it declines and the text decides, as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.ops import window_packed as wp
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.ir import poly, regions
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_
from vta.compiler.ops.window import WindowSpec
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def _text_box(st, readers, bodies, env, loopvar, done, pkey):  # type: ignore[no-untyped-def]
    """``_attached``'s text route for the same stage: the pieces' text and its ``set_box``."""
    nm = regions._Namer()
    params = [lp for lp in env[st] if not regions._relaxed(st, lp)]
    names = [nm(loopvar[lp[1]], "p") for lp in params]
    assert names == list(pkey.values())
    pieces: list[str] = []
    for c in readers:
        pieces += regions._reader_pieces(st, c, bodies[c], env[c], done, loopvar, nm, params)
    return poly.set_box(f"[{', '.join(names)}] -> {{ {'; '.join(pieces)} }}")


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Every ``_closed_box`` answer compared with the text route's; how many were closed."""
    seen = {"closed": 0, "declined": 0}
    closed_box = regions._closed_box

    def both(*args):  # type: ignore[no-untyped-def]
        got = closed_box(*args)
        if got is None:
            seen["declined"] += 1
        else:
            seen["closed"] += 1
            assert got == _text_box(*args)
        return got

    monkeypatch.setattr(regions, "_closed_box", both)
    yield seen


def test_resnet18_candidates_boxes_equal_the_text_route(checked: dict[str, int]) -> None:
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, HW)
        for p in driver.default_points(w, HW):
            fold, sch = problem.schedule(p)
            lower_op(driver.op_compute(w, HW, sch, w.epilogue, fold), HW, sch)
    spec = WindowSpec("max", 1, 64, 112, 112, 3, 2, 1)  # the network's max-pool
    for s in wp.candidates(spec, HW):
        op = wp.window_compute(spec, HW)
        lower(wp.schedule_window(op, spec, HW, s), op.args, op.name)
    assert checked["closed"] > 100 and checked["declined"] == 0


def tiled_matmul():  # type: ignore[no-untyped-def]
    """A 32x32x16 int8 matmul tiled 8x8, its accumulator a local stage computed per tile and A
    read into a local stage per reduction step: (schedule, the local stage's tensor, (A, B, C))."""
    m, n, k = 32, 32, 16
    a = placeholder((m, k), "int8", "A")
    b = placeholder((k, n), "int8", "B")
    r = reduce_axis(k, "r")
    c = compute((m, n), lambda i, j: sum_(a[i, r].astype("int32") * b[r, j].astype("int32"), r),
                "C")
    s = create_schedule(c)
    cl = s.cache_write(c, "local")
    i, j = s[c].axis
    io, ii = s[c].split(i, 8)
    jo, ji = s[c].split(j, 8)
    s[c].reorder(io, jo, ii, ji)
    s[cl].compute_at(s[c], jo)
    al = s.cache_read(a, "local", [cl])
    s[al].compute_at(s[cl], s[cl].reduce_axis[0])
    return s, cl, (a, b, c)


def test_fused_reader_declines_and_the_text_decides(checked: dict[str, int]) -> None:
    """A stage computed inside a reader whose loops are fused: the fuse's parts are
    existentials with an equality (isl's to eliminate), so the closed box declines; the
    buffer is still the reader's tile."""
    s, cl, (a, b, c) = tiled_matmul()
    s[cl].fuse(*s[cl].axis)
    f = lower(s, [a, b, c])
    assert checked["declined"] >= 1
    assert "C_local" in str(f) and "A_local" in str(f)
