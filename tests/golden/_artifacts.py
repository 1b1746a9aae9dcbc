"""The artifacts the golden tests pin: VTA programs and IR on pynq, and rendered CUDA kernels.

Every builder here is a pure function of its fixed inputs (small shapes, pinned schedule
knobs), so the text is the same in every run and every process. ``all_texts()`` gives every
artifact by golden file name; run as a script, this module prints it as JSON (the
cross-process determinism test compares that with its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from vta.compiler.accel.driver import Compiled
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.gpu.cuda import CudaKernel
from vta.isa import disassemble
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]
HW_YAML = ROOT / "hwconfigs" / "pynq.yaml"


@dataclass(frozen=True)
class VtaCase:
    """A workload compiled for pynq with pinned knobs (``knobs``: what the default schedule
    -- model ranking refined by the timing simulator -- chose for it when the golden files
    were written; pinned so the golden text depends on the compiler only, not on the
    simulator's timing model)."""

    name: str
    spec: Conv2dSpec | MatmulSpec
    knobs: dict[str, Any]


VTA_CASES: dict[str, VtaCase] = {c.name: c for c in (
    VtaCase("conv2d_3x3", Conv2dSpec(n=1, ic=16, h=8, w=8, oc=32, kh=3, kw=3, stride=1, pad=1),
            {"tco": 2, "tci": 1, "th": 2, "tw": 8, "vthreads": 2, "vt_axis": "oh"}),
    VtaCase("conv2d_1x1_s2", Conv2dSpec(n=1, ic=16, h=8, w=8, oc=32, kh=1, kw=1, stride=2,
                                        pad=0),
            {"tco": 2, "tci": 1, "th": 1, "tw": 4, "vthreads": 2, "vt_axis": "oh"}),
    VtaCase("matmul", MatmulSpec(16, 32, 32),
            {"tco": 1, "tci": 2, "th": 1, "tw": 8, "vthreads": 2, "vt_axis": "oc"}),
)}

#: The passes whose IR the golden files pin for ``conv2d_3x3`` (``input`` is ``lower()``'s
#: output, before any VTA pass).
IR_PASSES = ("input", "tensorize", "coproc_sync")


@lru_cache(maxsize=1)
def pynq() -> HwConfig:
    return HwConfig.from_yaml(HW_YAML)


@cache
def compiled(case: str) -> Compiled:
    c = VTA_CASES[case]
    return AccelTarget(pynq()).compile_layer(Workload(c.name, c.spec), **c.knobs)


def isa_text(case: str) -> str:
    return disassemble(compiled(case).program)


def ir_text(case: str, pass_name: str) -> str:
    return compiled(case).result.dump(pass_name) + "\n"


#: Rendered CUDA kernels: (schedule, spec). The SIMT matmul uses the default SimtKnobs; the
#: tensor-core conv2d uses conv2d_wmma's default knobs (fitted to the problem).
CUDA_CASES: dict[str, tuple[str, Conv2dSpec | MatmulSpec]] = {
    "matmul_simt": ("simt", MatmulSpec(64, 64, 32)),
    "conv2d_wmma": ("wmma", Conv2dSpec(n=1, ic=16, h=8, w=8, oc=32, kh=3, kw=3, stride=1,
                                       pad=1)),
}


@cache
def kernel(case: str) -> CudaKernel:
    from vta.gpu.lower_gpu import build
    from vta.run.gpu_workloads import GpuWorkload, build_func

    schedule, spec = CUDA_CASES[case]
    return build(build_func(GpuWorkload(case, spec, "int8", Epilogue()), schedule))


def cuda_text(case: str) -> str:
    k = kernel(case)
    ln = k.launch
    return (f"// {k.name}: grid={ln.grid} block={ln.block} shared_bytes={ln.shared_bytes}\n"
            + k.source)


def all_texts() -> dict[str, str]:
    """Every golden artifact by file name."""
    out = {f"isa/{c}.asm": isa_text(c) for c in VTA_CASES}
    out.update({f"ir/conv2d_3x3.{p}.txt": ir_text("conv2d_3x3", p) for p in IR_PASSES})
    out.update({f"cuda/{c}.cu": cuda_text(c) for c in CUDA_CASES})
    return out


if __name__ == "__main__":  # used by the cross-process determinism test
    import json
    import sys

    json.dump(all_texts(), sys.stdout)
