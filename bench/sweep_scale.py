"""Sweep scale benchmark: how a ``vta sweep`` grows with its grid, in three modes.

``--mode mix`` (the default; issue 22's target: a 100-point whole-ResNet-18 sweep with default
schedules in 5 minutes on 2 cores, 3 s a point): a realistic 100-point grid around pynq
(``mix_grid_text``: 5 GEMM arrays and buffer sizes x 2 bus widths x 5 DRAM latencies x 2
clocks) through ``vta sweep resnet18 --trials 0 --no-check`` end to end on each ``--executors``
entry, a fresh cache each. Each row's arrival is recorded; rows arrive a chunk at a time, so a
chunk's seconds are spread over its points: the per-point median is the median over chunks of
(chunk seconds / chunk points), the total is the sweep's wall time, and the CPU seconds are the
sweep's whole process tree's (``wait4``). ``--verify K`` then runs ``vta run --hw POINT.yaml
resnet18 --layers C1,...,C11 --no-cache --json`` on K points spread over the ok rows and
records whether its cycles (the 20 convolutions, repeats counted) and energy are the row's.
``--tree DIR`` runs another checkout's vta (``/work/main`` for a before figure); ``--sample N``
stops after N rows and extrapolates (``extrapolate``). Writes bench/results/sweep_scale.json.

``--mode grid`` (the issue-25 case: a 100 x 100 grid printed nothing in 300 s and grew to
3.1 GB): a grid of N x N points through ``vta sweep --force``, varying the clock and the
board's LUT limit (``board.*`` fields: every point shares one cache key, so the benchmark
measures the sweep's own machinery, not the simulator), at ``--trials 0`` (the default
schedule) without the bit-exact check. Peak resident set (``ru_maxrss`` of the child), wall
time, the time to its first row on stdout and the rows it printed are reported for each size,
so memory against grid size reads off the table: bounded means it does not grow with the
point count. Writes bench/results/sweep_memory.json.

``--mode network`` (the first issue-22 measurement): ``--points`` distinct hardware points
(memory latency x bus width x reads in flight around pynq: every point its own cache key)
through ``vta sweep resnet18 --trials 0 --no-check`` on each ``--executors`` entry
(``workers:N``: ``--workers N``; ``local:N``: ``--cluster local:N``, a Dask LocalCluster),
stopped after the chunk that holds the ``--sample``-th row (or ``--budget-s``) and
extrapolated (``--sample 100``: the whole sweep, measured); ``--verify K`` then runs ``vta run
--no-cache`` on K of its points as the mix mode does; ``--tree DIR`` runs another checkout's
vta. Writes bench/results/sweep_network.json.

    python bench/sweep_scale.py [--mode mix] [--executors workers:1,workers:2] [--verify 2]
        [--tree /work/main] [--sample N]
    python bench/sweep_scale.py --mode grid [--sizes 10,32,100] [--workload matmul:16x16x16]
    python bench/sweep_scale.py --mode network [--points 100] [--sample 6] [--verify 2]
        [--executors workers:1,workers:2,local:1,local:2] [--budget-s 600] [--tree DIR]

``--mode programs``: whether DRAM timing changes the programs the compile makes (``main_programs``);
writes bench/results/sweep_programs.json.

Prints a table and writes the JSON.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import queue
import signal
import statistics
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


def chunks(arrivals: list[float]) -> list[list[float]]:
    """Row arrival times grouped by chunk: a row within 0.5 s of the previous one arrived
    with it (a chunk's rows are written together)."""
    groups: list[list[float]] = []
    for a in arrivals:
        if groups and a - groups[-1][-1] <= 0.5:
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def extrapolate(arrivals: list[float], cpu: list[float], points: int) -> dict[str, Any]:
    """Seconds and CPU seconds a point, and the whole sweep, from the rows' arrival times
    and the CPU seconds then. Rows of one chunk arrive together: they are grouped, and each
    chunk's seconds spread over its points (the first chunk also pays the start: imports,
    the workers, the first compiles, so the rate is the later chunks'). ``run_network``
    stops a run only after the whole chunk of its last row has arrived, so every group is a
    whole chunk. (Before round 6 it stopped at the ``--sample``-th row, inside a chunk: 12
    rows of a 32-point chunk were counted as a chunk of 12, a point's seconds overstated
    32/12 times; ``sweep_network_r5.json`` has that error, which ``--recompute`` cannot
    undo: the file does not say how large the chunk was.)"""
    groups = chunks(arrivals)
    first_n = len(groups[0])
    complete = len(arrivals) == points
    later = sum(len(g) for g in groups[1:])
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


#: seconds after a row within which another row counts as the same chunk's (``chunks``)
SAME_CHUNK_S = 0.5


def _lines(stream: Any) -> queue.Queue[str | None]:
    """``stream``'s lines on a queue, read by a thread (None at its end), so the reader can
    wait for the next row with a timeout."""
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def run_network(points: int, spec: str, sample: int, budget_s: float, tree: Path,
                tmp: Path) -> dict[str, Any]:
    """A ``points``-point ResNet-18 sweep of ``tree``'s vta on executor ``spec``, stopped after
    the chunk that holds its ``sample``-th row (the rows that arrive within ``SAME_CHUNK_S``
    of it) or after ``budget_s`` seconds; the arrival time of each row, the CPU seconds then,
    the extrapolated whole, and each row (status, cycles, energy) from the streamed CSV."""
    grid = tmp / f"net{points}.yaml"
    grid.write_text(network_grid_text(points))
    tag = spec.replace(":", "")
    out = tmp / f"net_{tag}"
    argv = [sys.executable, "-m", "vta.cli", "sweep", "--grid", str(grid), "resnet18",
            "--trials", "0", "--no-check", *executor_flags(spec), "--out",
            str(out), "--cache", str(tmp / f"net_{tag}.sqlite")]
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    load = round(os.getloadavg()[0], 2)
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env, start_new_session=True)
    timer = threading.Timer(budget_s, lambda: os.killpg(child.pid, signal.SIGTERM))
    timer.start()
    assert child.stdout is not None
    lines = _lines(child.stdout)
    arrivals: list[float] = []
    cpu: list[float] = []  # the session's CPU seconds at each row (the CLI and its workers)
    while True:
        try:  # past the sample, only the rest of the last row's chunk is waited for
            line = lines.get(timeout=SAME_CHUNK_S if sample <= len(arrivals) < points
                             else None)  # all rows seen: the sweep ends by itself
        except queue.Empty:
            os.killpg(child.pid, signal.SIGTERM)  # its own session: the workers too
            break
        if line is None:
            break
        if line.startswith("lat"):
            arrivals.append(time.perf_counter() - t0)
            cpu.append(session_cpu_s(child.pid))
            print(f"  {spec}: row {len(arrivals)} at {arrivals[-1]:.1f} s "
                  f"({cpu[-1]:.1f} CPU s)", flush=True)
    timer.cancel()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    complete = len(arrivals) == points
    if not arrivals:
        raise SystemExit(f"no row from {' '.join(argv)} in {wall:.0f} s")
    if complete and os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    fig = extrapolate(arrivals, cpu, points)
    res = {"executor": spec, "tree": str(tree), "points": points, "rows_seen": len(arrivals),
           "complete": complete, "first_row_s": round(arrivals[0], 1),
           "row_arrivals_s": [round(a, 1) for a in arrivals],
           "cpu_s_at_rows": [round(c, 1) for c in cpu], "load_1min_at_start": load, **fig,
           "wall_s": round(wall, 1), "command": " ".join(argv[1:]),
           "rows": _csv_rows(out.with_suffix(".csv"))}
    if complete:
        res["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
    return res


#: the mix grid's axes: GEMM arrays with their buffers (the structures: each its own compile),
#: bus widths and DRAM latencies (timing the compile reads too), clocks (the run alone)
ARRAYS = (
    "{name: 16x16, gemm.block_in: 16, gemm.block_out: 16}",
    "{name: 16x16-halfwgt, gemm.block_in: 16, gemm.block_out: 16, scratchpad.wgt: 131072}",
    "{name: 16x32, gemm.block_in: 16, gemm.block_out: 32}",
    "{name: 32x32, gemm.block_in: 32, gemm.block_out: 32, scratchpad.inp: 65536, "
    "scratchpad.wgt: 524288, scratchpad.acc: 262144, scratchpad.out: 65536}",
    "{name: 8x8, gemm.block_in: 8, gemm.block_out: 8, scratchpad.inp: 16384, "
    "scratchpad.wgt: 65536, scratchpad.acc: 65536, scratchpad.out: 16384}")
MIX_BUS = (8, 16)
MIX_LATENCY = (16, 32, 48, 64, 96)
MIX_CLOCK = (100, 200)
#: the convolutions ``vta run --layers`` runs for a point's check (ResNet-18's 11 distinct)
LAYERS = ",".join(f"C{i}" for i in range(1, 12))


def mix_grid_text() -> str:
    """The 100-point mix grid (5 x 2 x 5 x 2) as a grid file."""
    arrays = "\n".join(f"    - {a}" for a in ARRAYS)
    return (f"name: mix\nbase: {ROOT / 'hwconfigs' / 'pynq.yaml'}\nboards: [pynq-z1, zcu104]\n"
            f"trials: 0\ngrid:\n  array:\n{arrays}\n"
            f"  memory.bus_bytes: {list(MIX_BUS)}\n  memory.latency: {list(MIX_LATENCY)}\n"
            f"  board.clock_mhz: {list(MIX_CLOCK)}\n")


def chunk_rates(arrivals: list[float]) -> list[float]:
    """Seconds a point in each chunk of rows (rows within 0.5 s of the previous are one
    chunk; a chunk's seconds run from the previous chunk's last row, the first's from the
    start)."""
    groups = chunks(arrivals)
    out, last = [], 0.0
    for g in groups:
        out.append((g[-1] - last) / len(g))
        last = g[-1]
    return out


def run_mix(spec: str, tree: Path, sample: int | None, tmp: Path) -> dict[str, Any]:
    """The mix grid through ``vta sweep`` of ``tree`` on executor ``spec``, end to end (or
    stopped after ``sample`` rows and extrapolated): row arrivals, per-point median, total,
    CPU seconds of the whole process tree, and each point's row from the CSV."""
    grid = tmp / "mix.yaml"
    grid.write_text(mix_grid_text())
    tag = spec.replace(":", "")
    out = tmp / f"mix_{tag}"
    argv = [sys.executable, "-m", "vta.cli", "sweep", "--grid", str(grid), "resnet18",
            "--trials", "0", "--no-check", *executor_flags(spec), "--out", str(out),
            "--cache", str(tmp / f"mix_{tag}.sqlite")]
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    load = round(os.getloadavg()[0], 2)
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env, start_new_session=True)
    assert child.stdout is not None
    arrivals: list[float] = []
    cpu: list[float] = []
    for line in child.stdout:
        if line.startswith("array="):
            arrivals.append(time.perf_counter() - t0)
            cpu.append(session_cpu_s(child.pid))
            if len(arrivals) % 10 == 0:
                print(f"  {spec}: {len(arrivals)} rows at {arrivals[-1]:.1f} s", flush=True)
            if sample is not None and len(arrivals) >= sample:
                os.killpg(child.pid, signal.SIGTERM)
                break
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    points = 100
    complete = len(arrivals) == points
    if complete and os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    rates = chunk_rates(arrivals)
    res: dict[str, Any] = {
        "executor": spec, "tree": str(tree), "points": points, "rows_seen": len(arrivals),
        "complete": complete, "load_1min_at_start": load,
        "first_row_s": round(arrivals[0], 1) if arrivals else None,
        "row_arrivals_s": [round(a, 1) for a in arrivals],
        "s_per_point_by_chunk": [round(r, 2) for r in rates],
        "median_s_per_point": round(statistics.median(rates), 2) if rates else None,
        "command": " ".join(argv[1:])}
    if complete:
        res.update({"total_s": round(wall, 1), "mean_s_per_point": round(wall / points, 2),
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                    "rows": _csv_rows(out.with_suffix(".csv"))})
    else:
        res.update(extrapolate(arrivals, cpu, points))
    return res


