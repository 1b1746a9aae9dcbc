"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

Every user error (a ``VtaError``) is printed as one line on stderr and exits with status 2;
a failed correctness check exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vta.errors import VtaError

if TYPE_CHECKING:
    import numpy as np

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


def _load_npy(spec: str) -> tuple[str, np.ndarray]:
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
    from pathlib import Path

    import numpy as np

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
    check: dict[str, Any] | None = None
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


def _cmd_run(args: argparse.Namespace) -> int:
    if args.target != "vta":
        from vta.gpu.cli_support import run_gpu_workload

        return run_gpu_workload(args)
    from vta.compiler.workloads import resolve, resolve_network
    from vta.config import HwConfig
    from vta.runner import compile_workload, run_workload
    from vta.sim import format_report

    hw = HwConfig.from_yaml(args.hw)
    knobs = {"tco": args.tco, "tci": args.tci, "th": args.th, "tw": args.tw,
             "vthreads": args.vthreads, "vt_axis": args.vt_axis}
    net = resolve_network(args.workload, batch=args.batch,
                          layers=args.layers.upper().split(",") if args.layers else None)
    if net is not None:
        return _run_network(args, net, hw, knobs)
    w = resolve(args.workload, args.sizes, batch=args.batch, height=args.height,
                width=args.width, in_channels=args.in_channels, out_channels=args.out_channels,
                kernel=args.kernel, stride=args.stride, pad=args.pad)
    compiled = compile_workload(w, hw, latency_hiding=not args.no_latency_hiding, **knobs)
    if args.dump_ir:
        print(compiled.result.dump(args.dump_ir))
    r = run_workload(w, hw, seed=args.seed or 0, trace_path=args.trace, compiled=compiled,
                     check_reference=args.check_reference)
    r.seconds_compile = compiled.result.seconds
    s = r.summary()
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        print(f"{s['workload']}: {s['shape']} on {hw.name}  schedule {s['schedule']}")
        print(format_report(r.sim, hw), end="")
        kind = "memory" if s["memory_bound"] else "compute"
        print(f"roofline (classic): {s['roofline_cycles']:,.0f} cycles, {kind}-bound (GEMM "
              f"{s['roofline_compute_cycles']:,.0f}, DRAM {s['roofline_memory_cycles']:,.0f}); "
              f"achieved {s['of_roofline']:.1%} of it")
        print(f"machine bound (GEMM + serial ALU epilogue {s['epilogue_cycles']:,.0f}): "
              f"{s['machine_bound_cycles']:,.0f} cycles, utilization ceiling "
              f"{s['utilization_ceiling']:.3f}; achieved {s['of_machine_bound']:.1%} of it")
        print(f"GEMM utilization {s['utilization']:.1%}  GOP/s {s['gops']:.2f}  "
              f"compile {s['compile_s'] * 1e3:.0f} ms  simulate {s['sim_s'] * 1e3:.0f} ms  "
              f"acc hazards {s['acc_hazards']}")
        if args.trace:
            print(f"trace written to {args.trace}")
        print("PASS: bit-exact against numpy" if r.passed else
              f"FAIL: {r.mismatches} output elements differ from numpy")
    return 0 if r.passed else 1


