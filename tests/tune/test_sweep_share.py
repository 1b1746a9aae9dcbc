"""What a default-schedule sweep shares among its points (``vta.tune.sweep_share``, issue 22).

The split of the hardware fields is derived from the code here: the lowering and every pass of
the pipeline run on a configuration that records each field it reads, and the fields each step
reads are held to the module's classification. Then: the shared compiles give the cold
compile's programs and choices at every point; a field no compile step reads gives the same
program object; a structural field puts a point in another group (compiled anew); the sweep's
per-point cycles are what ``vta run --hw POINT`` gives."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from vta.cli import main
from vta.compiler.accel import driver
from vta.compiler.accel.passes.emit import emit_program
from vta.compiler.accel.pipeline import PASSES
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.ops.workloads import Workload, resolve
from vta.config import HwConfig
from vta.run import layer as layer_module
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget
from vta.sim.machine import simulate
from vta.tune.executor import LocalExecutor
from vta.tune.sweep import largest_first, load_grid, pack_groups, run_sweep
from vta.tune.sweep_share import (
    CHECK_FREE,
    NOT_HARDWARE,
    TIMED_PASSES,
    TIMING_FIELDS,
    DefaultGroup,
    SharedCompiles,
    check_digest,
    default_group,
    structural_digest,
)

ROOT = Path(__file__).resolve().parents[2]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"
#: C11's shape at 7x7 with 64 channels (three default candidates), and C1's at 28x28 (three
#: input channels: the folded layouts)
SMALL = dict(height=7, in_channels=64, out_channels=64)
FOLDED = dict(height=28, width=28)
#: fields read in messages only (a name a compile error gives)
LABELS = {"name", "source"}


def _layers() -> list[Workload]:
    return [resolve("resnet18:C11", [], **SMALL), resolve("resnet18:C1", [], **FOLDED)]


def _recording(hw: HwConfig, log: set[str]) -> HwConfig:
    """``hw`` as an object that adds each field read (``section.field``, or a top-level name)
    to ``log``. Its sections and itself hash by identity, so no cache keyed on the
    configuration answers for it: a step recorded on a fresh one computes (and records)
    everything it uses."""
    def recording_class(cls: type, prefix: str) -> type:
        names = {f.name for f in dataclasses.fields(cls)}

        def get(self: Any, k: str) -> Any:
            if k in names:
                log.add(f"{prefix}{k}")
            return object.__getattribute__(self, k)

        return type(f"Recording{cls.__name__}", (cls,), {
            "__slots__": (), "__getattribute__": get, "__hash__": object.__hash__,
            "__eq__": lambda a, b: a is b})

    def copy(obj: Any, cls: type) -> Any:
        new = object.__new__(cls)
        for f in dataclasses.fields(obj):
            object.__setattr__(new, f.name, getattr(obj, f.name))
        return new

    sections = {f.name: copy(getattr(hw, f.name),
                             recording_class(type(getattr(hw, f.name)), f.name + "."))
                for f in dataclasses.fields(hw)
                if dataclasses.is_dataclass(getattr(hw, f.name))}
    top = recording_class(HwConfig, "")
    rec = copy(hw, top)
    for name, sec in sections.items():
        object.__setattr__(rec, name, sec)
    log.clear()  # copying read every field
    return rec


def _reads(w: Workload, hw: HwConfig) -> dict[str, set[str]]:
    """The fields each compile step (``lower``, each pass, ``emit``) reads, over the default
    candidates of ``w`` on ``hw``; each candidate's recorded compile must give
    ``driver.build``'s program (the recording changes nothing)."""
    out: dict[str, set[str]] = {}
    problem = driver.space_of(w, hw)
    for p in driver.default_points(w, hw):
        fold, sch = problem.schedule(p)
        log: set[str] = set()
        rec = _recording(hw, log)
        func = lower_op(driver.op_compute(w, rec, sch, w.epilogue, fold), rec, sch)
        out.setdefault("lower", set()).update(log)
        for name, fn, _ in PASSES:
            rec = _recording(hw, log)
            func = fn(func, rec)
            out.setdefault(name, set()).update(log)
        rec = _recording(hw, log)
        program = emit_program(func, rec)
        out.setdefault("emit", set()).update(log)
        assert program == driver.build(w, hw, p).program
    return out