def _csv_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The sweep CSV's rows by point: status, cycles, energy."""
    with path.open() as f:
        return {r["point"]: {"status": r["status"], "cycles": int(r["cycles"]) if r["cycles"]
                             else None, "energy_uj": float(r["energy_uj"]) if r["energy_uj"]
                             else None} for r in csv.DictReader(f)}


def verify_points(rows: dict[str, dict[str, Any]], k: int, grid_path: Path,
                  tmp: Path) -> list[dict[str, Any]]:
    """``vta run --hw POINT.yaml resnet18 --layers C1..C11 --no-cache --json`` (this tree) on
    ``k`` ok points of the sweep's ``rows`` spread over the grid file ``grid_path``: its
    cycles and energy against the sweep's row."""
    sys.path.insert(0, str(ROOT))
    import yaml

    from vta.tune.sweep import load_grid

    grid = load_grid(grid_path)
    ok = [p for p in grid.points if rows.get(p.name, {}).get("status") == "ok"]
    picks = [ok[round(i * (len(ok) - 1) / max(1, k - 1))] for i in range(k)] if ok else []
    out = []
    for p in picks:
        hw_yaml = tmp / f"point{len(out)}.yaml"
        hw_yaml.write_text(yaml.safe_dump(grid.config(p).to_dict()))
        argv = [sys.executable, "-m", "vta.cli", "run", "--hw", str(hw_yaml), "resnet18",
                "--layers", LAYERS, "--no-cache", "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]}")
        ran = json.loads(done.stdout)
        row = rows[p.name]
        out.append({"point": p.name, "sweep_cycles": row["cycles"], "run_cycles": ran["cycles"],
                    "cycles_equal": row["cycles"] == ran["cycles"],
                    "sweep_energy_uj": row["energy_uj"],
                    "run_energy_uj": ran["energy"]["total_uj"],
                    "energy_equal": _same_energy(row["energy_uj"], ran["energy"]["total_uj"]),
                    "command": "vta run --hw POINT.yaml resnet18 --layers "
                               f"{LAYERS} --no-cache --json"})
        print(f"  {p.name}: sweep {row['cycles']:,} cycles, vta run {ran['cycles']:,}",
              flush=True)
    return out


