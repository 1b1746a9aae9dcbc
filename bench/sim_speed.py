"""Simulator speed on ResNet-18 layer C2 (bit-exact, cycle-level), pynq config; with
``--network`` also the compiled C1-C11 programs and every kernel of ``vta run resnet18``.

Anchor: SCALE-Sim takes a median 52 s for C2 on a 2-core machine; the target here is <= 0.2 s
for a bit-exact, cycle-level run (issue 22: C1-C11 <= 0.25 s, the whole graph well under 1 s).
C2 is ``bench/c2_program.py``'s hand-written program, checked bit-exact against numpy. The
``--network`` programs are the compiler's (default schedules, compiled once through the
compile cache at ``--cache``, not timed), simulated on full-range random inputs (seed 0) in
both modes; their values are checked by tests/golden and ``vta run``. Timing-only runs must
give the bit-exact runs' cycles (checked). ``--engine simpy`` runs the machine on simpy itself
(the reference event engine; the default is the lean engine, ``vta/sim/engine.py``, with the
same event order). To compare two checkouts, run this file with ``PYTHONPATH`` at each (it
imports vta from there; a checkout before the lean engine takes no ``--engine``), or give
``--baseline CHECKOUT``: this file first runs itself with ``PYTHONPATH`` at that checkout (the
same options), then here, back to back, and the JSON holds both (``before``) and the CPU
speedups. Set ``OPENBLAS_NUM_THREADS=1`` (the baseline run inherits it): a shared 2-core
machine times BLAS threads badly. Prints tables and writes bench/results/sim_speed.json
(with the load average before and after, and the checkout's commit).

The medians above are of repeated runs in one process, whose caches (each instruction's
description, its DMA timing, the port's solo plans) are warm after the first. ``vta run``
simulates each kernel once in a fresh process, and the compiler times each candidate once:
with ``--network`` each group is also simulated once per fresh interpreter (``cold``: one
pass bit-exact, one timing-only, each in its own process, the median of ``min(runs, 3)``
such processes; CPU seconds of the pass alone, not the interpreter's start). ``--network``
also times encoding each group's programs to words and decoding them back (``encode``,
``decode``).

CPU seconds swing by tens of percent on a shared machine; ``--callgrind`` counts instructions
instead (valgrind's callgrind, deterministic to a few parts in 10,000): the compiled C1-C11
programs (compiled here, pickled once, the same programs for both trees) simulated once
bit-exact in a fresh interpreter under ``valgrind --tool=callgrind``, less a fresh interpreter
that does everything but simulate (imports, unpickling, drawing the inputs), for this tree and,
with ``--baseline``, that tree, side by side (``PYTHONHASHSEED=0``). Nothing else is timed in
that mode; without valgrind it says so and exits 0.

    OPENBLAS_NUM_THREADS=1 python bench/sim_speed.py [--hw hwconfigs/pynq.yaml] [--runs 5]
        [--network] [--engine lean|simpy] [--cache FILE] [--baseline CHECKOUT] [--out FILE]
    python bench/sim_speed.py --callgrind [--baseline CHECKOUT] [--cache FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import callgrind  # noqa: E402
from c2_program import c2_program, conv2d_expected, pack_c2, unpack_c2  # noqa: E402

import vta  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.sim import random_inputs  # noqa: E402
from vta.sim import simulate as _simulate  # noqa: E402

#: ``_simulate`` with the engine ``--engine`` names (set in ``main``; nothing for the default,
#: so that a checkout without engines runs too)
simulate = _simulate

#: the CPU seconds (this process) of each ``_timed`` call's runs: less load-dependent than
#: the wall on a shared machine
CPU: dict[str, float] = {}


def _timed(fn, runs: int, name: str = "") -> tuple[float, object]:
    walls, cpus, result = [], [], None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    CPU[name] = statistics.median(cpus)
    return statistics.median(walls), result


def network_programs(hw: HwConfig, cache: Path) -> dict[str, list]:
    """The compiled C1-C11 programs and the whole graph's kernel programs (compile cache at
    ``cache``)."""
    from vta.compiler.ops.workloads import RESNET18, resolve
    from vta.graph.models import MODELS
    from vta.run.graph import compile_for
    from vta.run.targets import AccelTarget
    from vta.tune.cache import open_cache
    from vta.tune.compile_cache import CompileCache

    target = AccelTarget(hw)
    with open_cache(cache, create=True) as c:
        assert c is not None
        target.memo = CompileCache(c, hw)
        layers = [target.compile_layer(resolve(f"resnet18:{k}")).program for k in RESNET18]
        graph = compile_for(MODELS["resnet18"](batch=1), target)
    return {"C1-C11": layers,
            "resnet18 graph": [p for p in graph.programs if p is not None]}


def time_programs(hw: HwConfig, programs: list, runs: int) -> dict[str, object]:
    """Median over ``runs`` of the summed wall of simulating every program, bit-exact and
    timing-only; their summed cycles (equal in both modes, checked)."""
    inputs = [random_inputs(p, hw, 0) for p in programs]
    full, timing, full_cpu, timing_cpu = [], [], [], []
    cycles = cycles_t = 0
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        cycles = sum(simulate(p, hw, x).cycles for p, x in zip(programs, inputs, strict=True))
        full.append(time.perf_counter() - t)
        full_cpu.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        cycles_t = sum(simulate(p, hw, x, timing_only=True).cycles
                       for p, x in zip(programs, inputs, strict=True))
        timing.append(time.perf_counter() - t)
        timing_cpu.append(time.process_time() - c)
    return {"programs": len(programs), "instructions": sum(len(p.instructions) for p in programs),
            "cycles": cycles, "wall_s_median": statistics.median(full),
            "timing_only_wall_s_median": statistics.median(timing),
            "cpu_s_median": statistics.median(full_cpu),
            "timing_only_cpu_s_median": statistics.median(timing_cpu),
            "timing_only_same_cycles": cycles == cycles_t}


def time_encoding(hw: HwConfig, programs: list, runs: int) -> dict[str, object]:
    """Median CPU seconds of encoding every program's instructions and micro-ops to words
    (``encode_program``, ``encode_uops``: what the run layer ships between processes) and of
    decoding them back, checked to round-trip."""
    from vta.isa import decode_program, encode_program, encode_uops

    enc, dec = [], []
    words: list = []
    for _ in range(runs):
        c = time.process_time()
        words = [encode_program(p.instructions, hw) for p in programs]
        for p in programs:
            for uops in p.uops.values():
                encode_uops(uops, hw)
        enc.append(time.process_time() - c)
        c = time.process_time()
        back = [decode_program(w, hw) for w in words]
        dec.append(time.process_time() - c)
        assert all(tuple(b) == p.instructions for b, p in zip(back, programs, strict=True))
    return {"encode_cpu_s_median": statistics.median(enc),
            "decode_cpu_s_median": statistics.median(dec)}


def cold_pass(programs: list, hw_path: str, timing_only: bool, runs: int,
              engine: str | None) -> dict[str, float]:
    """Median CPU and wall seconds of one pass over ``programs`` (random inputs, seed 0, drawn
    before the clock starts) in a fresh interpreter importing the same vta as this one, over
    ``runs`` interpreters: what ``vta run`` (bit-exact) and the compiler's candidate timing
    (timing-only) pay, every cache cold."""
    root = str(Path(vta.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    cpu, wall = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "programs.pkl"
        path.write_bytes(pickle.dumps(programs))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--hw", hw_path,
               "--cold-pass", str(path)] + (["--timing-only"] if timing_only else []) + \
            ([] if engine is None else ["--engine", engine])
        for _ in range(runs):
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"sim_speed: the cold pass failed:\n{done.stderr}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            cpu.append(got["cpu_s"])
            wall.append(got["wall_s"])
    return {"cpu_s_median": statistics.median(cpu), "wall_s_median": statistics.median(wall)}


def _cold_pass_main(path: str, hw_path: str, timing_only: bool, engine: str | None,
                    simulate_none: bool = False) -> int:
    """``--cold-pass``: simulate the pickled programs once each, print the seconds as JSON
    (``simulate_none``: all but the simulation, the baseline ``--callgrind`` subtracts)."""
    hw = HwConfig.from_yaml(hw_path)
    programs = pickle.loads(Path(path).read_bytes())
    inputs = [{} if timing_only else random_inputs(p, hw, 0) for p in programs]
    if simulate_none:
        print(json.dumps({"cpu_s": 0.0, "wall_s": 0.0, "cycles": 0}))
        return 0
    t, c = time.perf_counter(), time.process_time()
    run = _simulate if engine is None else partial(_simulate, engine=engine)
    cycles = sum(run(p, hw, x, timing_only=timing_only).cycles
                 for p, x in zip(programs, inputs, strict=True))
    print(json.dumps({"cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - t,
                      "cycles": cycles}))
    return 0


def callgrind_pass(root: str, programs: Path, hw_path: str, simulate_none: bool,
                   tmp: Path) -> tuple[int, int]:
    """Instructions (Ir) of a fresh interpreter importing vta from ``root`` that runs
    ``--cold-pass`` over the pickled ``programs`` under callgrind (``simulate_none``: all but
    the simulation), and the cycles it printed (0 for ``simulate_none``)."""
    out = tmp / f"callgrind.{len(list(tmp.iterdir()))}.out"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--hw", hw_path,
           "--cold-pass", str(programs)] + (["--simulate-none"] if simulate_none else [])
    ir, stdout = callgrind.count(cmd, callgrind.child_env(root), out)
    return ir, int(json.loads(stdout.strip().splitlines()[-1])["cycles"])


def callgrind_compare(args: argparse.Namespace) -> int:
    """``--callgrind``: instructions of one bit-exact C1-C11 pass in a fresh interpreter
    (the pass's process less one that simulates nothing), this tree and ``--baseline``'s,
    printed side by side and written to ``--out``; their cycles must agree."""
    if not callgrind.available():
        print("sim_speed --callgrind: valgrind is not installed (no valgrind on PATH): "
              "skipped, nothing measured")
        return 0
    hw = HwConfig.from_yaml(args.hw)
    from vta.tune.cache import default_cache_path

    cache = Path(args.cache) if args.cache else default_cache_path(os.environ)
    programs = network_programs(hw, cache)["C1-C11"]
    here = str(Path(vta.__file__).resolve().parents[1])
    trees = [("this tree", here)]
    if args.baseline is not None:
        trees.insert(0, ("baseline", str(Path(args.baseline).resolve())))
    rows: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "programs.pkl"
        path.write_bytes(pickle.dumps(programs))
        for label, root in trees:
            print(f"callgrind: {label} ({root}) ...", flush=True)
            # once without valgrind: every module the pass imports gets its bytecode written
            # (where it can be), so neither measured process below compiles sources
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--hw", args.hw,
                            "--cold-pass", str(path)], env=callgrind.child_env(root),
                           capture_output=True, check=False)
            ir_none, _ = callgrind_pass(root, path, args.hw, True, tmp)
            ir_all, cycles = callgrind_pass(root, path, args.hw, False, tmp)
            rows[label] = {"tree": root, "commit": _commit_of(Path(root)), "cycles": cycles,
                           "process_ir": ir_all, "no_simulation_ir": ir_none,
                           "pass_ir": ir_all - ir_none}
    table = Table(title=f"callgrind instructions (Ir) of one bit-exact C1-C11 pass on {hw.name}, "
                        f"fresh interpreter ({len(programs)} programs)")
    for col in ("tree", "commit", "pass Ir", "process Ir", "no-simulation Ir", "cycles"):
        table.add_column(col, justify="left" if col in ("tree", "commit") else "right")
    for label, r in rows.items():
        table.add_row(label, str(r["commit"]), *(f"{r[k] / 1e6:,.1f}M" for k in (  # type: ignore[operator]
            "pass_ir", "process_ir", "no_simulation_ir")), f"{r['cycles']:,}")
    console = Console()
    console.print(table)
    result: dict[str, object] = {"mode": "callgrind", "hw": hw.name, "programs": "C1-C11",
                                 "load_average": [round(x, 2) for x in os.getloadavg()],
                                 "trees": rows}
    same = len({r["cycles"] for r in rows.values()}) == 1
    if "baseline" in rows:
        b, a = rows["baseline"]["pass_ir"], rows["this tree"]["pass_ir"]
        assert isinstance(b, int) and isinstance(a, int)
        result["pass_ir_ratio"] = a / b
        console.print(f"pass Ir this tree / baseline: {a / b:.4f} ({(a - b) / 1e6:+,.1f}M); "
                      f"cycles equal: {same}")
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if same else 1


def _commit() -> str:
    """The commit of the checkout vta is imported from (and ``+dirty`` with local changes)."""
    return _commit_of(Path(vta.__file__).resolve().parents[1])


def _commit_of(root: Path) -> str:
    """The commit of the checkout at ``root`` (and ``+dirty`` with local changes to vta)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "vta"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def main() -> int:
    global simulate
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(HERE.parent / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--network", action="store_true",
                    help="also C1-C11's and the whole graph's compiled programs")
    ap.add_argument("--cache", default=None,
                    help="--network: the compile cache file (default: vta's, as vta run)")
    ap.add_argument("--engine", choices=("lean", "simpy"), default=None,
                    help="the event engine (default: the checkout's default)")
    ap.add_argument("--baseline", default=None, metavar="CHECKOUT",
                    help="first run this file with PYTHONPATH at CHECKOUT (another tree of "
                         "vta, e.g. main's), then here; the JSON holds both")
    ap.add_argument("--out", default=str(HERE / "results" / "sim_speed.json"))
    ap.add_argument("--callgrind", action="store_true",
                    help="only count instructions (valgrind's callgrind) of one bit-exact "
                         "C1-C11 pass in a fresh interpreter, here and at --baseline")
    ap.add_argument("--cold-pass", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timing-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--simulate-none", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cold_pass is not None:
        return _cold_pass_main(args.cold_pass, args.hw, args.timing_only, args.engine,
                               args.simulate_none)
    if args.callgrind:
        return callgrind_compare(args)
    before = None if args.baseline is None else run_baseline(args)
    if args.engine is not None:
        simulate = partial(_simulate, engine=args.engine)
    load_before = [round(x, 2) for x in os.getloadavg()]
    hw = HwConfig.from_yaml(args.hw)
    program = c2_program(hw)
    rng = np.random.default_rng(0)
    data = rng.integers(-128, 128, (1, 64, 56, 56), dtype=np.int8)
    kernel = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    inputs = pack_c2(hw, data, kernel)

    full_wall, full = _timed(lambda: simulate(program, hw, inputs), args.runs, "full")
    timing_wall, timing = _timed(lambda: simulate(program, hw, inputs, timing_only=True),
                                 args.runs, "timing")
    got = unpack_c2(hw, full.outputs["O"], 64, 56)
    exact = bool(np.array_equal(got, conv2d_expected(hw, data, kernel)))
    same_cycles = timing.cycles == full.cycles
    rows = {
        "bit-exact, cycle-level": (full_wall, CPU["full"], full.cycles),
        "timing only": (timing_wall, CPU["timing"], timing.cycles),
    }
    table = Table(title=f"C2 on {hw.name}: {len(program.instructions)} instructions, "
                        f"median of {args.runs} runs")
    for col in ("mode", "wall s", "CPU s", "sim cycles", "sim cycles / wall s"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, (wall, cpu, cycles) in rows.items():
        table.add_row(mode, f"{wall:.4f}", f"{cpu:.4f}", f"{cycles:,}", f"{cycles / wall:,.0f}")
    console = Console()
    console.print(table)
    s = full.stats
    console.print(f"utilization {s.utilization:.1%} ({s.gemm_cycles:,} tensor-op cycles), "
                  f"{s.gops:.1f} GOP/s at {s.clock_mhz:g} MHz; bit-exact vs numpy conv2d: "
                  f"{'PASS' if exact else 'FAIL'}; timing-only cycles equal: {same_cycles}; "
                  f"target <= 0.2 s: {'met' if full_wall <= 0.2 else 'MISSED'} "
                  f"(SCALE-Sim anchor: 52 s)")
    extra: dict[str, object] = {}
    if args.network:
        from vta.tune.cache import default_cache_path

        cache = Path(args.cache) if args.cache else default_cache_path(os.environ)
        net = Table(title=f"compiled programs on {hw.name}, median of {args.runs} runs "
                          f"(random inputs)")
        for col in ("programs", "count", "instructions", "cycles", "bit-exact s",
                    "timing-only s", "bit-exact CPU s", "timing-only CPU s",
                    "cold bit-exact CPU s", "cold timing-only CPU s"):
            net.add_column(col, justify="left" if col == "programs" else "right")
        for name, progs in network_programs(hw, cache).items():
            r = time_programs(hw, progs, args.runs)
            cold = min(args.runs, 3)
            for key, timing_only in (("cold_cpu_s_median", False),
                                     ("cold_timing_only_cpu_s_median", True)):
                r[key] = cold_pass(progs, args.hw, timing_only, cold,
                                   args.engine)["cpu_s_median"]
            r.update(time_encoding(hw, progs, args.runs))
            extra[name] = r
            net.add_row(name, str(r["programs"]), f"{r['instructions']:,}", f"{r['cycles']:,}",
                        f"{r['wall_s_median']:.3f}", f"{r['timing_only_wall_s_median']:.3f}",
                        f"{r['cpu_s_median']:.3f}", f"{r['timing_only_cpu_s_median']:.3f}",
                        f"{r['cold_cpu_s_median']:.3f}",
                        f"{r['cold_timing_only_cpu_s_median']:.3f}")
        console.print(net)
        console.print("encode (instructions and micro-ops) / decode, CPU s: " + "; ".join(
            f"{k} {v['encode_cpu_s_median']:.3f} / {v['decode_cpu_s_median']:.3f}"  # type: ignore[index]
            for k, v in extra.items()))
        same_cycles = same_cycles and all(r["timing_only_same_cycles"] for r in extra.values())
    result: dict[str, object] = {
        "workload": "resnet18:C2", "hw": hw.name, "runs": args.runs,
        "instructions": len(program.instructions),
        "wall_s_median": full_wall, "timing_only_wall_s_median": timing_wall,
        "cpu_s_median": CPU["full"], "timing_only_cpu_s_median": CPU["timing"],
        "cycles": full.cycles, "cycles_per_wall_s": full.cycles / full_wall,
        "gemm_cycles": s.gemm_cycles, "utilization": s.utilization,
        "bit_exact": exact, "timing_only_same_cycles": same_cycles,
        "narrowing": "out = low 8 bits of the int32 sums (no epilogue)",
        "target_wall_s": 0.2, "scale_sim_anchor_wall_s": 52.0,
        "engine": args.engine or "default", "commit": _commit(),
        "load_average_before": load_before,
        "load_average": [round(x, 2) for x in os.getloadavg()], **extra,
    }
    if before is not None:
        result["before"] = before
        result["cpu_speedup"] = speedups(before, result)
        console.print(speedup_table(result["cpu_speedup"], args.baseline))
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if exact and same_cycles else 1


def run_baseline(args: argparse.Namespace) -> dict[str, object]:
    """This file's JSON from a run with ``PYTHONPATH`` at ``args.baseline`` (the same options,
    no baseline of its own), and which tree that was."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "before.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--hw", args.hw,
               "--runs", str(args.runs), "--out", str(out)]
        if args.network:
            cmd.append("--network")
        if args.cache:
            cmd += ["--cache", args.cache]
        env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
        print(f"baseline: vta from {args.baseline}")
        done = subprocess.run(cmd, env=env, check=False)
        print(f"this tree: vta from {Path(vta.__file__).resolve().parents[1]}")
        if not out.exists():
            raise SystemExit(f"sim_speed: the baseline run at {args.baseline} wrote no "
                             f"results (exit {done.returncode})")
        got = json.loads(out.read_text())
    got["tree"] = f"{args.baseline} (this file run with PYTHONPATH there), right before"
    return got


#: the figures ``speedups`` compares: (JSON key, its label)
_MODES = (("cpu_s_median", "bit-exact"), ("timing_only_cpu_s_median", "timing-only"),
          ("cold_cpu_s_median", "bit-exact, cold"),
          ("cold_timing_only_cpu_s_median", "timing-only, cold"),
          ("encode_cpu_s_median", "encode"), ("decode_cpu_s_median", "decode"))


def speedups(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    """Before / after CPU seconds of each figure both runs measured: C2 (top level) and each
    ``--network`` group, in both modes."""
    out: dict[str, object] = {}
    groups = [("C2", before, after)] + [
        (k, before[k], after[k]) for k, v in after.items()
        if isinstance(v, dict) and "programs" in v and isinstance(before.get(k), dict)]
    for name, b, a in groups:
        assert isinstance(b, dict) and isinstance(a, dict)
        for key, label in _MODES:
            if key in b and key in a:
                out[f"{name} {label}"] = {"before_cpu_s": b[key], "after_cpu_s": a[key],
                                          "speedup": b[key] / a[key]}
    return out


def speedup_table(rows: dict[str, object], baseline: str) -> Table:
    table = Table(title=f"CPU seconds, median: {baseline} (before) and this tree (after), "
                        f"back to back")
    for col in ("figure", "before CPU s", "after CPU s", "speedup"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    for name, r in rows.items():
        assert isinstance(r, dict)
        table.add_row(name, f"{r['before_cpu_s']:.3f}", f"{r['after_cpu_s']:.3f}",
                      f"{r['speedup']:.2f}x")
    return table


if __name__ == "__main__":
    sys.exit(main())
