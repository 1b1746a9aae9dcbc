"""``vta run``: one layer, a network's layers, a whole graph (a named model or ``--onnx``) or a
TC definition (``--tc``), on any target (``--target vta|cuda-emu|cuda``), checked against its
reference.

This module only reads the command line, refuses flags that would be silently ignored, picks
the target (``vta.run.targets.get_target``), calls the run (``vta.run.layer``, ``network``,
``graph``, ``tc``) and prints its report (``vta.run.report``) or its summary as JSON. The exit
status is 0 on PASS and 1 on FAIL.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any

import numpy as np

from vta.cli.cached import load_plugins, run_compile_cache, say_cache
from vta.cli.parser import DEFAULT_HW, flag
from vta.compiler.ops.workloads import (
    LAYER_SHAPE_OPTIONS,
    NETWORKS,
    resolve_network,
)
from vta.config import BOARD_RESOURCES, HwConfig
from vta.errors import UsageError
from vta.graph.ir import Graph
from vta.graph.models import LAYERS_OF, MODELS, ONNX_MODELS, random_image
from vta.graph.onnx_io import format_io, io_summary, read_input, write_output
from vta.resources import REQUANT_F32
from vta.run.graph import Reference, accelerator_graph, compile_for, run_graph
from vta.run.pool import default_jobs
from vta.run.report import format_gpu_run, format_run
from vta.run.targets import AccelTarget, Target, get_target
from vta.tune.compile_cache import CompileCache

__all__ = ["main", "emit", "board_overflow", "rarer_collections", "RUN_GC_THRESHOLDS"]

#: the flags of a hand-set accelerator schedule (tile sizes; virtual threads and their axis)
_SCHEDULE = ("tco", "tci", "th", "tw", "vthreads", "vt_axis")
#: flags only the accelerator target (``--target vta``) reads, by dest ...
_VTA_ONLY = ("hw", *_SCHEDULE, "no_latency_hiding", "dump_ir", "trace", "plot", "cache",
             "no_cache", "jobs")
#: ... and those only the GPU targets read
_GPU_ONLY = ("emit_cuda", "gpu_schedule", "profile", "dtype")
#: flags that set one layer's shape, schedule or check: a whole graph refuses them by name
_LAYER_ONLY = (*LAYER_SHAPE_OPTIONS, *_SCHEDULE, "no_latency_hiding", "dump_ir",
               "check_reference", "emit_cuda", "gpu_schedule", "profile", "dtype")



def _given(args: argparse.Namespace, dest: str) -> bool:
    """Whether ``dest`` was given (``--pad 0`` is given: 0 is not "absent")."""
    value = getattr(args, dest)
    return value is not None and value is not False


def _is_graph(args: argparse.Namespace) -> bool:
    """Whether ``vta run`` runs a whole graph: ``--onnx``, or a model by name without
    ``--layers`` (which runs the model's convolutions one by one)."""
    return args.onnx is not None or (args.workload in MODELS and args.layers is None) \
        or args.workload in ONNX_MODELS


def _flags_apply(args: argparse.Namespace) -> None:
    """A ``UsageError`` naming a flag the target or workload would silently ignore."""
    for dest in ("entry", "size"):
        if _given(args, dest):
            raise UsageError(f"{flag(dest)} does not apply without --tc (it picks the "
                             f"definition and sizes of a TC file)")
    gpu = args.target != "vta"
    for dest in _VTA_ONLY if gpu else _GPU_ONLY:
        if _given(args, dest):
            raise UsageError(f"{flag(dest)} does not apply to --target {args.target} (it is "
                             f"for --target {'vta' if gpu else 'cuda or cuda-emu'})")
    if args.profile and args.target != "cuda-emu":
        raise UsageError("--profile counts in the SIMT emulator: use it with --target cuda-emu")
    if args.layers is not None and args.workload not in NETWORKS:
        raise UsageError(f"--layers does not apply to {args.workload} (it picks layers of a "
                         f"network: {', '.join(NETWORKS)})")
    if _given(args, "plot"):
        _module("vta.run.plot").check_plot_path(args.plot)
    if _given(args, "fusion") and not _is_graph(args):
        raise UsageError(f"--fusion does not apply to {args.workload} (it sets how a whole "
                         f"network's operators are fused: resnet18 or --onnx)")
    if _given(args, "jobs") and not _is_graph(args):
        raise UsageError(f"--jobs does not apply to {args.workload} (it compiles a whole "
                         f"network's kernels in parallel: resnet18 or --onnx)")
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


def _hw(args: argparse.Namespace) -> HwConfig:
    """The accelerator's config; a warning on stderr when its resource estimate exceeds its
    board (the simulator runs it all the same: a design study may go past the board)."""
    hw = HwConfig.load(args.hw or DEFAULT_HW)
    if not hw.fits_board():
        print(f"vta: warning: {board_overflow(hw)}", file=sys.stderr)
    return hw


def board_overflow(hw: HwConfig) -> str:
    """What of ``hw``'s resource estimate exceeds its board (``HwConfig.fits_board`` false)."""
    est = hw.resource_estimate()
    over = [f"{k} {est[k]:,} > {int(getattr(hw.board, k)):,}" for k in BOARD_RESOURCES
            if getattr(hw.board, k) and est[k] > int(getattr(hw.board, k))]
    return (f"{hw.name} does not fit its board ({hw.board.part}): estimated "
            f"{', '.join(over)} (vta.resources; vta info --hw {hw.name} itemises it); it is "
            f"simulated all the same")


def _target(args: argparse.Namespace) -> Target:
    return get_target(args.target, _hw(args) if args.target == "vta" else None,
                      profile=bool(args.profile))


def emit(summary: dict[str, Any], text: str, as_json: bool) -> None:
    """The summary as JSON, or the report's text, on stdout."""
    print(json.dumps(summary, indent=2, default=str) if as_json else text)


#: the cyclic garbage collector's thresholds during ``vta run`` (``gc.set_threshold``; Python's
#: default is (700, 10, 10)): a run makes hundreds of thousands of objects that live until it
#: ends (instructions, micro-ops, the simulator's events and timelines), and at the default a
#: young collection every 700 of them (342 in a warm ``vta run resnet18 --jobs 1``, two of
#: them full, re-walking everything alive) costs 0.10-0.18 s of CPU; ten thousand between
#: young collections (the same ratios above them) leaves 0.05 s. The forked workers inherit it.
RUN_GC_THRESHOLDS = (10_000, 10, 10)


@contextmanager
def rarer_collections() -> Iterator[None]:
    """``RUN_GC_THRESHOLDS`` for the duration of a ``with`` (the caller's restored after: a
    test or a program calling ``main`` keeps its own)."""
    old = gc.get_threshold()
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def main(args: argparse.Namespace) -> int:
    with rarer_collections():
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    load_plugins(args)
    if args.tc is not None:  # its module loads the TC front end
        rc: int = _module("vta.cli.run_tc").run_tc_command(args)
        return rc
    _flags_apply(args)
    if _is_graph(args):
        return _run_graph(args)
    for dest in ("input", "output", "approx"):
        if _given(args, dest):
            raise UsageError(f"{flag(dest)} applies to a whole graph (--onnx FILE or "
                             f"resnet18), not to {args.workload or 'a layer'}")
    shape = {k: getattr(args, k) for k in LAYER_SHAPE_OPTIONS}
    net = resolve_network(args.workload, batch=args.batch, layers=_layers(args.layers),
                          sizes=args.sizes, **shape)
    target = _target(args)
    with run_compile_cache(args, target) as memo:
        # a layer or a network's layers: their module (and the tuning cache's lookups) is
        # loaded only for them, as ``vta.cli.main`` loads a command's
        rc = _module("vta.cli.run_layers").run_layers(args, net, target, shape)
    say_cache(memo)
    return rc


def _module(name: str) -> Any:
    """The module ``name``, imported when a run needs it: ``vta run`` of a whole network loads
    neither the TC front end, the ONNX importer, the plots nor the layer runs (``vta.cli.main``
    loads a command's module the same way)."""
    return import_module(name)


def _before_verdict(report: str, lines: str) -> str:
    """``lines`` inserted before the report's last line (its PASS/FAIL verdict stays last)."""
    head, _, verdict = report.rpartition("\n")
    return f"{head}\n{lines}\n{verdict}" if head else f"{lines}\n{verdict}"


def _run_graph(args: argparse.Namespace) -> int:
    """``vta run resnet18`` / ``vta run --onnx FILE``: the whole graph, from the input image to
    the outputs, every tensor checked against the graph interpreter."""
    what = f"--onnx {args.onnx}" if args.onnx else f"the network {args.workload} (the whole graph)"
    if args.onnx is not None and args.workload not in (None, "conv2d"):
        raise UsageError(f"give either a workload ({args.workload}) or --onnx, not both")
    for dest in _LAYER_ONLY:
        if _given(args, dest):  # --pad 0 is given
            raise UsageError(f"{flag(dest)} does not apply to {what} (it sets one layer's "
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
    if args.approx is not None and args.onnx is None:
        raise UsageError(f"--approx {args.approx} applies to --onnx FILE, not to {what} (a "
                         f"built network's stock-ALU form has power-of-two scales)")
    target = _target(args)
    # ORT's own requantize arithmetic where the hardware has its instruction; a GPU computes
    # it in float32 (vta.gpu.requant) and ORT's adds as chain stages or table lookups
    exact = not isinstance(target, AccelTarget) or target.hw.intrinsic(REQUANT_F32) is not None
    model: Any = args.onnx
    if args.onnx is not None or args.workload in ONNX_MODELS:
        if args.batch is not None:
            raise UsageError(f"--batch does not apply to {args.onnx or args.workload} (the "
                             f"model fixes its shapes)")
        if args.onnx is None:  # built, quantized by ORT; shifts alone on an ALU without MUL
            shifts = isinstance(target, AccelTarget) and not exact \
                and "mul" not in target.hw.alu.ops
            model = _module("vta.graph.onnx_ort").quantized_network(
                args.workload, pow2=shifts, seed=args.seed or 0)
        graph = _module("vta.graph.onnx_import").load_onnx(model,
                                                           requant="ort" if exact else "fixed")
        if args.approx is not None:
            graph = _shift_add(args, target, graph, exact)
    else:
        net = resolve_network(LAYERS_OF[args.workload], batch=args.batch)
        assert net is not None
        if isinstance(target, AccelTarget):
            for w, _ in net.layers:  # refuse a batch too large before building anything
                target.check_size(w)
        graph = None
    with run_compile_cache(args, target) as memo:
        t0 = time.perf_counter()
        if graph is None:  # a built-in model: kept in the compile cache's file when it is on
            build, batch = MODELS[args.workload], args.batch or 1
            # (a graph built here is kept while the workers compile: ``_run_built``)
            graph = memo.graph_later(build, batch=batch) if memo is not None \
                else build(batch=batch)
        build_s = time.perf_counter() - t0
        return _run_built(args, target, graph, model, exact, memo, build_s)


def _shift_add(args: argparse.Namespace, target: Target, graph: Graph, exact: bool) -> Graph:
    """``--approx shift-add``: ``graph`` (an ``--onnx`` model's) with its multipliers by shifts
    and adds (``quant.shift_add_multipliers``); a ``UsageError`` where it does not apply (not
    an accelerator, an ALU with MUL or ORT's requantize instruction)."""
    if not isinstance(target, AccelTarget) or exact or "mul" in target.hw.alu.ops:
        where = target.hw.name if isinstance(target, AccelTarget) else f"--target {args.target}"
        raise UsageError(f"--approx {args.approx} is for an accelerator whose ALU has no MUL "
                         f"(and no {REQUANT_F32}); {where} multiplies (run without --approx)")
    return _module("vta.graph.quant").shift_add_multipliers(graph)  # type: ignore[no-any-return]


def _run_built(args: argparse.Namespace, target: Target, graph: Graph, model: Any, exact: bool,
               memo: CompileCache | None, build_s: float) -> int:
    """``_run_graph`` once the graph is built (``build_s``: how long building or reading it
    took), with the compile cache ``memo`` open (None when off)."""
    seed = args.seed or 0
    if args.output is not None and len(graph.outputs) != 1:
        raise UsageError(f"--output writes one output; graph {graph.name} has "
                         f"{len(graph.outputs)}")
    if args.input is not None:
        image, real = read_input(args.input, graph)
    else:
        # seeded, kept in the compile cache (a warm run then imports no ``numpy.random``)
        image = {v.name: random_image(seed + k, v.type.shape) if memo is None
                 else memo.array(random_image, seed=seed + k, shape=v.type.shape)
                 for k, v in enumerate(graph.inputs)}
        # the real-valued input only ONNX Runtime's verdict reads (an ONNX model's run)
        real = {v.name: (image[v.name].astype(np.float32) - np.float32(v.type.zero))
                * np.float32(v.type.scale or 1.0) for v in graph.inputs} if model is not None \
            else {}
    # the interpreter's run (what every tensor is checked against) is computed while worker
    # processes compile, or while they simulate the kernels whose inputs it has computed
    # on the accelerator: the graph its passes make (``accelerator_graph``: the same object
    # when they change nothing), so that the reference is the compiled graph's
    run_on = accelerator_graph(graph) if isinstance(target, AccelTarget) else graph
    reference = Reference(run_on, image)
    # the workers decided once, before the interpreter's process exists (counted after it, it
    # would be the runnable task that leaves the compile and the simulations one worker)
    idle = default_jobs()
    jobs = args.jobs if args.jobs is not None else idle
    if isinstance(target, AccelTarget) and jobs != 1 and idle > 1:
        # a process of its own, from now on, where a core is idle now (on a busy machine it
        # would only take turns with this one, even with --jobs 2): this one reads the compile
        # cache's programs meanwhile (warm) or waits for the compile workers (cold)
        reference.start()
    def meanwhile() -> None:
        """This process's work while the workers compile: the built model's cache row (when
        it was built: ``CompileCache.graph_later``), then the interpreter's run."""
        if memo is not None:
            memo.write_pending()
        reference.compute()

    compiled = compile_for(run_on, target, fusion=args.fusion or "full", jobs=jobs,
                           meanwhile=meanwhile)
    say_cache(memo)
    # the kernels' timelines only for the trace (the report prints none of them)
    r = run_graph(compiled, image, target=target, trace_path=args.trace, jobs=jobs,
                  reference=reference, timelines=False)
    s = r.summary()
    s["graph_s"] = build_s
    verdict = _module("vta.graph.onnx_ort").ort_verdict(
        model, graph, {**r.reference, **r.outputs}, real) if model is not None else None
    io = io_summary(graph, r.outputs, verdict)
    s.update(io)
    if args.output is not None:
        write_output(args.output, r.outputs[graph.outputs[0]])
    if not isinstance(target, AccelTarget):
        emit(s, _before_verdict(format_gpu_run(s), format_io(io)), args.json)
        return 0 if r.passed else 1
    s.update(_wall(args, s))
    text = _before_verdict(format_run(s, target.hw.board.clock_mhz), format_io(io))
    if args.trace:
        text += f"\ntrace written to {args.trace} (one timeline, an ops track above the units)"
    emit(s, text, args.json)
    if args.plot:
        _module("vta.run.plot").plot_graph(r, target.hw, args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0 if r.passed else 1


#: the phases of a graph run the summary times (``vta.run.graph.graph_summary``), and the graph
#: build (``_run_built``)
_PHASES = ("graph_s", "compile_s", "sim_s", "check_s", "reference_s")


def _wall(args: argparse.Namespace, s: dict[str, Any]) -> dict[str, float]:
    """The run's wall time so far and what the timed phases leave of it: ``startup_s`` (the
    interpreter and the imports, until the command was ready: ``vta.cli.main``'s clock),
    ``other_s`` (the rest: reading the input, layouts, reports); empty without the clock
    (``main`` called directly)."""
    clock = getattr(args, "clock", None)
    if clock is None:
        return {}
    started, ready = clock
    wall = time.perf_counter() - started
    startup = ready - started
    return {"wall_s": wall, "startup_s": startup,
            "other_s": max(0.0, wall - startup - sum(s[k] for k in _PHASES))}
