"""Golden files for generated text: VTA assembly, per-pass IR, CUDA (docs/testing.md).

Each test compares the generated text with ``tests/golden/data/`` (``golden`` fixture,
conftest.py) and checks the artifact is valid: assembly re-assembles to an equal Program,
CUDA compiles to PTX for sm_80. Refresh on purpose with ``pytest tests/golden --update-golden``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _artifacts import (
    CUDA_CASES,
    IR_PASSES,
    VTA_CASES,
    all_texts,
    compiled,
    cuda_text,
    ir_text,
    isa_text,
    kernel,
    pynq,
)

from vta.compiler.ops.workloads import Workload
from vta.gpu.nvcc import compile_ptx_batch, find_nvcc
from vta.isa import assemble, disassemble
from vta.run.targets import AccelTarget


@pytest.mark.parametrize("case", list(VTA_CASES))
def test_isa_golden(case: str, golden) -> None:
    text = isa_text(case)
    golden(f"isa/{case}.asm", text)
    # valid: the text re-assembles to the compiler's program, and prints back identically
    prog = assemble(text, pynq(), source=f"{case}.asm")
    assert prog == compiled(case).program
    assert disassemble(prog) == text


@pytest.mark.parametrize("pass_name", IR_PASSES)
def test_conv2d_ir_golden(pass_name: str, golden) -> None:
    golden(f"ir/conv2d_3x3.{pass_name}.txt", ir_text("conv2d_3x3", pass_name))


@pytest.mark.parametrize("case", list(CUDA_CASES))
def test_cuda_golden(case: str, golden) -> None:
    text = cuda_text(case)
    golden(f"cuda/{case}.cu", text)
    assert f'__global__ void __launch_bounds__({kernel(case).launch.threads_per_block}) ' \
           f'{kernel(case).name}(' in text
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the golden text matched, but the kernel cannot be "
                    "compiled to PTX here")
    compile_ptx_batch([text], "sm_80")  # raises NvccError with nvcc's diagnostics


@pytest.mark.parametrize("case", list(VTA_CASES))
def test_pinned_knobs_are_the_default_choice(case: str) -> None:
    """The golden programs pin their knobs; they should be the ones the default schedule
    picks. If the schedule model or the simulator's timing changed the choice, update the
    knobs in _artifacts.py to the new default and refresh the golden files."""
    c = VTA_CASES[case]
    got = AccelTarget(pynq()).compile_layer(Workload(c.name, c.spec)).schedule
    assert {k: getattr(got, k) for k in c.knobs} == c.knobs


def test_text_is_identical_in_another_process() -> None:
    """Another interpreter with a different hash seed generates the same text (no ids,
    addresses or set/dict-order dependence)."""
    script = os.path.join(os.path.dirname(__file__), "_artifacts.py")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env,
                          check=True)
    assert json.loads(proc.stdout) == all_texts()
