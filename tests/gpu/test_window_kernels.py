"""The GPU path's window kernels (vta.gpu.window): max-pool (padding never wins, negative
inputs included), sum-pool with its requantization, element-wise kernels with fused chains;
the SIMT emulator against numpy, every rendered kernel compiled to PTX."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vta.compiler.ops.chain import (
    Chain,
    add_stage,
    requant_stage,
    round_clip_stage,
    scaled_operand,
)
from vta.compiler.ops.window import WindowSpec
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.window import window_func
from vta.graph import interp


def _run(spec: WindowSpec, chain: Chain | None, *arrays: np.ndarray) -> tuple[np.ndarray, str]:
    f = lower_for_gpu(window_func(spec, chain))
    out = np.zeros((spec.n, spec.c, spec.oh, spec.ow), np.int8)
    Emulator(f).run(*arrays, out)
    return out, render_cuda(f).source


@settings(max_examples=8)
@given(st.integers(1, 2), st.integers(1, 20), st.integers(2, 9), st.integers(1, 3),
       st.integers(1, 2), st.integers(0, 2), st.integers(0, 2 ** 32 - 1))
@example(2, 13, 3, 2, 1, 1, 0)  # bound inference met a rational piece isl cannot bound
def test_max_pool_any_sign(n: int, c: int, size: int, k: int, s: int, p: int,
                           seed: int) -> None:
    if p >= k or size + 2 * p < k:
        return
    x = np.random.default_rng(seed).integers(-128, 128, (n, c, size, size), dtype=np.int8)
    got, _ = _run(WindowSpec("max", n, c, size, size, k, s, p), None, x)
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-128)
    oh = (size + 2 * p - k) // s + 1
    want = np.full((n, c, oh, oh), -128, np.int8)
    for r in range(k):
        for q in range(k):
            win = xp[:, :, r: r + s * (oh - 1) + 1: s, q: q + s * (oh - 1) + 1: s]
            want = np.maximum(want, win)
    assert np.array_equal(got, want)


def test_sum_pool_and_elementwise_chains(nvcc_check: Callable[[Iterable[str]], None]) -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (2, 24, 5, 5), dtype=np.int8)
    got, src1 = _run(WindowSpec("sum", 2, 24, 5, 5, 5),
                     Chain((requant_stage(3001, 2, 15, -128, 127),)), x)
    total = interp.wrap32(x.astype(np.int64).sum(axis=(2, 3)))
    assert np.array_equal(got.reshape(2, 24), np.clip(interp.scale_round(total, 3001, 17),
                                                      -128, 127))
    b = rng.integers(-128, 128, x.shape, dtype=np.int8)
    chain = Chain((add_stage(12345, 0), round_clip_stage(0, 15, 0, 127)),
                  (scaled_operand("opnd0", 23456),))
    got, src2 = _run(WindowSpec("ewise", 2, 24, 5, 5), chain, x, b)
    t = interp.wrap32(interp.wrap32(x.astype(np.int64) * 12345).astype(np.int64)
                      + interp.wrap32(b.astype(np.int64) * 23456))
    assert np.array_equal(got, np.clip(interp.rounding_shift(t, 15), 0, 127))
    _, src3 = _run(WindowSpec("max", 1, 16, 8, 8, 3, 2, 1), None,
                   rng.integers(-128, 128, (1, 16, 8, 8), dtype=np.int8))
    nvcc_check([src1, src2, src3])
