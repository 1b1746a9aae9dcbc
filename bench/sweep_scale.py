"""Sweep scale benchmark: how a ``vta sweep`` grows with its grid, in two modes.

``--mode grid`` (the issue-25 case: a 100 x 100 grid printed nothing in 300 s and grew to
3.1 GB): a grid of N x N points through ``vta sweep --force``, varying the clock and the
board's LUT limit (``board.*`` fields: every point shares one cache key, so the benchmark
measures the sweep's own machinery, not the simulator), at ``--trials 0`` (the default
schedule) without the bit-exact check. Peak resident set (``ru_maxrss`` of the child), wall
time, the time to its first row on stdout and the rows it printed are reported for each size,
so memory against grid size reads off the table: bounded means it does not grow with the
point count.

``--mode network`` (issue 22: a 100-point whole-ResNet-18 sweep with default schedules):
``--points`` distinct hardware points (memory latency x bus width x reads in flight around
pynq: every point its own cache key, so every point compiles and simulates all 11 distinct
convolutions) through ``vta sweep resnet18 --trials 0 --no-check`` on each ``--executors``
entry (``workers:N``: ``--workers N``; ``local:N``: ``--cluster local:N``, a Dask LocalCluster).
Each row's arrival time and the CPU seconds of the sweep's processes then (``/proc``) are
recorded; after ``--sample`` rows (or ``--budget-s``) the child is
stopped and the whole sweep's time is *extrapolated*: the time to the first row plus the
median seconds between rows times the points left (rows arrive a chunk of points at a time;
the seconds per point are the chunk's over its points). A fresh cache per run: nothing is
answered from an earlier one.

    python bench/sweep_scale.py --mode grid [--sizes 10,32,100] [--workload matmul:16x16x16]
    python bench/sweep_scale.py --mode network [--points 100] [--sample 6]
        [--executors workers:1,workers:2,local:1,local:2] [--budget-s 600]

Prints a table and writes bench/results/sweep_scale.json (grid) or
bench/results/sweep_network.json (network).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: the network grid's axes around pynq (10 x 2 x 5 = 100 points, each its own cache key)
LATENCIES = [16, 24, 32, 40, 48, 56, 64, 72, 80, 88]
BUS_BYTES = [8, 16]
OUTSTANDING = [1, 2, 4, 8, 16]


def grid_text(n: int) -> str:
    """An n x n grid over ``board.clock_mhz`` and ``board.lut`` around pynq."""
    clocks = ", ".join(str(100 + i) for i in range(n))
    luts = ", ".join(str(53200 + i) for i in range(n))
    return (f"name: scale{n}\nbase: {ROOT / 'hwconfigs' / 'pynq.yaml'}\nboards: [pynq-z1]\n"
            f"trials: 0\ngrid:\n  board.clock_mhz: [{clocks}]\n  board.lut: [{luts}]\n")


def network_grid_text(points: int) -> str:
    """The first ``points`` (<= 100) of memory latency x bus width x reads in flight, as a grid
    of named points (the grid form has no way to take a prefix)."""
    combos = [(lat, bus, out) for lat in LATENCIES for bus in BUS_BYTES for out in OUTSTANDING]
    if not 1 <= points <= len(combos):
        raise SystemExit(f"--points must be 1..{len(combos)}, got {points}")
    lines = [f"name: net{points}", f"base: {ROOT / 'hwconfigs' / 'pynq.yaml'}",
             "boards: [pynq-z1]", "trials: 0", "points:"]
    for lat, bus, out in combos[:points]:
        lines.append(f"  lat{lat}_bus{bus}_out{out}: {{memory.latency: {lat}, "
                     f"memory.bus_bytes: {bus}, memory.outstanding: {out}}}")
    return "\n".join(lines) + "\n"


def run_one(n: int, workload: str, tmp: Path) -> dict[str, Any]:
    """One ``vta sweep --force`` of an n x n grid in a child; its peak RSS and timings."""
    grid = tmp / f"scale{n}.yaml"
    grid.write_text(grid_text(n))
    argv = [sys.executable, "-m", "vta.cli", "sweep", "--grid", str(grid), workload, "--force",
            "--workers", "1", "--no-check", "--out", str(tmp / f"scale{n}"), "--cache",
            str(tmp / f"scale{n}.sqlite")]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None
    first: float | None = None
    rows = 0
    for line in child.stdout:
        if line.startswith("clock_mhz="):
            rows += 1
            if first is None:
                first = time.perf_counter() - t0
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"vta sweep of {n}x{n} exited {child.returncode}: {' '.join(argv)}")
    return {"grid": f"{n}x{n}", "points": n * n, "rows_printed": rows,
            "first_row_s": round(first or 0.0, 2), "wall_s": round(wall, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "command": " ".join(argv[1:])}


def session_cpu_s(sid: int) -> float:
    """User + system CPU seconds of the live processes of session ``sid`` (the sweep's CLI
    and its worker processes: it runs in a session of its own), from ``/proc``; what the
    workers' CPU is at a row, before they are stopped (a stopped worker is never reaped, so
    ``getrusage`` would miss it). 0 where ``/proc`` cannot be read."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for d in Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the name: state, ppid, pgrp, session, ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def extrapolate(arrivals: list[float], cpu: list[float], points: int) -> dict[str, Any]:
    """Seconds and CPU seconds a point, and the whole sweep, from the rows' arrival times
    and the CPU seconds then. Rows of one chunk arrive together: they are grouped, and each
    chunk's seconds spread over its points (the first chunk also pays the start: imports,
    the cluster, the first compiles, so the rate is the later chunks'). The run is stopped at
    the first row of a chunk whose other rows were written with it: a last group shorter
    than the first counts as a whole chunk (the first group's size)."""
    groups: list[list[float]] = []
    for a in arrivals:
        if groups and a - groups[-1][-1] <= 0.5:
            groups[-1].append(a)
        else:
            groups.append([a])
    first_n = len(groups[0])
    complete = len(arrivals) == points
    later = sum(len(g) for g in groups[1:])
    if len(groups) > 1 and not complete and len(groups[-1]) < first_n:
        later += first_n - len(groups[-1])
    per_point = (arrivals[-1] - groups[0][-1]) / later if later else arrivals[0] / first_n
    cpu_per_point = (cpu[-1] - cpu[first_n - 1]) / later if later else cpu[0] / first_n
    whole = arrivals[-1] if complete else groups[0][-1] + per_point * (points - first_n)
    return {"rows_per_chunk": [len(g) for g in groups], "points_in_later_chunks": later,
            "s_per_point": round(per_point, 2), "cpu_s_per_point": round(cpu_per_point, 2),
            "whole_sweep_s": round(whole, 1),
            "whole_sweep_is": "measured" if complete else "extrapolated"}


