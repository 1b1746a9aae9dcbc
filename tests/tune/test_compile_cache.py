"""The persistent compile cache (``vta.tune.compile_cache``): a warm request compiles nothing and
gives the same program; the key follows the hardware's content, the request and the compiler;
a damaged row is compiled again, never used; ``vta run`` (a layer, a network's layers, the
whole graph) keeps and reuses programs, and ``--no-cache`` neither reads nor writes."""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from vta.cli import main
from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.graph import interp, models
from vta.graph.ir import Graph
from vta.run.targets import AccelTarget
from vta.tune import compile_cache
from vta.tune.cache import Cache
from vta.tune.compile_cache import CompileCache, pack_compiled, unpack_compiled

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
#: a small layer: C11's shape at 7x7 with 64 channels
SMALL = dict(height=7, in_channels=64, out_channels=64)


def _w():  # type: ignore[no-untyped-def]
    return resolve("resnet18:C11", [], **SMALL)


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("compiled although the cache holds the program")

    monkeypatch.setattr(driver, "_compile_with", refuse)


def test_warm_request_compiles_nothing_and_gives_the_same_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(PYNQ)
    t = AccelTarget(hw)
    with Cache(tmp_path / "c.sqlite") as cache:
        t.memo = memo = CompileCache(cache, hw)
        cold = t.compile_layer(_w())
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 0} and memo.count() == 1
        with monkeypatch.context() as m:
            _no_compiling(m)
            warm = t.compile_layer(_w())
        assert memo.stats["hits"] == 1
    assert warm.program == cold.program and warm.schedule == cold.schedule
    assert warm.fold_kind == cold.fold_kind and warm.hw is hw
    assert warm.result.seconds < cold.result.seconds
    # the same as compiling without any cache
    plain = AccelTarget(hw).compile_layer(_w())
    assert plain.program == warm.program


