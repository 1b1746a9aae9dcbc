"""Text reports of runs, what ``vta run`` prints: each from the run's ``summary()`` (the same
dictionary ``--json`` prints), ending with the run's verdict (``vta.run.check``).

* ``format_layer(run)``: one layer: on the accelerator the simulator's report (cycles, per-unit
  busy/stall table, bytes per buffer), the classic roofline and the machine bound; on a GPU
  target the kernel's launch (and the emulator's counters with ``--profile``);
* ``format_network(run)``: a network's layers, a row each, and the totals;
* ``format_run(summary)``: a whole graph on the accelerator: per step the op (its output
  tensor), where it ran (the accelerator, or the host with the reason), the operators fused
  into it, cycles, GEMM utilization, % of its machine bound, DRAM bytes and its check; then the
  totals (cycles, time at the clock, frames/s, GOP/s, share of MACs on the accelerator, the
  ALU instructions by function and whether every instruction is VTA's, peak DRAM with and
  without reuse, the host's layout transforms); ``format_gpu_run`` on a GPU target;
``vta.run.tc.format_tc`` reports a TC definition's run (beside its runs: this module does not
load the TC front end, nor the layer runs', which a whole graph's report does not need, nor
the GPU back end's counters unless a GPU launch has them: ``vta run`` of a graph on the
accelerator imports no ``vta.gpu`` module).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from vta.run.targets import AccelTarget
from vta.sim import format_report

if TYPE_CHECKING:  # the runs' modules load what their runs need: not for the report
    from vta.run.gpu_targets import GpuLaunch
    from vta.run.layer import LayerRun
    from vta.run.network import NetworkRun

__all__ = ["format_layer", "format_network", "format_run", "format_gpu_run"]


def _n(x: float) -> str:
    return f"{x:,.0f}"


def format_run(s: dict[str, Any], clock_mhz: float) -> str:
    """The report of a graph run on the accelerator (module docstring)."""
    out = [f"{s['graph']} on {s['hw']} (fusion: {s['fusion']}): {s['kernels']} kernels, "
           f"{s['host_ops']} host fallbacks"]
    out.append(f"{'#':>2} {'op':24} {'on':4} {'fused':30} {'cycles':>11} {'util':>6} "
               f"{'%bound':>7} {'DRAM bytes':>11} {'uJ':>8}  check")
    for r in s["steps"]:
        fused = "+".join(r["ops"]) if len(r["ops"]) > 1 else r["ops"][0]
        ok = "ok" if not r["mismatches"] else f"BAD ({r['mismatches']} differ)"
        if r["placement"] == "vta":
            out.append(f"{r['step']:>2} {r['op']:24} {'vta':4} {fused:30} {_n(r['cycles']):>11} "
                       f"{r['utilization']:>6.3f} {r['of_machine_bound']:>7.1%} "
                       f"{_n(r['dram_bytes']):>11} {r['energy_uj']:>8.1f}  {ok}")
        else:
            out.append(f"{r['step']:>2} {r['op']:24} {'cpu':4} {fused:30} {'-':>11} {'-':>6} "
                       f"{'-':>7} {'-':>11} {'-':>8}  {ok}  host fallback: {r['reason']} "
                       f"({r.get('host_ms', 0.0):.2f} ms on the host)")
    out.append(f"total {_n(s['cycles'])} cycles = {s['time_ms']:.2f} ms at {clock_mhz:g} MHz; "
               f"{s['frames_per_s']:.2f} frames/s; {s['gops']:.2f} GOP/s; GEMM utilization "
               f"{s['utilization']:.1%} (useful {s['useful_utilization']:.1%}); "
               f"{s['of_machine_bound']:.1%} of the summed machine bounds "
               f"({_n(s['machine_bound_cycles'])} cycles)")
    host = [r["op"] for r in s["steps"] if r["placement"] != "vta"]
    on_host = f" ({s.get('host_ms', 0.0):.1f} ms on the host)" if host else ""
    out.append(f"MACs on the accelerator: {s['mac_share']:.1%} of {_n(s['macs'])}; host "
               f"fallbacks{on_host}: {', '.join(host) if host else 'none'}")
    alu = ", ".join(f"{k.split('.')[1]} {_n(n)}" for k, n in s["instructions"].items()
                    if k.startswith("ALU."))
    foreign = ", ".join(f"{k} {_n(n)}" for k, n in s["non_vta_instructions"].items())
    out.append(f"ALU instructions: {alu or 'none'}; "
               f"{'not VTA instructions: ' + foreign if foreign else 'VTA instructions only'}")
    tr = ", ".join(f"{t['kind']} {t['tensor']}" for t in s["transforms"])
    out.append(f"DRAM: peak activations {_n(s['peak_dram_bytes'])} B ({_n(s['naive_dram_bytes'])}"
               f" B without reuse), constants {_n(s['const_dram_bytes'])} B; moved "
               f"{_n(s['dram_bytes'])} B; host layout transforms: {tr or 'none'}")
    out.append(energy_line(s["energy"], "on the accelerator"))
    out.append(seconds_line(s))
    out.append(s["verdict"])
    return "\n".join(out)


def seconds_line(s: dict[str, Any]) -> str:
    """Where a graph run's wall time went: compile (or the compile cache's answer), simulate,
    check, the graph interpreter, and where the command line measured them the startup (the
    interpreter and the imports), the graph's build (or the cache's) and the rest."""
    parts = [("startup", "startup_s"), ("graph", "graph_s"), ("compile", "compile_s"),
             ("simulate", "sim_s"), ("check", "check_s"), ("interpreter", "reference_s"),
             ("other", "other_s")]
    text = "  ".join(f"{name} {s[k]:.2f} s" + _beside(s, k) for name, k in parts if k in s)
    return f"{text}  (wall {s['wall_s']:.2f} s)" if "wall_s" in s else text


def _beside(s: dict[str, Any], key: str) -> str:
    """For the interpreter: the part of its time spent while worker processes compiled or
    simulated (``reference_total_s`` less ``reference_s``: inside those phases' wall time,
    not added to it), when there is one."""
    if key != "reference_s" or "reference_total_s" not in s:
        return ""
    beside = s["reference_total_s"] - s["reference_s"]
    return f" (+{beside:.2f} s beside the workers)" if beside >= 0.005 else ""


def energy_line(e: dict[str, Any], what: str) -> str:
    """One line: the energy of a run (``vta.sim.energy``: total and its components, in µJ)
    and the technology it was priced at."""
    c = e["components_uj"]
    sram = sum(v for k, v in c.items() if k.startswith("sram_"))
    bufs = ", ".join(f"{k[5:]} {v:,.1f}" for k, v in c.items() if k.startswith("sram_"))
    return (f"energy {e['total_uj']:,.1f} uJ {what} ({e['node_nm']} nm, x{e['scale']:g} "
            f"Horowitz 45 nm): MAC {c['mac']:,.1f}, ALU {c['alu']:,.1f}, SRAM {sram:,.1f} "
            f"({bufs}), DRAM {c['dram']:,.1f}, instruction fetch {c['fetch']:,.1f}")


def format_gpu_run(s: dict[str, Any]) -> str:
    """The report of a graph run on a GPU target (``vta.run.graph``)."""
    out = [f"{s['graph']} on {s['where']} (fusion: {s['fusion']}): {len(s['steps'])} kernels"]
    out.append(f"{'#':>2} {'op':24} {'fused':30} {'kernel':34} {'layout':6} {'ms':>8}  check")
    for r in s["steps"]:
        fused = "+".join(r["ops"])
        ok = "ok" if not r["mismatches"] else f"BAD ({r['mismatches']} differ)"
        out.append(f"{r['step']:>2} {r['op']:24} {fused:30} {r['kernel']:34} "
                   f"{r.get('layout', ''):6} {r['ms']:>8.1f}  {ok}")
    out.append(f"total {s['ms']:.1f} ms in {s['where']} (wall clock, not a GPU timing); "
               f"lower + render {s['build_s']:.2f} s; {s.get('host_transposes', 0)} "
               f"activations transposed on the host (NHWC <-> NCHW)")
    out.append(s["verdict"])
    return "\n".join(out)


def format_layer(r: LayerRun, tuned: dict[str, Any] | None = None) -> str:
    """One layer's report (module docstring); ``tuned`` says where a cached schedule came
    from."""
    s = r.summary()
    if not isinstance(r.target, AccelTarget):
        launch: GpuLaunch = r.stats
        out = [f"{s['workload']} [{s['shape']}] {s['dtype']} on {r.target.where}: kernel "
               f"{s['kernel']}, grid {launch.grid}, block {launch.block}, "
               f"{launch.shared_bytes} B shared, {s['gop']:.3f} GOP, "
               f"{launch.seconds * 1e3:.1f} ms (incl. transfers)"]
        if launch.profile is not None:  # (a GPU launch: its module loads the GPU back end)
            profile = import_module("vta.gpu.profile")
            out.append(profile.format_profile(launch.profile).rstrip("\n"))
        out.append(s["verdict"])
        return "\n".join(out)
    hw = r.target.hw
    out = [f"{s['workload']}: {s['shape']} on {hw.name}  schedule {s['schedule']}"]
    if tuned:
        out.append(f"schedule from the tuning cache {tuned['cache']} (key {tuned['key']}: "
                   f"{tuned['cycles']:,.0f} cycles by the {tuned['method']}, "
                   f"{tuned['measured']})")
    out.append(format_report(r.sim, hw).rstrip("\n"))
    kind = "memory" if s["memory_bound"] else "compute"
    moved = "memory" if s["memory_bound_moved"] else "compute"
    out.append(f"roofline (classic): {s['roofline_cycles']:,.0f} cycles, {kind}-bound (GEMM "
               f"{s['roofline_compute_cycles']:,.0f}, DRAM {s['roofline_memory_cycles']:,.0f} "
               f"compulsory; {s['moved_memory_cycles']:,.0f} for the bytes moved: {moved}-"
               f"bound); achieved {s['of_roofline']:.1%} of it")
    how = "serial" if s["serial_epilogue"] else "separate"
    out.append(f"machine bound (GEMM {s['machine_gemm_cycles']:,.0f} + {how} ALU "
               f"{s['epilogue_cycles']:,.0f}): {s['machine_bound_cycles']:,.0f} cycles, "
               f"utilization ceiling {s['utilization_ceiling']:.3f}; achieved "
               f"{s['of_machine_bound']:.1%} of it")
    out.append(energy_line(s["energy"], "per run"))
    out.append(f"GEMM utilization {s['utilization']:.1%}  useful GOP/s {s['gops']:.2f} "
               f"(unpadded work; the table's throughput counts padded tensor ops)  "
               f"compile {s['compile_s'] * 1e3:.0f} ms  simulate {s['sim_s'] * 1e3:.0f} ms  "
               f"acc hazards {s['acc_hazards']}")
    return "\n".join(out)


def format_network(r: NetworkRun, tuned: list[dict[str, Any]] | None = None) -> str:
    """A network's layers, one row each, and the totals; ``tuned`` lists the layers whose
    schedule came from the tuning cache."""
    s = r.summary()
    if not isinstance(r.target, AccelTarget):
        rows = [f"{row['workload']:14} x{row['repeats']}  {row['kernel']}  {row['verdict']}"
                for row in s["layers"]]
        return "\n".join([f"{s['network']} on {r.target.where}: {len(rows)} distinct layers",
                          *rows, s["verdict"]])
    hw = r.target.hw
    out = [f"{s['network']} on {hw.name}: {s['convolutions']} convolutions, "
           f"{len(s['layers'])} distinct layers",
           f"{'layer':14} {'x':>2} {'cycles':>11} {'total':>12} {'share':>6} {'util':>6} "
           f"{'%mach':>6} {'fold':>5} {'sat':>5}  schedule         ok"]
    for row in s["layers"]:
        sc = row["schedule"]
        knob = (f"{sc['tco']}/{sc['tci']}/{sc['th']}/{sc['tw']} vt={sc['vthreads']}"
                f"{sc['vt_axis'] if sc['vthreads'] > 1 else ''}")
        out.append(f"{row['workload']:14} {row['repeats']:>2} {row['cycles']:>11,} "
                   f"{row['total_cycles']:>12,} {row['share']:>6.1%} "
                   f"{row['utilization']:>6.3f} {row['of_machine_bound']:>6.1%} "
                   f"{row['fold']:>5} {row['saturated']:>5.1%}  {knob:16} "
                   f"{'ok' if row['passed'] else 'BAD'}")
    out.append(f"total {s['cycles']:,} cycles = {s['time_ms']:.2f} ms at {hw.board.clock_mhz} "
               f"MHz; {s['gops']:.2f} useful GOP/s; GEMM utilization {s['utilization']:.1%} "
               f"(useful, unpadded: {s['useful_utilization']:.1%}); "
               f"{s['of_machine_bound']:.1%} of the machine bound")
    out.append(energy_line(s["energy"], f"for the {s['convolutions']} convolutions"))
    out.append(f"compile {s['compile_s']:.2f} s  simulate {s['sim_s']:.2f} s")
    if tuned:
        out.append(f"{len(tuned)} of {len(s['layers'])} layers with their schedule from the "
                   f"tuning cache {tuned[0]['cache']}: "
                   f"{', '.join(u['workload'] for u in tuned)}")
    out.append(s["verdict"])
    return "\n".join(out)
