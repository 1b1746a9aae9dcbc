"""ONNX Runtime's arithmetic on the GPU path: ORT-quantized networks on cuda-emu or cuda.

For each network (the small CNN in QOperator asymmetric int8 per-channel, ``mobilenet_v2_32``,
``bert_tiny``, optionally ``mobilenet_v2`` at 224x224) and each import (``requant="ort"``:
ORT's float32 requantize as the ``requant_f32`` call in the GPU kernels' epilogues, ORT's adds
as chain stages or the table kernel, what ``vta run --target cuda-emu|cuda`` imports; and
``fixed``: the fixed-point requantize the GPU path ran before), the CLI's seeded random input
(``models.random_image(0, ...)``, as ``vta run NAME``) is run through the GPU path and judged
twice: every stored tensor against the graph interpreter (``passed``) and every int8 tensor
ONNX Runtime computes against ORT (CPU, ``ORT_DISABLE_ALL``: ``equal`` of ``elements``,
``max_diff``). ``kernel_ms`` is the steps' time (the emulator's wall clock on cuda-emu; on
cuda, launches with their copies), ``wall_s`` the whole compile-and-run.

    PYTHONPATH=. python bench/gpu_exact.py [--target cuda-emu|cuda]
                                           [--models small_cnn,mobilenet_v2_32,bert_tiny]
                                           [--imports ort,fixed]

Prints a table and writes bench/results/gpu_exact_<target>.json (``_<gpu>`` added on cuda).
Exit status 1 if a run differs from the interpreter.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vta.gpu.runtime import gpu_name
from vta.graph.models import random_image
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    MODELS,
    Format,
    ort_verdict,
    quantize,
    quantized_network,
)
from vta.run.graph import compile_for, run_graph
from vta.run.targets import Target, get_target

RESULTS = Path(__file__).resolve().parent / "results"
#: the small CNN's format (``vta run --onnx`` of the file ``.dev/h21g_gpu.sh`` writes)
CNN_FORMAT = Format("QOperator", "a8", True)


def model_of(name: str) -> Any:
    """The ORT-quantized model ``name`` (a network of ``vta run``, or the small CNN)."""
    if name == "small_cnn":
        return quantize(MODELS["small_cnn"](0), CNN_FORMAT, seed=1)
    return quantized_network(name)


def run_one(name: str, model: Any, requant: str, target: Target) -> dict[str, Any]:
    """One network, one import, one run (module docstring): its row."""
    t0 = time.perf_counter()
    graph = load_onnx(model, requant=requant)
    image = {v.name: random_image(k, v.type.shape) for k, v in enumerate(graph.inputs)}
    real = {v.name: (image[v.name].astype(np.float32) - np.float32(v.type.zero))
            * np.float32(v.type.scale or 1.0) for v in graph.inputs}
    r = run_graph(compile_for(graph, target), image, target=target)
    wall = time.perf_counter() - t0
    s = r.summary()
    v = ort_verdict(model, graph, {**r.reference, **r.outputs}, real)
    host = [row for row in s["steps"] if row["kernel"] == "host"]
    return {"model": name, "import": requant, "groups": len(s["steps"]),
            "gpu_kernels": len(s["steps"]) - len(host),
            "host_steps": sorted({"+".join(row["ops"]) for row in host}),
            "passed": bool(r.passed), "ort_judged": v["judged"],
            "ort_equal": v.get("equal"), "ort_elements": v.get("elements"),
            "ort_max_diff": v.get("max_diff"), "ort_identical": v.get("identical"),
            "kernel_ms": round(float(s["ms"]), 1), "wall_s": round(wall, 1)}


def table(rows: list[dict[str, Any]]) -> str:
    out = [f"{'model':16} {'import':6} {'groups':>6} {'gpu':>4} {'check':6} "
           f"{'ORT equal':>21} {'%':>7} {'max':>4} {'kernel ms':>10} {'wall s':>7}"]
    for r in rows:
        pct = 100.0 * r["ort_equal"] / r["ort_elements"] if r["ort_elements"] else float("nan")
        eq = f"{r['ort_equal']:,}/{r['ort_elements']:,}" if r["ort_judged"] else "not judged"
        out.append(f"{r['model']:16} {r['import']:6} {r['groups']:>6} {r['gpu_kernels']:>4} "
                   f"{'PASS' if r['passed'] else 'FAIL':6} {eq:>21} {pct:>7.2f} "
                   f"{r['ort_max_diff'] if r['ort_judged'] else '-':>4} "
                   f"{r['kernel_ms']:>10.1f} {r['wall_s']:>7.1f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=("cuda-emu", "cuda"), default="cuda-emu")
    ap.add_argument("--models", default="small_cnn,mobilenet_v2_32,bert_tiny")
    ap.add_argument("--imports", default="ort,fixed")
    args = ap.parse_args(argv)
    target = get_target(args.target)
    rows = []
    for name in args.models.split(","):
        model = model_of(name)
        for requant in args.imports.split(","):
            rows.append(run_one(name, model, requant, target))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    suffix = args.target.replace("-", "_")
    if args.target == "cuda":
        suffix += "_" + re.sub(r"[^a-z0-9]+", "_", gpu_name().lower()).strip("_")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"gpu_exact_{suffix}.json"
    path.write_text(json.dumps({"target": args.target, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