def test_a_warm_request_brings_its_roofline(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``driver.roofline`` is kept with the program (``Compiled.bound``): a request read from
    the cache answers it without computing it again (a warm ``vta run`` selected every fused
    chain's instructions for it), the same bound as a fresh compile's."""
    hw = HwConfig.load(PYNQ)
    plain = driver.roofline(driver.compile_workload(_w(), hw))
    with Cache(tmp_path / "c.sqlite") as cache:
        driver.compile_workload(_w(), hw, memo=CompileCache(cache, hw))
        with monkeypatch.context() as m:
            _no_compiling(m)
            m.setattr(driver, "_roofline", lambda c: pytest.fail("roofline computed again"))
            warm = driver.compile_workload(_w(), hw, memo=CompileCache(cache, hw))
            assert driver.roofline(warm) == plain


def test_key_is_the_hardware_content_the_request_and_the_compiler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(PYNQ)
    with Cache(tmp_path / "c.sqlite") as cache:
        memo = CompileCache(cache, hw)
        driver.compile_workload(_w(), hw, memo=memo)
        # a renamed copy of the same hardware: a hit, answered with the caller's config
        renamed = hw.with_changes(name="pynq_copy")
        other = CompileCache(cache, renamed)
        with monkeypatch.context() as m:
            _no_compiling(m)
            c = driver.compile_workload(_w(), renamed, memo=other)
        assert other.stats["hits"] == 1 and c.hw is renamed
        # another request (a forced knob, another epilogue) or hardware: a miss
        driver.compile_workload(_w(), hw, memo=memo, vthreads=1)
        bigger = hw.with_changes(**{"memory.bus_bytes": 16})
        driver.compile_workload(_w(), bigger, memo=CompileCache(cache, bigger))
        assert memo.count() == 3
        # another compiler version: a miss
        monkeypatch.setattr("vta.tune.compile_cache.compiler_version", lambda: "changed")
        fresh = CompileCache(cache, hw)
        driver.compile_workload(_w(), hw, memo=fresh)
        assert fresh.stats == {"hits": 0, "misses": 1, "rejected": 0}


def test_a_damaged_row_is_compiled_again_and_replaced(tmp_path: Path) -> None:
    hw = HwConfig.load(PYNQ)
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        good = driver.compile_workload(_w(), hw, memo=CompileCache(cache, hw))
    db = sqlite3.connect(path)
    db.execute("UPDATE compiled SET blob = CAST('junk' AS BLOB)")
    db.commit()
    db.close()
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        again = driver.compile_workload(_w(), hw, memo=memo)
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 1}
        assert again.program == good.program
        driver.compile_workload(_w(), hw, memo=memo)
        assert memo.stats["hits"] == 1  # the row was replaced by a sound one


def test_vta_run_keeps_and_reuses_programs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "c.sqlite"
    run = ["run", "--hw", PYNQ, "resnet18", "--layers", "C11,C10", "--cache", str(cache)]
    assert main(run) == 0
    cold = capsys.readouterr()
    assert "0 from the cache, 2 compiled" in cold.err
    assert main(run) == 0
    warm = capsys.readouterr()
    assert "2 from the cache, 0 compiled" in warm.err
    cycles = [line.split()[:3] for line in cold.out.splitlines() if "resnet18:C1" in line]
    assert cycles == [line.split()[:3] for line in warm.out.splitlines()
                      if "resnet18:C1" in line]
    # --no-cache: nothing read, nothing written
    fresh = tmp_path / "none.sqlite"
    assert main([*run[:-1], str(fresh), "--no-cache"]) == 0
    assert "compile cache" not in capsys.readouterr().err and not fresh.exists()
    # --dump-ir needs the IR after each pass, which the cache does not keep: it compiles
    shape = [a for k, v in SMALL.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["run", "--hw", PYNQ, "resnet18:C11", *shape, "--cache", str(cache),
                 "--dump-ir", "emit"]) == 0
    assert "compile cache" not in capsys.readouterr().err


def test_the_whole_graph_takes_the_cache_and_no_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    small = dict(image=32, width=16, classes=10)
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **small))
    cache = tmp_path / "c.sqlite"
    run = ["run", "--hw", PYNQ, "resnet18", "--cache", str(cache)]
    assert main(run) == 0
    cold = capsys.readouterr()
    assert "0 from the cache, " in cold.err and "PASS" in cold.out
    assert main(run) == 0
    warm = capsys.readouterr()
    n = int(cold.err.split("0 from the cache, ")[1].split()[0])
    assert f"{n} from the cache, 0 compiled" in warm.err and "PASS" in warm.out
    table = lambda out: [r for r in out.splitlines() if r[:3].strip().isdigit()]  # noqa: E731
    assert table(cold.out) == table(warm.out)
    assert main([*run, "--no-cache"]) == 0
    assert "compile cache" not in capsys.readouterr().err


def test_rows_hold_encoded_words_and_the_format_is_in_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's program is its instruction and micro-op words beside small metadata (format
    ``FORMAT``): it unpacks to the same program, schedule and fold; a row of another format is
    another key (a miss, never misread); words that no longer decode (a sound digest over
    them) are a damaged row: compiled again."""
    hw = HwConfig.load(PYNQ)
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        good = driver.compile_workload(_w(), hw, memo=CompileCache(cache, hw))
    blob = pack_compiled(good, hw)
    assert blob is not None and len(blob) < 20 * len(good.program.instructions) + 4 * sum(
        len(u) for u in good.program.uops.values()) + 4096
    back = unpack_compiled(blob, hw)
    assert back.program == good.program and back.schedule == good.schedule
    assert back.fold == good.fold and back.hw is hw and back.result.ir == {}
    with monkeypatch.context() as m, Cache(path) as cache:
        m.setattr(compile_cache, "FORMAT", compile_cache.FORMAT + 1)
        memo = CompileCache(cache, hw)
        driver.compile_workload(_w(), hw, memo=memo)
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 0} and memo.count() == 2
    meta, (insns, uops) = pickle.loads(blob)
    words = bytearray(insns)
    words[0] = (words[0] & ~0x7) | 6  # opcode 6: no instruction has it
    bad = pickle.dumps((meta, (bytes(words), uops)))
    assert unpack_compiled(bad, hw) is None
    db = sqlite3.connect(path)
    db.execute("UPDATE compiled SET blob = ?, sha256 = ?", (bad, hashlib.sha256(bad).hexdigest()))
    db.commit()
    db.close()
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        assert driver.compile_workload(_w(), hw, memo=memo).program == good.program
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 1}


