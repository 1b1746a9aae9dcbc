"""Co-design sweep: ResNet-18 C1-C11 and the whole 20-convolution network on VTA's two timing
models and on hardware variants of the PYNQ design, with each variant's resource estimate.

Configurations (each a documented YAML field; docs/hwconfig.md lists what each costs):

* ``pynq`` (VTA's HLS design) and ``pynq_tsim`` (the same hardware timed as VTA's Chisel
  design);
* variants of pynq, one field group at a time: (a) ``separate ALU``: the ALU as a pipeline of its
  own beside the GEMM core, two accumulator banks; (b) ``ALU II=1``: every ALU op at one micro-op
  a cycle (immediates without the src read, register operands with a second accumulator read
  port); (c) ``16 reads``: 16 read bursts in flight instead of 4; (d) ``GEMM depth 8``: a GEMM
  pipeline twice as deep (more registers; the HLS design refills it on every micro-op loop);
* ``pynq_overlap`` (hwconfigs/pynq_overlap.yaml): (a) with immediates at II=1, the point that
  still fits the xc7z020.

Every layer is compiled for the configuration, simulated and checked bit-exact against numpy
(``vta.runner.run_workload``). Per layer: cycles, GEMM utilization and the share of the machine
bound achieved (``vta.compiler.driver.roofline``); per configuration: the network's cycles (each
layer as often as ResNet-18 has it), its GEMM utilization and the DSP/BRAM/LUT estimate
(``vta.resources``).

    python bench/codesign.py [--layers C2,C5] [--configs pynq,pynq_overlap] [--replot]

Prints a table, writes bench/results/codesign.json and bench/results/codesign.png (network
cycles against BRAM and LUT estimates, one point per configuration).
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

from vta.compiler.workloads import RESNET18, RESNET18_REPEATS, resolve  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.runner import run_workload  # noqa: E402

PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")

#: name -> how to build it from pynq (or a shipped file)
VARIANTS: dict[str, Any] = {
    "pynq": lambda: PYNQ,
    "pynq_tsim": lambda: HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_tsim.yaml"),
    "separate ALU": lambda: PYNQ.with_changes(name="pynq_separate_alu", **{
        "alu.separate_pipeline": True, "alu.acc_banks": 2}),
    "ALU II=1": lambda: PYNQ.with_changes(name="pynq_alu_ii1", **{"alu.ii": 1,
                                                                   "alu.ii_imm": 1}),
    "16 reads": lambda: PYNQ.with_changes(name="pynq_16_reads", **{"memory.outstanding": 16}),
    "GEMM depth 8": lambda: PYNQ.with_changes(name="pynq_gemm_depth8",
                                              **{"gemm.pipeline_depth": 8}),
    "pynq_overlap": lambda: HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_overlap.yaml"),
}


def bench(hw: HwConfig, layers: list[str]) -> dict[str, Any]:
    rows = []
    for layer in layers:
        r = run_workload(resolve(f"resnet18:{layer}"), hw)
        s = r.summary()
        rows.append({"layer": layer, "passed": r.passed, "cycles": r.cycles,
                     "utilization": s["utilization"], "machine_bound_cycles":
                     s["machine_bound_cycles"], "of_machine_bound": s["of_machine_bound"],
                     "memory_bound": s["memory_bound"],
                     "memory_bound_moved": s["memory_bound_moved"],
                     "schedule": s["schedule"], "fold": s["fold"],
                     "compile_s": s["compile_s"], "sim_s": s["sim_s"]})
    net = sum(r["cycles"] * RESNET18_REPEATS[r["layer"]] for r in rows)
    gemm = sum(r["utilization"] * r["cycles"] * RESNET18_REPEATS[r["layer"]] for r in rows)
    machine = sum(r["machine_bound_cycles"] * RESNET18_REPEATS[r["layer"]] for r in rows)
    whole = set(layers) == set(RESNET18)
    return {"hw": hw.name, "timing_model": hw.timing_model, "layers": rows,
            "network_cycles": net if whole else None,
            "network_ms": net / (hw.board.clock_mhz * 1e3) if whole else None,
            "network_utilization": gemm / net if net else 0.0,
            "network_of_machine_bound": machine / net if net else 0.0,
            "resources": hw.resource_estimate(), "fits_board": hw.fits_board(),
            "passed": all(r["passed"] for r in rows)}


def table(results: dict[str, dict[str, Any]], layers: list[str]) -> str:
    names = list(results)
    w = 13
    lines = [f"{'layer':6}" + "".join(f"{n[:w]:>{w + 8}}" for n in names),
             f"{'':6}" + "".join(f"{'cycles':>{w - 1}} {'util':>5} {'%mach':>6}"
                                 for _ in names)]
    for k, layer in enumerate(layers):
        cells = []
        for n in names:
            r = results[n]["layers"][k]
            cells.append(f"{r['cycles']:>{w - 1},} {r['utilization']:>5.3f} "
                         f"{r['of_machine_bound']:>6.1%}{'' if r['passed'] else '!'}")
        lines.append(f"{layer:6}" + " ".join(cells))
    net = [results[n]["network_cycles"] for n in names]
    if all(x is not None for x in net):
        lines.append(f"{'net':6}" + "".join(
            f"{results[n]['network_cycles']:>{w - 1},} {results[n]['network_utilization']:>5.3f}"
            f" {results[n]['network_of_machine_bound']:>6.1%} " for n in names))
    lines.append("")
    lines.append(f"{'config':14} {'model':7} {'DSP':>5} {'BRAM36':>7} {'LUT':>7} {'FF':>6} fits")
    for n in names:
        e = results[n]["resources"]
        lines.append(f"{n:14} {results[n]['timing_model']:7} {e['dsp']:>5} {e['bram36']:>7} "
                     f"{e['lut']:>7} {e['ff']:>6} {'yes' if results[n]['fits_board'] else 'NO'}")
    return "\n".join(lines)


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Network cycles against the BRAM and LUT estimates, one labelled point per config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, res in zip(axes, ("bram36", "lut"), strict=True):
        pts = [(name, r["resources"][res], r["network_cycles"] / 1e6, r["fits_board"])
               for name, r in results.items() if r["network_cycles"] is not None]
        for name, x, y, fits in pts:
            ax.scatter([x], [y], color="#2b7bba" if fits else "#d64541", zorder=3)
            # points at the same resource: labels stacked from the top one down
            rank = sorted((-yy for _, xx, yy, _ in pts if xx == x)).index(-y)
            ax.annotate(name, (x, y), textcoords="offset points", fontsize=8,
                        xytext=(8, 10 - 12 * rank))
        ax.set_xlabel(f"{res} (estimate, vta.resources)")
        ax.grid(True, alpha=0.3)
    if "bram36" in PYNQ.resource_estimate() and PYNQ.board.bram36:
        axes[0].axvline(PYNQ.board.bram36, color="#d64541", lw=1, ls="--",
                        label=f"xc7z020: {PYNQ.board.bram36} BRAM36")
        axes[0].legend(fontsize=8)
    axes[0].set_ylabel("ResNet-18 (20 convolutions), M cycles")
    fig.suptitle("co-design: cycles against resources (red: does not fit the PYNQ)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(RESNET18))
    ap.add_argument("--configs", default=",".join(VARIANTS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "codesign.json"))
    ap.add_argument("--replot", action="store_true",
                    help="redraw the PNG from the JSON of an earlier run (no simulation)")
    a = ap.parse_args()
    if a.replot:
        plot(json.loads(Path(a.out).read_text()), Path(a.out).with_suffix(".png"))
        return 0
    layers = a.layers.split(",")
    results = {}
    t0 = time.perf_counter()
    for name in a.configs.split(","):
        results[name] = bench(VARIANTS[name](), layers)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(table(results, layers))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    png = out.with_suffix(".png")
    plot(results, png)
    print(f"wrote {out} and {png} ({time.perf_counter() - t0:.0f} s)")
    return 0 if all(r["passed"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
