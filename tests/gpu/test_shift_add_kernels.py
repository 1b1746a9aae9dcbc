"""The shift-add small CNN's GPU kernels stay as small as their IR (``passes.share_values``).

``shift_add_multipliers`` turns every multiplier into shifts and adds (Horner's rule, a term per
set bit, per channel where the weights are per-channel); printed as a tree, the running value
each term reads again made the per-channel convolution 2,960,960 characters with lines of
24,059 (nvcc: 79 s). For each of ONNX Runtime's twelve formats, every kernel's source is
bounded by its IR: at most ``CHARS_PER_NODE`` characters per distinct node of the lowered
function (a structural bound: each value printed about once, index arithmetic inline; the
kernels measure 8.5 to 15.8), no line longer than ``LONGEST_LINE``; and nvcc compiles them
(PTX, sm_80). Bit-exactness on the emulator: ``tests/graph/test_shift_add.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from vta.gpu.nvcc import compile_ptx_batch, find_nvcc
from vta.gpu.passes.share_values import distinct_nodes
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import FORMATS, Format, quantize, small_cnn
from vta.graph.quant import shift_add_multipliers
from vta.run.graph import compile_for
from vta.run.targets import CudaEmuTarget

#: characters of CUDA per distinct IR node of the lowered kernel (before share_values: 127 for
#: the s8 per-channel convolution, 39 for the s8 per-tensor one)
CHARS_PER_NODE = 32
#: the longest line a kernel may have (after: 1,866; before: 24,059 per-channel, 4,763 s8
#: per-tensor)
LONGEST_LINE = 4000


@pytest.fixture(scope="module")
def kernels() -> dict[str, list[Any]]:
    """Per format, the compiled kernels of its shift-add small CNN (cuda-emu: no GPU)."""
    out = {}
    for f in FORMATS:
        g = shift_add_multipliers(load_onnx(quantize(small_cnn(0), f, seed=1)))
        cg: Any = compile_for(g, CudaEmuTarget())
        out[f.name] = [k for k, _ in filter(None, cg.kernels)]
    return out


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_each_kernel_is_linear_in_its_ir(kernels: dict[str, list[Any]], fmt: Format) -> None:
    for k in kernels[fmt.name]:
        src = k.cuda.source
        nodes = distinct_nodes(k.func.body)
        assert len(src) <= CHARS_PER_NODE * nodes, (fmt.name, k.func.name, len(src), nodes)
        longest = max(map(len, src.split("\n")))
        assert longest <= LONGEST_LINE, (fmt.name, k.func.name, longest)


def test_every_format_compiles_to_ptx(kernels: dict[str, list[Any]]) -> None:
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the kernels cannot be compiled to PTX")
    srcs = [k.cuda.source for ks in kernels.values() for k in ks]
    compile_ptx_batch(srcs, "sm_80")