def recompute(path: str) -> None:
    """Rewrite a network result file's derived figures (``extrapolate``) from its recorded
    arrivals and CPU seconds, without running anything."""
    data = json.loads(Path(path).read_text())
    for r in data["runs"]:
        r.update(extrapolate(r["row_arrivals_s"], r["cpu_s_at_rows"], r["points"]))
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    _network_table(data["runs"])
    print(f"rewrote {path}")


def _network_table(out: list[dict[str, Any]]) -> None:
    print(f"{'executor':>10} {'rows':>5} {'first row s':>11} {'s/point':>8} {'CPU s/pt':>8} "
          f"{'100-point sweep s':>17}  how")
    for r in out:
        print(f"{r['executor']:>10} {r['rows_seen']:>5} {r['first_row_s']:>11.1f} "
              f"{r['s_per_point']:>8.2f} {r['cpu_s_per_point']:>8.2f} "
              f"{r['whole_sweep_s']:>17.1f}  {r['whole_sweep_is']}")


def executor_flags(spec: str) -> list[str]:
    """``workers:N`` -> ``--workers N``; ``local:N`` -> ``--cluster local:N``."""
    kind, _, n = spec.partition(":")
    if kind == "workers" and n.isdigit():
        return ["--workers", n]
    if kind == "local" and n.isdigit():
        return ["--cluster", f"local:{n}"]
    raise SystemExit(f"--executors: expected workers:N or local:N, got {spec!r}")


