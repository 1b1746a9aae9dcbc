"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

Every user error (a ``VtaError``) is printed as one line on stderr and exits with status 2;
a failed correctness check exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from vta.errors import VtaError

__all__ = ["main"]


def _cmd_info(args: argparse.Namespace) -> int:
    from vta.config import HwConfig

    hw = HwConfig.from_yaml(args.hw)
    summary = hw.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{hw.name} ({hw.source})", show_header=False)
    for key, value in summary.items():
        if isinstance(value, dict):
            value = "  ".join(f"{k}={v}" for k, v in value.items())
        table.add_row(key, str(value))
    Console().print(table)
    return 0


def _load_npy(spec: str) -> tuple[str, object]:
    """``NAME=file.npy`` -> (name, array); a SimError for a malformed spec or unreadable file."""
    import numpy as np

    from vta.sim import InputError

    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InputError(f"--input {spec!r}: expected NAME=FILE.npy")
    try:
        return name, np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"--input {name}: cannot read {path}: {e}") from None


def _save_outputs(outputs: dict, directory: str) -> None:
    import numpy as np
    from pathlib import Path

    from vta.sim import SimError

    try:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in outputs.items():
            np.save(d / f"{name}.npy", arr)
    except OSError as e:
        raise SimError(f"--save-outputs {directory}: {e.strerror or e}") from None


def _cmd_sim(args: argparse.Namespace) -> int:
    import numpy as np

    from vta.config import HwConfig
    from vta.isa import assemble
    from vta.sim import SimError, format_report, run_reference, simulate

    hw = HwConfig.from_yaml(args.hw)
    try:
        text = open(args.program).read()
    except OSError as e:
        raise SimError(f"{args.program}: cannot read file: {e.strerror or e}") from None
    program = assemble(text, hw, source=args.program)
    given = dict(_load_npy(s) for s in args.input) if args.input else None
    if given is not None:
        from vta.sim import random_inputs

        inputs = {**random_inputs(program, hw, args.seed or 0), **given}
    else:
        inputs = None
    result = simulate(program, hw, inputs, seed=args.seed, timing_only=args.timing_only,
                      trace_path=args.trace)
    check = None
    if not args.timing_only and not args.no_check:
        ref = run_reference(program, hw, result.inputs)
        bad = [n for n in ref if not np.array_equal(ref[n], result.outputs[n])]
        check = {"passed": not bad, "mismatched": bad}
    if args.save_outputs and not args.timing_only:
        _save_outputs(dict(result.outputs), args.save_outputs)
    if args.json:
        print(json.dumps({**result.to_dict(), "check": check}, indent=2))
    else:
        print(format_report(result, hw), end="")
        if check is not None:
            print("PASS: machine matches the reference" if check["passed"] else
                  f"FAIL: machine differs from the reference in {', '.join(check['mismatched'])}")
        if args.trace:
            print(f"trace written to {args.trace}")
    return 0 if check is None or check["passed"] else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vta", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="print a hardware config's derived values")
    info.add_argument("--hw", required=True, help="hardware config YAML")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(func=_cmd_info)

    sim = sub.add_parser("sim", help="run an assembly program on the cycle-level simulator")
    sim.add_argument("program", help="assembly file (see vta.isa.asm)")
    sim.add_argument("--hw", required=True, help="hardware config YAML")
    sim.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="contents of a DRAM allocation (others are random); repeatable")
    sim.add_argument("--seed", type=int, default=None, help="seed for random inputs (default 0)")
    sim.add_argument("--trace", metavar="OUT.json", help="write a Perfetto/Chrome trace")
    sim.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sim.add_argument("--save-outputs", metavar="DIR", help="save every allocation as DIR/NAME.npy")
    sim.add_argument("--timing-only", action="store_true",
                     help="skip the arithmetic (cycles only; no reference check)")
    sim.add_argument("--no-check", action="store_true",
                     help="do not run the reference interpreter to check the outputs")
    sim.set_defaults(func=_cmd_sim)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vta`` console script."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except VtaError as e:
        print(f"vta: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