def test_a_built_model_is_kept_and_a_damaged_one_built_again(tmp_path: Path) -> None:
    """``CompileCache.graph``: the second request reads the graph (same nodes, constants and
    scales); another parameter is another row; a damaged row is built again and replaced; a
    read-only cache builds and keeps nothing."""
    hw = HwConfig.load(PYNQ)
    built: list[dict[str, int]] = []

    def small(**kw: int) -> Graph:
        built.append(kw)
        return models.resnet18(image=32, width=16, classes=10, **kw)

    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        cold = memo.graph(small, batch=1)
        warm = memo.graph(small, batch=1)
        assert built == [{"batch": 1}] and memo.graph_hits == 1
        memo.graph(small, batch=2)
        assert len(built) == 2
    assert [n.op for n in warm.nodes] == [n.op for n in cold.nodes]
    for a, b in zip(warm.constants(), cold.constants(), strict=True):
        assert a.name == b.name and a.type == b.type and np.array_equal(a.data, b.data)
    image = models.random_image(0, cold.inputs[0].type.shape)
    ran = [interp.run_graph(g, {g.inputs[0]: image}) for g in (cold, warm)]
    assert all(np.array_equal(ran[0][v], ran[1][w])
               for v, w in zip(cold.outputs, warm.outputs, strict=True))
    db = sqlite3.connect(path)
    db.execute("UPDATE graphs SET blob = CAST('junk' AS BLOB)")
    db.commit()
    db.close()
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        memo.graph(small, batch=1)
        assert memo.graph_rejected == 1 and len(built) == 3
        memo.graph(small, batch=1)
        assert memo.graph_hits == 1 and len(built) == 3
    with Cache(path, readonly=True) as cache:
        memo = CompileCache(cache, hw)
        memo.graph(small, batch=3)
        memo.graph(small, batch=3)
        assert len(built) == 5 and memo.graph_hits == 0


def test_the_graph_runs_seconds_line_breaks_the_wall_time_down(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``vta run`` of a whole graph prints where its wall time went: startup, the graph's
    build (or the cache's answer), compile, simulate, check, interpreter, the rest; the JSON
    carries the same figures, and they add up to the wall time."""
    small = dict(image=32, width=16, classes=10)
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **small))
    run = ["run", "--hw", PYNQ, "resnet18", "--cache", str(tmp_path / "c.sqlite")]
    assert main(run) == 0
    assert main(run) == 0
    out = capsys.readouterr()
    assert "; the graph from the cache" in out.err.splitlines()[-1]
    line = next(x for x in out.out.splitlines() if x.startswith("startup "))
    for part in ("graph", "compile", "simulate", "check", "interpreter", "other", "(wall"):
        assert f" {part} " in line
    assert main([*run, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    phases = ("startup_s", "graph_s", "compile_s", "sim_s", "check_s", "reference_s",
              "other_s")
    assert sum(s[k] for k in phases) == pytest.approx(s["wall_s"], rel=1e-9)


def test_a_run_keeps_its_built_model_while_the_workers_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``graph_later`` leaves a built model's row to ``write_pending``; ``vta run`` writes it
    while the workers compile (its ``meanwhile``), else at the end of the run, and the row
    holds the graph as built (its bytes those of a fresh build): the next run reads it."""
    hw = HwConfig.load(PYNQ)
    small = dict(image=32, width=16, classes=10)

    def build(batch: int = 1) -> Graph:
        return models.resnet18(batch=batch, **small)

    with Cache(tmp_path / "a.sqlite") as cache:
        memo = CompileCache(cache, hw)
        memo.graph_later(build, batch=1)
        assert memo.pending is not None and _graph_rows(cache) == []
        memo.write_pending()
        assert memo.pending is None and len(_graph_rows(cache)) == 1
    fresh = build()
    want = pickle.dumps(Graph(fresh.name, fresh.inputs, fresh.outputs, fresh.nodes),
                        protocol=pickle.HIGHEST_PROTOCOL)
    monkeypatch.setitem(models.MODELS, "resnet18", build)
    written: list[bool] = []
    real = CompileCache.write_pending

    def noted(self: CompileCache) -> None:
        written.append(self.pending is not None)
        real(self)

    monkeypatch.setattr(CompileCache, "write_pending", noted)
    for jobs in ("2", "1"):  # the row written beside the workers, or at the run's end
        path = tmp_path / f"{jobs}.sqlite"
        run = ["run", "--hw", PYNQ, "resnet18", "--cache", str(path), "--jobs", jobs]
        written.clear()
        assert main(run) == 0
        assert written[0] and not any(written[1:])
        with Cache(path) as cache:
            assert _graph_rows(cache) == [want]
            assert CompileCache(cache, hw).graph(build, batch=1) is not None


def _graph_rows(cache: Cache) -> list[bytes]:
    if not cache.db.execute("SELECT name FROM sqlite_master WHERE name='graphs'").fetchone():
        return []
    return [bytes(r[0]) for r in cache.db.execute("SELECT blob FROM graphs")]
