"""The pass pipeline's outputs, digested: a before/after check for a change to the passes.

For every default candidate of ResNet-18's C1-C11 (``driver.default_points``, what
``compile_workload`` compiles) and every ``compile_window`` candidate of its max-pool, on every
shipped configuration (or ``--configs``): a SHA-256 (16 hex digits) of the IR after every
pass (``CompileResult.dump``), of the emitted program's disassembly and of its whole value
(instructions with every field, DRAM map, micro-op tables: ``repr``). A candidate a config
refuses is recorded by its error. Prints how many entries were compared and which differ, and
writes the digests as JSON.

``--before CHECKOUT`` first runs this script against another checkout (e.g. ``git archive
main``) in a subprocess and compares the two: a pass rewritten for speed must leave every
digest as it was (exit status 1 otherwise).

    OPENBLAS_NUM_THREADS=1 python bench/pipeline_digests.py [--configs pynq,pynq_overlap]
        [--before CHECKOUT] [--out bench/results/pipeline_digests.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from vta.compiler.accel import driver, pipeline
from vta.compiler.accel.ops import window_packed
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.ir import stmt as S
from vta.compiler.ir.lower import lower
from vta.compiler.ops.window import WindowSpec
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig
from vta.errors import VtaError

HERE = Path(__file__).resolve().parent
#: ResNet-18's max-pool (after C1), as its graph places it on the accelerator
MAXPOOL = WindowSpec("max", 1, 64, 112, 112, 3, 2, 1)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _entry(func: S.PrimFunc, hw: HwConfig) -> dict[str, str]:
    """The digests of one candidate: the IR after every pass, ``emit`` and the program."""
    r = pipeline.compile_func(func, hw)
    out = {name: _digest(r.dump(name)) for name in [*r.ir, "emit"]}
    out["program"] = _digest(repr(r.program))
    return out


def _candidates(hw: HwConfig) -> dict[str, dict[str, str] | str]:
    """Every C1-C11 default candidate's and max-pool candidate's digests (or its error)."""
    out: dict[str, dict[str, str] | str] = {}
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        try:
            problem = driver.space_of(w, hw)
            points = list(driver.default_points(w, hw))
        except VtaError as e:
            out[layer] = f"{type(e).__name__}: {e}"
            continue
        for k, p in enumerate(points):
            fold, sch = problem.schedule(p)
            try:
                op = driver.op_compute(w, hw, sch, w.epilogue, fold)
                out[f"{layer}/{k}"] = _entry(lower_op(op, hw, sch), hw)
            except VtaError as e:
                out[f"{layer}/{k}"] = f"{type(e).__name__}: {e}"
    try:
        op = window_packed.window_compute(MAXPOOL, hw)
        for k, s in enumerate(window_packed.candidates(MAXPOOL, hw)[:window_packed.REFINE]):
            func = lower(window_packed.schedule_window(op, MAXPOOL, hw, s), op.args, op.name)
            out[f"maxpool/{k}"] = _entry(func, hw)
    except VtaError as e:
        out["maxpool"] = f"{type(e).__name__}: {e}"
    return out


def digests(configs: list[str]) -> dict[str, dict[str, str] | str]:
    """``config/candidate`` -> digests, over ``configs`` (stems of hwconfigs/*.yaml)."""
    out: dict[str, dict[str, str] | str] = {}
    for name in configs:
        hw = HwConfig.from_yaml(HERE.parent / "hwconfigs" / f"{name}.yaml")
        for key, v in _candidates(hw).items():
            out[f"{name}/{key}"] = v
        print(f"{name}: {sum(k.startswith(name + '/') for k in out)} candidates", flush=True)
    return out


def _before(checkout: str, configs: list[str]) -> dict[str, dict[str, str] | str]:
    """This script's digests for the vta of ``checkout`` (a subprocess)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "before.json"
        env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--configs",
                        ",".join(configs), "--out", str(out)], env=env, check=True,
                       cwd=Path(checkout).resolve())
        data: dict[str, dict[str, str] | str] = json.loads(out.read_text())["digests"]
        return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shipped = sorted(p.stem for p in (HERE.parent / "hwconfigs").glob("*.yaml"))
    ap.add_argument("--configs", default="all",
                    help="comma-separated stems of hwconfigs/*.yaml, or 'all'")
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="compare with the digests of this checkout's vta (a subprocess)")
    ap.add_argument("--out", default=str(HERE / "results" / "pipeline_digests.json"))
    args = ap.parse_args()
    configs = shipped if args.configs == "all" else args.configs.split(",")
    unknown = [c for c in configs if c not in shipped]
    if unknown:
        print(f"--configs: no hwconfigs/{unknown[0]}.yaml (shipped: {', '.join(shipped)})",
              file=sys.stderr)
        return 2
    before = _before(args.before, configs) if args.before else None
    after = digests(configs)
    result: dict[str, object] = {"configs": configs, "digests": after}
    status = 0
    if before is not None:
        keys = sorted(set(before) | set(after))
        differ = [k for k in keys if before.get(k) != after.get(k)]
        passes = sum(len(v) for v in after.values() if isinstance(v, dict))
        print(f"compared {len(keys)} candidates ({passes} digests): {len(differ)} differ")
        for k in differ[:20]:
            b, a = before.get(k), after.get(k)
            which = ([p for p in a if a[p] != b.get(p)] if isinstance(a, dict)
                     and isinstance(b, dict) else "error or missing")
            print(f"  {k}: {which}")
        result.update(before=args.before, compared=len(keys), differ=differ)
        status = 1 if differ else 0
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
