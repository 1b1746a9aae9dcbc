"""The schedule model priced a batch at a time (``space.TileBatch``): every estimate and fit
answer of a batch equals the one-schedule answer, bit for bit, and the ranking over batches
equals the ranking of the schedules one at a time (``rank(..., fits=...)`` walks them singly),
on every shipped configuration, with the graph's exact layouts and with a fused chain."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.ops.chain_plan import chain_cost
from vta.compiler.accel.schedules.model import estimate, rank
from vta.compiler.accel.schedules.space import (
    ConvProblem,
    exact_layout,
    footprint,
    schedule_fits,
)
from vta.compiler.ops.chain import (
    Chain,
    add_stage,
    requant_stage,
    round_clip_stage,
    scaled_operand,
)
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig, shipped_configs

#: the default run: a folded layer (C1), a strided 1x1 one (its input rows subsampled, C4) on
#: three configurations (one thread's acc banks, a separate ALU pipeline, a wider bus); every
#: shipped configuration and more layers under ``-m slow``
QUICK = [pytest.param(c, ("C1", "C4")) for c in ("pynq", "pynq_overlap", "ultra96")]
EVERY = [pytest.param(c, ("C1", "C4", "C7", "C11"), marks=pytest.mark.slow)
         for c in sorted(shipped_configs())]


def _fitting(problem: ConvProblem) -> frozenset:  # type: ignore[type-arg]
    """Every point of ``problem`` that ``ConvProblem.fits``, found one schedule at a time."""
    out = set()
    for f in problem.folds:
        for values, s in problem.fold_schedules(f.kind):
            if problem.fits(f, s):
                out.add(problem.point_of(values))
    return frozenset(out)


@pytest.mark.parametrize(("config", "layers"), QUICK + EVERY)
def test_a_batch_prices_and_fits_each_schedule_as_alone(config: str,
                                                         layers: tuple[str, ...]) -> None:
    hw = HwConfig.from_yaml(shipped_configs()[config])
    for layer in layers:
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, hw)
        for f in problem.folds:
            dev = f.device
            for head, b in problem.fold_batches(f.kind):
                ok = schedule_fits(dev, hw, b, problem.fused, problem.row_view)
                est = estimate(dev, hw, b, w.epilogue, problem.fused, problem.row_view)
                need = footprint(dev, hw, b, problem.fused, problem.row_view)
                for k in range(len(b.tco)):
                    s = b.schedule(k)
                    assert bool(ok[k]) is schedule_fits(dev, hw, s, problem.fused,
                                                         problem.row_view), (head, s)
                    one = estimate(dev, hw, s, w.epilogue, problem.fused, problem.row_view)
                    assert float(est[k]) == one, (head, s)
                    assert {kk: int(v[k]) for kk, v in need.items()} == footprint(
                        dev, hw, s, problem.fused, problem.row_view)


@pytest.mark.parametrize(("config", "layers"), QUICK + EVERY)
@pytest.mark.parametrize("exact", [False, True])
def test_the_batched_ranking_is_the_ranking_one_at_a_time(config: str, layers: tuple[str, ...],
                                                          exact: bool) -> None:
    hw = HwConfig.from_yaml(shipped_configs()[config])
    for layer in layers:
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, hw, exact=exact)
        fits = _fitting(problem)
        for every in (False, True):
            whole = rank(problem, w.epilogue, every_order=every)
            assert whole == rank(problem, w.epilogue, every_order=every, fits=fits)
            assert [q for _, q in rank(problem, w.epilogue, limit=3, every_order=every)] == \
                [q for _, q in whole[:3]]
        two = rank(problem, w.epilogue, prefer_two_threads=True)
        assert two == rank(problem, w.epilogue, prefer_two_threads=True, fits=fits)


@pytest.mark.parametrize("config", ["pynq", "pynq_overlap"])
def test_a_fused_chain_is_priced_alike_in_a_batch(config: str) -> None:
    """The graph's residual block (requantize, add the shortcut, round and clip, exact
    layouts): its instructions and operand tiles in the batch estimate as alone."""
    hw = HwConfig.from_yaml(shipped_configs()[config])
    chain = Chain((requant_stage(1, 0, 9, -128, 127), add_stage(1, 0),
                   round_clip_stage(0, 1, 0, 127)), (scaled_operand("opnd0", 2),))
    w = resolve("resnet18:C3")
    problem = driver.space_of(w, hw, chain=chain, exact=True)
    assert problem.fused is not None and problem.fused == chain_cost(chain, hw)
    epi = Epilogue(shift=0, bias=True, clip=False)
    assert rank(problem, epi) == rank(problem, epi, fits=_fitting(problem))
    for f in problem.folds:
        for _, b in problem.fold_batches(f.kind):
            est = estimate(f.device, hw, b, epi, problem.fused)
            assert [float(x) for x in est] == [
                estimate(f.device, hw, b.schedule(k), epi, problem.fused)
                for k in range(len(b.tco))]
            assert isinstance(est, np.ndarray)


@pytest.mark.parametrize("config", ["pynq", "ultra96"])
def test_the_exact_layout_of_a_batch_is_each_schedules(config: str) -> None:
    """``space.exact_layout``'s predicate over a ``TileBatch`` (how ``rank`` filters a graph's
    space) answers each schedule's own answer, for convolutions (folded and plain, strided)
    and a matmul, and answers both ways somewhere (the rule is not vacuous here)."""
    hw = HwConfig.from_yaml(shipped_configs()[config])
    seen: set[bool] = set()
    for name in ("resnet18:C1", "resnet18:C4", "resnet18:C7", "matmul", "dense"):
        w = resolve(name)
        problem = driver.space_of(w, hw)
        for f in problem.folds:
            ok = exact_layout(problem.spec, hw, f)
            for _, b in problem.fold_batches(f.kind):
                got = ok(b)
                assert isinstance(got, np.ndarray) and got.shape == b.tco.shape
                for k in range(len(b.tco)):
                    one = ok(b.schedule(k))
                    assert isinstance(one, bool) and bool(got[k]) is one
                    seen.add(one)
    assert seen == {True, False}