@pytest.fixture(scope="module")
def configs() -> list[HwConfig]:
    """pynq, its Chisel timing, a separate ALU with two banks, and an 8x8 GEMM core."""
    pynq = HwConfig.load(PYNQ)
    return [pynq, HwConfig.load(ROOT / "hwconfigs" / "pynq_tsim.yaml"),
            HwConfig.load(ROOT / "hwconfigs" / "pynq_overlap.yaml"),
            pynq.with_changes(**{"gemm.block_in": 8, "gemm.block_out": 8,
                                 "scratchpad.inp": 16384, "scratchpad.wgt": 65536,
                                 "scratchpad.acc": 65536, "scratchpad.out": 16384})]


def test_the_classification_names_real_fields(configs: list[HwConfig]) -> None:
    d = configs[0].to_dict()
    for f in TIMING_FIELDS | NOT_HARDWARE:
        sec, _, leaf = f.partition(".")
        assert sec in d and (not leaf or leaf in d[sec]), f
    assert CHECK_FREE <= TIMING_FIELDS
    assert TIMED_PASSES <= {n for n, _, _ in PASSES}


def test_what_each_compile_step_reads_is_what_sweep_share_says(
        configs: list[HwConfig]) -> None:
    """No step reads the board, the energy model or the stock claim; the lowering, emit and
    every pass outside ``TIMED_PASSES`` read no timing field (so their output is a function of
    their input and ``structural_digest``), and each timed pass does read one."""
    seen: dict[str, set[str]] = {}
    for hw in configs:
        for w in _layers():
            for step, fields in _reads(w, hw).items():
                seen.setdefault(step, set()).update(fields)
    assert set(seen) == {"lower", "emit", *(n for n, _, _ in PASSES)}
    for step, fields in seen.items():
        hardware_only = {f for f in fields if f.partition(".")[0] in NOT_HARDWARE} - LABELS
        assert not hardware_only, (step, hardware_only)
        timing = fields & TIMING_FIELDS
        if step in TIMED_PASSES:
            assert timing, f"{step} reads no timing field: it need not be re-run"
        else:
            assert not timing, f"{step} reads {sorted(timing)}: it belongs in TIMED_PASSES"


def _cold(w: Workload, hw: HwConfig) -> tuple[driver.Compiled, int]:
    """``driver.compile_workload`` with the timing-only simulator as its oracle (what ``vta
    run`` does) and the chosen program's cycles."""
    c = driver.compile_workload(
        w, hw, cost=lambda p: int(simulate(p, hw, timing_only=True).stats.cycles))
    return c, int(simulate(c.program, hw, timing_only=True).stats.cycles)


def test_shared_compiles_choose_and_build_what_a_cold_compile_does() -> None:
    """At points differing in DRAM latency and bus width (fields the compile reads: the
    choice and even the programs change), a group's figures are the cold compile's at each:
    the schedule, the cycles; and the compiles were shared (the lowering ran fewer times than
    candidates were compiled)."""
    pynq = HwConfig.load(PYNQ)
    hws = tuple(pynq.with_changes(**{"memory.latency": lat, "memory.bus_bytes": bus})
                for lat in (16, 40, 88) for bus in (8, 16))
    made: list[SharedCompiles] = []

    class Counting(SharedCompiles):
        def __init__(self, workload: Workload) -> None:
            super().__init__(workload)
            made.append(self)

    for w in _layers():
        made.clear()
        with pytest.MonkeyPatch.context() as m:
            m.setattr("vta.tune.sweep_share.SharedCompiles", Counting)
            got = default_group(DefaultGroup(w, hws, check=False))
        for hw, res in zip(hws, got, strict=True):
            c, cycles = _cold(w, hw)
            assert res["cycles"] == cycles, (w.name, hw.memory)
            assert res["schedule"] == {"fold": c.fold_kind, **dataclasses.asdict(c.schedule)}
        [shared] = made
        compiled = 3 * len(hws)
        assert shared.ran["lower"] + shared.reused["lower"] == compiled
        assert shared.ran["lower"] < compiled and shared.reused["coproc_sync"] > 0


