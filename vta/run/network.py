"""A network's convolutions one by one (``vta run resnet18 --layers C2,C10``), on any target.

Each distinct layer is compiled and run once (checked against numpy, ``vta.run.layer``); a
layer that occurs several times in the network runs the same program, whose cycle count does
not depend on the data, so it is counted as often as it occurs. Layers run one after another,
so the network's cycles are the sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vta.compiler.accel.driver import Compiled
from vta.compiler.ops.workloads import Network, Workload
from vta.run.check import Check, merge
from vta.run.layer import LayerRun, run_layer
from vta.run.targets import AccelTarget, Target
from vta.sim.energy import Energy

__all__ = ["NetworkRun", "run_network"]


@dataclass
class NetworkRun:
    """Every distinct layer of ``network`` run on ``target``, with how often it occurs."""

    network: Network
    target: Target
    layers: list[tuple[LayerRun, int]]

    @property
    def check(self) -> Check:
        raw = any(r.raw_slices for r, _ in self.layers)
        sat = max((r.saturated for r, _ in self.layers), default=0.0)
        note = ("int32 accumulators (no epilogue)" if raw else
                f"at most {sat:.2%} of a layer's outputs saturated")
        checks = [r.check for r, _ in self.layers]
        return merge(checks, against="numpy", subject="every layer", note=note,
                     names=[r.workload.name for r, _ in self.layers])

    @property
    def passed(self) -> bool:
        return all(r.passed for r, _ in self.layers)

    @property
    def cycles(self) -> int:
        return sum(r.cycles * n for r, n in self.layers)

    def summary(self) -> dict[str, Any]:
        if not isinstance(self.target, AccelTarget):
            return {"network": self.network.name, "target": self.target.name,
                    "passed": self.passed, "verdict": self.check.line(),
                    "layers": [{**r.summary(), "repeats": n} for r, n in self.layers]}
        hw = self.target.hw
        clock = hw.board.clock_mhz * 1e6
        rows = []
        gemm = ideal = machine = 0.0
        energy: list[Energy] = []
        cycles = self.cycles
        for r, n in self.layers:
            s = r.summary()
            gemm += s["gemm_cycles"] * n
            ideal += s["ideal_gemm_cycles"] * n
            machine += s["machine_bound_cycles"] * n
            rows.append({"workload": s["workload"], "shape": s["shape"], "repeats": n,
                         "passed": s["passed"], "cycles": s["cycles"],
                         "total_cycles": s["cycles"] * n,
                         "share": s["cycles"] * n / cycles if cycles else 0.0,
                         "utilization": s["utilization"],
                         "useful_utilization": s["useful_utilization"], "fold": s["fold"],
                         "of_machine_bound": s["of_machine_bound"],
                         "saturated": s["saturated"],
                         "schedule": s["schedule"], "compile_s": s["compile_s"],
                         "sim_s": s["sim_s"], "energy_uj": s["energy"]["total_uj"],
                         "total_energy_uj": s["energy"]["total_uj"] * n})
            energy.append(Energy({k: v * 1e6 * n
                                  for k, v in s["energy"]["components_uj"].items()}))
        t = cycles / clock
        return {"network": self.network.name, "hw": hw.name, "passed": self.passed,
                "verdict": self.check.line(),
                "layers": rows, "convolutions": sum(n for _, n in self.layers),
                "cycles": cycles, "time_ms": t * 1e3,
                "gops": self.network.ops / t / 1e9 if t else 0.0,
                "utilization": gemm / cycles if cycles else 0.0,
                "useful_utilization": ideal / cycles if cycles else 0.0,
                "machine_bound_cycles": machine,
                "of_machine_bound": machine / cycles if cycles else 0.0,
                "saturated_max": max((r["saturated"] for r in rows), default=0.0),
                "raw": any(r.raw_slices for r, _ in self.layers),
                "energy": {**Energy.total(energy).summary(), "node_nm": hw.energy.node_nm,
                           "scale": hw.energy.scale},
                "compile_s": sum(r["compile_s"] for r in rows),
                "sim_s": sum(r["sim_s"] for r in rows)}


def run_network(net: Network, target: Target, *, seed: int = 0, raw: bool = False,
                pick: Callable[[Workload], Compiled | None] | None = None,
                **options: Any) -> NetworkRun:
    """Compile and run every distinct layer of ``net`` once on ``target`` (module docstring).
    ``pick``: a layer's accelerator program compiled elsewhere (a tuned schedule), or None for
    the default; ``options`` go to ``run_layer`` (schedule knobs, latency hiding, the GPU
    schedule)."""
    if isinstance(target, AccelTarget):
        for w, _ in net.layers:  # refuse a too-large layer before compiling any
            target.check_size(w)
    layers = [(run_layer(w, target, seed=seed, raw=raw,
                         compiled=pick(w) if pick is not None else None, **options), n)
              for w, n in net.layers]
    return NetworkRun(net, target, layers)
