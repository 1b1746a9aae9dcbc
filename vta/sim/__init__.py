"""Simulators of the accelerator: a functional reference and a cycle-level machine.

``run_reference`` defines what a program computes; ``simulate`` runs the same program on the
cycle-level machine (same bits, plus cycles, stalls, traffic and a timeline; a discrete-event
model run on ``engine.py``, or on simpy, its reference). See docs/simulator.md.
"""

from vta.errors import AddressError, DeadlockError, InputError, SimError
from vta.sim.dram import Dram, random_inputs
from vta.sim.machine import simulate
from vta.sim.reference import reference_dram, run_reference
from vta.sim.report import format_report
from vta.sim.stats import SimResult, SimStats, Slice, UnitStats
from vta.sim.trace import write_trace

__all__ = [
    "AddressError", "DeadlockError", "Dram", "InputError", "SimError", "SimResult", "SimStats",
    "Slice", "UnitStats", "format_report", "random_inputs", "reference_dram", "run_reference",
    "simulate", "write_trace",
]
