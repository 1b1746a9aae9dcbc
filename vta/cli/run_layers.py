"""``vta run`` of one layer or of a network's layers (``vta run resnet18:C2``, ``vta run
resnet18 --layers C1,C2``): ``vta.cli.run.main`` loads this module for them only, so a whole
graph's run loads neither the layer runs nor the tuning cache's schedule lookups
(``vta.cli.tune.tuned_compile``).
"""

from __future__ import annotations

import argparse
from typing import Any

from vta.cli.run import emit
from vta.cli.tune import tuned_compile, tuned_picker
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import resolve
from vta.run.layer import run_layer
from vta.run.network import run_network
from vta.run.plot import plot_layers
from vta.run.report import format_layer, format_network
from vta.run.targets import AccelTarget, Target

__all__ = ["run_layers"]


def run_layers(args: argparse.Namespace, net: Any, target: Target,
                shape: dict[str, Any]) -> int:
    """A layer or a network's layers (``vta.cli.run.main``), with the compile cache open."""
    knobs = {"tco": args.tco, "tci": args.tci, "th": args.th, "tw": args.tw,
             "vthreads": args.vthreads, "vt_axis": args.vt_axis}
    raw = args.epilogue == "none"
    options: dict[str, Any] = {"latency_hiding": not args.no_latency_hiding}
    if isinstance(target, AccelTarget):
        options.update(knobs)
    else:
        options.update(gpu_schedule=args.gpu_schedule or "auto", dtype=args.dtype or "int8")
    if net is not None:
        return _run_network(args, net, target, raw, knobs, options)
    w = resolve(args.workload, args.sizes, batch=args.batch, **shape)
    tuned = None
    if isinstance(target, AccelTarget):
        target.check_size(w)
        tuned = tuned_compile(args, w, target.hw, Epilogue.none() if raw else None, knobs)
    r = run_layer(w, target, seed=args.seed or 0, raw=raw,
                  compiled=tuned[0] if tuned else None, trace_path=args.trace,
                  check_reference=args.check_reference, **options)
    if args.dump_ir:
        print(r.compiled.result.dump(args.dump_ir))
    if tuned:
        r.seconds_compile = r.compiled.result.seconds
    if args.emit_cuda:
        print(r.kernel.source)
    s = r.summary()
    s["tuned"] = tuned[1] if tuned else None
    text = format_layer(r, tuned[1] if tuned else None)
    if args.trace:
        text += f"\ntrace written to {args.trace}"
    emit(s, text + "\n" + r.check.line() if isinstance(target, AccelTarget) else text,
          args.json)
    if args.plot:
        plot_layers([(r, 1)], target.hw, args.plot)  # type: ignore[attr-defined]
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0 if r.passed else 1


def _run_network(args: argparse.Namespace, net: Any, target: Target, raw: bool,
                 knobs: dict[str, Any], options: dict[str, Any]) -> int:
    used: list[dict[str, Any]] = []
    pick = None
    if isinstance(target, AccelTarget):
        pick, used = tuned_picker(args, target.hw, raw, knobs)
    r = run_network(net, target, seed=args.seed or 0, raw=raw, pick=pick, **options)
    emit(r.summary(), format_network(r, used), args.json)
    if args.plot:
        plot_layers(r.layers, target.hw, args.plot)  # type: ignore[attr-defined]
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0 if r.passed else 1
