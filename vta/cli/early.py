"""What ``vta`` starts as soon as its command line is read, before the command's module is
imported (``vta.cli.main``), and stops after the command if the command did not use it.

``vta run`` of a built-in model (``resnet18``) that it will build draws the model's 11.7 M
weights from then on (``vta.graph.models.draw_early``): the draws are the graph phase's
longest path (a thread beside the calibration, numpy releasing the GIL), and the imports
before the build leave the other core idle. It will build the model with ``--no-cache``,
``--dump-ir`` or a GPU target (no compile cache), or where the cache file is not there yet;
where it is, the run may read the model from it, and nothing is drawn ahead (a warm run
draws nothing). A run that ends before its build (a refused flag) leaves the draws to
``finish``, which stops them: no thread outlives the command. Modules are loaded by name
here, as ``main`` loads a command's, so that another command loads none of the model's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module

__all__ = ["start", "finish"]

#: how to stop what ``start`` started (``finish``)
_STOPS: list[Callable[[], None]] = []


def start(args: argparse.Namespace) -> None:
    """Start what the command ``args`` will need first (module docstring); nothing for a
    command that needs nothing ahead."""
    if args.handler == "run.main" and _builds_model(args):
        models = import_module("vta.graph.models")
        models.draw_early()
        _STOPS.append(models.drop_early)


def finish() -> None:
    """After the command: stop what ``start`` started and the command left unused."""
    while _STOPS:
        _STOPS.pop()()


def _builds_model(args: argparse.Namespace) -> bool:
    """Whether ``vta run`` (``args``) builds a model of ``vta.graph.models.MODELS`` with its
    default seed and sizes (what ``vta.cli.run`` builds): a whole graph by name, and no
    compile cache that could hold it (``cached.run_compile_cache``'s cases)."""
    if args.tc is not None or args.onnx is not None or args.layers is not None:
        return False
    if args.workload not in import_module("vta.graph.models").MODELS:
        return False
    if args.no_cache or args.dump_ir or args.target != "vta":
        return True
    return not import_module("vta.cli.cached").cache_path(args).exists()
