"""Text reports of a whole-graph run (``vta run resnet18``): a per-step table and the totals.

``format_run(summary)`` takes ``vta.runner.graph_summary``'s dictionary (the same the JSON
output prints) and returns the lines: per step the op (its output tensor), where it ran (the
accelerator, or the host with the reason), the operators fused into it, cycles, GEMM
utilization, % of its machine bound, DRAM bytes and its check; then the totals (cycles, time
at the clock, frames/s, GOP/s, share of MACs on the accelerator, peak DRAM with and without
reuse, the host's layout transforms) and the verdict.
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_run", "format_gpu_run"]


def _n(x: float) -> str:
    return f"{x:,.0f}"


def format_run(s: dict[str, Any], clock_mhz: float) -> str:
    """The report of a graph run on the accelerator (module docstring)."""
    out = [f"{s['graph']} on {s['hw']} (fusion: {s['fusion']}): {s['kernels']} kernels, "
           f"{s['host_ops']} host fallbacks"]
    out.append(f"{'#':>2} {'op':24} {'on':4} {'fused':30} {'cycles':>11} {'util':>6} "
               f"{'%bound':>7} {'DRAM bytes':>11}  check")
    for r in s["steps"]:
        fused = "+".join(r["ops"]) if len(r["ops"]) > 1 else r["ops"][0]
        ok = "ok" if not r["mismatches"] else f"BAD ({r['mismatches']} differ)"
        if r["placement"] == "vta":
            out.append(f"{r['step']:>2} {r['op']:24} {'vta':4} {fused:30} {_n(r['cycles']):>11} "
                       f"{r['utilization']:>6.3f} {r['of_machine_bound']:>7.1%} "
                       f"{_n(r['dram_bytes']):>11}  {ok}")
        else:
            out.append(f"{r['step']:>2} {r['op']:24} {'cpu':4} {fused:30} {'-':>11} {'-':>6} "
                       f"{'-':>7} {'-':>11}  {ok}  host fallback: {r['reason']}")
    out.append(f"total {_n(s['cycles'])} cycles = {s['time_ms']:.2f} ms at {clock_mhz:g} MHz; "
               f"{s['frames_per_s']:.2f} frames/s; {s['gops']:.2f} GOP/s; GEMM utilization "
               f"{s['utilization']:.1%} (useful {s['useful_utilization']:.1%}); "
               f"{s['of_machine_bound']:.1%} of the summed machine bounds "
               f"({_n(s['machine_bound_cycles'])} cycles)")
    host = [r["op"] for r in s["steps"] if r["placement"] != "vta"]
    out.append(f"MACs on the accelerator: {s['mac_share']:.1%} of {_n(s['macs'])}; host "
               f"fallbacks: {', '.join(host) if host else 'none'}")
    tr = ", ".join(f"{t['kind']} {t['tensor']}" for t in s["transforms"])
    out.append(f"DRAM: peak activations {_n(s['peak_dram_bytes'])} B ({_n(s['naive_dram_bytes'])}"
               f" B without reuse), constants {_n(s['const_dram_bytes'])} B; moved "
               f"{_n(s['dram_bytes'])} B; host layout transforms: {tr or 'none'}")
    out.append(f"compile {s['compile_s']:.2f} s  simulate {s['sim_s']:.2f} s  check "
               f"{s['check_s']:.2f} s  interpreter {s['reference_s']:.2f} s")
    n = len(s["steps"])
    if s["passed"]:
        out.append(f"PASS: the outputs and all {n} stored tensors bit-exact against the graph "
                   f"interpreter (numpy)")
    else:
        bad = ", ".join(s["mismatched_tensors"]) or "the outputs"
        out.append(f"FAIL: {bad} differ from the graph interpreter")
    return "\n".join(out)


def format_gpu_run(s: dict[str, Any]) -> str:
    """The report of a graph run through the GPU path (``vta.graph.gpu``)."""
    out = [f"{s['graph']} on {s['where']} (fusion: {s['fusion']}): {len(s['steps'])} kernels"]
    out.append(f"{'#':>2} {'op':24} {'fused':30} {'kernel':34} {'ms':>8}  check")
    for r in s["steps"]:
        fused = "+".join(r["ops"])
        ok = "ok" if not r["mismatches"] else f"BAD ({r['mismatches']} differ)"
        out.append(f"{r['step']:>2} {r['op']:24} {fused:30} {r['kernel']:34} "
                   f"{r['ms']:>8.1f}  {ok}")
    out.append(f"total {s['ms']:.1f} ms in the {s['where']} (wall clock, not a GPU timing); "
               f"lower + render {s['build_s']:.2f} s")
    if s["passed"]:
        out.append(f"PASS: the outputs and all {len(s['steps'])} tensors bit-exact against the "
                   f"graph interpreter (numpy)")
    else:
        out.append(f"FAIL: {', '.join(s['mismatched_tensors']) or 'the outputs'} differ")
    return "\n".join(out)
