"""Deprecated: the run layer is ``vta.run`` (targets, ``run_layer``, ``run_network``,
``run_graph``). These names call it, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

import warnings
from typing import Any

from vta.compiler.accel.driver import Compiled
from vta.compiler.ops.workloads import Network, Workload
from vta.config import HwConfig
from vta.isa import Program
from vta.run.layer import LayerRun, run_layer
from vta.run.network import NetworkRun
from vta.run.network import run_network as _run_network
from vta.run.targets import AccelTarget

__all__ = ["run_workload", "compile_workload", "run_network", "timing_cost"]


def _moved(old: str, new: str) -> None:
    warnings.warn(f"vta.runner.{old} is deprecated: use {new}", DeprecationWarning, stacklevel=3)


def run_workload(w: Workload, hw: HwConfig, **kwargs: Any) -> LayerRun:
    """``run_layer(w, AccelTarget(hw), **kwargs)``."""
    _moved("run_workload", "vta.run.layer.run_layer(w, AccelTarget(hw), ...)")
    return run_layer(w, AccelTarget(hw), **kwargs)


def compile_workload(w: Workload, hw: HwConfig, **kwargs: Any) -> Compiled:
    """``AccelTarget(hw).compile_layer(w, **kwargs)``."""
    _moved("compile_workload", "vta.run.targets.AccelTarget(hw).compile_layer(w, ...)")
    return AccelTarget(hw).compile_layer(w, **kwargs)


def run_network(net: Network, hw: HwConfig, **kwargs: Any) -> NetworkRun:
    """``vta.run.network.run_network(net, AccelTarget(hw), **kwargs)``."""
    _moved("run_network", "vta.run.network.run_network(net, AccelTarget(hw), ...)")
    return _run_network(net, AccelTarget(hw), **kwargs)


def timing_cost(hw: HwConfig) -> Any:
    """``AccelTarget(hw).cycles``: a program's timing-only cycles."""
    _moved("timing_cost", "vta.run.targets.AccelTarget(hw).cycles")
    target = AccelTarget(hw)

    def cycles(program: Program) -> int:
        return target.cycles(program)

    return cycles
