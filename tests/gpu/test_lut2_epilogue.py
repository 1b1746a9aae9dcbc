"""A two-operand table (the graph's ``Lut2``: ONNX Runtime's element-wise add or product that
no integer form reproduces) fused into the epilogue of the GPU kernel that produces one of its
operands: the task-mapping GEMM, the channels-last and NCHW convolutions and the SIMT window
kernels read the ``(256, 256)`` table from global memory at the indices the chain computes.
Bit-exact under the SIMT emulator against numpy's lookup, PTX for sm_80 and sm_90, and the
accelerator's chains refuse a table by name. Also the other new operand kind, an int32 bias per
output position (zero-point padding folded into the convolution, ``graph.passes.fold_pad``),
read from global memory in the same epilogues."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from vta.compiler.accel.ops.chain_plan import chain_cost
from vta.compiler.ops.chain import (
    POSITION,
    TABLE,
    TENSOR,
    Chain,
    ChainOperand,
    add_stage,
    bias_stage,
    lut2_stage,
    requant_stage,
    scaled_operand,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.window import WindowSpec
from vta.config import HwConfig
from vta.errors import CompileError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.conv2d import mma_conv2d, ohwi_weight
from vta.gpu.kernels.gemm import MmaKnobs, mma_gemm
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.window import window_func

from .test_mma_chain import BIAS_ONLY, _acc, _nhwc, _rounding, _wrap

ROOT = Path(__file__).resolve().parents[2]


def _chain(first: bool, residual: bool) -> Chain:
    """requantize (mult 37, shift 2+6, to [-128, 127]), then ``table[x, o]`` (``first``) or
    ``table[o, x]`` with ``o`` a tensor operand, then (``residual``) a residual add of a second
    tensor operand and a clip."""
    stages = [requant_stage(37, 2, 6, -128, 127), lut2_stage(0, 1, first)]
    ops = [ChainOperand("tab", TABLE), ChainOperand("other", TENSOR)]
    if residual:
        stages += [add_stage(1, 2), requant_stage(1, 0, 1, -128, 127)]
        ops.append(scaled_operand("res", 1))
    return Chain(tuple(stages), tuple(ops))


def _reference(acc: np.ndarray, bias: np.ndarray, table: np.ndarray, other: np.ndarray,
               res: np.ndarray | None, first: bool) -> np.ndarray:
    """``_chain``'s stages in numpy on ``acc + bias`` (M, N)."""
    x = _wrap(acc.astype(np.int64) + bias)
    x = np.clip(_rounding(_wrap(x * 37), 2, 6), -128, 127)
    o = other.astype(np.int64)
    i, j = (x, o) if first else (o, x)
    x = table[i + 128, j + 128].astype(np.int64)
    if res is not None:
        x = np.clip(_rounding(_wrap(x + res.astype(np.int64)), 0, 1), -128, 127)
    return x.astype(np.int8)


def _table(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (256, 256), dtype=np.int8)


@pytest.mark.parametrize("first,residual,m,n,k", [(True, False, 40, 48, 72),
                                                   (False, True, 16, 24, 33),
                                                   (True, True, 70, 20, 16)])
