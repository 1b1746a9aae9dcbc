"""Work lowering does once: each stage's definition is walked once for its tensor reads
(``regions.tensor_reads``): the input check, which stages read which, and every attached
stage's pieces (closed form and isl text alike) read that one list, in pre-order, instead of
walking the definitions again per question; an attached stage's largest base over its loops
is read from its closed-form box's affine form (``regions._top``), not from decomposing the
base expression built from that form. Same IR as before (the pipeline digests)."""

from __future__ import annotations

import pytest

from tests.compiler.test_region_closed_box import tiled_matmul
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly, regions
from vta.compiler.ir.lower import lower
from vta.compiler.ir.tensor import TensorRead, compute, placeholder
from vta.errors import LowerError


def _matmul():  # type: ignore[no-untyped-def]
    s, _cl, args = tiled_matmul()
    return s, args


def test_each_definition_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[int] = []
    walk = E.walk

    def counted(node):  # type: ignore[no-untyped-def]
        if not isinstance(node, TensorRead):
            walked.append(id(node))
        return walk(node)

    monkeypatch.setattr(E, "walk", counted)
    s, args = _matmul()
    f = lower(s, list(args))
    assert "A_local" in str(f)
    assert len(walked) == len(set(walked)), "a stage's definition walked twice"


def test_reads_are_in_pre_order() -> None:
    a = placeholder((4,), "int32", "A")
    b = placeholder((4,), "int32", "B")
    c = compute((4,), lambda i: a[i] + b[i] * a[3 - i], "C")
    reads = regions.tensor_reads(c.op.body)  # type: ignore[attr-defined]
    assert [r.tensor.name for r in reads] == ["A", "B", "A"]


def test_an_input_missing_from_args_is_still_named() -> None:
    s, (a, _b, c) = _matmul()
    with pytest.raises(LowerError, match="reads input B, which is not in args"):
        lower(s, [a, c])


def test_a_closed_box_top_is_read_from_its_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every top read from a closed-form box equals the base expression's (``_max_over``'s
    reading), and the base is not decomposed again for it."""
    tops: list[int | None] = []
    top = regions._top

    def checked(terms, const, ranges):  # type: ignore[no-untyped-def]
        terms = list(terms)
        got = top(terms, const, ranges)
        form, k = poly.linear_form(poly.from_linear(dict(terms), const))
        assert got == top(form.items(), k, ranges)
        tops.append(got)
        return got

    decomposed: list[E.Expr] = []
    max_over = regions._max_over

    def counted(e, ranges):  # type: ignore[no-untyped-def]
        decomposed.append(e)
        return max_over(e, ranges)

    monkeypatch.setattr(regions, "_top", checked)
    monkeypatch.setattr(regions, "_max_over", counted)
    s, args = _matmul()
    lower(s, list(args))
    assert tops and not decomposed


def test_a_zero_based_root_is_not_simplified_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage at base 0 takes ``root_values``' values as they are (``lower._zero``): each is
    what ``simplify`` would give back, equal, for layers of ResNet-18, its max-pool and a
    fused schedule (whose fuse makes divisions of a loop variable)."""
    from vta.compiler.accel import driver
    from vta.compiler.accel.ops import window_packed as wp
    from vta.compiler.accel.schedules.build import lower_op
    from vta.compiler.ir import lower as lower_mod
    from vta.compiler.ops.window import WindowSpec
    from vta.compiler.ops.workloads import resolve
    from vta.config import HwConfig

    hw = HwConfig.from_yaml("hwconfigs/pynq.yaml")
    taken: list[E.Expr] = []
    zero = lower_mod._zero

    def checked(b, v):  # type: ignore[no-untyped-def]
        if zero(b, v):
            assert poly.simplify(b + v) == v
            taken.append(v)
            return True
        return False

    monkeypatch.setattr(lower_mod, "_zero", checked)
    for layer in ("C1", "C7"):
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, hw)
        for p in driver.default_points(w, hw):
            fold, sch = problem.schedule(p)
            lower_op(driver.op_compute(w, hw, sch, w.epilogue, fold), hw, sch)
    spec = WindowSpec("max", 1, 64, 112, 112, 3, 2, 1)
    for s in wp.candidates(spec, hw)[:2]:
        op = wp.window_compute(spec, hw)
        lower(wp.schedule_window(op, spec, hw, s), op.args, op.name)
    s, args = _matmul()
    s[s.outputs[0]].fuse(*s[s.outputs[0]].leaf_iter_vars[2:4])
    lower(s, list(args))
    assert any(not isinstance(v, E.Var) for v in taken)
    assert any(isinstance(n, E.FloorDiv) for v in taken for n in E.walk(v))
