"""The HLS timing's named assumption and the strided 1x1 layers' remedies, measured.

Two tables, every run checked bit-exact against numpy:

* **fill sensitivity** (docs/simulator.md): pynq (VTA's HLS timing) with ``gemm.fill`` and
  ``alu.fill`` set to each value (the cycles each entry of a micro-op loop costs beyond its
  issues, an assumption: no source fixes it), C4, C7, C10 and the 20-convolution network
  (``vta run --hw ... resnet18 --layers C1,...,C11``: C1-C11, each as often as ResNet-18 has
  it);
* **co-design points** (docs/compiler.md): C4, C7, C10 (cycles, share of the machine bound, the
  compute module's busy cycles over the bound) and the network on pynq and on the shipped
  variants that each change one thing: ``pynq_uop_base`` (a micro-op base field: virtual
  threads share micro-op blocks), ``pynq_flat`` (GEMM and ALU loops flattened: one fill per
  instruction), ``pynq_uop64`` (a 64-bit micro-op port), and the three together (built here
  from pynq, not shipped).

Each layer gets the default schedule (the analytic model's three best timed by the timing-only
simulator, as ``vta run`` compiles it).

    python bench/timing_codesign.py [--fills 0,2,4,8] [--layers C1,...,C11]
                                    [--out bench/results/timing_codesign.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.compiler.ops.workloads import RESNET18, resolve_network  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.run.network import run_network  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402

FOCUS = ("C4", "C7", "C10")
VARIANTS = ("pynq", "pynq_uop_base", "pynq_flat", "pynq_uop64")


def measure(hw: HwConfig, layers: list[str]) -> dict[str, Any]:
    """The network of ``layers`` on ``hw``: per layer cycles, share of the machine bound, the
    compute module's busy cycles and the micro-ops loaded; the network's cycles."""
    net = resolve_network("resnet18", layers=layers)
    assert net is not None
    t0 = time.perf_counter()
    run = run_network(net, AccelTarget(hw))
    rows = {}
    for r, _ in run.layers:
        s = r.summary()
        rows[s["workload"].split(":")[1]] = {
            "passed": s["passed"], "cycles": s["cycles"],
            "machine_bound_cycles": s["machine_bound_cycles"],
            "of_machine_bound": s["of_machine_bound"],
            "compute_busy": s["units"]["compute"]["busy"],
            "busy_of_machine_bound": s["machine_bound_cycles"] / s["units"]["compute"]["busy"],
            "uop_bytes": s["bytes"].get("uop", 0), "schedule": s["schedule"]}
    summ = run.summary()
    return {"hw": hw.name, "passed": run.passed, "layers": rows,
            "network_cycles": summ["cycles"], "network_of_machine_bound":
            summ["of_machine_bound"], "convolutions": summ["convolutions"],
            "wall_s": time.perf_counter() - t0}


def shipped(name: str) -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / f"{name}.yaml")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fills", default="0,2,4,8")
    ap.add_argument("--layers", default=",".join(RESNET18))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "timing_codesign.json"))
    a = ap.parse_args()
    layers = a.layers.split(",")
    pynq = shipped("pynq")
    out: dict[str, Any] = {"layers": layers, "fill": {}, "variants": {}}
    for f in (int(x) for x in a.fills.split(",")):
        hw = pynq.with_changes(name=f"pynq_fill{f}", **{"gemm.fill": f, "alu.fill": f})
        out["fill"][str(f)] = measure(hw, layers)
    for name in VARIANTS:
        out["variants"][name] = measure(shipped(name), layers)
    combined = pynq.with_changes(name="pynq_all_three", **{
        "gemm.uop_base": True, "gemm.flat_loop": True, "alu.flat_loop": True,
        "memory.uop_beat_bytes": 8})
    out["variants"]["all three"] = measure(combined, layers)
    out["resources"] = {n: (shipped(n) if n in VARIANTS else combined).resource_estimate()
                        for n in (*VARIANTS, "all three")}

    print("fill sensitivity (pynq, gemm.fill = alu.fill = f): cycles (% of machine bound)")
    print(f"{'fill':>4} " + "".join(f"{x:>20}" for x in (*FOCUS, "network")))
    for f, m in out["fill"].items():
        cells = [f"{m['layers'][x]['cycles']:>11,} "
                 f"({m['layers'][x]['of_machine_bound']:5.1%})" for x in FOCUS if x in m["layers"]]
        cells.append(f"{m['network_cycles']:>11,} ({m['network_of_machine_bound']:5.1%})")
        print(f"{f:>4} " + "".join(f"{c:>20}" for c in cells))
    print("\nco-design points: % of machine bound (compute busy alone: bound / busy)")
    print(f"{'config':>14} " + "".join(f"{x:>20}" for x in (*FOCUS, "network"))
          + "   LUT  BRAM")
    for n, m in out["variants"].items():
        cells = [f"{m['layers'][x]['of_machine_bound']:6.1%} "
                 f"({m['layers'][x]['busy_of_machine_bound']:5.1%})"
                 for x in FOCUS if x in m["layers"]]
        cells.append(f"{m['network_cycles']:>11,} ({m['network_of_machine_bound']:5.1%})")
        r = out["resources"][n]
        print(f"{n:>14} " + "".join(f"{c:>20}" for c in cells)
              + f" {r['lut']:>5} {r['bram36']:>5}")
    ok = all(m["passed"] for m in (*out["fill"].values(), *out["variants"].values()))
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {a.out}; every run bit-exact: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