def test_a_field_no_step_reads_gives_the_same_program_and_a_structural_one_is_refused() -> None:
    """Two points differing only in the command queue's depth, the clock or the energy scale
    (no compile step reads them) get the very same program object, no pass re-run after the
    timed ones came out equal; a point differing in a buffer size (a structural field) is not
    this group's: ``SharedCompiles`` refuses it, and the sweep gives it a group of its own."""
    pynq = HwConfig.load(PYNQ)
    w = _layers()[0]
    fold, sch = driver.space_of(w, pynq).schedule(driver.default_points(w, pynq)[0])
    shared = SharedCompiles(w)
    first = shared.compile(pynq, fold, sch)
    for change in ({"queues.command_depth": 64}, {"board.clock_mhz": 200.0},
                   {"energy.scale": 0.5}):
        other = pynq.with_changes(**change)
        assert structural_digest(other) == structural_digest(pynq)
        again = shared.compile(other, fold, sch)
        assert again.program is first.program
    assert shared.ran["lower"] == 1 and shared.ran["coproc_sync"] == 1
    assert shared.ran["emit"] == 1 and shared.reused["emit"] == 3
    smaller = pynq.with_changes(**{"scratchpad.wgt": 131072})
    assert structural_digest(smaller) != structural_digest(pynq)
    with pytest.raises(ValueError, match="another structure"):
        shared.compile(smaller, fold, sch)
    # DRAM timing is in the check-free set, a pipeline depth is not
    assert check_digest(pynq.with_changes(**{"memory.latency": 88})) == check_digest(pynq)
    assert check_digest(pynq.with_changes(**{"gemm.pipeline_depth": 8})) != check_digest(pynq)


def test_a_sweep_groups_points_by_structure_and_checks_each_program_once(
        tmp_path: Path) -> None:
    """One task per layer and structure: the two DRAM points share one, the smaller weight
    buffer has its own, the fast clock shares the base's run; with the check, the points
    whose programs are the same run it once with values (the others from their own timing
    run, the verdict carried), and every point is checked ok."""
    path = tmp_path / "g.yaml"
    path.write_text(f"base: {PYNQ}\nboards: [pynq-z1]\ntrials: 0\npoints:\n"
                    f"  base: {{memory.latency: 40}}\n"
                    f"  deep queues: {{memory.latency: 40, queues.command_depth: 64}}\n"
                    f"  slow dram: {{memory.latency: 88}}\n"
                    f"  fast clock: {{memory.latency: 40, board.clock_mhz: 200}}\n"
                    f"  half wgt: {{memory.latency: 40, scratchpad.wgt: 131072}}\n")
    grid = load_grid(path)
    tasks: list[DefaultGroup] = []
    results: list[list[dict[str, Any]]] = []

    class Recording(LocalExecutor):
        def map_unordered(self, fn: Any, items: Any) -> Any:
            items = list(items)
            tasks.extend(items)
            for i, r in super().map_unordered(fn, items):
                results.append(r)
                yield i, r

    with Recording(1) as ex:
        res = run_sweep(grid, ["resnet18:C11"], ex, check=True)
    assert [p.point.name for p in res.points] == [p.name for p in grid.points]
    assert sorted(len(t.hws) for t in tasks) == [1, 3]  # base, deep queues, slow dram | half
    assert all(p.status == "ok" and p.passed for p in res.points)
    rows = {p.point.name: p for p in res.points}
    assert rows["fast clock"].cycles == rows["base"].cycles
    verdicts = [r["verify"] for batch in results for r in batch]
    assert sum(not v["timing_only"] for v in verdicts) >= 2  # each structure's first
    assert sum(v["timing_only"] for v in verdicts) >= 1  # deep queues: base's program
    for p in res.points:
        [layer] = p.layers
        assert layer["sim_cycles"] == layer["cycles"]