def _run_network(args: argparse.Namespace, net, hw, knobs: dict) -> int:  # type: ignore[no-untyped-def]
    from vta.runner import run_network

    r = run_network(net, hw, seed=args.seed or 0, latency_hiding=not args.no_latency_hiding,
                    **knobs)
    s = r.summary()
    if args.json:
        print(json.dumps(s, indent=2, default=str))
        return 0 if r.passed else 1
    print(f"{s['network']} on {hw.name}: {s['convolutions']} convolutions, "
          f"{len(s['layers'])} distinct layers")
    print(f"{'layer':14} {'x':>2} {'cycles':>11} {'total':>12} {'share':>6} {'util':>6} "
          f"{'%mach':>6} {'fold':>5}  schedule         ok")
    for row in s["layers"]:
        sc = row["schedule"]
        knob = (f"{sc['tco']}/{sc['tci']}/{sc['th']}/{sc['tw']} vt={sc['vthreads']}"
                f"{sc['vt_axis'] if sc['vthreads'] > 1 else ''}")
        print(f"{row['workload']:14} {row['repeats']:>2} {row['cycles']:>11,} "
              f"{row['total_cycles']:>12,} {row['share']:>6.1%} {row['utilization']:>6.3f} "
              f"{row['of_machine_bound']:>6.1%} {row['fold']:>5}  {knob:16} "
              f"{'ok' if row['passed'] else 'BAD'}")
    print(f"total {s['cycles']:,} cycles = {s['time_ms']:.2f} ms at {hw.board.clock_mhz} MHz; "
          f"{s['gops']:.2f} GOP/s; GEMM utilization {s['utilization']:.1%} "
          f"(useful, unpadded: {s['useful_utilization']:.1%}); "
          f"{s['of_machine_bound']:.1%} of the machine bound")
    print(f"compile {s['compile_s']:.2f} s  simulate {s['sim_s']:.2f} s")
    print("PASS: every layer bit-exact against numpy" if r.passed else
          "FAIL: some layer differs from numpy")
    return 0 if r.passed else 1


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

    run = sub.add_parser("run", help="compile a workload, simulate it, check it against numpy")
    run.add_argument("workload", nargs="?", default="conv2d",
                     help="conv2d (ResNet-18 C2), resnet18:C1..C11, matmul [M N K], dense [M N K]")
    run.add_argument("sizes", nargs="*", type=int, help="M N K for matmul/dense")
    run.add_argument("--hw", default="hwconfigs/pynq.yaml", help="hardware config YAML")
    run.add_argument("--layers", default=None,
                     help="for a network (resnet18): only these layers, e.g. C2,C10")
    for flag in ("batch", "height", "width", "in-channels", "out-channels", "kernel", "stride",
                 "pad"):
        run.add_argument(f"--{flag}", type=int, default=None, help=f"override the {flag}")
    for knob in ("tco", "tci", "th", "tw", "vthreads"):
        run.add_argument(f"--{knob}", type=int, default=None, help=f"schedule knob {knob}")
    run.add_argument("--vt-axis", choices=("oh", "oc"), default=None,
                     help="virtual-thread axis (output rows or output channels)")
    run.add_argument("--no-latency-hiding", action="store_true",
                     help="one virtual thread (no load/compute overlap)")
    run.add_argument("--trace", metavar="OUT.json", help="write a Perfetto/Chrome trace")
    run.add_argument("--json", action="store_true", help="print JSON instead of tables")
    run.add_argument("--seed", type=int, default=None, help="seed for the random inputs")
    run.add_argument("--dump-ir", metavar="PASS", help="print the IR after PASS (or 'all')")
    run.add_argument("--check-reference", action="store_true",
                     help="also run the reference interpreter and compare it with the machine")
    run.add_argument("--target", choices=("vta", "cuda", "cuda-emu"), default="vta",
                     help="vta: the simulated accelerator; cuda: a GPU through CuPy; "
                          "cuda-emu: the generated kernel in the SIMT emulator")
    run.add_argument("--emit-cuda", action="store_true", help="print the generated CUDA kernel")
    run.add_argument("--gpu-schedule", choices=("wmma", "simt", "mma"), default=None,
                     help="GPU kernel: wmma (tensor-core schedule, default), simt, or mma (the "
                          "task-mapping kernels: cp.async pipeline, ldmatrix, mma.sync)")
    run.add_argument("--profile", action="store_true",
                     help="with --target cuda-emu: count bank conflicts, global sectors, "
                          "barriers and instructions by kind")
    run.set_defaults(func=_cmd_run)

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
