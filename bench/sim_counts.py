"""Where the simulator's steps go (issue 22), counted rather than timed: for the compiled C1-C11
programs and every kernel of ``vta run resnet18`` (as ``bench/sim_speed.py --network`` compiles
them), timing-only: instructions, distinct instructions, distinct timing keys (the
descriptions the machine builds, ``InstructionDef.timing_key``), generator resumes of the
event engine, the events it scheduled (heap pushes: timeouts, triggered events, the port
server's checkpoints), burst issues the memory port planned (toward a first completion, by
steps on the lean engine: ``Port.next_completion``'s horizon; committed up to an arrival; or
whole), and the planned bursts thrown away because another transfer arrived before the
planned completion; and the Python function calls of one warm pass over each
group, bit-exact and timing-only (``cProfile``'s ``total_calls``: a proxy for the
interpreter's work that, unlike seconds, does not move with the machine's load). Counts do
not depend on the machine's load.

    python bench/sim_counts.py [--hw hwconfigs/pynq.yaml] [--cache FILE] [--out FILE]

Prints a table and writes bench/results/sim_counts.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sim_speed import network_programs  # noqa: E402

from vta.config import HwConfig  # noqa: E402
from vta.isa import definition_of, memport  # noqa: E402
from vta.sim import engine, random_inputs, simulate  # noqa: E402


def _counting() -> tuple[Counter[str], Callable[[], None]]:
    """Wrap the engine's resume and the port's planning so that they count what they do (for
    this process only: a bench, not the library); returns the counts and what puts the
    originals back."""
    counts: Counter[str] = Counter()
    run, resume, submit = memport._run, engine.Process._resume, memport.Port.submit
    push = engine.heappush

    def counted_run(ch: Any, st: Any, jobs: list[Any], until: int | None,
                    first_done: bool = False) -> int | None:
        before = sum(j.next for j in jobs)
        got = run(ch, st, jobs, until, first_done)
        what = "planned toward a first completion" if first_done else \
            "committed up to an arrival" if until is not None else "planned whole"
        counts[f"bursts {what}"] += sum(j.next for j in jobs) - before
        if first_done:
            counts["planning steps toward a first completion"] += 1
        return got

    def counted_push(heap: list[Any], item: Any) -> None:
        counts["events scheduled"] += 1
        push(heap, item)

    def counted_resume(self: Any, event: Any) -> None:
        counts["generator resumes"] += 1
        resume(self, event)

    def counted_submit(self: Any, transfer: Any, now: int) -> int:
        trial = self._trial[transfer.write]
        if trial is not None:  # a plan toward the first completion, thrown away by this arrival
            counts["plans discarded"] += 1
            counts["bursts in discarded plans"] += sum(j.next for j in trial[1]) - sum(
                j.next for j in self.jobs[transfer.write])
        return submit(self, transfer, now)

    memport._run = counted_run  # type: ignore[assignment]
    engine.Process._resume = counted_resume  # type: ignore[method-assign]
    memport.Port.submit = counted_submit  # type: ignore[method-assign]
    engine.heappush = counted_push  # type: ignore[assignment]

    def undo() -> None:
        memport._run = run  # type: ignore[assignment]
        engine.Process._resume = resume  # type: ignore[method-assign]
        memport.Port.submit = submit  # type: ignore[method-assign]
        engine.heappush = push

    return counts, undo


def python_calls(programs: list[Any], hw: HwConfig, timing_only: bool) -> int:
    """Python function calls of one pass simulating ``programs`` (random inputs, seed 0),
    after a first pass that warms the caches, as ``cProfile`` counts them."""
    inputs = [{} if timing_only else random_inputs(p, hw, 0) for p in programs]
    for p, x in zip(programs, inputs, strict=True):
        simulate(p, hw, x, timing_only=timing_only)
    prof = cProfile.Profile()
    prof.enable()
    for p, x in zip(programs, inputs, strict=True):
        simulate(p, hw, x, timing_only=timing_only)
    prof.disable()
    return int(pstats.Stats(prof).total_calls)  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(HERE.parent / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--cache", default=None, help="the compile cache file (default: vta's)")
    ap.add_argument("--out", default=str(HERE / "results" / "sim_counts.json"))
    args = ap.parse_args()
    from vta.tune.cache import default_cache_path

    hw = HwConfig.from_yaml(args.hw)
    cache = Path(args.cache) if args.cache else default_cache_path(os.environ)
    groups = network_programs(hw, cache)
    counts, undo = _counting()
    result: dict[str, dict[str, int]] = {}
    for name, programs in groups.items():
        counts.clear()
        insns = [i for p in programs for i in p.instructions]
        keys = set()
        for i in insns:
            d = definition_of(i)
            keys.add((d.timing_key(i, hw) if d.timing_key is not None else i, d.name))
        for p in programs:
            simulate(p, hw, timing_only=True)
        result[name] = {"instructions": len(insns), "distinct instructions": len(set(insns)),
                        "distinct timing keys": len(keys), **dict(counts)}
    undo()  # the calls counted without the wrappers (after the counts: their caches warm)
    for name, programs in groups.items():
        result[name]["python calls, bit-exact pass"] = python_calls(programs, hw, False)
        result[name]["python calls, timing-only pass"] = python_calls(programs, hw, True)
    table = Table(title=f"timing-only steps on {hw.name}")
    table.add_column("count")
    for name in result:
        table.add_column(name, justify="right")
    for row in sorted({k for r in result.values() for k in r}):
        table.add_row(row, *(f"{r.get(row, 0):,}" for r in result.values()))
    Console().print(table)
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"hw": hw.name, **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
