"""SASS of the task-mapping conv2d kernels: instruction mix per tensor-core MMA, compiled by nvcc
and disassembled by cuobjdump (no GPU needed).

    python bench/gpu_sass.py [--layers C5 ...] [--arch sm_80 sm_90] [--layout NCHW NHWC]
                             [--cuobjdump PATH]

For each layer (ResNet-18, batch 1, int8, the calibrated requantizing epilogue) and layout
(``NCHW``: the input patch per channel block and a per-tap byte-gather expansion; ``NHWC``:
one 16-byte ``cp.async`` per pixel-tap straight into the swizzled A tile) the kernel is
rendered, compiled with ``nvcc -cubin -O3`` for each arch and disassembled; the table gives the
static instruction count of the whole kernel and, in its main loop (the innermost loop holding
the tensor-core MMAs), instructions, MMAs (IMMA/HMMA), byte loads from shared memory
(``LDS.U8``/``LDS.S8``), ``LDGSTS`` (cp.async) and instructions per 4 MMAs.
Results: bench/results/gpu_sass.json. Exits 2 (saying why) without nvcc or cuobjdump
(``pip install nvidia-cuda-cuobjdump`` provides the latter).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _gpu_common import RESULTS, print_table

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import resolve
from vta.gpu.cuda import render_cuda
from vta.gpu.kernels.conv2d import mma_conv2d
from vta.gpu.nvcc import find_nvcc

#: a SASS instruction line of cuobjdump: ``/*0a30*/  @!P0 IMMA.16832.S8.S8 R4, ...``
_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-7T]\s+)?([A-Z][A-Z0-9_.]*)(.*)")
_BRA = re.compile(r"BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)")


def _cuobjdump(given: str | None) -> str | None:
    if given:
        return given
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:  # the pip wheel nvidia-cuda-cuobjdump
        import nvidia  # type: ignore[import-not-found]

        for root in nvidia.__path__:
            for cand in Path(root).glob("*/bin/cuobjdump"):
                return str(cand)
    except ImportError:
        pass
    return None


def opcode_counts(source: str, arch: str, nvcc: str, cuobjdump: str
                  ) -> tuple[Counter[str], Counter[str]]:
    """Static SASS opcode counts (full opcode with modifiers) of ``source`` for ``arch``: of
    the whole kernel, and of its main loop (the innermost backward branch's range holding
    the first tensor-core MMA; empty when no loop holds one)."""
    with tempfile.TemporaryDirectory(prefix="vta_sass_") as tmp:
        cu, cubin = Path(tmp) / "k.cu", Path(tmp) / "k.cubin"
        cu.write_text(source)
        subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-O3", "-o", str(cubin),
                        str(cu)], check=True, capture_output=True, text=True)
        out = subprocess.run([cuobjdump, "-sass", str(cubin)], check=True,
                             capture_output=True, text=True).stdout
    insns = [(int(m.group(1), 16), m.group(2), m.group(3)) for line in out.splitlines()
             if (m := _INSN.match(line))]
    whole = Counter(op for _, op, _ in insns)
    mmas = [a for a, op, _ in insns if op.startswith(("IMMA", "HMMA"))]
    loops = [(int(b.group(1), 16), a) for a, op, rest in insns
             if op == "BRA" and (b := _BRA.search(op + rest)) and int(b.group(1), 16) <= a]
    inner = [lp for lp in loops if mmas and lp[0] <= mmas[0] <= lp[1]]
    if not inner:
        return whole, Counter()
    lo, hi = min(inner, key=lambda lp: lp[1] - lp[0])
    return whole, Counter(op for a, op, _ in insns if lo <= a <= hi)


def summary(ops: Counter[str]) -> dict[str, int | float]:
    """The figures of the table from an opcode count (whole kernel or main loop)."""
    total = sum(ops.values())
    mma = sum(n for k, n in ops.items() if k.startswith(("IMMA", "HMMA")))
    lds8 = sum(n for k, n in ops.items() if k.startswith(("LDS.U8", "LDS.S8")))
    ldgsts = sum(n for k, n in ops.items() if k.startswith("LDGSTS"))
    return {"instructions": total, "mma": mma, "lds_u8": lds8, "ldgsts": ldgsts,
            "per_4_mma": round(4 * total / mma, 1) if mma else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=["C2", "C5", "C8", "C11"])
    ap.add_argument("--arch", nargs="+", default=["sm_80", "sm_90"])
    ap.add_argument("--layout", nargs="+", default=["NCHW", "NHWC"], choices=["NCHW", "NHWC"])
    ap.add_argument("--cuobjdump", default=None)
    args = ap.parse_args()
    nvcc, cuobjdump = find_nvcc(), _cuobjdump(args.cuobjdump)
    if nvcc is None or cuobjdump is None:
        print(f"gpu_sass.py: needs nvcc and cuobjdump (nvcc: {nvcc}, cuobjdump: {cuobjdump})",
              file=sys.stderr)
        raise SystemExit(2)
    rows, table = [], []
    for layer in args.layers:
        wl = resolve(f"resnet18:{layer}")
        assert isinstance(wl.spec, Conv2dSpec)
        for layout in args.layout:
            src = render_cuda(mma_conv2d(wl.spec, "int8", wl.epilogue, layout=layout)).source
            for arch in args.arch:
                whole, loop = opcode_counts(src, arch, nvcc, cuobjdump)
                s, lp = summary(whole), summary(loop)
                rows.append({"layer": layer, "layout": layout, "arch": arch, "kernel": s,
                             "main_loop": lp})
                table.append([layer, layout, arch, s["instructions"], lp["instructions"],
                              lp["mma"], lp["lds_u8"], lp["ldgsts"], lp["per_4_mma"]])
    print("task-mapping conv2d int8, static SASS counts (nvcc -O3 -cubin, cuobjdump -sass)")
    print_table(["layer", "layout", "arch", "kernel insns", "loop insns", "loop MMA",
                 "loop LDS.U8", "loop LDGSTS", "loop per 4 MMA"], table)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "gpu_sass.json"
    path.write_text(json.dumps({"command": "python bench/gpu_sass.py", "rows": rows},
                               indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
