"""Task mappings (vta.gpu.taskmap) against a brute-force statement of Hidet's definition, and
the loop nests ``emit`` writes against ``worker_tasks`` (run by the IR interpreter).

The brute force transcribes Hidet's published source (hidet-org/hidet,
python/hidet/ir/mapping.py: ``strides_from_ranks``, ``SpatialTaskMapping._worker2task``,
``RepeatTaskMapping._worker2task``, ``ComposedTaskMapping._worker2task``), not vta's code: a
spatial worker ``w`` gets ``((w // stride[d]) % shape[d])_d``; a repeat atom's tasks are all
index tuples sorted by ``sum(task[d] * stride[d])``; strides come from ``ranks`` by walking
the significances from the least (``n - 1``) to the most (``0``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.errors import TaskMappingError
from vta.gpu.taskmap import TaskMapping, repeat, spatial

# ---------------------------------------------------------------------------- brute force


def brute(m: tuple) -> tuple[tuple[int, ...], int, dict[int, list[tuple[int, ...]]]]:
    """(task_shape, workers, worker -> tasks) straight from the definition, recursively:
    m is ("spatial"|"repeat", shape, ranks) or ("*", outer, inner)."""
    if m[0] == "*":
        oshape, ow, otasks = brute(m[1])
        ishape, iw, itasks = brute(m[2])
        shape = tuple(a * b for a, b in zip(oshape, ishape, strict=True))
        table = {}
        for w in range(ow * iw):
            table[w] = [tuple(a * s + b for a, s, b in zip(ta, ishape, tb, strict=True))
                        for ta in otasks[w // iw] for tb in itasks[w % iw]]
        return shape, ow * iw, table
    kind, shape, ranks = m
    strides = hidet_strides(shape, ranks)
    if kind == "spatial":
        workers = int(np.prod(shape))
        return shape, workers, {w: [tuple((w // b) % d for d, b in zip(shape, strides,
                                                                       strict=True))]
                                for w in range(workers)}
    tasks = sorted(itertools.product(*[range(d) for d in shape]),
                   key=lambda t: sum(a * b for a, b in zip(t, strides, strict=True)))
    return shape, 1, {0: tasks}


def hidet_strides(shape: tuple[int, ...], ranks: tuple[int, ...]) -> list[int]:
    """Hidet's ``strides_from_ranks``: for significance ``i`` from ``n - 1`` down to 0, the
    dimension ``ranks.index(i)`` gets the product of the extents assigned before it."""
    strides = [0] * len(shape)
    acc = 1
    for i in reversed(range(len(shape))):
        dim = ranks.index(i)
        strides[dim] = acc
        acc *= shape[dim]
    return strides


def build(m: tuple) -> TaskMapping:
    if m[0] == "*":
        return build(m[1]) * build(m[2])
    kind, shape, ranks = m
    return (spatial if kind == "spatial" else repeat)(*shape, ranks=ranks)


@st.composite
def mappings(draw: st.DrawFn, rank: int, depth: int = 2) -> tuple:
    if depth == 0 or draw(st.booleans()):
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
        ranks = tuple(draw(st.permutations(range(rank))))
        return (draw(st.sampled_from(["spatial", "repeat"])), shape, ranks)
    return ("*", draw(mappings(rank, depth - 1)), draw(mappings(rank, depth - 1)))


def _size(m: tuple) -> int:
    return _size(m[1]) * _size(m[2]) if m[0] == "*" else int(np.prod(m[1]))


# at most 4 atoms and 512 tasks: brute force stays cheap
ranked = st.integers(1, 3).flatmap(mappings).filter(lambda m: _size(m) <= 512)

# ---------------------------------------------------------------------------- tests


@given(ranked)
def test_worker_tasks_match_the_definition(m: tuple) -> None:
    shape, workers, table = brute(m)
    tm = build(m)
    assert tm.task_shape == shape and tm.workers == workers
    for w in range(workers):
        assert tm.worker_tasks(w) == table[w]
    assert tm.worker_tasks(workers) == []


@given(ranked)
def test_tasks_partition_the_task_grid(m: tuple) -> None:
    tm = build(m)
    every = [t for w in range(tm.workers) for t in tm.worker_tasks(w)]
    assert sorted(every) == sorted(itertools.product(*[range(d) for d in tm.task_shape]))


@given(ranked, st.integers(0, 5))
def test_emitted_loop_nest_performs_the_same_tasks_in_order(m: tuple, extra: int) -> None:
    """Every worker (a serial loop standing for the threads) runs ``emit``'s nest and appends
    its tasks to a log; the log equals ``worker_tasks``. Extra workers (a guard) do nothing."""
    tm = build(m)
    nworkers = tm.workers + extra
    ntasks = max(len(tm.worker_tasks(w)) for w in range(tm.workers))
    log = S.Buffer("log", (nworkers, ntasks + 1, tm.rank), "int32")
    count = S.Buffer("count", (nworkers,), "int32")
    w = E.Var("w")

    def body(task: tuple[E.Expr, ...]) -> S.Stmt:
        n = count.load(w)
        return S.seq(*[log.store(x, w, n, k) for k, x in enumerate(task)],
                     count.store(n + 1, w))

    nest = tm.emit(w, body, workers=nworkers)
    func = S.PrimFunc("log_tasks", (log, count),
                      S.For(w, E.IntImm(0), E.IntImm(nworkers), nest))
    out = {"log": np.full(log.shape, -1, np.int32), "count": np.zeros(nworkers, np.int32)}
    run_func(func, out)
    for wi in range(nworkers):
        want = tm.worker_tasks(wi)
        assert out["count"][wi] == len(want)
        assert [tuple(int(x) for x in out["log"][wi, i]) for i in range(len(want))] == want


def test_hidet_examples() -> None:
    # Hidet's paper: repeat(2, 1) * spatial(2, 2) gives worker 1 the tasks (0, 1) and (2, 1)
    tm = repeat(2, 1) * spatial(2, 2)
    assert tm.task_shape == (4, 2) and tm.workers == 4
    assert tm.worker_tasks(1) == [(0, 1), (2, 1)]
    # spatial(4, 8): 32 lanes in row-major order; column-major with ranks
    assert spatial(4, 8).worker_tasks(9) == [(1, 1)]
    assert spatial(4, 8, ranks=[1, 0]).worker_tasks(9) == [(1, 2)]
    assert str(tm) == "repeat(2, 1) * spatial(2, 2)"


def test_ranks_are_significances_as_in_hidet() -> None:
    """Three dimensions, where Hidet's ``ranks`` and the slowest-to-fastest list differ. By
    Hidet's ``strides_from_ranks`` for shape (2, 3, 4) and ranks [1, 2, 0]: significance 2 is
    dimension 1 (stride 1), significance 1 dimension 0 (stride 3), significance 0 dimension 2
    (stride 6); worked by hand from those strides."""
    tm = spatial(2, 3, 4, ranks=[1, 2, 0])
    assert tm.worker_tasks(1) == [(0, 1, 0)]
    assert tm.worker_tasks(3) == [(1, 0, 0)]
    assert tm.worker_tasks(6) == [(0, 0, 1)]
    assert tm.worker_tasks(23) == [(1, 2, 3)]
    assert tm.atoms[0].order == (2, 0, 1)
    # a repeat atom walks the same order: dimension 1 fastest, then 0, then 2
    assert repeat(2, 3, 4, ranks=[1, 2, 0]).worker_tasks(0)[:7] == [
        (0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0), (0, 0, 1)]


def test_bad_mappings_are_named_errors() -> None:
    with pytest.raises(TaskMappingError, match="ranks must agree"):
        spatial(2, 2) * repeat(4)
    with pytest.raises(TaskMappingError, match=">= 1"):
        spatial(0, 2)
    with pytest.raises(TaskMappingError, match="permutation"):
        repeat(2, 2, ranks=[0, 0])
    with pytest.raises(TaskMappingError, match="needs 8 workers, only 4"):
        spatial(8).emit(E.Var("w"), lambda t: S.Evaluate(t[0]), workers=4)


def test_docs_worked_example() -> None:
    """docs/gpu.md's example: the GEMM's A-tile copy, 128 rows x 4 chunks over 128 threads."""
    from vta.gpu.kernels.copy import copy_mapping

    tm = copy_mapping(128, 4, 128, "A tile copy")
    assert str(tm) == "repeat(4, 1) * spatial(32, 4)"
    assert tm.worker_tasks(5) == [(1, 1), (33, 1), (65, 1), (97, 1)]
