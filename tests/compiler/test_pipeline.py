"""The pass list, --dump-ir text, default schedules for every shipped config, named errors."""

import gc

import pytest
from _vta_helpers import HWCONFIGS, hw

from vta.compiler.accel import pipeline
from vta.compiler.accel.pipeline import PASS_NAMES, PASSES
from vta.compiler.accel.schedules.default import (
    ConvSchedule,
    ScheduleError,
    default_schedule,
    fit_report,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import RESNET18, Workload, resolve
from vta.config import HwConfig
from vta.errors import UnknownPass
from vta.run.targets import AccelTarget


def test_pass_order_and_reasons() -> None:
    assert [n for n, _, _ in PASSES] == [
        "unit_loops", "region_inference", "acc_inplace", "scratchpad_alloc", "inject_dma",
        "tensorize", "lower_alu", "uop_gen", "virtual_thread", "flatten", "hoist_resets",
        "drain_tail", "coproc_sync"]
    assert all((why and fn.__doc__ is None) or why for _, fn, why in PASSES)
    for _, fn, _ in PASSES:
        mod = __import__(fn.__module__, fromlist=["_"])
        assert "Pre:" in mod.__doc__ and "Post:" in mod.__doc__


def test_dump_ir_after_each_pass() -> None:
    c = AccelTarget(hw()).compile_layer(resolve("matmul", [16, 16, 16]))
    for name in ("input", *PASS_NAMES):
        text = c.result.dump(name)
        assert text.startswith(f"# after {name}")
    assert "dma_load.inp" in c.result.dump("inject_dma")
    assert "gemm(" in c.result.dump("tensorize")
    assert "alu.shr" in c.result.dump("lower_alu")
    assert "pop_prev" in c.result.dump("coproc_sync") or "push_next" in c.result.dump("coproc_sync")
    assert "FINISH" in c.result.dump("emit")
    assert c.result.dump("all").count("# after") == len(PASS_NAMES) + 1
    with pytest.raises(UnknownPass):
        c.result.dump("nope")


@pytest.mark.parametrize("cfg", HWCONFIGS, ids=lambda p: p.stem)
def test_every_resnet_layer_gets_a_fitting_schedule(cfg) -> None:  # type: ignore[no-untyped-def]
    h = HwConfig.from_yaml(cfg)
    for layer in RESNET18:
        spec = resolve(f"resnet18:{layer}").spec
        s = default_schedule(spec, h)
        fit_report(spec, h, s)
        assert s.vthreads in (1, 2)


def test_too_large_tile_fails_at_compile_time() -> None:
    w = Workload("c", Conv2dSpec(n=1, ic=64, h=56, w=56, oc=64, kh=3, kw=3, stride=1, pad=1))
    with pytest.raises(ScheduleError, match=r"inp scratchpad of pynq: needs .* bytes .*available "
                                            "32768 bytes"):
        AccelTarget(hw()).compile_layer(w, tco=4, tci=4, th=56, tw=56)


def test_overrides_are_honoured() -> None:
    spec = resolve("conv2d").spec
    s = default_schedule(spec, hw(), vthreads=1, th=4)
    assert s.vthreads == 1 and s.th == 4
    with pytest.raises(ScheduleError, match="must be >= 1"):
        ConvSchedule(0, 1, 1, 1)


def test_collector_paused_during_a_compile_and_restored() -> None:
    """``compile_func`` runs the passes with the cycle collector off and leaves it as it found
    it: on after a compile, on after a pass that raises, off when it was off."""
    seen: list[bool] = []

    def probe(func, hw):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return func

    def broken(func, hw):  # type: ignore[no-untyped-def]
        raise RuntimeError("a pass failed")

    c = AccelTarget(hw()).compile_layer(resolve("matmul", [16, 16, 16]))
    func = c.result.ir["input"]
    saved = pipeline.PASSES
    assert gc.isenabled()
    try:
        pipeline.PASSES = (("probe", probe, "test"), *saved)
        pipeline.compile_func(func, hw())
        assert seen == [False] and gc.isenabled()
        pipeline.PASSES = (("broken", broken, "test"),)
        with pytest.raises(RuntimeError, match="a pass failed"):
            pipeline.compile_func(func, hw())
        assert gc.isenabled()
        gc.disable()
        pipeline.PASSES = (("probe", probe, "test"), *saved)
        pipeline.compile_func(func, hw())
        assert not gc.isenabled()
    finally:
        gc.enable()
        pipeline.PASSES = saved


def test_a_compile_leaves_its_result_out_of_the_young_generation() -> None:
    """What a compile leaves alive is moved to the oldest generation (``gc.freeze`` then
    ``gc.unfreeze``), so the next young collection does not walk it; objects the process froze
    itself stay frozen (the move is skipped), and a garbage cycle made during the compile is
    still collected by a full collection."""
    import weakref

    class Node:
        pass

    refs: list[weakref.ref[Node]] = []

    def cycle(func, hw):  # type: ignore[no-untyped-def]
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        refs.append(weakref.ref(a))
        return func

    c = AccelTarget(hw()).compile_layer(resolve("matmul", [16, 16, 16]))
    func = c.result.ir["input"]
    saved = pipeline.PASSES
    try:
        pipeline.PASSES = (("cycle", cycle, "test"), *saved)
        gc.collect()
        r = pipeline.compile_func(func, hw())
        assert gc.isenabled() and gc.get_freeze_count() == 0
        young = {id(x) for x in gc.get_objects(0)}
        kept = [r.program.instructions[0], r.ir["flatten"], r.ir["coproc_sync"].body]
        assert all(gc.is_tracked(x) and id(x) not in young for x in kept)
        assert refs[0]() is not None  # the cycle waits ...
        gc.collect()
        assert refs[0]() is None  # ... for the next full collection
        gc.freeze()
        frozen = gc.get_freeze_count()
        pipeline.compile_func(func, hw())
        assert gc.get_freeze_count() == frozen  # the process's frozen objects stay frozen
    finally:
        gc.unfreeze()
        pipeline.PASSES = saved
