"""Run Tensor Comprehensions definitions: ``vta tc show`` and ``vta run --tc``.

This module sits above the compiler, the simulator and the GPU backend and joins them (as
``vta.runner`` does for named workloads): it loads a TC definition (``vta.compiler.tc``),
compiles it for the chosen target, runs it on random inputs and checks the result against the
TC interpreter.
"""

from __future__ import annotations

import argparse

from vta.compiler.tc import describe, load_file, parse_sizes

__all__ = ["tc_command", "run_tc"]


def tc_command(args: argparse.Namespace) -> int:
    """``vta tc show FILE [--entry NAME] [--size N=..]``: print the inferred domains."""
    d = load_file(args.file, args.entry)
    sizes = parse_sizes(args.size)
    print(describe(d, d.at(sizes) if sizes else None))
    return 0


def run_tc(args: argparse.Namespace) -> int:  # pragma: no cover - filled in by the mappers
    raise NotImplementedError
