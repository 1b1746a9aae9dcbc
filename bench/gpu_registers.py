"""The register estimate against ptxas on the shipped GPU kernels (needs nvcc, no GPU).

    PYTHONPATH=. python bench/gpu_registers.py [--arch sm_80]

For each kernel the benchmarks and ``vta run --target cuda`` build (task-mapping and WMMA
GEMMs at 4096^3, task-mapping and WMMA ResNet-18 convolutions, a SIMT GEMM), the table gives
the register tiles ``check_registers`` counts, its calibrated estimate (tiles +
``REGISTER_OVERHEAD``), ptxas's allocation (``nvcc -cubin -Xptxas -v``), spills and static
shared memory. ``REGISTER_OVERHEAD`` is the mean of ptxas minus tiles over these kernels;
the results go to bench/results/gpu_registers.json. Without nvcc the script says so and exits
with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vta.compiler.ir import stmt as S
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import resnet18_layer
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import LAUNCH, REGISTERS
from vta.gpu.kernels.conv2d import mma_conv2d
from vta.gpu.kernels.gemm import mma_gemm
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.nvcc import find_nvcc, kernel_resources
from vta.gpu.passes.check_registers import REGISTER_OVERHEAD
from vta.gpu.schedules import conv2d_wmma, matmul_simt, matmul_wmma

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_registers.json"


def kernels() -> list[tuple[str, S.PrimFunc]]:
    """(label, lowered kernel) for every kernel of the calibration set."""
    big = MatmulSpec(4096, 4096, 4096)
    out: list[tuple[str, S.PrimFunc]] = []
    for dt, acc in (("float16", "float16"), ("int8", "int32")):
        out.append((f"mma gemm {dt} 4096", mma_gemm(big, dt, None, out_dtype=acc)))
        out.append((f"wmma gemm {dt} 4096",
                    lower_for_gpu(matmul_wmma(big, dt, None, out_dtype=acc))))
    for layer in ("C2", "C9"):
        out.append((f"mma conv2d int8 {layer} requant",
                    mma_conv2d(resnet18_layer(layer), "int8", Epilogue())))
    out.append(("wmma conv2d int8 C2 requant",
                lower_for_gpu(conv2d_wmma(resnet18_layer("C2"), "int8", Epilogue()))))
    out.append(("simt gemm int8 1024",
                lower_for_gpu(matmul_simt(MatmulSpec(1024, 1024, 1024), "int8", None))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80")
    args = ap.parse_args()
    if find_nvcc() is None:
        print("nvcc is not installed: ptxas's register counts cannot be read", file=sys.stderr)
        sys.exit(2)
    rows = []
    for label, f in kernels():
        k = render_cuda(f)
        r = kernel_resources(k.source, args.arch)[k.name]
        est = int(f.attr(REGISTERS) or 0)
        rows.append({"kernel": label, "threads": f.attr(LAUNCH).threads_per_block,
                     "tiles": est - REGISTER_OVERHEAD, "estimate": est,
                     "ptxas": r.registers, "error": r.registers - est,
                     "spill_bytes": r.spill_stores + r.spill_loads, "static_smem": r.shared})
    heads = list(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in heads]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[h]).rjust(w) for h, w in zip(heads, widths, strict=True)))
    diffs = [r["ptxas"] - r["tiles"] for r in rows]
    summary = {"arch": args.arch, "register_overhead": REGISTER_OVERHEAD,
               "mean_ptxas_minus_tiles": sum(diffs) / len(diffs),
               "error_range": [min(r["error"] for r in rows), max(r["error"] for r in rows)]}
    print(json.dumps(summary))
    RESULTS.write_text(json.dumps({**summary, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
