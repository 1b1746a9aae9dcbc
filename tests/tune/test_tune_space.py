"""The schedule spaces: rules from the hardware, pruning with counted reasons, the footprint
against the compiled program's scratchpad allocation, every point compiles or is refused, and
the default schedule as the analytic model ranking the space."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel import driver
from vta.compiler.accel.schedules.default import ranked_schedules
from vta.compiler.accel.schedules.model import rank
from vta.compiler.accel.schedules.space import (
    COL_TILES,
    ROW_TILES,
    ConvSpace,
    divisors,
    fit_problems,
    footprint,
    tile_choices,
)
from vta.compiler.accel.vta_ir import SRAM
from vta.compiler.ir import expr as E
from vta.compiler.ir.space import Point, enumerate_space
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload, resolve
from vta.config import HwConfig
from vta.errors import ScheduleError
from vta.gpu.space import GpuSpace
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")


def test_the_rules_are_the_same_for_every_shape() -> None:
    """One space per hardware: binding two shapes materialises the same rules (divisors of the
    channel blocks, tile counts up to ROW_TILES / COL_TILES)."""
    space = ConvSpace(PYNQ)
    assert space.KNOBS == ("fold", "vthreads", "vt_axis", "order", "operands", "tco", "tci",
                           "th", "tw")
    for layer in ("C2", "C11", "C4"):
        spec = resolve(f"resnet18:{layer}").spec
        assert isinstance(spec, Conv2dSpec)
        p = space.bind(spec)
        first = {"fold": "none", "vthreads": 2, "vt_axis": "oh"}
        assert p.domain("tco", first) == divisors(spec.oc // 16)
        assert p.domain("tci", first) == divisors(spec.ic // 16)
        assert p.domain("th", first) == tile_choices(spec.oh, ROW_TILES)
        assert p.domain("tw", first) == tile_choices(spec.ow, COL_TILES)
        assert p.domain("vt_axis", {**first, "vthreads": 1}) == ("oh",)
        assert p.domain("order", first) == ("oc", "px")
        assert p.domain("operands", first) == ("once", "tile")
    assert tile_choices(56, 8) == (7, 8, 10, 12, 14, 19, 28, 56)
    c1 = ConvSpace(PYNQ).bind(resolve("resnet18:C1").spec)  # 3 channels: the folds too
    assert c1.domain("fold", {}) == ("none", "kw", "khkw")


def test_refusals_are_counted_by_reason_and_match_the_fit_check() -> None:
    spec = resolve("resnet18:C11").spec
    assert isinstance(spec, Conv2dSpec)
    p = ConvSpace(PYNQ).bind(spec)
    e = enumerate_space(p)
    brute: Counter[str] = Counter()
    for q in p.points():
        _, s = p.schedule(q)
        probs = fit_problems(spec, PYNQ, s)
        if probs:
            brute[probs[0][0]] += 1
    assert e.refused == brute and e.size == len(list(p.points()))
    assert set(e.refused) <= {"inp scratchpad", "wgt scratchpad", "acc scratchpad", "pad field"}
    assert all("does not fit the" in e.examples[k] for k in e.refused if "scratchpad" in k)
    assert len(e.valid) == e.size - sum(e.refused.values()) > 0


def test_points_outside_the_space_are_refused_with_the_knob_named() -> None:
    p = driver.space_of(resolve("resnet18:C2"), PYNQ)
    good = next(iter(p.points()))
    assert p.refusal(good.replace(tco=3)) is not None
    why = p.refusal(good.replace(tco=3))
    assert why is not None and why[0] == "outside the space" and "tco=3" in why[1]
    assert p.refusal(good.replace(fold="khkw"))[0] == "outside the space"  # type: ignore[index]
    with pytest.raises(ScheduleError, match="tco=3"):
        driver.build(resolve("resnet18:C2"), PYNQ, good.replace(tco=3))


def test_a_point_round_trips_through_json() -> None:
    p = driver.space_of(resolve("resnet18:C2"), PYNQ)
    for q in list(p.points())[:20]:
        assert Point.from_json(q.key()) == q


def _allocated(c: driver.Compiled) -> dict[str, int]:
    """Entries per scope of the compiled program's scratchpad allocation (isl's footprints):
    a buffer allocated per virtual thread counts once per thread."""
    table = next(t for f in reversed(c.result.ir.values()) if (t := f.attr(SRAM)) is not None)
    used: dict[str, int] = {}
    for buf, base, n in table:
        copies = 1 if isinstance(base, E.IntImm) else c.schedule.vthreads
        used[buf.scope] = used.get(buf.scope, 0) + n * copies
    return used


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_footprint_is_the_compiled_allocation(data: st.DataObject) -> None:
    """The space prunes with ``footprint`` (a closed form); the compiled program's scratchpad
    allocation (bound inference with isl) needs exactly as many entries per scope."""
    spec = Conv2dSpec(1, data.draw(st.sampled_from([16, 32, 64])), 10, 10,
                      data.draw(st.sampled_from([16, 32, 64])), 3, 3,
                      data.draw(st.sampled_from([1, 2])), 1)
    w = Workload("t", spec)
    p = driver.space_of(w, PYNQ)
    valid = enumerate_space(p).valid
    point = data.draw(st.sampled_from(valid))
    c = driver.build(w, PYNQ, point)
    _, s = p.schedule(point)
    assert _allocated(c) == footprint(spec, PYNQ, s)


def test_every_point_compiles_or_is_refused_with_its_reason() -> None:
    """A small matmul's whole space: every point that fits builds and runs on the timing-only
    simulator; every refused point's build raises the refusal's message."""
    w = resolve("matmul", [32, 32, 32])
    p = driver.space_of(w, PYNQ)
    cost = AccelTarget(PYNQ).cycles
    built = refused = 0
    for q in p.points():
        why = p.refusal(q)
        if why is None:
            assert cost(driver.build(w, PYNQ, q).program) > 0
            built += 1
        else:
            with pytest.raises(ScheduleError) as e:
                driver.build(w, PYNQ, q)
            assert str(e.value) == why[1]
            refused += 1
    assert built > 20


def test_the_default_is_the_model_ranking_the_space() -> None:
    """``ranked_schedules`` (the default model) is ``rank`` over the bound space with the
    two-thread rule, and ``compile_workload`` without an oracle compiles its first point."""
    w = resolve("resnet18:C5")
    spec = w.spec
    assert isinstance(spec, Conv2dSpec)
    ranked = rank(driver.space_of(w, PYNQ), w.epilogue, limit=5, prefer_two_threads=True)
    want = [driver.space_of(w, PYNQ).schedule(q)[1] for _, q in ranked]
    assert ranked_schedules(spec, PYNQ, 5, epi=w.epilogue) == want
    assert driver.default_points(w, PYNQ) == [q for _, q in ranked[:3]]
    assert driver.compile_workload(w, PYNQ).schedule == want[0]
    ests = [e for e, _ in rank(driver.space_of(w, PYNQ), w.epilogue, every_order=True)]
    assert ests == sorted(ests)


def test_gpu_spaces_prune_by_the_knobs_rules_and_the_problem() -> None:
    w = resolve("matmul", [64, 64, 64])
    for kind in ("simt", "wmma", "mma"):
        p = GpuSpace(kind).bind(w.spec)
        e = enumerate_space(p)
        assert e.valid and e.size == len(e.valid) + sum(e.refused.values())
        assert p.refusal(p.default()) is None, kind
        # no block tile past the smallest of the space covering 64
        assert all(q["bm"] <= 64 and q["bn"] <= 64 for q in e.valid)
    small = GpuSpace("wmma").bind(resolve("matmul", [8, 64, 64]).spec)
    assert enumerate_space(small).refused["smaller than a tile"] > 0


@pytest.mark.parametrize("config", ["pynq", "pynq_overlap"])
@pytest.mark.parametrize("layer", ["C10", "C11"])
def test_loop_order_and_operand_placement_run_bit_exact(config: str, layer: str) -> None:
    """Every (order, operands, threads) combination of a 1x1 stride-2 and a 3x3 layer, with
    one tile covering every input channel (so ``px`` hoists the input to the pixel tile and
    ``oc`` the weights to the channel tile), builds, allocates what ``footprint`` says and runs
    bit-exact against numpy on stock and banked accumulators (one thread on banked
    accumulators loads the operands once: its footprint was undercounted before)."""
    hw = HwConfig.from_yaml(ROOT / "hwconfigs" / f"{config}.yaml")
    w = resolve(f"resnet18:{layer}")
    p = driver.space_of(w, hw)
    valid = enumerate_space(p).valid
    seen = set()
    for q in valid:
        _, s = p.schedule(q)
        combo = (s.order, s.operands, s.vthreads, s.vt_axis)
        hoisted = s.tci == p.domain("tci", q.as_dict())[-1]
        if combo in seen or not hoisted or s.th * s.tw < 7:
            continue
        seen.add(combo)
        c = driver.build(w, hw, q)
        assert _allocated(c) == footprint(w.spec, hw, s), (combo, s)
        r = run_layer(w, AccelTarget(hw), compiled=c)
        assert r.passed, (combo, s)
    assert {o for o, *_ in seen} == {"oc", "px"}
    assert {x for _, x, *_ in seen} == {"once", "tile"}  # banked: "once" with one thread


OVERLAP = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_overlap.yaml")


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_one_thread_on_banked_accumulators_fits_one_bank(data: st.DataObject) -> None:
    """With one thread on banked accumulators, every acc buffer shares one bank: a point the
    space keeps builds with the allocation ``footprint`` says, a point it refuses (one bank
    too small, though the whole scratchpad is not) fails to build with the same message."""
    w = resolve(f"resnet18:{data.draw(st.sampled_from(['C4', 'C10', 'C11']))}")
    p = driver.space_of(w, OVERLAP, vthreads=1)
    q = data.draw(st.sampled_from(list(p.points())))
    why = p.refusal(q)
    if why is None:
        c = driver.build(w, OVERLAP, q)
        assert _allocated(c) == footprint(w.spec, OVERLAP, p.schedule(q)[1])
    else:
        with pytest.raises(ScheduleError) as e:
            driver.build(w, OVERLAP, q)
        assert str(e.value) == why[1]


def test_a_point_too_big_for_one_bank_is_refused_as_the_allocator_would() -> None:
    """A refusal for one bank (C4, one thread, pynq_overlap): ``build`` raises it, and the
    program compiled anyway (past the space's check) overflows the bank in scratchpad
    allocation: the space and the allocator agree."""
    from vta.errors import ScratchpadOverflow

    w = resolve("resnet18:C4")
    p = driver.space_of(w, OVERLAP, vthreads=1)
    q = next(q for q in p.points() if (r := p.refusal(q)) and "one acc bank" in r[1])
    with pytest.raises(ScheduleError, match="one acc bank"):
        driver.build(w, OVERLAP, q)
    fold, s = p.schedule(q)
    with pytest.raises(ScratchpadOverflow, match="bank"):
        driver._compile_with(w, OVERLAP, fold, s, w.epilogue)