def run_network(points: int, spec: str, sample: int, budget_s: float,
                tmp: Path) -> dict[str, Any]:
    """A ``points``-point ResNet-18 sweep on executor ``spec``, stopped after ``sample`` rows or
    ``budget_s`` seconds; the arrival time of each row and the extrapolated whole."""
    grid = tmp / f"net{points}.yaml"
    grid.write_text(network_grid_text(points))
    tag = spec.replace(":", "")
    argv = [sys.executable, "-m", "vta.cli", "sweep", "--grid", str(grid), "resnet18",
            "--trials", "0", "--no-check", *executor_flags(spec), "--out",
            str(tmp / f"net_{tag}"), "--cache", str(tmp / f"net_{tag}.sqlite")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    load = round(os.getloadavg()[0], 2)
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env, start_new_session=True)
    timer = threading.Timer(budget_s, lambda: os.killpg(child.pid, signal.SIGTERM))
    timer.start()
    assert child.stdout is not None
    arrivals: list[float] = []
    cpu: list[float] = []  # the session's CPU seconds at each row (the CLI and its workers)
    for line in child.stdout:
        if line.startswith("lat"):
            arrivals.append(time.perf_counter() - t0)
            cpu.append(session_cpu_s(child.pid))
            print(f"  {spec}: row {len(arrivals)} at {arrivals[-1]:.1f} s "
                  f"({cpu[-1]:.1f} CPU s)", flush=True)
            if len(arrivals) >= sample and len(arrivals) < points:
                os.killpg(child.pid, signal.SIGTERM)  # its own session: the workers too
                break
    timer.cancel()
    child.wait()
    wall = time.perf_counter() - t0
    complete = len(arrivals) == points
    if not arrivals:
        raise SystemExit(f"no row from {' '.join(argv)} in {wall:.0f} s")
    fig = extrapolate(arrivals, cpu, points)
    return {"executor": spec, "points": points, "rows_seen": len(arrivals),
            "complete": complete, "first_row_s": round(arrivals[0], 1),
            "row_arrivals_s": [round(a, 1) for a in arrivals],
            "cpu_s_at_rows": [round(c, 1) for c in cpu], "load_1min_at_start": load, **fig,
            "wall_s": round(wall, 1), "command": " ".join(argv[1:])}


def main_grid(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        for n in (int(x) for x in args.sizes.split(",")):
            out.append(run_one(n, args.workload, Path(d)))
            r = out[-1]
            print(f"{r['grid']:>8} {r['points']:>7,} points  rows {r['rows_printed']:>7,}  "
                  f"first row {r['first_row_s']:>6.1f} s  wall {r['wall_s']:>7.1f} s  "
                  f"peak RSS {r['peak_rss_mib']:>7.1f} MiB", flush=True)
    path = args.out or str(ROOT / "bench" / "results" / "sweep_scale.json")
    Path(path).write_text(json.dumps({"workload": args.workload, "runs": out,
                                      "note": "--workers 1 on a shared 2-core machine"},
                                     indent=2) + "\n")
    print(f"wrote {path}")


def main_network(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        for spec in args.executors.split(","):
            out.append(run_network(args.points, spec, args.sample, args.budget_s, Path(d)))
    _network_table(out)
    path = args.out or str(ROOT / "bench" / "results" / "sweep_network.json")
    Path(path).write_text(json.dumps({
        "workload": "resnet18 (11 distinct convolutions, 20 with repeats)",
        "grid": "memory.latency x memory.bus_bytes x memory.outstanding around pynq",
        "target": "100 points <= 300 s on 2 cores (<= 3 s a point)",
        "load_average_at_start": [round(x, 2) for x in load], "runs": out,
        "note": "a fresh cache per run; a run stopped early is extrapolated from its rows"},
        indent=2) + "\n")
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("grid", "network"), default="grid")
    ap.add_argument("--sizes", default="10,32,100", help="grid: grid sides, comma-separated")
    ap.add_argument("--workload", default="matmul:16x16x16", help="grid: the workload")
    ap.add_argument("--points", type=int, default=100, help="network: points in the grid")
    ap.add_argument("--sample", type=int, default=6,
                    help="network: stop after this many rows and extrapolate")
    ap.add_argument("--budget-s", type=float, default=600.0,
                    help="network: stop a run after this many seconds")
    ap.add_argument("--executors", default="workers:1,workers:2,local:1,local:2",
                    help="network: workers:N and/or local:N (Dask), comma-separated")
    ap.add_argument("--out", default=None)
    ap.add_argument("--recompute", default=None, metavar="JSON",
                    help="network: rewrite a result file's derived figures, running nothing")
    args = ap.parse_args()
    if args.recompute:
        recompute(args.recompute)
        return
    (main_network if args.mode == "network" else main_grid)(args)


if __name__ == "__main__":
    main()