def test_the_gemm_epilogue_looks_the_table_up(first: bool, residual: bool, m: int, n: int,
                                              k: int, nvcc_check: Callable) -> None:
    chain = _chain(first, residual)
    kb = MmaKnobs(32, 16, 0, 2, 1, 2)
    func = mma_gemm(MatmulSpec(m, n, k), "int8", BIAS_ONLY, kb, chain=chain)
    names = ["X", "W", "bias", "tab", "other", *(["res"] if residual else []), "Y"]
    assert [b.name for b in func.params] == names
    rng = np.random.default_rng(m + n + k)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-4096, 4096, n, dtype=np.int32)
    table, other = _table(k), rng.integers(-128, 128, (m, n), dtype=np.int8)
    res = rng.integers(-128, 128, (m, n), dtype=np.int8) if residual else None
    y = np.zeros((m, n), np.int8)
    Emulator(func).run(x, w, bias, table, other, *([res] if res is not None else []), y)
    acc = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.array_equal(y, _reference(acc, bias, table, other, res, first))
    nvcc_check([render_cuda(func).source])


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_the_convolution_epilogue_looks_the_table_up(layout: str,
                                                     nvcc_check: Callable) -> None:
    spec = Conv2dSpec(1, 16, 6, 6, 32, 3, 3, 1, 1)
    chain = _chain(True, True)
    func = mma_conv2d(spec, "int8", BIAS_ONLY, layout=layout, chain=chain)
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1, 16, 6, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-4096, 4096, 32, dtype=np.int32)
    oshape = (1, 32, 6, 6)
    other = rng.integers(-128, 128, oshape, dtype=np.int8)
    res = rng.integers(-128, 128, oshape, dtype=np.int8)
    table = _table(6)
    flat = lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1).reshape(-1, 32))  # noqa: E731
    want = _reference(flat(_acc(x, w, spec)), bias, table, flat(other), flat(res), True)
    if layout == "NHWC":
        y = np.zeros(want.shape, np.int8)
        Emulator(func).run(_nhwc(x), ohwi_weight(w), bias, table, flat(other), flat(res), y)
        got = y
    else:
        y4 = np.zeros(oshape, np.int8)
        Emulator(func).run(x, ohwi_weight(w), bias, table, other, res, y4)
        got = flat(y4)
    assert np.array_equal(got, want)
    nvcc_check([render_cuda(func).source])


def test_a_window_kernel_looks_the_table_up_on_its_own_value(nvcc_check: Callable) -> None:
    """An element-wise kernel whose chain is ``table[x, x]`` (both operands the running
    value: no tensor operand)."""
    shape = (1, 4, 5, 7)
    chain = Chain((lut2_stage(0, None),), (ChainOperand("tab", TABLE),))
    func = lower_for_gpu(window_func(WindowSpec("ewise", *shape), chain))
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    table = _table(3)
    y = np.zeros(shape, np.int8)
    Emulator(func).run(x, table, y)
    assert np.array_equal(y, table[x.astype(np.int64) + 128, x.astype(np.int64) + 128])
    nvcc_check([render_cuda(func).source])


def test_the_accelerator_refuses_a_table_by_name() -> None:
    hw = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
    with pytest.raises(CompileError, match="chain operand tab is a table; no accelerator"):
        chain_cost(_chain(True, False), hw)


def test_a_table_operand_takes_no_prep() -> None:
    with pytest.raises(CompileError, match="only a 'tensor' operand has a prep"):
        ChainOperand("tab", TABLE, lambda v: v)



@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_the_convolution_epilogue_adds_a_per_position_bias(layout: str,
                                                           nvcc_check: Callable) -> None:
    """``x + p[position]`` (an int32 ``POSITION`` operand shaped like the output), then the
    requantize: the GPU side of the zero-point padding fold."""
    spec = Conv2dSpec(1, 16, 5, 5, 16, 3, 3, 2, 1)
    chain = Chain((bias_stage(0), requant_stage(37, 2, 6, -128, 127)),
                  (ChainOperand("pos", POSITION),))
    func = mma_conv2d(spec, "int8", BIAS_ONLY, layout=layout, chain=chain)
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (1, 16, 5, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-4096, 4096, 16, dtype=np.int32)
    oshape = (1, 16, spec.oh, spec.ow)
    pos = rng.integers(-(1 << 20), 1 << 20, oshape, dtype=np.int32)
    flat = lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1).reshape(-1, 16))  # noqa: E731
    acc = _wrap(flat(_acc(x, w, spec)).astype(np.int64) + bias + flat(pos))
    want = np.clip(_rounding(_wrap(acc * 37), 2, 6), -128, 127).astype(np.int8)
    if layout == "NHWC":
        y = np.zeros(want.shape, np.int8)
        Emulator(func).run(_nhwc(x), ohwi_weight(w), bias, flat(pos), y)
        got = y
    else:
        y4 = np.zeros(oshape, np.int8)
        Emulator(func).run(x, ohwi_weight(w), bias, pos, y4)
        got = flat(y4)
    assert np.array_equal(got, want)
    nvcc_check([render_cuda(func).source])
