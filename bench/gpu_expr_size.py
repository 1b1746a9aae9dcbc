"""The size of the shift-add small CNN's CUDA kernels, and nvcc's time on the largest (no GPU).

    PYTHONPATH=. python bench/gpu_expr_size.py [--nvcc] [FORMAT ...]

For each of ONNX Runtime's twelve formats (or those named, e.g. ``QDQ/s8/per-channel``), the
shift-add small CNN (``shift_add_multipliers(load_onnx(quantize(small_cnn(0), fmt, seed=1)))``)
is compiled for cuda-emu; the table gives its kernels, the largest kernel's characters, lines
and longest line, its characters per distinct IR node (``passes.share_values`` keeps each
value printed once: see docs/gpu.md), the graph's compile seconds and, with ``--nvcc``, nvcc's
seconds to make PTX (sm_80) of the largest kernel (once per distinct source: formats whose
kernels are byte for byte the same name the first). Results go to
bench/results/gpu_expr_size.json. Seconds on a shared machine are noisy: read them as orders of
magnitude and quote the load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from vta.gpu.nvcc import compile_ptx, find_nvcc
from vta.gpu.passes.share_values import distinct_nodes
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import FORMATS, quantize, small_cnn
from vta.graph.quant import shift_add_multipliers
from vta.run.graph import compile_for
from vta.run.targets import CudaEmuTarget

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_expr_size.json"


def measure(fmt: Any, nvcc: bool, seen: dict[str, str]) -> dict[str, Any]:
    """One format's row (module docstring); ``seen``: the largest kernels' sources measured
    so far, by source, with their format (formats whose kernel is byte for byte the same are
    not timed again: ``same_as`` names the first)."""
    t0 = time.perf_counter()
    g = shift_add_multipliers(load_onnx(quantize(small_cnn(0), fmt, seed=1)))
    cg: Any = compile_for(g, CudaEmuTarget())
    ks: list[Any] = [k for k, _ in filter(None, cg.kernels)]
    row: dict[str, Any] = {"format": fmt.name, "compile_s": round(time.perf_counter() - t0, 2),
                           "kernels": len(ks)}
    big = max(ks, key=lambda k: len(k.cuda.source))
    src = big.cuda.source
    row.update(largest=big.func.name, chars=len(src), lines=src.count("\n"),
               longest_line=max(map(len, src.split("\n"))),
               chars_per_node=round(len(src) / distinct_nodes(big.func.body), 1))
    row["same_as"] = seen.setdefault(src, fmt.name)
    if nvcc and row["same_as"] == fmt.name:
        t0 = time.perf_counter()
        compile_ptx(src, "sm_80")
        row["nvcc_s"] = round(time.perf_counter() - t0, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("formats", nargs="*", help="format names (default: all twelve)")
    ap.add_argument("--nvcc", action="store_true", help="time nvcc -ptx on the largest kernel")
    a = ap.parse_args(argv)
    names = {f.name for f in FORMATS}
    bad = [n for n in a.formats if n not in names]
    if bad:
        print(f"unknown format(s) {', '.join(bad)}; one of: {', '.join(sorted(names))}",
              file=sys.stderr)
        return 2
    if a.nvcc and find_nvcc() is None:
        print("--nvcc: nvcc is not installed", file=sys.stderr)
        return 2
    seen: dict[str, str] = {}
    rows = [measure(f, a.nvcc, seen) for f in FORMATS if not a.formats or f.name in a.formats]
    cols = ["kernels", "chars", "lines", "longest_line", "chars_per_node", "compile_s"] + \
        (["nvcc_s"] if a.nvcc else [])
    print(f"{'format':26}" + "".join(f"{c:>15}" for c in cols) + "  same source as")
    for r in rows:
        cells = [r.get(c, "-") for c in cols]
        print(f"{r['format']:26}" + "".join(f"{v:>15,}" if isinstance(v, int) else f"{v:>15}"
                                            for v in cells)
              + ("" if r["same_as"] == r["format"] else f"  {r['same_as']}"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    RESULTS.write_text(json.dumps({"command": " ".join(["bench/gpu_expr_size.py",
                                                        *(argv or sys.argv[1:])]),
                                   "load_1min": load, "rows": rows}, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
