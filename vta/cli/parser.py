"""The ``vta`` command line: every subcommand, flag and argument type, and nothing else.

This is the only module that builds argparse parsers. Each subcommand's parser names the
module that runs it (``handler``: ``vta.cli.run`` for ``vta run``, ...); ``vta.cli.main``
imports that module only when its command runs, so ``vta --help`` and ``vta info`` do not load
the compiler. Argument types (``seed``, ``positive``) check their values here, so a bad value
is a usage error naming the flag.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from vta.compiler.ops.workloads import CONV_OPTIONS
from vta.errors import UsageError

__all__ = ["DEFAULT_HW", "SEED_LIMIT", "build_parser", "flag"]

#: the hardware ``vta run``/``vta tune`` target when ``--hw`` is not given: a shipped config
#: (``vta.config.shipped_config``), found from any directory
DEFAULT_HW = "pynq"

#: Seeds are 64-bit: numpy accepts larger ones, but a seed that long is a typo.
SEED_LIMIT = 1 << 64

#: the targets, as vta.run.targets names them (the parser imports nothing heavy)
TARGETS = ("vta", "cuda", "cuda-emu")

_HW_HELP = "hardware config: a shipped one by name (pynq, ultra96, ...) or a YAML file"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are ``UsageError``s (one line, exit 2), not the usage
    block and ``SystemExit``."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def flag(dest: str) -> str:
    """The flag of an argparse destination: ``vt_axis`` -> ``--vt-axis``."""
    return "--" + dest.replace("_", "-")


def seed(text: str) -> int:
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


def positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _target_flag(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("--target", choices=TARGETS, default="vta", help=help_text)


def _cache_flags(p: argparse.ArgumentParser, cache_help: str, no_cache_help: str) -> None:
    p.add_argument("--cache", default=None, metavar="FILE", help=cache_help)
    p.add_argument("--no-cache", action="store_true", help=no_cache_help)


def _shape_flags(p: argparse.ArgumentParser) -> None:
    for key in CONV_OPTIONS:
        name = key.replace("_", "-")
        p.add_argument(f"--{name}", type=int, default=None, help=f"override the {name}")


def _info(sub: Any) -> None:
    info = sub.add_parser("info", help="print a hardware config's derived values")
    info.add_argument("--hw", required=True, help=_HW_HELP)
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler="info.main")


def _sim(sub: Any) -> None:
    sim = sub.add_parser("sim", help="run an assembly program on the cycle-level simulator")
    sim.add_argument("program", help="assembly file (see vta.isa.asm)")
    sim.add_argument("--hw", required=True, help=_HW_HELP)
    sim.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="contents of a DRAM allocation (others are random); repeatable")
    sim.add_argument("--seed", type=seed, default=None,
                     help="seed for random inputs (default 0)")
    sim.add_argument("--trace", metavar="OUT.json", help="write a Perfetto/Chrome trace")
    sim.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sim.add_argument("--save-outputs", metavar="DIR", help="save every allocation as DIR/NAME.npy")
    sim.add_argument("--timing-only", action="store_true",
                     help="skip the arithmetic (cycles only; no reference check)")
    sim.add_argument("--no-check", action="store_true",
                     help="do not run the reference interpreter to check the outputs")
    sim.set_defaults(handler="sim.main")


def _run(sub: Any) -> None:
    run = sub.add_parser("run", help="compile a workload, run it on a target, check it against "
                                     "a reference")
    run.add_argument("workload", nargs="?", default="conv2d",
                     help="conv2d (ResNet-18 C2), resnet18:C1..C11, matmul [M N K], dense [M N K],"
                          " or resnet18: the whole quantized network, every requantization a "
                          "shift (--layers C2,C10: those convolutions alone), or resnet18_fixed: "
                          "the same with fixed-point multipliers (needs ALU MUL: --hw pynq_mul)"
                          ", or mobilenet_v2 (mobilenet_v2_32: on 32x32): built as a float ONNX "
                          "model and quantized by ONNX Runtime (needs onnxruntime)")
    run.add_argument("sizes", nargs="*", type=int, help="M N K for matmul/dense")
    run.add_argument("--hw", default=None,
                     help=f"{_HW_HELP} (default {DEFAULT_HW}; accelerator only)")
    _plugin_flag(run)
    run.add_argument("--layers", default=None,
                     help="for resnet18: run only these convolutions, one by one, e.g. C2,C10")
    run.add_argument("--fusion", choices=("full", "requant"), default=None,
                     help="for a whole network: full (element-wise operators fused into their "
                          "producer, default) or requant (only each requantize into its "
                          "convolution: the unfused baseline)")
    run.add_argument("--onnx", metavar="FILE.onnx", default=None,
                     help="run a quantized ONNX model (QLinearConv/QLinearAdd/... or QDQ form; "
                          "needs the onnx extra) as a whole graph")
    run.add_argument("--approx", choices=("shift-add",), default=None,
                     help="with --onnx on an accelerator whose ALU has no MUL: run ORT's scale "
                          "ratios as fixed-point multipliers (what pynq_mul runs) computed by "
                          "shifts and adds instead of refusing them (more ALU cycles; the "
                          "agreement with ORT is printed)")
    run.add_argument("--input", metavar="X.npy|IMAGE.png", default=None,
                     help="a whole graph's input: a .npy (float: quantized with the model's "
                          "input scale; int8: as is) or an image (pixels in [0, 1]); default a "
                          "seeded random image")
    run.add_argument("--output", metavar="OUT.npy", default=None,
                     help="write a whole graph's int8 output to this .npy")
    _shape_flags(run)
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
    run.add_argument("--seed", type=seed, default=None, help="seed for the random inputs")
    run.add_argument("--epilogue", choices=("calibrated", "none"), default="calibrated",
                     help="calibrated: the layer's requantizing epilogue (int8 outputs, shift "
                          "from the accumulator range); none: check the int32 accumulators")
    run.add_argument("--dump-ir", metavar="PASS", help="print the IR after PASS (or 'all')")
    run.add_argument("--check-reference", action="store_true",
                     help="also run the target's functional oracle (the ISA's reference "
                          "interpreter) and compare it with the run")
    _target_flag(run, "vta: the simulated accelerator; cuda: a GPU through CuPy; cuda-emu: the "
                      "generated kernel in the SIMT emulator")
    run.add_argument("--emit-cuda", action="store_true", help="print the generated CUDA kernel")
    run.add_argument("--tc", metavar="FILE.tc", default=None,
                     help="run a Tensor Comprehensions definition (docs/tc.md) instead of a "
                          "named workload, checked against the TC interpreter")
    run.add_argument("--entry", default=None, help="the definition of --tc FILE to run")
    run.add_argument("--size", default=None, metavar="N=1,C=64,...",
                     help="values of the TC definition's size variables")
    run.add_argument("--gpu-schedule", choices=("wmma", "simt", "mma"), default=None,
                     help="GPU kernel: wmma (tensor-core schedule; the default where the output "
                          "holds one 16x16 tile, else simt), simt, or mma (the task-mapping "
                          "kernels: cp.async pipeline, ldmatrix, mma.sync)")
    run.add_argument("--dtype", choices=("int8", "float16"), default=None,
                     help="with a GPU target: the layer's element type (default int8; float16 "
                          "is checked within a tolerance, not bit for bit)")
    _cache_flags(run, "the cache file: its tuned best schedules are used (a forced knob "
                      "wins) and its compiled programs reused, those compiled kept (default: "
                      "$VTA_CACHE, else the user cache directory's)",
                 "neither read nor write the cache: the default schedule, everything "
                 "compiled (the cold figure)")
    run.add_argument("--jobs", type=positive, default=None,
                     help="a whole network on the accelerator: compile and simulate its kernels "
                          "on this many worker processes (default: the cores no other job is "
                          "running on; 1: in the vta process alone)")
    run.add_argument("--profile", action="store_true",
                     help="with --target cuda-emu: count bank conflicts, global sectors, "
                          "barriers and instructions by kind")
    run.set_defaults(handler="run.main")


def _tc(sub: Any) -> None:
    tc = sub.add_parser("tc", help="Tensor Comprehensions: show a definition's inferred ranges")
    tc.add_argument("action", choices=("show",), help="show: each statement's inferred domain "
                    "and the output shapes")
    tc.add_argument("file", help="TC source file")
    tc.add_argument("--entry", default=None, help="the definition to show (default: the only one)")
    tc.add_argument("--size", default=None, metavar="N=1,C=64,...",
                    help="also show the ranges and shapes at these sizes")
    tc.set_defaults(handler="tc.main")


def _plugin_flag(p: argparse.ArgumentParser) -> None:
    """``--plugin``: user instructions to load before the hardware config is read."""
    p.add_argument("--plugin", action="append", default=None, metavar="FILE.py|MODULE",
                   help="import this Python file or module (and call its define()) first, so "
                        "the hardware config may list its instructions under intrinsics: "
                        "(repeatable; installed vta.intrinsics entry points load always)")


def _where_args(p: argparse.ArgumentParser) -> None:
    """Where trials run and where they are kept (``vta tune`` and ``vta sweep``)."""
    _plugin_flag(p)
    p.add_argument("--workers", type=positive, default=None,
                   help="local worker processes (default: the CPUs this process may use)")
    p.add_argument("--cluster", default=None, metavar="ADDR",
                   help="run the trials on a Dask cluster: tcp://HOST:PORT (a running "
                        "scheduler) or local:N (a local cluster of N workers); needs the dask "
                        "extra")
    _cache_flags(p, "the tuning cache (default: $VTA_CACHE, else "
                    "$XDG_CACHE_HOME/vta/tune.sqlite or ~/.cache/vta/tune.sqlite)",
                 "neither read nor write the tuning cache")
    p.add_argument("--seed", type=seed, default=None, help="the search's seed (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _tune(sub: Any) -> None:
    tune = sub.add_parser("tune", help="search a workload's schedule space with the timing-only "
                                       "simulator; keep the best in the tuning cache")
    tune.add_argument("workload", nargs="?", default="conv2d",
                      help="conv2d (ResNet-18 C2), resnet18:C1..C11, matmul [M N K], dense, or "
                           "resnet18 (every layer; --layers C2,C10: those)")
    tune.add_argument("sizes", nargs="*", type=int, help="M N K for matmul/dense")
    tune.add_argument("--hw", default=None,
                      help=f"{_HW_HELP} (default {DEFAULT_HW}; accelerator only)")
    tune.add_argument("--layers", default=None, help="for resnet18: only these layers")
    _shape_flags(tune)
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
    _target_flag(tune, "vta: the accelerator (timing-only simulator); cuda: kernels timed on a "
                       "GPU (the SIMT emulator cannot time one)")
    tune.add_argument("--gpu-schedule", choices=("simt", "wmma", "mma"), default=None,
                      help="with --target cuda: the kernel family whose knobs are tuned "
                           "(default wmma)")
    _where_args(tune)
    tune.set_defaults(handler="tune.tune_main")

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
    cache.set_defaults(handler="tune.cache_main")

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
    sweep.add_argument("--force", action="store_true",
                       help="run a grid larger than the limit the refusal names (rows stream "
                            "as points finish)")
    _where_args(sweep)
    sweep.set_defaults(handler="tune.sweep_main")


def build_parser(description: str) -> argparse.ArgumentParser:
    """The ``vta`` parser: every subcommand (``info``, ``sim``, ``run``, ``tc``, ``tune``,
    ``cache``, ``sweep``), each with ``handler`` set to the module that runs it."""
    p = _Parser(prog="vta", description=description)
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_info, _sim, _run, _tc, _tune):
        add(sub)
    return p