def _same_energy(sweep_uj: float | None, run_uj: float) -> bool:
    """Whether a sweep row's energy (the CSV's float, printed by ``repr``: it round-trips)
    is ``vta run``'s (its JSON float: likewise); the two sum the same layers in another
    order, so equal to 1e-12 relative (what ``tests/tune/test_sweep_share.py`` holds)."""
    return sweep_uj is not None and abs(sweep_uj - run_uj) <= 1e-12 * abs(run_uj)


def main_mix(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    tree = Path(args.tree).resolve() if args.tree else ROOT
    with tempfile.TemporaryDirectory() as d:
        for spec in args.executors.split(","):
            out.append(run_mix(spec, tree, args.sample, Path(d)))
        verified = verify_points(out[0]["rows"], args.verify, Path(d) / "mix.yaml", Path(d)) \
            if args.verify and "rows" in out[0] else []
    print(f"{'executor':>10} {'tree':>16} {'rows':>5} {'median s/pt':>11} {'total s':>8} "
          f"{'CPU s':>7}")
    for r in out:
        total = r.get("total_s", r.get("whole_sweep_s"))
        print(f"{r['executor']:>10} {Path(r['tree']).name:>16} {r['rows_seen']:>5} "
              f"{r['median_s_per_point'] or 0:>11.2f} {total or 0:>8.1f} "
              f"{r.get('cpu_s', r.get('cpu_s_per_point', 0)):>7}"
              f"{'' if r['complete'] else ' (extrapolated)'}")
    path = args.out or str(ROOT / "bench" / "results" / "sweep_scale.json")
    Path(path).write_text(json.dumps({
        "workload": "resnet18 (11 distinct convolutions, 20 with repeats), --trials 0",
        "grid": mix_grid_text(), "target": "100 points <= 300 s on 2 cores (<= 3 s a point)",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "runs": out,
        "verified": verified,
        "note": "a fresh cache per run; the machine is shared (2 cores, other sessions' jobs)"},
        indent=2) + "\n")
    print(f"wrote {path}")


#: the DRAM variants of pynq ``--mode programs`` compiles C1-C11's default candidates at
DRAM_VARIANTS = {"memory.latency 16": {"memory.latency": 16},
                 "memory.latency 88": {"memory.latency": 88},
                 "memory.bus_bytes 16": {"memory.bus_bytes": 16},
                 "memory.outstanding 16": {"memory.outstanding": 16}}


def main_programs(args: argparse.Namespace) -> None:
    """Whether DRAM timing changes what the compile makes: for each ``DRAM_VARIANTS`` entry,
    over ResNet-18's C1-C11 on pynq, the layers whose default candidates (the model's three
    best) change, and among the candidates common to pynq and the variant, how many compile
    to another program (``driver.build``)."""
    sys.path.insert(0, str(ROOT))
    from vta.compiler.accel import driver
    from vta.config import HwConfig
    from vta.tune.sweep import sweep_workloads

    base = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    layers = [w for w, _ in sweep_workloads(["resnet18"])[0][1]]

    def candidates(w: Any, hw: Any) -> dict[Any, Any]:
        problem = driver.space_of(w, hw)
        return {problem.schedule(p): p for p in driver.default_points(w, hw)}

    at_base = {w.name: {k: driver.build(w, base, p).program
                        for k, p in candidates(w, base).items()} for w in layers}
    out = []
    for label, change in DRAM_VARIANTS.items():
        hw = base.with_changes(**change)
        moved = common = differ = 0
        for w in layers:
            cands = candidates(w, hw)
            moved += set(cands) != set(at_base[w.name])
            for k, p in cands.items():
                if k in at_base[w.name]:
                    common += 1
                    differ += driver.build(w, hw, p).program != at_base[w.name][k]
        out.append({"variant": label, "layers_whose_candidates_change": moved,
                    "common_candidates": common, "common_with_another_program": differ})
        print(f"{label:>22}: candidates change in {moved}/11 layers; {differ} of {common} "
              f"common candidates compile to another program", flush=True)
    path = args.out or str(ROOT / "bench" / "results" / "sweep_programs.json")
    Path(path).write_text(json.dumps({"base": "hwconfigs/pynq.yaml",
                                      "layers": "resnet18 C1-C11", "variants": out},
                                     indent=2) + "\n")
    print(f"wrote {path}")


def main_grid(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        for n in (int(x) for x in args.sizes.split(",")):
            out.append(run_one(n, args.workload, Path(d)))
            r = out[-1]
            print(f"{r['grid']:>8} {r['points']:>7,} points  rows {r['rows_printed']:>7,}  "
                  f"first row {r['first_row_s']:>6.1f} s  wall {r['wall_s']:>7.1f} s  "
                  f"peak RSS {r['peak_rss_mib']:>7.1f} MiB", flush=True)
    path = args.out or str(ROOT / "bench" / "results" / "sweep_memory.json")
    Path(path).write_text(json.dumps({"workload": args.workload, "runs": out,
                                      "note": "--workers 1 on a shared 2-core machine"},
                                     indent=2) + "\n")
    print(f"wrote {path}")


def main_network(args: argparse.Namespace) -> None:
    out: list[dict[str, Any]] = []
    load = os.getloadavg()
    tree = Path(args.tree).resolve() if args.tree else ROOT
    with tempfile.TemporaryDirectory() as d:
        for spec in args.executors.split(","):
            out.append(run_network(args.points, spec, args.sample, args.budget_s, tree,
                                   Path(d)))
        verified = verify_points(out[0]["rows"], args.verify, Path(d) / f"net{args.points}.yaml",
                                 Path(d)) if args.verify else []
    _network_table(out)
    path = args.out or str(ROOT / "bench" / "results" / "sweep_network.json")
    Path(path).write_text(json.dumps({
        "workload": "resnet18 (11 distinct convolutions, 20 with repeats)",
        "grid": "memory.latency x memory.bus_bytes x memory.outstanding around pynq",
        "target": "100 points <= 300 s on 2 cores (<= 3 s a point)",
        "load_average_at_start": [round(x, 2) for x in load], "runs": out,
        "verified": verified,
        "note": "a fresh cache per run; a run stopped early (after the chunk of its --sample-th "
                "row) is extrapolated from its rows; the machine is shared (2 cores, other "
                "sessions' jobs): CPU seconds compare, wall seconds depend on the load"},
        indent=2) + "\n")
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("mix", "grid", "network", "programs"), default="mix")
    ap.add_argument("--tree", default=None, help="mix, network: the checkout whose vta runs")
    ap.add_argument("--verify", type=int, default=2,
                    help="mix, network: points checked against vta run (0: none)")
    ap.add_argument("--sizes", default="10,32,100", help="grid: grid sides, comma-separated")
    ap.add_argument("--workload", default="matmul:16x16x16", help="grid: the workload")
    ap.add_argument("--points", type=int, default=100, help="network: points in the grid")
    ap.add_argument("--sample", type=int, default=None,
                    help="mix, network: stop after this many rows (network: after the rest of "
                    "that row's chunk) and extrapolate (network: default 6; mix: default none, "
                    "the whole sweep)")
    ap.add_argument("--budget-s", type=float, default=600.0,
                    help="network: stop a run after this many seconds")
    ap.add_argument("--executors", default=None,
                    help="workers:N and/or local:N (Dask), comma-separated (mix: default "
                    "workers:1,workers:2; network: those and local:1,local:2)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--recompute", default=None, metavar="JSON",
                    help="network: rewrite a result file's derived figures, running nothing")
    args = ap.parse_args()
    if args.executors is None:
        args.executors = "workers:1,workers:2" + (",local:1,local:2"
                                                  if args.mode == "network" else "")
    if args.sample is None and args.mode == "network":
        args.sample = 6
    if args.recompute:
        recompute(args.recompute)
        return
    {"mix": main_mix, "grid": main_grid, "network": main_network,
     "programs": main_programs}[args.mode](args)


if __name__ == "__main__":
    main()
