"""Chrome trace-event JSON (opens in ui.perfetto.dev or chrome://tracing).

One process (the run) with one thread (track) per unit, named by metadata events, in the order
fetch, load, compute, (alu,) store. Every executed instruction is a complete (``"X"``) slice
named by its mnemonic, with its index, assembly text, duration in cycles and fields in
``args``; waits (on a token, a queue, the memory port or an accumulator bank) are slices too,
in category ``stall``. Timestamps and
durations are microseconds at the board clock (``cycle / clock_mhz``).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

from vta.errors import SimError
from vta.isa import format_insn
from vta.sim.stats import SimResult

__all__ = ["trace_events", "write_trace"]


def _insn_args(result: SimResult, index: int) -> dict[str, Any]:
    insn = result.program.instructions[index]
    args: dict[str, Any] = {"index": index, "asm": format_insn(insn, result.program)}
    for f in fields(cast(Any, insn)):
        v = getattr(insn, f.name)
        args[f.name] = str(v) if f.name == "deps" else (v.name if hasattr(v, "name") else v)
    return args


def trace_events(result: SimResult) -> list[dict[str, Any]]:
    """The trace as a list of Chrome trace events."""
    mhz = result.stats.clock_mhz
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
         "args": {"name": f"vta {result.hw_name}"}}]
    tid = {u: i + 1 for i, u in enumerate(result.stats.units)}
    for u, t in tid.items():
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": t, "args": {"name": u}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": t,
                       "args": {"sort_index": t}})
    for s in result.slices:
        ev: dict[str, Any] = {"ph": "X", "name": s.label, "pid": 1, "tid": tid[s.unit],
                              "ts": s.start / mhz, "dur": (s.end - s.start) / mhz,
                              "cat": "insn" if s.kind == "insn" else "stall"}
        if s.kind == "insn" and s.unit != "fetch":
            ev["args"] = {**_insn_args(result, s.index), "cycles": s.end - s.start}
        else:
            ev["args"] = {"index": s.index, "cycles": s.end - s.start, "wait": s.kind}
        events.append(ev)
    return events


def write_trace(result: SimResult, path: str | Path) -> None:
    """Write ``result``'s timeline as Chrome trace-event JSON to ``path``."""
    doc = {"traceEvents": trace_events(result), "displayTimeUnit": "ns",
           "otherData": {"hw": result.hw_name, "cycles": result.cycles}}
    try:
        Path(path).write_text(json.dumps(doc))
    except OSError as e:
        raise SimError(f"cannot write trace {path}: {e.strerror or e}") from None
