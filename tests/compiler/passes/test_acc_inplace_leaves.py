"""acc_inplace's search state (``_Leaves``): whether a store before or after a position touches
a buffer, answered from each buffer's first and last toucher and kept right as buffers are
taken over, equals the scan of the stores it replaces; ``_replace_buffers`` leaves a store
naming no buffer taken over as it is, without walking it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _accel_ir import PYNQ

from vta.compiler.accel.passes import acc_inplace
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, seq, stage

RES = buf("res", (2, 1, 16), "int8")
ACC = buf("conv_acc", (2, 1, 16), "int32", "acc")
SHR = buf("res_shr", (2, 1, 16), "int32", "acc")
CLIP = buf("res_clip", (2, 1, 16), "int32", "acc")
INP = buf("data", (2, 1, 16), "int32")


def _each(body: Callable[[E.Var, E.Var], S.Stmt]) -> S.Stmt:
    return loop(2, lambda i: loop(16, lambda j: body(i, j)))


BODY = seq(
    stage("conv_acc", _each(lambda i, j: ACC.store(INP.load(i, 0, j) * 3, i, 0, j))),
    stage("res_shr", _each(lambda i, j: SHR.store(ACC.load(i, 0, j) >> 8, i, 0, j))),
    stage("res_clip", _each(lambda i, j: CLIP.store(E.min_(SHR.load(i, 0, j), 127), i, 0, j))),
    stage("res", _each(lambda i, j: RES.store(CLIP.load(i, 0, j).astype("int8"), i, 0, j))))


def _scan(leaves: acc_inplace._Leaves, buf_: S.Buffer, positions: range,
          taken: acc_inplace.Taken) -> bool:
    """Whether a store at one of ``positions`` touches ``buf_`` once ``taken`` is replaced."""
    return any(acc_inplace._now(b, taken) is buf_
               for j in positions for b in acc_inplace._touched(leaves.items[j][0])[0])


@pytest.mark.parametrize("merges", [[], [(SHR, ACC)], [(SHR, ACC), (CLIP, ACC)]])
def test_first_and_last_touchers_equal_the_scan(merges: list[tuple[S.Buffer, S.Buffer]]
                                                ) -> None:
    leaves = acc_inplace._Leaves(BODY)
    taken: acc_inplace.Taken = {}
    for c, p in merges:
        taken[c] = p
        leaves.merge(c, p)
    n = len(leaves.items)
    assert n == 4
    for b in {acc_inplace._now(x, taken) for x in (ACC, SHR, CLIP, INP, RES)}:
        for k in range(n):
            assert leaves.touched_before(b, k) == _scan(leaves, b, range(k), taken)
            assert leaves.touched_after(b, k) == _scan(leaves, b, range(k + 1, n), taken)


def test_a_store_naming_no_buffer_taken_over_is_not_walked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain collapses onto conv_acc; the reduction's store names none of the buffers
    taken over, so the rewrite meets it but never its expressions."""
    f = func("f", [RES], alloc(ACC, alloc(SHR, alloc(CLIP, BODY))))
    met: list[object] = []
    replace = acc_inplace._replace_buffers

    def watched(s, taken, leaves):  # type: ignore[no-untyped-def]
        original = E.substitute

        def spy(node, fn, descend=None):  # type: ignore[no-untyped-def]
            def seen(n):  # type: ignore[no-untyped-def]
                met.append(n)
                return fn(n)
            return original(node, seen, descend)

        monkeypatch.setattr(E, "substitute", spy)
        try:
            return replace(s, taken, leaves)
        finally:
            monkeypatch.setattr(E, "substitute", original)

    monkeypatch.setattr(acc_inplace, "_replace_buffers", watched)
    out = acc_inplace.reuse_acc_buffers(f, PYNQ)
    assert [n.buffer for n in E.walk(out.body) if isinstance(n, S.Allocate)] == [ACC]
    reduction = acc_inplace._Leaves(BODY).items[0][0]
    assert isinstance(reduction, S.BufferStore)
    assert any(n is reduction for n in met)
    assert not any(n is reduction.value for n in met)
    assert any(isinstance(n, S.Buffer) and n is SHR for n in met)


def _replace_before(s: S.Stmt, taken: acc_inplace.Taken, leaves: acc_inplace._Leaves
                    ) -> S.Stmt:
    """``_replace_buffers`` as it was: the same replacement, recursing into every node."""
    kept = {id(st) for (st, _loops), named in zip(leaves.items, leaves.named, strict=True)
            if named.isdisjoint(taken)}

    def replace(n: object) -> object:
        if id(n) in kept:
            return n
        return acc_inplace._now(n, taken) if isinstance(n, S.Buffer) and n in taken else None

    return E.substitute(s, replace)


#: BODY and statements reading a taken buffer where the search does not look: in a guard's
#: condition, in a store's index, in a loop's bound
ODD = seq(
    BODY,
    _each(lambda i, j: S.IfThenElse(SHR.load(i, 0, j) < 3, RES.store(E.IntImm(0, "int8"),
                                                                      i, 0, j))),
    _each(lambda i, j: RES.store(CLIP.load(i, 0, j).astype("int8"), SHR.load(i, 0, j) % 2,
                                 0, j)),
    S.For(E.Var("k"), E.IntImm(0), CLIP.load(0, 0, 0), RES.store(E.IntImm(1, "int8"), 0, 0, 0)))


@pytest.mark.parametrize("body", [BODY, ODD], ids=["epilogue", "odd places"])
@pytest.mark.parametrize("merges", [[], [(SHR, ACC)], [(CLIP, SHR)], [(SHR, ACC), (CLIP, ACC)]])
def test_replace_skipping_leaves_equals_the_full_rewrite(
        body: S.Stmt, merges: list[tuple[S.Buffer, S.Buffer]]) -> None:
    """``_replace_buffers``, which does not recurse into variables and constants, against the
    rewrite that recurses into every node (its definition before): the same statement, with
    the same unchanged subtrees (``is``)."""
    leaves = acc_inplace._Leaves(body)
    taken: acc_inplace.Taken = dict(merges)
    new, old = (acc_inplace._replace_buffers(body, taken, leaves),
                _replace_before(body, taken, leaves))
    assert new == old
    assert (new is body) == (old is body)
    subtrees = {id(n) for n in E.walk(body)}
    assert [id(n) in subtrees for n in E.walk(new)] == [id(n) in subtrees for n in E.walk(old)]
