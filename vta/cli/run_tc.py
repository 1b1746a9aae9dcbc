"""``vta run --tc FILE``: a Tensor Comprehensions definition mapped onto the target and checked
against the TC interpreter. Apart from ``vta.cli.run`` (which loads it for ``--tc``) so that
other runs do not load the TC front end."""

from __future__ import annotations

import argparse

from vta.cli.parser import flag
from vta.cli.run import _SCHEDULE, _given, _target, emit
from vta.compiler.ops.workloads import CONV_OPTIONS
from vta.compiler.tc import load_file, parse_sizes
from vta.errors import TcSizeError
from vta.run.targets import AccelTarget
from vta.run.tc import format_tc, run_tc

__all__ = ["run_tc_command"]

#: flags that describe a named workload or its hand-set schedule: a TC definition refuses them
_WORKLOAD_FLAGS = ("layers", *CONV_OPTIONS, *_SCHEDULE, "trace", "dump_ir", "no_latency_hiding",
                   "check_reference", "dtype", "plot", "input", "output", "jobs")


def _tc_flags_apply(args: argparse.Namespace) -> None:
    """Options of ``vta run`` that mean nothing for a TC definition are refused by name."""
    given = [f for f in _WORKLOAD_FLAGS if _given(args, f)]
    if args.sizes:
        given.append("positional sizes")
    if given:
        names = ", ".join(n if " " in n else flag(n) for n in given)
        raise TcSizeError(f"vta run --tc: {names} apply to named workloads, not to a TC "
                          f"definition (sizes come from --size, the schedule from the mapper)")
    if args.emit_cuda and args.target == "vta":
        raise TcSizeError("vta run --tc: --emit-cuda needs --target cuda-emu or cuda")


def run_tc_command(args: argparse.Namespace) -> int:
    """``vta run --tc FILE [--entry NAME] --size N=.. [--target vta|cuda-emu|cuda]``: map,
    run and check against the TC interpreter."""
    _tc_flags_apply(args)
    d = load_file(args.tc, args.entry)
    sizes = parse_sizes(args.size)
    target = _target(args)
    r = run_tc(d, sizes, target, seed=args.seed or 0)
    if args.emit_cuda:
        for src in getattr(r, "sources", []):
            print(src)
    if isinstance(target, AccelTarget):
        text = format_tc(r, sizes, target.hw.board.clock_mhz, target.hw.name)
    else:
        text = format_tc(r, sizes)
    emit(r.summary(), text, args.json)
    return 0 if r.passed else 1
