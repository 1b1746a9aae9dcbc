"""A human-readable report of a run (rich tables rendered to text).

``rich`` (about 35 ms of import) is loaded when a report is formatted, not with the simulator:
``vta run`` of a whole graph prints its own report (``vta.run.report``) and never loads it."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from vta.config import HwConfig
from vta.sim.stats import SimResult

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["format_report"]


def _summary(result: SimResult, hw: HwConfig) -> Table:
    from rich.table import Table  # a third-party module, loaded with the first report

    s = result.stats
    t = Table(title=f"simulation on {hw.name}", show_header=False)
    t.add_row("cycles", f"{s.cycles:,}")
    t.add_row("time", f"{s.time_us:,.2f} µs at {s.clock_mhz:g} MHz")
    if s.ops:
        t.add_row("throughput", f"{s.gops:.2f} GOP/s (peak {hw.peak_gops:.1f})")
    t.add_row("GEMM utilization", f"{s.utilization:.1%} ({s.gemm_cycles:,} tensor-op cycles)")
    t.add_row("instructions", "  ".join(f"{k}={v}" for k, v in sorted(s.insn_counts.items())))
    if s.acc_hazards is not None:
        t.add_row("acc RAW hazards", str(s.acc_hazards))
    if result.timing_only:
        t.add_row("mode", "timing only (no arithmetic)")
    return t


def _units(result: SimResult) -> Table:
    from rich.table import Table

    s = result.stats
    t = Table(title="per-unit cycles")
    conflicts = any(u.conflict for u in s.units.values())
    cols = ["unit", "insns", "busy", "token wait", "queue wait", "memory wait"]
    cols += ["bank wait"] * conflicts + ["idle"]
    for col in cols:
        t.add_column(col, justify="left" if col == "unit" else "right")
    for name, u in s.units.items():
        values = (u.busy, u.token, u.queue, u.memory, *((u.conflict,) * conflicts), u.idle)
        pct = [f"{v:,} ({v / s.cycles:.0%})" if s.cycles else str(v) for v in values]
        t.add_row(name, str(u.insns), *pct)
    return t


def _bytes(result: SimResult) -> Table:
    from rich.table import Table

    t = Table(title="DRAM traffic")
    t.add_column("buffer")
    t.add_column("bytes", justify="right")
    for kind, n in result.stats.bytes.items():
        t.add_row(kind, f"{n:,}")
    t.add_row("total", f"{sum(result.stats.bytes.values()):,}")
    return t


def format_report(result: SimResult, hw: HwConfig) -> str:
    """Cycles, time, GOP/s, utilization, per-unit busy/stall table and bytes per buffer."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=110, color_system=None)
    for table in (_summary(result, hw), _units(result), _bytes(result)):
        console.print(table)
    return buf.getvalue()
