"""The whole-graph ``vta run`` cold and warm (issue 22): where its wall time goes.

Runs ``vta run --hw hwconfigs/pynq.yaml resnet18`` in child processes: ``--cold N`` times with a
fresh cache file each (``VTA_CACHE``: every kernel compiled, the model built and calibrated),
then ``--warm N`` times on the last of them (the compile cache answers every kernel and the
built model). ``--compare-jobs`` adds runs with ``--jobs 1`` (the kernels compiled and
simulated in the vta process alone: the figure without ``vta.run.compile_pool`` and the
side-by-side simulation) and ``--jobs <cores>`` (workers whatever the load, where the default
takes only the idle cores) beside the default ones; with ``--before DIR`` (another
checkout, e.g. main's) the same runs of that tree (its default and, with ``--compare-jobs``,
its ``--jobs`` variants) are interleaved with this one's, run for run, so that all see the
same machine load. For each run: wall seconds, CPU seconds (user + system
of the child and its workers, ``RUSAGE_CHILDREN``), the load average before it, and the run's
own breakdown (the report's seconds line: startup, graph, compile, simulate, check,
interpreter, other). The medians are the figures; the issue's targets are cold <= 3 s and warm
<= 1 s wall.

The children run with Python's bytecode cache on (``PYTHONPYCACHEPREFIX``, a directory of this
run's, filled by ``compileall`` first), as an installed package has it, even where the
environment sets ``PYTHONDONTWRITEBYTECODE`` (``--no-bytecode`` keeps the environment's: every
import then compiles its source, several tenths of a second of startup). ``--source-too`` adds
this tree's default runs without the bytecode cache beside them (variant ``this, no .pyc``):
both startups, from the same runs' seconds lines, in one table.

    python bench/warm_run.py [--cold 3] [--warm 3] [--compare-jobs] [--source-too]
        [--before /work/main]

Prints a table and writes bench/results/warm_run.json.

``--callgrind`` instead counts the instructions (valgrind's callgrind, ``bench/callgrind.py``)
of one cold run (``--no-cache``) and one warm run of this tree and ``--before``'s, each in one
process (``--jobs 1``: callgrind follows no worker) after an unmeasured run that fills the
bytecode, dataclass-code and compile caches: the work a run does, with none of the seconds'
noise (this VM's CPU seconds move 30-50 % between its quiet and slow spells). It is the CPU
of the run whole, not its wall on two cores.

    python bench/warm_run.py --callgrind [--before /work/main] [--out FILE]

The machine's speed, measured beside every timed run: just before each run two copies of a
fixed workload (``CALIBRATION``: Python's dictionaries, calls and sorting, and numpy integer
arithmetic, imports included; nothing of vta's) start together in child processes, and the
wall until both have ended is the run's ``calibration_s``: what two busy cores of the VM did
at that moment. The median wall over the median ``calibration_s`` of the same runs
(``wall_per_calibration``) is the wall in units of the machine's speed, comparable between
samples taken in the VM's fast and slow spells and between rounds (a ratio of medians: one
calibration jitters by about a tenth, more than the runs do, so runs are not divided one by
one): the workload is fixed, never to be edited (a changed workload
would make the ratios of different rounds incomparable). ``--no-calibration`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import callgrind  # noqa: E402  (bench/callgrind.py)

COMMAND = ["run", "--hw", "hwconfigs/pynq.yaml", "resnet18"]
#: the report's seconds line: ``name 1.23 s`` pairs
_PART = re.compile(r"(startup|graph|compile|simulate|check|interpreter|other|wall) "
                   r"([0-9.]+) s")
_CYCLES = re.compile(r"total ([0-9,]+) cycles")
#: the interpreter's time beside the workers (inside the compile or simulate phase's wall)
_BESIDE = re.compile(r"interpreter [0-9.]+ s \(\+([0-9.]+) s beside")


def child_env(tree: Path, cache: Path, pycache: Path | None) -> dict[str, str]:
    """The environment of a child run of ``tree`` with ``cache`` (and ``pycache`` as the
    bytecode cache, or the environment's setting when None)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "VTA_CACHE": str(cache)}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache / tree.name)
    return env


#: a variant: the tree, its extra flags and whether it runs with the bytecode cache
Variant = tuple[Path, list[str], bool]


#: the machine-speed workload (``calibrate``): fixed for good, so that the ratio of the runs'
#: wall to it compares between samples and rounds; two copies take about 0.36 s on the project's
#: VM when it is quiet
CALIBRATION = """
import numpy as np
d = {}
for i in range(300000):
    d[i & 1023] = d.get(i & 1023, 0) + i * 3 // 7
s = sorted(range(200000), key=lambda x: (x * 7919) % 10007)
a = np.arange(1 << 20, dtype=np.int64)
for _ in range(100):
    a = (a * 1103515245 + 12345) & 0x7FFFFFFF
assert len(d) == 1024 and len(s) == 200000 and int(a[1]) >= 0
"""


def calibrate() -> float:
    """Seconds of wall for two copies of ``CALIBRATION`` started together in child
    processes (each a fresh interpreter importing numpy, as a run's processes are): the
    speed of two cores of the machine now."""
    t0 = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-c", CALIBRATION]) for _ in range(2)]
    codes = [c.wait() for c in children]
    wall = time.perf_counter() - t0
    if any(codes):
        raise SystemExit(f"the calibration workload exited {codes}")
    return wall


def one_run(tree: Path, cache: Path, pycache: Path | None, extra: list[str]) -> dict[str, Any]:
    """``vta run resnet18`` of ``tree`` with ``cache``: its wall and CPU seconds, the load
    before it, its seconds line's parts and its cycles."""
    argv = [sys.executable, "-m", "vta.cli", *COMMAND, *extra]
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, cwd=tree, env=child_env(tree, cache, pycache),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = child.communicate()
    wall = time.perf_counter() - t0
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        raise SystemExit(f"{tree}: vta run exited {child.returncode}: {err.strip()[-500:]}")
    line = next((x for x in out.splitlines() if "simulate" in x and " s" in x), "")
    cycles = _CYCLES.search(out)
    return {"wall_s": round(wall, 3),
            "cpu_s": round((now.ru_utime - before.ru_utime) + (now.ru_stime - before.ru_stime),
                           3),
            "load_1min": round(load, 2),
            "parts": _parts(line),
            "cycles": int(cycles.group(1).replace(",", "")) if cycles else None,
            "cache_line": err.strip().splitlines()[-1] if err.strip() else "",
            "passed": "PASS" in out}


def _parts(line: str) -> dict[str, float]:
    """A seconds line's parts by name (and ``interpreter_beside``: the interpreter's seconds
    inside the workers' phases, when the line has them)."""
    parts = {k: float(v) for k, v in _PART.findall(line)}
    beside = _BESIDE.search(line)
    if beside:
        parts["interpreter_beside"] = float(beside.group(1))
    return parts


def _median_parts(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k in runs[0]["parts"] if all(k in r["parts"] for r in runs)]
    return {k: statistics.median(r["parts"][k] for r in runs) for k in keys}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of a variant's cold and warm runs (with the calibration's and each run's
    wall per calibration where the runs were calibrated)."""
    out: dict[str, Any] = {}
    for kind in ("cold", "warm"):
        rs = [r for r in runs if r["kind"] == kind]
        if not rs:
            continue
        out[kind] = {"runs": len(rs),
                     "wall_s_median": statistics.median(r["wall_s"] for r in rs),
                     "cpu_s_median": statistics.median(r["cpu_s"] for r in rs),
                     "load_1min_median": statistics.median(r["load_1min"] for r in rs),
                     "parts_median": _median_parts(rs)}
        if all("calibration_s" in r for r in rs):
            calib = statistics.median(r["calibration_s"] for r in rs)
            out[kind]["calibration_s_median"] = calib
            out[kind]["wall_per_calibration"] = round(out[kind]["wall_s_median"] / calib, 3)
    out["cycles"] = sorted({r["cycles"] for r in runs})
    out["all_passed"] = all(r["passed"] for r in runs)
    return out


def compile_bytecode(trees: dict[str, Variant], pycache: Path) -> None:
    """Every tree's ``vta`` package compiled into ``pycache`` (as an install does)."""
    for tree in {t for t, _, _ in trees.values()}:
        env = child_env(tree, pycache / "unused.sqlite", pycache)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "vta")],
                       env=env, check=True, stdout=subprocess.DEVNULL)


