"""``vta sim PROGRAM.asm --hw HW``: assemble a program, run it on the cycle-level simulator and
check it against the ISA's reference interpreter."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from vta.config import HwConfig
from vta.errors import AsmError, InputError, SimError, UsageError
from vta.isa import assemble
from vta.run.check import compare_all
from vta.sim import format_report, random_inputs, run_reference, simulate

__all__ = ["main", "read_text"]


def read_text(path: str, what: str) -> str:
    """The UTF-8 text of ``path``, or a one-line error naming the file (and the first byte
    that is not UTF-8)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise AsmError(f"{path}: cannot read file: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AsmError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                       f"{e.start}); {what} must be text") from None


def _load_npy(spec: str) -> tuple[str, np.ndarray]:
    """``NAME=file.npy`` -> (name, array); an InputError for a malformed spec or a file that
    is not one .npy array."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InputError(f"--input {spec!r}: expected NAME=FILE.npy")
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        why = getattr(e, "strerror", None) or " ".join(str(e).split()) or type(e).__name__
        raise InputError(f"--input {name}: cannot read {path}: {why}") from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InputError(f"--input {name}: {path} is an .npz archive; expected one .npy array")
    return name, arr


def _load_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        name, arr = _load_npy(spec)
        if name in out:
            raise InputError(f"--input {name}: given twice")
        out[name] = arr
    return out


def _save_outputs(outputs: dict[str, np.ndarray], directory: str) -> None:
    try:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in outputs.items():
            np.save(d / f"{name}.npy", arr)
    except OSError as e:
        raise SimError(f"--save-outputs {directory}: {e.strerror or e}") from None


def _flags_apply(args: argparse.Namespace) -> None:
    if not args.timing_only:
        return
    for flag, given in (("--input", args.input), ("--save-outputs", args.save_outputs),
                        ("--no-check", args.no_check)):
        if given:
            raise UsageError(f"{flag} does not apply with --timing-only (it skips the "
                             f"arithmetic: no data is read, checked or saved)")


def main(args: argparse.Namespace) -> int:
    _flags_apply(args)
    hw = HwConfig.load(args.hw)
    program = assemble(read_text(args.program, "an assembly program"), hw, source=args.program)
    if not program.instructions:
        raise AsmError(f"{args.program}: no instructions (an empty program; a program is "
                       f"instructions ending with FINISH)")
    seed = 0 if args.seed is None else args.seed
    given = _load_inputs(args.input) if args.input else None
    inputs = {**random_inputs(program, hw, seed), **given} if given is not None else None
    result = simulate(program, hw, inputs, seed=seed, timing_only=args.timing_only,
                      trace_path=args.trace)
    check = None
    if not args.timing_only and not args.no_check:
        ref = run_reference(program, hw, result.inputs)
        check = compare_all(ref, dict(result.outputs), against="the reference interpreter",
                            subject="every allocation")
    if args.save_outputs and not args.timing_only:
        _save_outputs(dict(result.outputs), args.save_outputs)
    if args.json:
        doc: dict[str, Any] = {**result.to_dict(), "check": None}
        if check is not None:
            doc["check"] = {**check.to_dict(), "mismatched": list(check.mismatched)}
        print(json.dumps(doc, indent=2))
    else:
        print(format_report(result, hw), end="")
        if check is not None:
            print(check.line())
        if args.trace:
            print(f"trace written to {args.trace}")
    return 0 if check is None or check.passed else 1
