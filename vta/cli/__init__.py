"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

Every user error (a ``VtaError``, or a bad command line: an unknown flag, a value of the wrong
type or range, a flag that does not apply to the workload or target) is printed as one line
``vta: error: ...`` on stderr and exits with status 2; a failed correctness check exits with
status 1, as does output cut short by a reader that closed the pipe (silently). Anything else
is a bug in vta: one line ``vta: internal error: ...`` and status 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from vta.errors import UsageError, VtaError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["UsageError", "main"]

#: The hardware ``vta run`` targets when ``--hw`` is not given (relative to the working directory).
DEFAULT_HW = "hwconfigs/pynq.yaml"

#: Seeds are 64-bit: numpy accepts larger ones, but a seed that long is a typo.
SEED_LIMIT = 1 << 64


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are ``UsageError``s (one line, exit 2), not the usage
    block and ``SystemExit``."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _seed(text: str) -> int:
    """An argparse type: a seed in ``0 .. 2**64 - 1``."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") \
            from None
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer below 2**64, got "
                                         f"{text}")
    return value


def _read_text(path: str, what: str) -> str:
    """The UTF-8 text of ``path``, or a one-line error naming the file (and the first byte
    that is not UTF-8)."""
    from vta.isa import AsmError

    try:
        data = open(path, "rb").read()
    except OSError as e:
        raise AsmError(f"{path}: cannot read file: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AsmError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                       f"{e.start}); {what} must be text") from None


def _cmd_info(args: argparse.Namespace) -> int:
    from vta.config import HwConfig
    from vta.resources import BOARDS, fits, published_comparison, shares

    hw = HwConfig.from_yaml(args.hw)
    summary = hw.summary()
    est = hw.resource_estimate()
    summary["boards"] = {b.name: ("fits" if fits(est, b.limits) else "does not fit") + " (" +
                         ", ".join(f"{k} {v:.0%}" for k, v in shares(est, b.limits).items()) +
                         ")" for b in BOARDS.values()}
    summary["against VTA's published PYNQ design"] = {
        what: f"published {pub}; estimate {mine}: {verdict}"
        for what, pub, mine, verdict in published_comparison(hw)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{hw.name} ({hw.source})", show_header=False)
    for key, value in summary.items():
        if isinstance(value, dict):
            sep = "\n" if key in ("resource_breakdown", "boards",
                                  "against VTA's published PYNQ design") else "  "
            value = sep.join(f"{k}={v}" for k, v in value.items())
        table.add_row(key, str(value))
    Console().print(table)
    return 0


def _load_npy(spec: str) -> tuple[str, np.ndarray]:
    """``NAME=file.npy`` -> (name, array); an InputError for a malformed spec or a file that
    is not one .npy array."""
    import numpy as np

    from vta.sim import InputError

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
            from vta.sim import InputError

            raise InputError(f"--input {name}: given twice")
        out[name] = arr
    return out


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


def _sim_flags_apply(args: argparse.Namespace) -> None:
    if not args.timing_only:
        return
    for flag, given in (("--input", args.input), ("--save-outputs", args.save_outputs),
                        ("--no-check", args.no_check)):
        if given:
            raise UsageError(f"{flag} does not apply with --timing-only (it skips the "
                             f"arithmetic: no data is read, checked or saved)")


def _cmd_sim(args: argparse.Namespace) -> int:
    import numpy as np

    from vta.config import HwConfig
    from vta.isa import AsmError, assemble
    from vta.sim import format_report, run_reference, simulate

    _sim_flags_apply(args)
    hw = HwConfig.from_yaml(args.hw)
    program = assemble(_read_text(args.program, "an assembly program"), hw,
                       source=args.program)
    if not program.instructions:
        raise AsmError(f"{args.program}: no instructions (an empty program; a program is "
                       f"instructions ending with FINISH)")
    seed = 0 if args.seed is None else args.seed
    given = _load_inputs(args.input) if args.input else None
    if given is not None:
        from vta.sim import random_inputs

        inputs = {**random_inputs(program, hw, seed), **given}
    else:
        inputs = None
    result = simulate(program, hw, inputs, seed=seed, timing_only=args.timing_only,
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


#: ``vta run`` flags that only the accelerator target (``--target vta``) reads, by dest (the GPU
#: path reads no HwConfig and prints no JSON) ...
_VTA_ONLY = ("hw", "json", "tco", "tci", "th", "tw", "vthreads", "vt_axis", "no_latency_hiding",
             "dump_ir", "check_reference", "trace", "plot", "cache", "no_cache")
#: ... and those only the GPU targets read.
_GPU_ONLY = ("emit_cuda", "gpu_schedule", "profile")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _given(args: argparse.Namespace, dest: str) -> bool:
    return getattr(args, dest) not in (None, False)


def _check_plot_path(path: str) -> None:
    """A ``UsageError`` before anything runs when ``--plot PATH`` cannot be written: its
    directory does not exist, or matplotlib has no format for its suffix."""
    from pathlib import Path

    p = Path(path)
    if not p.parent.is_dir():
        raise UsageError(f"--plot {path}: no directory {p.parent} to write the picture in")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if p.suffix.lower().lstrip(".") not in formats:
        raise UsageError(f"--plot {path}: the suffix {p.suffix or '(none)'!r} names no picture "
                         f"format matplotlib writes ({', '.join(sorted(formats))})")


def _run_flags_apply(args: argparse.Namespace) -> None:
    """A ``UsageError`` naming a flag the target or workload would silently ignore."""
    from vta.compiler.ops.workloads import NETWORKS

    for dest in ("entry", "size"):
        if _given(args, dest):
            raise UsageError(f"{_flag(dest)} does not apply without --tc (it picks the "
                             f"definition and sizes of a TC file)")
    gpu = args.target != "vta"
    for dest in _VTA_ONLY if gpu else _GPU_ONLY:
        if _given(args, dest):
            raise UsageError(f"{_flag(dest)} does not apply to --target {args.target} (it is "
                             f"for --target {'vta' if gpu else 'cuda or cuda-emu'})")
    if args.layers is not None and args.workload not in NETWORKS:
        raise UsageError(f"--layers does not apply to {args.workload} (it picks layers of a "
                         f"network: {', '.join(NETWORKS)})")
    if _given(args, "plot"):
        _check_plot_path(args.plot)
    if _given(args, "fusion") and not _is_graph(args):
        raise UsageError(f"--fusion does not apply to {args.workload} (it sets how a whole "
                         f"network's operators are fused: resnet18 or --onnx)")
    one_thread = args.vthreads == 1 or args.no_latency_hiding
    if args.vt_axis is not None and one_thread:
        raise UsageError("--vt-axis does not apply with one virtual thread (--vthreads 1 or "
                         "--no-latency-hiding)")


def _layers(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [p.strip().upper() for p in text.split(",")]
    if not all(names):
        raise UsageError(f"--layers {text!r}: expected layer names separated by commas, e.g. "
                         f"C2,C10")
    return names


def _cmd_tc(args: argparse.Namespace) -> int:
    from vta.run.tc_runner import tc_command

    return tc_command(args)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.tc is not None:
        from vta.run.tc_runner import run_tc

        return run_tc(args)
    _run_flags_apply(args)
    if _is_graph(args):
        return _run_graph(args)
    if args.target != "vta":
        from vta.run.gpu_runner import run_gpu_workload

        return run_gpu_workload(args)
    from vta.compiler.ops.epilogue import Epilogue
    from vta.compiler.ops.workloads import resolve, resolve_network
    from vta.config import HwConfig
    from vta.run.runner import compile_workload, run_workload
    from vta.sim import format_report

    shape = {"height": args.height, "width": args.width, "in_channels": args.in_channels,
             "out_channels": args.out_channels, "kernel": args.kernel, "stride": args.stride,
             "pad": args.pad}
    net = resolve_network(args.workload, batch=args.batch, layers=_layers(args.layers),
                          sizes=args.sizes, **shape)
    w = None if net is not None else resolve(args.workload, args.sizes, batch=args.batch,
                                             **shape)
    hw = HwConfig.from_yaml(args.hw or DEFAULT_HW)
    knobs = {"tco": args.tco, "tci": args.tci, "th": args.th, "tw": args.tw,
             "vthreads": args.vthreads, "vt_axis": args.vt_axis}
    raw = args.epilogue == "none"
    if net is not None:
        return _run_network(args, net, hw, knobs, raw)
    assert w is not None
    epi = {"epilogue": Epilogue.none()} if raw else {}
    from vta.tune.commands import tuned_compile

    tuned = tuned_compile(args, w, hw, epi.get("epilogue"), knobs)
    compiled = tuned[0] if tuned else compile_workload(
        w, hw, latency_hiding=not args.no_latency_hiding, **epi, **knobs)
    if args.dump_ir:
        print(compiled.result.dump(args.dump_ir))
    r = run_workload(w, hw, seed=args.seed or 0, trace_path=args.trace, compiled=compiled,
                     check_reference=args.check_reference, raw=raw)
    r.seconds_compile = compiled.result.seconds
    s = r.summary()
    s["tuned"] = tuned[1] if tuned else None
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        print(f"{s['workload']}: {s['shape']} on {hw.name}  schedule {s['schedule']}")
        if tuned:
            t = tuned[1]
            print(f"schedule from the tuning cache {t['cache']} (key {t['key']}: "
                  f"{t['cycles']:,.0f} cycles by the {t['method']}, {t['measured']})")
        print(format_report(r.sim, hw), end="")
        kind = "memory" if s["memory_bound"] else "compute"
        moved = "memory" if s["memory_bound_moved"] else "compute"
        print(f"roofline (classic): {s['roofline_cycles']:,.0f} cycles, {kind}-bound (GEMM "
              f"{s['roofline_compute_cycles']:,.0f}, DRAM {s['roofline_memory_cycles']:,.0f} "
              f"compulsory; {s['moved_memory_cycles']:,.0f} for the bytes moved: {moved}-"
              f"bound); achieved {s['of_roofline']:.1%} of it")
        how = "serial" if s["serial_epilogue"] else "separate"
        print(f"machine bound (GEMM {s['machine_gemm_cycles']:,.0f} + {how} ALU "
              f"{s['epilogue_cycles']:,.0f}): {s['machine_bound_cycles']:,.0f} cycles, "
              f"utilization ceiling {s['utilization_ceiling']:.3f}; achieved "
              f"{s['of_machine_bound']:.1%} of it")
        print(f"GEMM utilization {s['utilization']:.1%}  GOP/s {s['gops']:.2f}  "
              f"compile {s['compile_s'] * 1e3:.0f} ms  simulate {s['sim_s'] * 1e3:.0f} ms  "
              f"acc hazards {s['acc_hazards']}")
        if args.trace:
            print(f"trace written to {args.trace}")
        print(_verdict(r.passed, r.mismatches, r.saturated, r.raw_slices))
    if args.plot:
        _plot([(r, 1)], hw, args.plot, quiet=args.json)
    return 0 if r.passed else 1


def _is_graph(args: argparse.Namespace) -> bool:
    """Whether ``vta run`` runs a whole graph: ``--onnx``, or a model by name without
    ``--layers`` (which runs the model's convolutions one by one)."""
    from vta.graph.models import MODELS

    return args.onnx is not None or (args.workload in MODELS and args.layers is None)


#: ``vta run`` flags that set one layer's shape, schedule or check, by dest: a whole graph
#: refuses them by name
_LAYER_ONLY = ("height", "width", "in_channels", "out_channels", "kernel", "stride", "pad",
               "tco", "tci", "th", "tw", "vthreads", "vt_axis", "no_latency_hiding", "dump_ir",
               "check_reference", "emit_cuda", "gpu_schedule", "profile", "cache", "no_cache")


def _run_graph(args: argparse.Namespace) -> int:
    """``vta run resnet18`` / ``vta run --onnx FILE``: the whole graph, from the input image to
    the outputs, every tensor checked against the graph interpreter."""
    from vta.graph.models import MODELS, random_image

    what = f"--onnx {args.onnx}" if args.onnx else f"the network {args.workload} (the whole graph)"
    if args.onnx is not None and args.workload not in (None, "conv2d"):
        raise UsageError(f"give either a workload ({args.workload}) or --onnx, not both")
    for dest in _LAYER_ONLY:
        value = getattr(args, dest)
        if value is not None and value is not False:  # --pad 0 is given
            raise UsageError(f"{_flag(dest)} does not apply to {what} (it sets one layer's "
                             f"shape, schedule or check; run one layer, e.g. resnet18:C2)")
    if args.sizes:
        who = args.onnx or args.workload
        raise UsageError(f"{who} takes no sizes, got {' '.join(map(str, args.sizes))} (it is a "
                         f"whole network)")
    if args.batch is not None and args.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {args.batch}")
    if args.epilogue == "none":
        raise UsageError(f"--epilogue none does not apply to {what} (its requantizations are "
                         f"operators of the graph)")
    if args.onnx is not None:
        from vta.graph.onnx_import import load_onnx

        if args.batch is not None:
            raise UsageError("--batch does not apply to --onnx (the model fixes its shapes)")
        graph = load_onnx(args.onnx)
    else:
        from vta.compiler.ops.workloads import resolve_network
        from vta.config import HwConfig
        from vta.run.runner import check_size

        net = resolve_network(args.workload, batch=args.batch)
        assert net is not None
        size_hw = HwConfig.from_yaml(args.hw or DEFAULT_HW)
        for w, _ in net.layers:  # refuse a batch too large before building anything
            check_size(w, size_hw)
        graph = MODELS[args.workload](batch=args.batch or 1)
    seed = args.seed or 0
    image = {v.name: random_image(seed + k, v.type.shape) for k, v in enumerate(graph.inputs)}
    fusion = args.fusion or "full"
    if args.target != "vta":
        from vta.graph.gpu import run_graph_gpu
        from vta.graph.report import format_gpu_run

        g = run_graph_gpu(graph, image, target=args.target, fusion=fusion)
        print(format_gpu_run(g.summary()))
        return 0 if g.passed else 1
    from vta.config import HwConfig
    from vta.graph.compile import compile_graph
    from vta.graph.report import format_run
    from vta.run.runner import run_graph, timing_cost

    hw = HwConfig.from_yaml(args.hw or DEFAULT_HW)
    cg = compile_graph(graph, hw, fusion=fusion, cost=timing_cost(hw))
    r = run_graph(cg, image, trace_path=args.trace)
    s = r.summary()
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        print(format_run(s, hw.board.clock_mhz))
        if args.trace:
            print(f"trace written to {args.trace} (one timeline, an ops track above the units)")
    if args.plot:
        _plot_graph(r, hw, args.plot, quiet=args.json)
    return 0 if r.passed else 1


def _plot(runs: list, hw, path: str, quiet: bool) -> None:  # type: ignore[no-untyped-def]
    """``--plot``: the layers against both bounds and where each unit's cycles went
    (``vta.plot``), the units summed over the layers as often as each runs."""
    from vta.run.plot import LayerPoint

    points: list[LayerPoint] = []
    units: dict[str, dict[str, int]] = {}
    for r, n in runs:
        b = r.roofline
        busier = b["memory_cycles"] * hw.memory.bus_bytes  # max(read, written) compulsory
        points.append(LayerPoint(r.compiled.workload.name, b["ops"], busier, r.cycles,
                                 b["bound_cycles"], b["machine_cycles"]))
        _add_units(units, r.stats, n)
    _write_plot(points, units, hw, path, quiet)


def _plot_graph(run, hw, path: str, quiet: bool) -> None:  # type: ignore[no-untyped-def]
    """``--plot`` of a whole graph: every convolution and dense kernel (its fused operators
    included) against both bounds, and the units' cycles summed over every kernel."""
    from vta.run.plot import LayerPoint

    points: list[LayerPoint] = []
    units: dict[str, dict[str, int]] = {}
    for s in run.steps:
        if s.sim is None:
            continue  # a host fallback: no accelerator cycles
        _add_units(units, s.sim.stats, 1)
        b = s.step.bound
        if "bound_cycles" in b:  # a GEMM kernel (driver.roofline); window kernels have no MACs
            busier = b["memory_cycles"] * hw.memory.bus_bytes
            points.append(LayerPoint(s.step.group.output.name, b["ops"], busier, s.cycles,
                                     b["bound_cycles"], b["machine_cycles"]))
    _write_plot(points, units, hw, path, quiet)


def _add_units(units: dict[str, dict[str, int]], stats, times: int) -> None:  # type: ignore[no-untyped-def]
    for name, u in stats.units.items():
        acc = units.setdefault(name, dict.fromkeys(("busy", "token", "queue", "memory",
                                                    "conflict", "idle"), 0))
        for k in acc:
            acc[k] += getattr(u, k) * times


def _write_plot(points: list, units: dict[str, dict[str, int]], hw, path: str,  # type: ignore[no-untyped-def]
                quiet: bool) -> None:
    from vta.run.plot import plot_run

    plot_run(points, units, hw, path)
    if not quiet:
        print(f"plot written to {path}")


def _verdict(passed: bool, mismatches: int, saturated: float, raw_slices: int) -> str:
    """The PASS/FAIL line of one layer."""
    if raw_slices:
        how = (f"int32 accumulators bit-exact against numpy (read back in {raw_slices} "
               f"slices, no epilogue)")
        return f"PASS: {how}" if passed else \
            f"FAIL: {mismatches} int32 accumulators differ from numpy"
    if passed:
        return f"PASS: bit-exact against numpy ({saturated:.2%} of outputs saturated)"
    return f"FAIL: {mismatches} output elements differ from numpy"


def _run_network(args: argparse.Namespace, net, hw, knobs: dict, raw: bool) -> int:  # type: ignore[no-untyped-def]
    from vta.run.runner import run_network
    from vta.tune.commands import tuned_picker

    pick, used = tuned_picker(args, hw, raw, knobs)
    r = run_network(net, hw, seed=args.seed or 0, latency_hiding=not args.no_latency_hiding,
                    raw=raw, pick=pick, **knobs)
    s = r.summary()
    if args.json:
        print(json.dumps(s, indent=2, default=str))
        if args.plot:
            _plot(r.layers, hw, args.plot, quiet=True)
        return 0 if r.passed else 1
    print(f"{s['network']} on {hw.name}: {s['convolutions']} convolutions, "
          f"{len(s['layers'])} distinct layers")
    print(f"{'layer':14} {'x':>2} {'cycles':>11} {'total':>12} {'share':>6} {'util':>6} "
          f"{'%mach':>6} {'fold':>5} {'sat':>5}  schedule         ok")
    for row in s["layers"]:
        sc = row["schedule"]
        knob = (f"{sc['tco']}/{sc['tci']}/{sc['th']}/{sc['tw']} vt={sc['vthreads']}"
                f"{sc['vt_axis'] if sc['vthreads'] > 1 else ''}")
        print(f"{row['workload']:14} {row['repeats']:>2} {row['cycles']:>11,} "
              f"{row['total_cycles']:>12,} {row['share']:>6.1%} {row['utilization']:>6.3f} "
              f"{row['of_machine_bound']:>6.1%} {row['fold']:>5} {row['saturated']:>5.1%}  "
              f"{knob:16} "
              f"{'ok' if row['passed'] else 'BAD'}")
    print(f"total {s['cycles']:,} cycles = {s['time_ms']:.2f} ms at {hw.board.clock_mhz} MHz; "
          f"{s['gops']:.2f} GOP/s; GEMM utilization {s['utilization']:.1%} "
          f"(useful, unpadded: {s['useful_utilization']:.1%}); "
          f"{s['of_machine_bound']:.1%} of the machine bound")
    print(f"compile {s['compile_s']:.2f} s  simulate {s['sim_s']:.2f} s")
    if used:
        print(f"{len(used)} of {len(s['layers'])} layers with their schedule from the tuning "
              f"cache {used[0]['cache']}: {', '.join(u['workload'] for u in used)}")
    what = ("int32 accumulators (no epilogue)" if s["raw"] else
            f"at most {s['saturated_max']:.2%} of a layer's outputs saturated")
    print(f"PASS: every layer bit-exact against numpy ({what})" if r.passed else
          "FAIL: some layer differs from numpy")
    if args.plot:
        _plot(r.layers, hw, args.plot, quiet=False)
    return 0 if r.passed else 1


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="vta", description=__doc__.splitlines()[0])
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
    sim.add_argument("--seed", type=_seed, default=None,
                     help="seed for random inputs (default 0)")
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
                     help="conv2d (ResNet-18 C2), resnet18:C1..C11, matmul [M N K], dense [M N K],"
                          " or resnet18: the whole quantized network (--layers C2,C10: those "
                          "convolutions alone)")
    run.add_argument("sizes", nargs="*", type=int, help="M N K for matmul/dense")
    run.add_argument("--hw", default=None,
                     help=f"hardware config YAML (default {DEFAULT_HW}; accelerator only)")
    run.add_argument("--layers", default=None,
                     help="for resnet18: run only these convolutions, one by one, e.g. C2,C10")
    run.add_argument("--fusion", choices=("full", "requant"), default=None,
                     help="for a whole network: full (element-wise operators fused into their "
                          "producer, default) or requant (only each requantize into its "
                          "convolution: the unfused baseline)")
    run.add_argument("--onnx", metavar="FILE.onnx", default=None,
                     help="run a quantized ONNX model (QLinearConv/QLinearAdd/... or QDQ form; "
                          "needs the onnx extra) as a whole graph")
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
    run.add_argument("--plot", metavar="FILE.png",
                     help="draw the layer(s) against the roofline and the machine bound, and "
                          "each unit's busy/stall shares")
    run.add_argument("--json", action="store_true", help="print JSON instead of tables")
    run.add_argument("--seed", type=_seed, default=None, help="seed for the random inputs")
    run.add_argument("--epilogue", choices=("calibrated", "none"), default="calibrated",
                     help="calibrated: the layer's requantizing epilogue (int8 outputs, shift "
                          "from the accumulator range); none: check the int32 accumulators")
    run.add_argument("--dump-ir", metavar="PASS", help="print the IR after PASS (or 'all')")
    run.add_argument("--check-reference", action="store_true",
                     help="also run the reference interpreter and compare it with the machine")
    run.add_argument("--target", choices=("vta", "cuda", "cuda-emu"), default="vta",
                     help="vta: the simulated accelerator; cuda: a GPU through CuPy; "
                          "cuda-emu: the generated kernel in the SIMT emulator")
    run.add_argument("--emit-cuda", action="store_true", help="print the generated CUDA kernel")
    run.add_argument("--tc", metavar="FILE.tc", default=None,
                     help="run a Tensor Comprehensions definition (docs/tc.md) instead of a "
                          "named workload, checked against the TC interpreter")
    run.add_argument("--entry", default=None, help="the definition of --tc FILE to run")
    run.add_argument("--size", default=None, metavar="N=1,C=64,...",
                     help="values of the TC definition's size variables")
    run.add_argument("--gpu-schedule", choices=("wmma", "simt", "mma"), default=None,
                     help="GPU kernel: wmma (tensor-core schedule, default), simt, or mma (the "
                          "task-mapping kernels: cp.async pipeline, ldmatrix, mma.sync)")
    run.add_argument("--cache", default=None, metavar="FILE",
                     help="the tuning cache whose best schedules are used (default: $VTA_CACHE, "
                          "else the user cache directory's; a forced knob wins)")
    run.add_argument("--no-cache", action="store_true",
                     help="ignore the tuning cache: the default schedule")
    run.add_argument("--profile", action="store_true",
                     help="with --target cuda-emu: count bank conflicts, global sectors, "
                          "barriers and instructions by kind")
    run.set_defaults(func=_cmd_run)

    tc = sub.add_parser("tc", help="Tensor Comprehensions: show a definition's inferred ranges")
    tc.add_argument("action", choices=("show",), help="show: each statement's inferred domain "
                    "and the output shapes")
    tc.add_argument("file", help="TC source file")
    tc.add_argument("--entry", default=None, help="the definition to show (default: the only one)")
    tc.add_argument("--size", default=None, metavar="N=1,C=64,...",
                    help="also show the ranges and shapes at these sizes")
    tc.set_defaults(func=_cmd_tc)

    _tune_parsers(sub)
    return p


