"""unit_loops: inside a loop of one iteration its variable is 0."""

from _accel_ir import PYNQ

from vta.compiler.accel.passes.unit_loops import fold_unit_loops
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal

A = buf("A", (2, 4, 1, 16), "int8")


def test_unit_loop_variable_becomes_zero() -> None:
    t = buf("t", (1, 4, 1, 16), "int8", "inp")

    def body(zero: bool) -> object:
        return alloc(t, loop(1, lambda o: loop(4, lambda x: loop(16, lambda k: t.store(
            A.load(o * 2 if not zero else 0, x, 0, k), 0 if zero else o, x, 0, k)))))

    before = func("f", [A], body(False))
    expected = func("f", [A], body(True))
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)


def test_nested_unit_loops_fold_inside_out() -> None:
    before = func("f", [A], loop(1, lambda a: loop(1, lambda b: A.store(0, a + b, 0, 0, 0))))
    expected = func("f", [A], loop(1, lambda a: loop(1, lambda b: A.store(0, 0, 0, 0, 0))))
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)


def test_without_unit_loops_the_function_is_returned_unchanged() -> None:
    f = func("f", [A], loop(2, lambda i: A.store(0, i, 0, 0, 0)))
    assert fold_unit_loops(f, PYNQ) is f


def test_nested_unit_loops_rewrite_their_body_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Under four nested unit loops the store is rebuilt once, with every variable around it
    0 (not once per loop around it); a loop whose extent is 1 only once an outer unit loop's
    variable is 0 is a unit loop too, as substituting loop by loop made it."""
    from vta.compiler.ir import expr as E

    before = func("f", [A], loop(1, lambda a: loop(1, lambda b: loop(1, lambda c: loop(
        1, lambda d: A.store(0, a + b + c + d, 0, 0, 0))))))
    expected = func("f", [A], loop(1, lambda a: loop(1, lambda b: loop(1, lambda c: loop(
        1, lambda d: A.store(0, 0, 0, 0, 0))))))
    real, rebuilt = E._rebuild, []

    def counted(node, *args):  # type: ignore[no-untyped-def]
        rebuilt.append(type(node).__name__)
        return real(node, *args)
    monkeypatch.setattr(E, "_rebuild", counted)
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)
    assert rebuilt.count("BufferStore") == 1
    monkeypatch.undo()

    grown = func("f", [A], loop(1, lambda a: loop(
        E.IntImm(1) + a * 3, lambda x: A.store(0, x + a, 0, 0, 0))))
    folded = func("f", [A], loop(1, lambda a: loop(1, lambda x: A.store(0, 0, 0, 0, 0))))
    assert_structural_equal(fold_unit_loops(grown, PYNQ), folded)
