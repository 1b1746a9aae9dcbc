"""The vta.cc oracle's command line: run compiled programs through VTA's own HLS source and
compare every byte with vta's simulator.

    python tools/vta_oracle/oracle.py --tvm-vta DIR --ap-int DIR [--hw pynq] WHAT

WHAT is one of

* a workload compiled with its default schedule, as ``vta run`` names it: ``resnet18:C2``,
  ``conv2d``, ``matmul 16 16 16``, ``dense 16 16 16`` (``--epilogue none``: the raw check's
  accumulator slices; ``--no-latency-hiding``, ``--vthreads N``: schedule knobs), run by
  ``vta.run.layer.run_layer`` on its usual inputs;
* ``--asm FILE.asm``: an assembly program on random inputs (``--seed``);
* ``--graph resnet18``: every kernel of the whole graph, each on the DRAM inputs the graph run
  gives it (``vta.run.graph.run_graph``);
* ``--tc FILE.tc --size N=..,.. [--entry NAME]``: every task program of a TC definition;
* ``--probes``: the ISA corner probes (``probes``), each checked against what vta.cc's source
  says and compared with the simulator.

The sources come from ``--tvm-vta`` / ``--ap-int`` or ``$VTA_ORACLE_TVM_VTA`` /
``$VTA_ORACLE_AP_INT``; the driver is built once per config and source digest into
``$XDG_CACHE_HOME/vta/oracle`` (``--rebuild`` builds anew). Every program executed prints one
line: PASS (vta.cc ran every instruction and every allocation is byte-identical with the
simulator's; with ``--reference`` also with the reference interpreter's), DIFF (naming the
first differing allocation, entry and element, and the constructs of the program vta.cc
reads differently) or ERROR. Exit status: 0 when everything passed, 1 otherwise, 2 for a bad
command line or missing sources.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's tools and vta
    _ROOT = str(Path(__file__).resolve().parents[2])
    sys.path[:1] = [_ROOT]

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from tools.vta_oracle.build import build_driver, locate_sources
from tools.vta_oracle.errors import OracleRunError
from tools.vta_oracle.probes import PROBES, token_chain
from tools.vta_oracle.run import (
    ROUND_LIMIT,
    OracleTarget,
    Record,
    corner_uses,
    differences,
    run_program,
)
from vta.compiler.ops.workloads import resolve
from vta.compiler.tc import load_file, parse_sizes
from vta.config import HwConfig
from vta.errors import VtaError
from vta.graph.models import MODELS, random_image
from vta.isa import assemble
from vta.run.graph import compile_for, run_graph
from vta.run.layer import run_layer
from vta.run.tc import run_tc
from vta.sim import simulate
from vta.sim.dram import random_inputs

__all__ = ["main", "parser", "oracle_target", "run_workload", "run_asm", "run_whole_graph",
           "run_tc_file", "run_probes"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python tools/vta_oracle/oracle.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("workload", nargs="?", default=None,
                   help="resnet18:C1..C11, conv2d, matmul [M N K], dense [M N K]")
    p.add_argument("sizes", nargs="*", type=int, help="M N K for matmul and dense")
    p.add_argument("--tvm-vta", default=None, help="a checkout of apache/tvm-vta "
                   "(default $VTA_ORACLE_TVM_VTA)")
    p.add_argument("--ap-int", default=None, help="Xilinx's HLS_arbitrary_Precision_Types "
                   "or its include/ folder (default $VTA_ORACLE_AP_INT)")
    p.add_argument("--hw", default="pynq", help="a shipped config name or a YAML path")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--asm", metavar="FILE.asm", help="an assembly program")
    what.add_argument("--graph", choices=sorted(MODELS), help="every kernel of a whole graph")
    what.add_argument("--tc", metavar="FILE.tc", help="a Tensor Comprehensions definition")
    what.add_argument("--probes", action="store_true", help="the ISA corner probes")
    p.add_argument("--entry", default=None, help="the definition of --tc FILE")
    p.add_argument("--size", default=None, metavar="N=1,C=64,...", help="--tc sizes")
    p.add_argument("--epilogue", choices=("calibrated", "none"), default="calibrated",
                   help="none: the raw check (one program per accumulator slice)")
    p.add_argument("--no-latency-hiding", action="store_true", help="one virtual thread")
    p.add_argument("--vthreads", type=int, default=None, help="virtual threads")
    p.add_argument("--fusion", choices=("full", "requant"), default="full",
                   help="--graph: how operators are fused")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--reference", action="store_true",
                   help="also compare with the ISA's reference interpreter")
    p.add_argument("--fill", type=int, default=0, help="the byte vta()'s uninitialised "
                   "on-chip buffers start with (default 0)")
    p.add_argument("--rebuild", action="store_true", help="build the driver even if cached")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    return p


def oracle_target(args: argparse.Namespace) -> OracleTarget:
    """The simulator-plus-vta.cc target for ``args`` (building the driver if needed)."""
    hw = HwConfig.load(args.hw)
    driver = build_driver(hw, locate_sources(args.tvm_vta, args.ap_int), force=args.rebuild)
    return OracleTarget(driver, reference=args.reference, fill=args.fill)


def run_workload(target: OracleTarget, name: str, sizes: Sequence[int], *, raw: bool = False,
                 latency_hiding: bool = True, vthreads: int | None = None,
                 seed: int = 0) -> tuple[list[Record], str]:
    """A named workload through ``run_layer`` on ``target``: its records (labelled by program:
    the raw check's slices) and the layer's own check against numpy."""
    w = resolve(name, list(sizes) or None)
    first = len(target.records)
    knobs = {} if vthreads is None else {"vthreads": vthreads}
    r = run_layer(w, target, seed=seed, raw=raw, latency_hiding=latency_hiding, **knobs)
    recs = target.records[first:]
    vt = r.compiled.schedule.vthreads  # what the compiler chose (it may refuse a request)
    for i, rec in enumerate(recs):
        rec.label = f"{w.name} (vthreads {vt})" + (f" slice {i}" if raw else "")
    return recs, r.check.line()


def run_asm(target: OracleTarget, path: str, seed: int = 0) -> list[Record]:
    """An assembly file on full-range random inputs."""
    program = assemble(Path(path).read_text(), target.hw, path)
    inputs = random_inputs(program, target.hw, seed)
    target.execute(program, inputs)
    target.records[-1].label = path
    return target.records[-1:]


def run_whole_graph(target: OracleTarget, model: str, *, fusion: str = "full",
                    seed: int = 0) -> tuple[list[Record], str]:
    """Every kernel of ``model``'s whole graph, each on the inputs the graph run forms for it
    (the simulator's outputs of the kernels before it)."""
    graph = MODELS[model](batch=1)
    image = {v.name: random_image(seed + k, v.type.shape) for k, v in enumerate(graph.inputs)}
    compiled = compile_for(graph, target, fusion=fusion)
    first = len(target.records)
    r = run_graph(compiled, image, target=target)
    by_ex = {id(rec.execution): rec for rec in target.records[first:]}
    for s in r.steps:
        rec = by_ex.get(id(s.execution))
        if rec is not None:
            group = s.step.group if hasattr(s.step, "group") else s.step
            rec.label = f"step {s.index} {group.output.name}"
    return target.records[first:], r.check.line()


def run_tc_file(target: OracleTarget, path: str, sizes: str | None, entry: str | None,
                seed: int = 0) -> tuple[list[Record], str]:
    """Every task program a TC definition maps to."""
    d = load_file(path, entry)
    first = len(target.records)
    r = run_tc(d, parse_sizes(sizes), target, seed=seed)
    recs = target.records[first:]
    for i, rec in enumerate(recs):
        rec.label = f"{d.name} program {i}"
    return recs, r.check.line() if r.check is not None else "not checked"


def run_probes(target: OracleTarget) -> list[dict[str, Any]]:
    """Every corner probe: whether vta.cc does what its source says, and whether the
    simulator agrees with vta.cc."""
    hw = target.hw
    out = []
    for p in PROBES:
        program, inputs = p.program(hw), p.draw(hw)
        o = run_program(target.driver, program, inputs, fill=target.fill, hw=p.config(hw))
        sim = simulate(program, p.config(hw), inputs).outputs
        diff = differences(program, o.outputs, sim)
        out.append({"probe": p.name, "claim": p.claim, "config": p.config(hw).name,
                    "complete": o.complete,
                    "vta_cc_as_documented": not p.mismatches(hw, inputs, o.outputs),
                    "mismatches": p.mismatches(hw, inputs, o.outputs),
                    "simulator": "byte-identical" if not diff else diff[0].describe()})
    for n, finishes in ((ROUND_LIMIT - 1, True), (ROUND_LIMIT, False)):
        out.append(_chain(target, n, finishes))
    return out


def _chain(target: OracleTarget, n: int, finishes: bool) -> dict[str, Any]:
    """The token-chain probe of ``n`` links: whether vta.cc finishes it as its round limit
    says (``finishes``), and whether the simulator agrees."""
    hw = target.hw
    program = assemble(token_chain(n), hw, f"<token chain {n}>")
    inputs = {"X": np.full((1, hw.gemm.batch, hw.gemm.block_out), 5, dtype=np.int32)}
    sim = simulate(program, hw, inputs).outputs
    try:
        o = run_program(target.driver, program, inputs, fill=target.fill)
        ran = o.complete
        diff = differences(program, o.outputs, sim)
        said = "byte-identical" if not diff else diff[0].describe()
    except OracleRunError as e:
        ran, said = False, f"vta.cc failed ({str(e).split(' (')[0]}); the simulator ran it"
    claim = (f"vta() {'finishes' if finishes else 'gives up on'} a token chain of {n} links "
             f"(its main loop stops after {ROUND_LIMIT} rounds)")
    return {"probe": f"token_chain_{n}", "claim": claim, "config": hw.name, "complete": True,
            "vta_cc_as_documented": ran == finishes,
            "mismatches": [] if ran == finishes else [f"vta.cc {'did' if ran else 'did not'} "
                                                      f"finish"],
            "simulator": said}


def _print_records(recs: list[Record], as_json: bool) -> None:
    for rec in recs:
        uses = corner_uses(rec.program)
        if as_json:
            o = rec.oracle
            print(json.dumps({"program": rec.label, "verdict": rec.verdict, "line": rec.line(),
                              "uses": uses, "seconds": o.seconds if o else None,
                              "rounds": o.rounds.rounds if o and o.rounds else None}))
        else:
            note = f" (uses {', '.join(uses)})" if uses else ""
            print(f"{rec.label}: {rec.line()}{note}")


def _summary(recs: list[Record]) -> str:
    counts = {v: sum(r.verdict == v for r in recs) for v in ("PASS", "DIFF", "ERROR")}
    return (f"{len(recs)} program(s) through vta.cc: {counts['PASS']} PASS, "
            f"{counts['DIFF']} DIFF, {counts['ERROR']} ERROR")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return _main(args)
    except VtaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    layer = args.workload is not None
    if sum(map(bool, (layer, args.asm, args.graph, args.tc, args.probes))) != 1:
        raise VtaError("give one thing to run: a workload, --asm, --graph, --tc or --probes")
    if (args.epilogue == "none" or args.no_latency_hiding or args.vthreads) and not layer:
        raise VtaError("--epilogue, --no-latency-hiding and --vthreads apply to a workload")
    if (args.size or args.entry) and not args.tc:
        raise VtaError("--size and --entry apply to --tc")
    target = oracle_target(args)
    if args.probes:
        results = run_probes(target)
        for res in results:
            if args.json:
                print(json.dumps(res))
            else:
                doc = "as documented" if res["vta_cc_as_documented"] else \
                    "NOT as documented: " + "; ".join(res["mismatches"])
                print(f"probe {res['probe']}: vta.cc {doc} ({res['claim']}); "
                      f"simulator ({res['config']}) vs vta.cc: {res['simulator']}")
        return 0 if all(r["vta_cc_as_documented"] and r["complete"] for r in results) else 1
    check = ""
    if layer:
        recs, check = run_workload(target, args.workload, args.sizes,
                                   raw=args.epilogue == "none",
                                   latency_hiding=not args.no_latency_hiding,
                                   vthreads=args.vthreads, seed=args.seed)
    elif args.asm:
        recs = run_asm(target, args.asm, args.seed)
    elif args.graph:
        recs, check = run_whole_graph(target, args.graph, fusion=args.fusion, seed=args.seed)
    else:
        recs, check = run_tc_file(target, args.tc, args.size, args.entry, args.seed)
    _print_records(recs, args.json)
    if not args.json:
        if check:
            print(f"the run's own check (simulator): {check}")
        print(_summary(recs))
    return 0 if recs and all(r.passed for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
