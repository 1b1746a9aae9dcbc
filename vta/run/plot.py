"""Pictures of runs (matplotlib, drawn off-screen with the Agg backend): ``vta run --plot``.

``plot_run(points, units, hw, path)`` draws two panels:

* the roofline: attained GOP/s against operational intensity (the layer's true operations per
  compulsory byte on the busier of the port's read and write channels, ``driver.
  compulsory_bytes``: the channels move data side by side), on log axes, under the classic
  roofline ``min(peak, intensity x bandwidth)``; each layer is a point at its achieved GOP/s
  joined to a hollow marker at the GOP/s its machine bound allows (``driver.roofline``:
  whole GEMM micro-ops and the ALU epilogue, serial or beside), so the distance to each bound
  reads off the picture;
* where every unit's cycles went: one bar per unit, its busy, token, queue, memory, bank
  conflict and idle shares of the run (summed over the layers, each counted as often as the
  network repeats it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vta.config import HwConfig
from vta.errors import PlotError
from vta.run.graph import GraphRun
from vta.run.layer import LayerRun

__all__ = ["LayerPoint", "plot_run", "plot_layers", "plot_graph", "check_plot_path",
           "PlotError"]

_KINDS = ("busy", "token", "queue", "memory", "conflict", "idle")
_COLORS = {"busy": "#2b7bba", "token": "#f0a830", "queue": "#9e9e9e", "memory": "#d64541",
           "conflict": "#8e44ad", "idle": "#e8e8e8"}


@dataclass(frozen=True)
class LayerPoint:
    """One layer on the roofline: its name, true operations, compulsory bytes on the busier
    channel, cycles, and the cycles of both bounds."""

    name: str
    ops: float
    bytes: float
    cycles: float
    roofline_cycles: float
    machine_cycles: float


def plot_run(points: Sequence[LayerPoint], units: Mapping[str, Mapping[str, int]],
             hw: HwConfig, path: str) -> None:
    """Write the two panels (module docstring) for ``points`` and the per-unit cycle split
    ``units`` (unit -> {busy, token, queue, memory, conflict, idle}) to ``path`` (PNG, or any
    format matplotlib infers from the suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    _roofline(ax, points, hw)
    _units(bx, units)
    fig.suptitle(f"{', '.join(p.name for p in points) if len(points) <= 3 else 'network'} "
                 f"on {hw.name} ({hw.timing_model} timing)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as e:
        raise PlotError(f"--plot {path}: cannot write the picture: {e}") from None
    finally:
        plt.close(fig)


def _roofline(ax, points: Sequence[LayerPoint], hw: HwConfig) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    clock = hw.board.clock_mhz * 1e6
    peak = hw.peak_gops
    bw = hw.dram_gbps
    intensities = [p.ops / p.bytes for p in points if p.bytes]
    lo = min([*intensities, peak / bw]) / 4
    hi = max([*intensities, peak / bw]) * 4
    x = np.geomspace(lo, hi, 200)
    ax.plot(x, np.minimum(peak, x * bw), color="black", lw=1.5,
            label=f"classic roofline ({peak:.1f} GOP/s, {bw:.2f} GB/s)")
    for p in points:
        ai = p.ops / p.bytes
        got = p.ops / (p.cycles / clock) / 1e9
        machine = p.ops / (p.machine_cycles / clock) / 1e9
        ax.plot([ai, ai], [got, machine], color="#2b7bba", lw=1, alpha=0.6)
        ax.scatter([ai], [machine], facecolors="none", edgecolors="#2b7bba", s=40, zorder=3)
        ax.scatter([ai], [got], color="#d64541", s=22, zorder=4)
        ax.annotate(p.name.split(":")[-1], (ai, got), textcoords="offset points",
                    xytext=(4, -10), fontsize=7)
    ax.scatter([], [], color="#d64541", s=22, label="achieved")
    ax.scatter([], [], facecolors="none", edgecolors="#2b7bba", s=40,
               label="machine bound (GEMM micro-ops + ALU epilogue)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    lowest = min([p.ops / (p.cycles / clock) / 1e9 for p in points] or [peak])
    ax.set_ylim(min(lowest, peak * lo / (peak / bw)) / 2, peak * 2)
    ax.set_xlabel("operational intensity (ops per compulsory byte, busier channel)")
    ax.set_ylabel("GOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def _units(ax, units: Mapping[str, Mapping[str, int]]) -> None:  # type: ignore[no-untyped-def]
    names = list(units)
    left = [0.0] * len(names)
    for kind in _KINDS:
        shares = []
        for n in names:
            total = sum(units[n].get(k, 0) for k in _KINDS) or 1
            shares.append(units[n].get(kind, 0) / total)
        ax.barh(names, shares, left=left, color=_COLORS[kind], label=kind)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the run's cycles")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.15))


def _add_units(units: dict[str, dict[str, int]], stats: Any, times: int) -> None:
    for name, u in stats.units.items():
        acc = units.setdefault(name, dict.fromkeys(_KINDS, 0))
        for k in acc:
            acc[k] += getattr(u, k) * times


def plot_layers(runs: Sequence[tuple[LayerRun, int]], hw: HwConfig, path: str) -> None:
    """``vta run --plot`` of layers: each against both bounds, and where each unit's cycles
    went, the units summed over the layers as often as each runs."""
    points: list[LayerPoint] = []
    units: dict[str, dict[str, int]] = {}
    for r, n in runs:
        b = r.roofline
        busier = b["memory_cycles"] * hw.memory.bus_bytes  # max(read, written) compulsory
        points.append(LayerPoint(r.workload.name, b["ops"], busier, r.cycles,
                                 b["bound_cycles"], b["machine_cycles"]))
        _add_units(units, r.stats, n)
    plot_run(points, units, hw, path)


def plot_graph(run: GraphRun, hw: HwConfig, path: str) -> None:
    """``vta run --plot`` of a whole graph: every convolution and dense kernel (its fused
    operators included) against both bounds, and the units' cycles summed over every kernel."""
    points: list[LayerPoint] = []
    units: dict[str, dict[str, int]] = {}
    for s in run.steps:
        if s.sim is None:
            continue  # a host fallback: no accelerator cycles
        _add_units(units, s.sim.stats, 1)
        b = s.step.bound
        if "bound_cycles" in b:  # a GEMM kernel (driver.roofline); window kernels have no MACs
            busier = b["memory_cycles"] * hw.memory.bus_bytes
            points.append(LayerPoint(s.step.group.output.name, b["ops"], busier, s.cycles,
                                     b["bound_cycles"], b["machine_cycles"]))
    plot_run(points, units, hw, path)


def check_plot_path(path: str) -> None:
    """A ``PlotError`` before anything runs when ``path`` cannot be written: its directory
    does not exist, or matplotlib has no format for its suffix."""
    from matplotlib.backend_bases import FigureCanvasBase

    p = Path(path)
    if not p.parent.is_dir():
        raise PlotError(f"--plot {path}: no directory {p.parent} to write the picture in")
    formats = FigureCanvasBase.get_supported_filetypes()
    if p.suffix.lower().lstrip(".") not in formats:
        raise PlotError(f"--plot {path}: the suffix {p.suffix or '(none)'!r} names no picture "
                        f"format matplotlib writes ({', '.join(sorted(formats))})")
