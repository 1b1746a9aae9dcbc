"""Every compiled program on a stock config through VTA's own vta.cc: PASS, DIFF or ERROR each.

The vta.cc oracle (tools/vta_oracle, docs/simulator.md "The vta.cc oracle") runs apache/tvm-vta's
HLS source as C-simulation on each program the runs below execute, on the same DRAM image, and
compares every allocation byte for byte with vta's simulator and its reference interpreter.
This is the check against an outside reference: a PASS means VTA's own source computes the
same bytes, not only that our two simulators agree. The matrix:

* ResNet-18 C1-C11: default schedule, ``--no-latency-hiding``, ``--vthreads 4`` and the raw
  check (``--epilogue none``: one program per accumulator slice);
* matmul 16x16x16 and 128x128x128, dense (M=1 N=1000 K=512) in the same four forms;
* the whole ResNet-18 graph (every kernel, on the inputs the graph run gives it);
* the TC examples at bench/tc_examples.py's sizes (every task program);
* examples/*.asm on random inputs; the ISA corner probes (tools/vta_oracle/probes.py).

Needs a checkout of apache/tvm-vta and Xilinx's HLS_arbitrary_Precision_Types (the flags or
``$VTA_ORACLE_TVM_VTA`` / ``$VTA_ORACLE_AP_INT``); without them it exits 2 saying so.

    python bench/vta_cc_oracle.py [--hw pynq] [--only layers,graph,tc,asm,probes]

Prints a table per group and writes bench/results/vta_cc_oracle.json (per program its verdict,
instruction count, the ISA corners it uses and the comparison's line). Exit status 1 when any
program is not byte-identical or a probe does not behave as vta.cc's source says.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402
from tc_examples import EXAMPLES  # noqa: E402

from tools.vta_oracle.build import build_driver, locate_sources  # noqa: E402
from tools.vta_oracle.oracle import (  # noqa: E402
    run_asm,
    run_probes,
    run_tc_file,
    run_whole_graph,
    run_workload,
)
from tools.vta_oracle.run import OracleTarget, Record, corner_uses  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.errors import VtaError  # noqa: E402

GROUPS = ("layers", "graph", "tc", "asm", "probes")

#: (workload, sizes): the per-layer runs
LAYERS: list[tuple[str, list[int]]] = [
    *((f"resnet18:C{i}", []) for i in range(1, 12)),
    ("matmul", [16, 16, 16]), ("matmul", [128, 128, 128]), ("dense", []),
]

#: the schedule forms each layer runs in: (label, run_workload keywords)
FORMS: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("no latency hiding", {"latency_hiding": False}),
    ("vthreads 4", {"vthreads": 4}),
    ("epilogue none", {"raw": True}),
]


def _row(group: str, run: str, rec: Record) -> dict[str, Any]:
    o = rec.oracle
    return {"group": group, "run": run, "program": rec.label, "verdict": rec.verdict,
            "instructions": len(rec.program.instructions), "uses": corner_uses(rec.program),
            "line": rec.line(), "vta_cc_seconds": o.seconds if o else None}


def _layers(target: OracleTarget) -> list[dict[str, Any]]:
    rows = []
    for name, sizes in LAYERS:
        for form, kw in FORMS:
            recs, check = run_workload(target, name, sizes, **kw)
            rows += [{**_row("layers", f"{name} {' '.join(map(str, sizes))}".strip() +
                             f" [{form}]", r), "check": check} for r in recs]
    return rows


def _graph(target: OracleTarget) -> list[dict[str, Any]]:
    recs, check = run_whole_graph(target, "resnet18")
    return [{**_row("graph", "resnet18 (whole graph)", r), "check": check} for r in recs]


def _tc(target: OracleTarget) -> list[dict[str, Any]]:
    rows = []
    for file, entry, sizes in EXAMPLES:
        size = ",".join(f"{k}={v}" for k, v in sizes.items())
        recs, check = run_tc_file(target, str(ROOT / "examples" / "tc" / file), size, entry)
        rows += [{**_row("tc", f"{entry} ({size})", r), "check": check} for r in recs]
    return rows


def _asm(target: OracleTarget) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((ROOT / "examples").glob("*.asm")):
        for r in run_asm(target, str(path)):
            r.label = str(path.relative_to(ROOT))
            rows.append(_row("asm", r.label, r))
    return rows


def _summary_table(rows: list[dict[str, Any]], group: str) -> Table:
    """Per run: programs, PASS/DIFF/ERROR, and the first DIFF's line."""
    t = Table(title=f"{group}: vta.cc vs vta's simulator and reference interpreter")
    for c in ("run", "programs", "PASS", "DIFF", "ERROR", "instructions", "first difference"):
        t.add_column(c, justify="left" if c in ("run", "first difference") else "right")
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    for run, rs in runs.items():
        bad = next((r for r in rs if r["verdict"] != "PASS"), None)
        t.add_row(escape(run), str(len(rs)), *(str(sum(r["verdict"] == v for r in rs))
                                       for v in ("PASS", "DIFF", "ERROR")),
                  f"{sum(r['instructions'] for r in rs):,}",
                  "" if bad is None else escape(f"{bad['program']}: {bad['line']}"[:120]))
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="pynq", help="a shipped config name or a YAML path")
    ap.add_argument("--tvm-vta", default=None, help="apache/tvm-vta (default "
                    "$VTA_ORACLE_TVM_VTA)")
    ap.add_argument("--ap-int", default=None, help="HLS_arbitrary_Precision_Types (default "
                    "$VTA_ORACLE_AP_INT)")
    ap.add_argument("--only", default=",".join(GROUPS), help="groups to run: " +
                    ",".join(GROUPS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "vta_cc_oracle.json"))
    args = ap.parse_args()
    groups = args.only.split(",")
    if not set(groups) <= set(GROUPS):
        print(f"error: --only: unknown group(s) {sorted(set(groups) - set(GROUPS))}; "
              f"choose from {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    try:
        hw = HwConfig.load(args.hw)
        sources = locate_sources(args.tvm_vta, args.ap_int)
        driver = build_driver(hw, sources)
    except VtaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    con = Console(width=160)
    target = OracleTarget(driver, reference=True)
    rows: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    runners = {"layers": _layers, "graph": _graph, "tc": _tc, "asm": _asm}
    for g in groups:
        t0 = time.perf_counter()
        if g == "probes":
            probes = run_probes(target)
        else:
            got = runners[g](target)
            rows += got
            con.print(_summary_table(got, g))
        seconds[g] = round(time.perf_counter() - t0, 1)
    if probes:
        t = Table(title="ISA corner probes: vta.cc against its source, the simulator against "
                        "vta.cc")
        for c in ("probe", "vta.cc as its source says", "simulated on", "simulator vs vta.cc"):
            t.add_column(c)
        for p in probes:
            t.add_row(p["probe"], "yes" if p["vta_cc_as_documented"] else
                      escape("NO: " + "; ".join(p["mismatches"])), p["config"],
                      escape(p["simulator"][:100]))
        con.print(t)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("PASS", "DIFF", "ERROR")}
    con.print(f"{len(rows)} programs through vta.cc on {hw.name}: {counts['PASS']} PASS, "
              f"{counts['DIFF']} DIFF, {counts['ERROR']} ERROR; "
              f"{sum(p['vta_cc_as_documented'] for p in probes)} of {len(probes)} probes as "
              f"vta.cc's source says")
    Path(args.out).write_text(json.dumps({
        "hw": hw.name, "stock": hw.stock,
        "vta_cc_sha256": hashlib.sha256(sources.vta_cc.read_bytes()).hexdigest(),
        "driver_digest": driver.digest,
        "macros": driver.macros, "counts": counts, "seconds": seconds, "rows": rows,
        "probes": probes}, indent=1))
    con.print(f"wrote {args.out}")
    fine = all(r["verdict"] == "PASS" for r in rows) and \
        all(p["vta_cc_as_documented"] and p["complete"] for p in probes)
    return 0 if fine else 1


if __name__ == "__main__":
    raise SystemExit(main())
