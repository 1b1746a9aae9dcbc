"""Every example in examples/tc/, end to end at small sizes: on the cycle-level simulator
(pynq, automatic accelerator mapping) and in the SIMT emulator (automatic GPU mapping), both
bit-exact against the TC interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_float_examples import CASES as FLOAT_CASES

from vta.compiler.tc import load_file
from vta.config import HwConfig
from vta.run.targets import AccelTarget, CudaEmuTarget
from vta.run.tc import run_gpu, run_vta

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tc"

#: (file, entry, small sizes, the kinds of task the accelerator mapping must choose)
CASES = [
    ("matmul.tc", "matmul", {"M": 12, "K": 40, "N": 20}, ["GEMM"]),
    ("transposed_matmul.tc", "tmm", {"K": 24, "M": 10, "N": 17}, ["GEMM"]),
    ("tbmm.tc", "tbmm", {"B": 2, "N": 9, "M": 20, "K": 11}, ["GEMM"]),
    ("conv.tc", "conv2d", {"N": 1, "C": 16, "H": 8, "W": 7, "K": 16, "R": 3, "S": 3}, ["GEMM"]),
    ("conv.tc", "conv2d_strided", {"N": 1, "C": 5, "HP": 11, "WP": 9, "K": 6, "R": 3, "S": 3},
     ["GEMM"]),
    ("depthwise.tc", "depthwise", {"N": 1, "C": 3, "H": 7, "W": 6, "R": 3, "S": 3}, ["GEMM"]),
    ("grouped_conv.tc", "grouped_conv",
     {"N": 1, "G": 2, "C": 4, "H": 6, "W": 6, "K": 3, "R": 3, "S": 3}, ["GEMM"]),
    ("tensordot.tc", "tensordot", {"N": 2, "C1": 3, "C2": 8, "C3": 5, "H": 3, "W": 2}, ["GEMM"]),
    ("mlp.tc", "mlp2", {"B": 3, "M": 40, "N": 24, "P": 10}, ["GEMM", "GEMM"]),
    ("maxpool.tc", "maxpool", {"N": 1, "C": 3, "H": 9, "W": 8}, ["ALU"]),
    ("kronecker.tc", "kronecker", {"M": 3, "N": 2, "P": 4, "Q": 5}, ["GEMM"]),
    ("intermediate.tc", "avg_fc", {"M": 6, "K": 40, "N": 12}, ["ALU", "GEMM"]),
]
IDS = [c[1] for c in CASES]


def test_every_example_is_covered() -> None:
    files = {p.name for p in EXAMPLES.glob("*.tc")}
    assert files == {c[0] for c in CASES} | {c[0] for c in FLOAT_CASES}
    assert len({c[0] for c in CASES}) == 11


@pytest.mark.parametrize("file, entry, sizes, kinds", CASES, ids=IDS)
def test_example_on_the_simulator(pynq: HwConfig, file: str, entry: str,
                                  sizes: dict[str, int], kinds: list[str]) -> None:
    r = run_vta(load_file(EXAMPLES / file, entry), sizes, AccelTarget(pynq), seed=2)
    assert r.passed, r.mismatches
    assert [t.kind for t in r.tasks] == kinds
    assert r.fraction == 1.0 and r.cycles > 0


@pytest.mark.parametrize("file, entry, sizes, kinds", CASES, ids=IDS)
def test_example_in_the_gpu_emulator(file: str, entry: str, sizes: dict[str, int],
                                     kinds: list[str]) -> None:
    g = run_gpu(load_file(EXAMPLES / file, entry), sizes, CudaEmuTarget(), seed=2)
    assert g.passed, g.mismatches
    assert g.program.kernels and all("__global__" in s for s in g.sources)