def test_sweep_cycles_are_what_vta_run_gives_for_the_point(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each point's cycles (a small grid over DRAM latency and bus width, one layer) are
    those ``vta run --hw POINT.yaml --no-cache`` prints for that configuration."""
    path = tmp_path / "g.yaml"
    path.write_text(f"base: {PYNQ}\nboards: [pynq-z1]\ntrials: 0\ngrid:\n"
                    f"  memory.latency: [16, 88]\n  memory.bus_bytes: [8, 16]\n")
    grid = load_grid(path)
    with LocalExecutor(1) as ex:
        res = run_sweep(grid, ["resnet18:C11"], ex, check=False)
    for p in res.points[::3]:  # two of the four
        assert p.hw is not None
        hw_yaml = tmp_path / f"{p.point.name.replace(' ', '_')}.yaml"
        hw_yaml.write_text(yaml.safe_dump(p.hw.to_dict()))
        assert main(["run", "resnet18:C11", "--hw", str(hw_yaml), "--no-cache",
                     "--json"]) == 0
        ran = json.loads(capsys.readouterr().out)
        assert ran["cycles"] == p.cycles
        assert ran["energy"]["total_uj"] == pytest.approx(p.energy_uj, rel=1e-12)


def test_chunks_keep_a_structure_whole_when_it_fits() -> None:
    """``pack_groups``: groups in order, a chunk never over ``size``, a group that fits never
    split, a larger one cut into whole chunks and a rest, nothing lost or reordered."""
    groups = [list("aaa"), list("bb"), list("ccc"), list("ddddddddd"), list("e")]
    chunks = list(pack_groups(groups, 4))
    assert chunks == [list("aaa"), list("bb"), list("ccc"), list("dddd"), list("dddd"),
                      list("de")]
    assert [x for c in chunks for x in c] == [x for g in groups for x in g]
    assert list(pack_groups([list("ab"), list("c")], 4)) == [list("abc")]
    assert list(pack_groups([], 4)) == []


def test_a_checked_group_draws_one_reference_and_each_point_is_a_lone_run() -> None:
    """With the check, a group's points (here: pipeline depths, so each has its own
    ``check_digest`` and runs its own check) share one draw of the random inputs and one
    numpy answer (``run_layer``'s ``references``); each point's verdict, cycles, utilization
    and machine bound are those of a lone ``run_layer`` of the cold compile at that point
    (inputs drawn and answer computed for it alone)."""
    pynq = HwConfig.load(PYNQ)
    hws = tuple(pynq.with_changes(**{"gemm.pipeline_depth": d, "memory.latency": lat})
                for d, lat in ((4, 32), (6, 16), (8, 88)))
    assert len({check_digest(hw) for hw in hws}) == len(hws)
    assert len({structural_digest(hw) for hw in hws}) == 1
    w = _layers()[0]
    drawn: list[Any] = []
    real = layer_module.layer_reference

    def counting(*a: Any, **k: Any) -> Any:
        drawn.append(a[0])
        return real(*a, **k)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(layer_module, "layer_reference", counting)
        got = default_group(DefaultGroup(w, hws, check=True))
    assert drawn == [w.spec]  # one reference for the three checks
    for hw, res in zip(hws, got, strict=True):
        v = res["verify"]
        assert v["timing_only"] is False
        c, cycles = _cold(w, hw)
        lone = run_layer(w, AccelTarget(hw), compiled=c)
        sm = lone.summary()
        assert (v["passed"], v["cycles"], v["utilization"], v["of_machine_bound"]) == \
            (True, lone.cycles, sm["utilization"], sm["of_machine_bound"])
        assert res["cycles"] == cycles == lone.cycles


def test_tasks_go_largest_first_and_keep_their_order_among_equals() -> None:
    """``largest_first``: by estimated work, descending; equal work in the given order;
    nothing lost."""
    tasks = [("a", 2), ("b", 5), ("c", 2), ("d", 9), ("e", 5)]
    assert largest_first(tasks, lambda t: t[1]) == [("d", 9), ("b", 5), ("e", 5), ("a", 2),
                                                    ("c", 2)]
    assert largest_first([], lambda t: 0) == []