def callgrind_compare(before: str | None, out: str) -> int:
    """``--callgrind``: instructions of one cold (``--no-cache``) and one warm ``vta run
    resnet18`` in one process (``--jobs 1``) of this tree and ``before``'s, printed side by
    side and written to ``out``; both must PASS with the same cycles (exit 1 otherwise)."""
    if not callgrind.available():
        print("warm_run --callgrind: valgrind is not installed (no valgrind on PATH): skipped, "
              "nothing measured")
        return 0
    trees = ([("before", Path(before).resolve())] if before else []) + [("this tree", ROOT)]
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as d:
        for k, (label, tree) in enumerate(trees):
            print(f"callgrind: {label} ({tree}) ...", flush=True)
            env = {**callgrind.child_env(str(tree)), "VTA_CACHE": str(Path(d) / f"{k}.sqlite"),
                   "PYTHONPYCACHEPREFIX": str(Path(d) / "pycache" / str(k))}
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "vta")],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            argv = [sys.executable, "-m", "vta.cli", *COMMAND]
            subprocess.run(argv, cwd=tree, env=env, capture_output=True, check=True)  # caches
            row: dict[str, Any] = {"tree": str(tree)}
            for kind, extra in (("cold", ["--no-cache", "--jobs", "1"]), ("warm", ["--jobs", "1"])):
                ir, text = callgrind.count(argv + extra, env, Path(d) / f"{k}.{kind}.out", tree)
                cycles = _CYCLES.search(text)
                row[kind] = {"ir": ir, "passed": "PASS" in text,
                             "cycles": int(cycles.group(1).replace(",", "")) if cycles else None}
            rows[label] = row
    print(f"{'tree':>10} {'cold Ir':>12} {'warm Ir':>12}  cycles  PASS")
    for label, r in rows.items():
        print(f"{label:>10} {r['cold']['ir'] / 1e6:>11,.1f}M {r['warm']['ir'] / 1e6:>11,.1f}M  "
              f"{r['cold']['cycles']}  {r['cold']['passed'] and r['warm']['passed']}")
    ok = all(r[kind]["passed"] for r in rows.values() for kind in ("cold", "warm")) and \
        len({r[kind]["cycles"] for r in rows.values() for kind in ("cold", "warm")}) == 1
    result: dict[str, Any] = {
        "mode": "callgrind", "command": "vta " + " ".join(COMMAND) + " (cold: --no-cache "
        "--jobs 1; warm: --jobs 1 on the compile cache an unmeasured run filled)",
        "load_average": [round(x, 2) for x in os.getloadavg()], "trees": rows, "ok": ok}
    if "before" in rows:
        for kind in ("cold", "warm"):
            b, a = rows["before"][kind]["ir"], rows["this tree"][kind]["ir"]
            result[f"{kind}_ir_ratio"] = a / b
            print(f"{kind} Ir this tree / before: {a / b:.4f} ({(a - b) / 1e6:+,.1f}M)")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0 if ok else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", type=int, default=3, help="cold runs per variant")
    ap.add_argument("--warm", type=int, default=3, help="warm runs per variant")
    ap.add_argument("--compare-jobs", action="store_true",
                    help="also run this tree with --jobs <cores> (workers whatever the load) "
                         "and --jobs 1 (no worker processes)")
    ap.add_argument("--before", default=None, help="another checkout to run alongside")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep the environment's bytecode setting")
    ap.add_argument("--source-too", action="store_true",
                    help="also run this tree's default without the bytecode cache")
    ap.add_argument("--callgrind", action="store_true",
                    help="count the instructions of one cold and one warm run in one process "
                         "(this tree and --before's) instead of timing runs")
    ap.add_argument("--no-calibration", action="store_true",
                    help="time no machine-speed workload before each run")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "warm_run.json"))
    a = ap.parse_args()
    if a.callgrind:
        raise SystemExit(callgrind_compare(a.before, a.out))
    bytecode = not a.no_bytecode
    variants: dict[str, Variant] = {"this": (ROOT, [], bytecode)}
    if a.compare_jobs:  # the default takes the idle cores: both ends named
        cpus = os.cpu_count() or 1
        variants[f"this --jobs {cpus}"] = (ROOT, ["--jobs", str(cpus)], bytecode)
        variants["this --jobs 1"] = (ROOT, ["--jobs", "1"], bytecode)
    if a.source_too:
        variants["this, no .pyc"] = (ROOT, [], False)
    if a.before:  # the before tree with the same --jobs variants (the same load, run for run)
        before = Path(a.before).resolve()
        theirs = {k.replace("this", "before", 1): (before, extra, pyc)
                  for k, (_, extra, pyc) in variants.items() if extra}
        variants = {"before": (before, [], bytecode), **theirs, **variants}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as d:
        pycache = Path(d) / "pycache"
        compile_bytecode({k: v for k, v in variants.items() if v[2]}, pycache)
        caches = {k: Path(d) / f"{i}.sqlite" for i, k in enumerate(variants)}
        plan = [("cold", i) for i in range(a.cold)] + [("warm", i) for i in range(a.warm)]
        for kind, i in plan:
            for k, (tree, extra, pyc) in variants.items():
                if kind == "cold":
                    caches[k].unlink(missing_ok=True)
                calib = None if a.no_calibration else calibrate()
                r = one_run(tree, caches[k], pycache if pyc else None, extra)
                r["kind"] = kind
                if calib is not None:
                    r["calibration_s"] = round(calib, 3)
                runs[k].append(r)
                speed = "" if calib is None else f"  calib {calib:5.2f} s"
                print(f"{k:>14} {kind:4} {i}  wall {r['wall_s']:6.2f} s  cpu {r['cpu_s']:6.2f} s"
                      f"  load {r['load_1min']:4.1f}{speed}  {r['parts']}", flush=True)
    summary = {k: {"tree": str(variants[k][0]), "flags": variants[k][1],
                   "bytecode": variants[k][2], **summarize(rs)} for k, rs in runs.items()}
    print(f"{'variant':>14} {'cold wall':>9} {'cold cpu':>8} {'warm wall':>9} {'warm cpu':>8}  "
          f"cycles")
    for k, s in summary.items():
        cold, warm = s.get("cold", {}), s.get("warm", {})
        print(f"{k:>14} {cold.get('wall_s_median', float('nan')):>9.2f} "
              f"{cold.get('cpu_s_median', float('nan')):>8.2f} "
              f"{warm.get('wall_s_median', float('nan')):>9.2f} "
              f"{warm.get('cpu_s_median', float('nan')):>8.2f}  {s['cycles']}")
    calibrated = [(k, kind, s[kind]) for k, s in summary.items() for kind in ("cold", "warm")
                  if "wall_per_calibration" in s.get(kind, {})]
    for k, kind, m in calibrated:
        print(f"{k:>14} {kind}: calibration {m['calibration_s_median']:.2f} s, wall "
              f"{m['wall_per_calibration']:.2f} calibrations (medians)")
    for k, s in summary.items():
        for kind in ("cold", "warm"):
            if kind in s:
                parts = "  ".join(f"{p} {v:.2f}" for p, v in s[kind]["parts_median"].items())
                print(f"{k:>14} {kind}: {parts}")
    Path(a.out).write_text(json.dumps({
        "command": "vta " + " ".join(COMMAND) + " (VTA_CACHE: a fresh file per cold run, the "
                   "last cold run's for the warm runs; BLAS threads as the environment sets them: "
                   f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')!r}; "
                   "since round 8 `vta` limits BLAS to one thread itself where none is set)",
        "targets": "cold <= 3 s wall, warm <= 1 s wall (issue 22)",
        "cpus": os.cpu_count(),
        "bytecode": "per variant ('bytecode': compiled first into a PYTHONPYCACHEPREFIX; else "
                    "the environment's setting: "
                    f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')})",
        "note": "medians; runs of the variants interleaved; CPU = user + system seconds of the "
                "child and its worker processes; load = 1-minute load average before each run; "
                "calibration_s = wall of two copies of the fixed CALIBRATION workload started "
                "together just before the run, wall_per_calibration = the median wall over the "
                "median calibration_s",
        "calibration": None if a.no_calibration else CALIBRATION,
        "summary": summary, "runs": runs}, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