def _cmd_tune(args: argparse.Namespace) -> int:
    from vta.tune.commands import tune_command

    return tune_command(args)


def _cmd_cache(args: argparse.Namespace) -> int:
    from vta.tune.commands import cache_command

    return cache_command(args)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from vta.tune.commands import sweep_command

    return sweep_command(args)


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _where_args(p: argparse.ArgumentParser) -> None:
    """Where trials run and where they are kept (``vta tune`` and ``vta sweep``)."""
    p.add_argument("--workers", type=_positive, default=None,
                   help="local worker processes (default: the CPUs this process may use)")
    p.add_argument("--cluster", default=None, metavar="ADDR",
                   help="run the trials on a Dask cluster: tcp://HOST:PORT (a running "
                        "scheduler) or local:N (a local cluster of N workers); needs the dask "
                        "extra")
    p.add_argument("--cache", default=None, metavar="FILE",
                   help="the tuning cache (default: $VTA_CACHE, else "
                        "$XDG_CACHE_HOME/vta/tune.sqlite or ~/.cache/vta/tune.sqlite)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the tuning cache")
    p.add_argument("--seed", type=_seed, default=None, help="the search's seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _tune_parsers(sub: Any) -> None:
    tune = sub.add_parser("tune", help="search a workload's schedule space with the timing-only "
                                       "simulator; keep the best in the tuning cache")
    tune.add_argument("workload", nargs="?", default="conv2d",
                      help="conv2d (ResNet-18 C2), resnet18:C1..C11, matmul [M N K], dense, or "
                           "resnet18 (every layer; --layers C2,C10: those)")
    tune.add_argument("sizes", nargs="*", type=int, help="M N K for matmul/dense")
    tune.add_argument("--hw", default=None, help=f"hardware config YAML (default {DEFAULT_HW};"
                                                 f" accelerator only)")
    tune.add_argument("--layers", default=None, help="for resnet18: only these layers")
    for flag in ("batch", "height", "width", "in-channels", "out-channels", "kernel", "stride",
                 "pad"):
        tune.add_argument(f"--{flag}", type=int, default=None, help=f"override the {flag}")
    tune.add_argument("--trials", type=int, default=64,
                      help="points measured per layer at most by the auto and evolution "
                           "searches (default 64; the default schedule's candidates always "
                           "are; --search exhaustive measures every point that fits)")
    tune.add_argument("--search", default="auto",
                      help="auto (exhaustive when the space is no larger than --trials), "
                           "exhaustive, or evolution (model-guided, seeded)")
    tune.add_argument("--space", action="store_true",
                      help="print the schedule space (knobs, values, refusals) and measure "
                           "nothing")
    tune.add_argument("--target", choices=("vta", "cuda", "cuda-emu"), default="vta",
                      help="vta: the accelerator (timing-only simulator); cuda: kernels timed "
                           "on a GPU (the SIMT emulator cannot time one)")
    tune.add_argument("--gpu-schedule", choices=("simt", "wmma", "mma"), default=None,
                      help="with --target cuda: the kernel family whose knobs are tuned "
                           "(default wmma)")
    _where_args(tune)
    tune.set_defaults(func=_cmd_tune)

    cache = sub.add_parser("cache", help="the tuning cache: list keys, show one, clear, export")
    cache.add_argument("action", choices=("list", "show", "clear", "export"),
                       help="list: every key; show KEY: its trials; clear [KEY]: delete "
                            "(everything, or one key); export: every trial as JSON lines")
    cache.add_argument("key", nargs="?", default=None, help="a key (or a prefix of one)")
    cache.add_argument("--cache", default=None, metavar="FILE",
                       help="the cache file (default: $VTA_CACHE, else the user cache "
                            "directory's)")
    cache.add_argument("--out", default=None, metavar="FILE.jsonl",
                       help="export: write here instead of stdout")
    cache.add_argument("--json", action="store_true", help="list/show: print JSON")
    cache.set_defaults(func=_cmd_cache)

    sweep = sub.add_parser("sweep", help="tune workloads on every point of a hardware grid; "
                                         "write a CSV and a Pareto plot")
    sweep.add_argument("--grid", required=True, metavar="FILE.yaml",
                       help="the grid: a base config and the fields to vary (docs/tuning.md)")
    sweep.add_argument("workloads", nargs="+",
                       help="resnet18 (its 11 distinct layers, each as often as it occurs), "
                            "resnet18:C2, conv2d, matmul, dense")
    sweep.add_argument("--trials", type=int, default=None,
                       help="schedule trials per layer and point (default: the grid's; 0: "
                            "the default schedule)")
    sweep.add_argument("--out", default=None, metavar="PREFIX",
                       help="write PREFIX.csv and PREFIX.png (default: the grid file's name)")
    sweep.add_argument("--no-check", action="store_true",
                       help="skip running each tuned layer bit-exact against numpy")
    _where_args(sweep)
    sweep.set_defaults(func=_cmd_sweep)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vta`` console script."""
    try:
        args = _parser().parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except VtaError as e:
        msg = str(e).replace("\n", " ")  # one line, whatever the message
        print(f"vta: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    except BrokenPipeError:  # the reader went away (``vta run ... | head``): no traceback;
        # status 1 (the output is incomplete), as rich's Console does for the tables
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail too
        return 1
    except Exception as e:  # a bug in vta: still one line, and a distinct status
        msg = " ".join(str(e).split())
        print(f"vta: internal error: {type(e).__name__}: {msg} (this is a bug in vta, not in "
              f"your input: please report it with the command line)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
