"""Co-design sweep: ResNet-18 C1-C11 and the whole 20-convolution network on VTA's two timing
models and on hardware variants of the PYNQ design, with each variant's resource estimate.

A preset grid of ``vta sweep`` (``sweeps/codesign.yaml``, run through ``vta.tune.sweep``):

* ``pynq`` (VTA's HLS design) and ``pynq_tsim`` (the same hardware timed as VTA's Chisel
  design);
* variants of pynq, one field group at a time: (a) ``separate ALU``: the ALU as a pipeline of its
  own beside the GEMM core, two accumulator banks; (b) ``ALU II=1``: every ALU op at one micro-op
  a cycle (immediates without the src read, register operands with a second accumulator read
  port); (c) ``16 reads``: 16 read bursts in flight instead of 4; (d) ``GEMM depth 8``: a GEMM
  pipeline twice as deep (more registers; the HLS design refills it on every micro-op loop);
* ``pynq_overlap`` (hwconfigs/pynq_overlap.yaml): (a) with immediates at II=1, the point that
  still fits the xc7z020.

Every layer gets the default schedule (``--trials 0``: the analytic model's three best timed by
the timing-only simulator, as ``vta run`` compiles it; ``--trials N`` tunes each) and runs once
cycle by cycle, checked bit-exact against numpy. Per layer: cycles, GEMM utilization and the
share of the machine bound achieved; per configuration: the network's cycles (each layer as
often as ResNet-18 has it), its utilization, the DSP/BRAM/LUT estimate, whether it fits the
PYNQ-Z1 and the ZCU104, and the Pareto front.

    python bench/codesign.py [--layers C2,C5] [--configs pynq,pynq_overlap] [--trials 0]
                             [--workers 2] [--replot]

Prints a table, writes bench/results/codesign.json, .csv and .png (frames/s against each
resource estimate: the sweep's Pareto plot).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.cli.tune import sweep_table  # noqa: E402
from vta.compiler.ops.workloads import RESNET18  # noqa: E402
from vta.tune.executor import LocalExecutor  # noqa: E402
from vta.tune.sweep import load_grid, plot, run_sweep, write_csv  # noqa: E402

GRID = ROOT / "sweeps" / "codesign.yaml"


def layer_table(summary: dict[str, Any], layers: list[str]) -> str:
    """Per layer and configuration: cycles, GEMM utilization, share of the machine bound."""
    points = [p for p in summary["points"] if p["status"] == "ok"]
    w = 13
    lines = [f"{'layer':6}" + "".join(f"{p['point'][:w]:>{w + 8}}" for p in points),
             f"{'':6}" + "".join(f"{'cycles':>{w - 1}} {'util':>5} {'%mach':>6}" for _ in points)]
    for layer in layers:
        cells = []
        for p in points:
            r = next(x for x in p["layers"] if x["workload"] == f"resnet18:{layer}")
            cells.append(f"{r['cycles']:>{w - 1},} {r['utilization']:>5.3f} "
                         f"{r['of_machine_bound']:>6.1%}{'' if r['passed'] else '!'}")
        lines.append(f"{layer:6}" + " ".join(cells))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(RESNET18))
    ap.add_argument("--configs", default=None, help="points of sweeps/codesign.yaml (default all)")
    ap.add_argument("--trials", type=int, default=None, help="schedule trials a layer (default "
                                                              "the grid's: 0)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "codesign.json"))
    ap.add_argument("--replot", action="store_true",
                    help="redraw the PNG from the JSON of an earlier run (no simulation)")
    a = ap.parse_args()
    out = Path(a.out)
    if a.replot:
        plot(json.loads(out.read_text()), out.with_suffix(".png"), "ResNet-18 convolutions")
        return 0
    grid = load_grid(GRID)
    if a.configs:
        names = a.configs.split(",")
        grid = replace(grid, points=tuple(p for p in grid.points if p.name in names))
    layers = a.layers.split(",")
    whole = set(layers) == set(RESNET18)  # the network: each layer as often as it occurs
    names = ["resnet18"] if whole else [f"resnet18:{x}" for x in layers]
    with LocalExecutor(a.workers) as ex:
        res = run_sweep(grid, names, ex, trials=a.trials)
    s = res.summary()
    print(layer_table(s, layers))
    print()
    print(sweep_table(res))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(s, indent=1))
    write_csv(res, out.with_suffix(".csv"))
    plot(s, out.with_suffix(".png"), "ResNet-18 convolutions")
    print(f"wrote {out}, {out.with_suffix('.csv')} and {out.with_suffix('.png')} "
          f"({res.seconds:.0f} s)")
    return 0 if all(p.passed is not False for p in res.points) else 1


if __name__ == "__main__":
    sys.exit(main())
