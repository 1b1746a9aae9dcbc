"""Window operators on the accelerator (ops.window): max-pool, sum-pool and element-wise
kernels with fused chains, bit-exact against numpy on random shapes; the machine bound is a
true lower bound; tiles write the exact packed layout."""

from __future__ import annotations

import numpy as np
import pytest
from _vta_helpers import hw
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.ops import packing
from vta.compiler.accel.ops.window_packed import compile_window, window_bound
from vta.compiler.ops.chain import (
    Chain,
    add_stage,
    clip_stage,
    requant_stage,
    round_clip_stage,
    scaled_operand,
)
from vta.compiler.ops.window import WindowSpec
from vta.errors import ShapeError
from vta.graph import interp
from vta.sim import simulate

EYE = np.eye(16, dtype=np.int8).reshape(1, 16, 16)


def _run(spec: WindowSpec, chain: Chain | None, x: np.ndarray,
         operands: dict[str, np.ndarray] | None = None, config: str = "pynq"
         ) -> tuple[np.ndarray, int]:
    h = hw(config)
    c = compile_window(spec, h, chain)
    assert c.out_shape[2:4] == (spec.oh, spec.ow)  # exact: no padded rows or columns
    ins = {"data": packing.to_entries(packing.pack_data(x, 1, 16, c.in_shape)), "eye": EYE}
    for k, v in (operands or {}).items():
        ins[k] = packing.to_entries(packing.pack_data(v, 1, 16, c.out_shape))
    sim = simulate(c.program, h, ins)
    out = np.asarray(sim.outputs["res"]).reshape(c.out_shape)
    assert sim.stats.cycles >= window_bound(spec, h, chain)["machine_cycles"]
    return packing.unpack_result(out, spec.n, spec.c, spec.oh, spec.ow), sim.stats.cycles


def _max_pool(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-128)
    oh, ow = (x.shape[2] + 2 * p - k) // s + 1, (x.shape[3] + 2 * p - k) // s + 1
    out = np.full((*x.shape[:2], oh, ow), -128, np.int8)
    for r in range(k):
        for q in range(k):
            out = np.maximum(out, xp[:, :, r: r + s * (oh - 1) + 1: s, q: q + s * (ow - 1) + 1: s])
    return out


@settings(max_examples=6)
@given(st.sampled_from([16, 32]), st.integers(3, 12), st.integers(2, 3), st.integers(1, 2),
       st.integers(0, 1), st.integers(0, 2 ** 32 - 1))
def test_max_pool(c: int, size: int, k: int, s: int, p: int, seed: int) -> None:
    if size + 2 * p < k or p >= k:
        return
    lo = 0 if p else -128  # a padded max-pool runs here only on non-negative inputs
    x = np.random.default_rng(seed).integers(lo, 128, (1, c, size, size), dtype=np.int8)
    got, _ = _run(WindowSpec("max", 1, c, size, size, k, s, p), None, x)
    assert np.array_equal(got, _max_pool(x, k, s, p))


@settings(max_examples=4)
@given(st.sampled_from([16, 48]), st.integers(1, 7), st.integers(0, 2 ** 32 - 1))
def test_global_sum_pool_with_its_requantization(c: int, size: int, seed: int) -> None:
    x = np.random.default_rng(seed).integers(-128, 128, (1, c, size, size), dtype=np.int8)
    for mult, config in ((777, "pynq_mul"), (1, "pynq")):  # a multiplier needs ALU MUL
        chain = Chain((requant_stage(mult, 1, 15, -128, 127),))  # a rounding shift by 16
        got, _ = _run(WindowSpec("sum", 1, c, size, size, size), chain, x, config=config)
        total = interp.wrap32(x.astype(np.int64).sum(axis=(2, 3)))
        want = np.clip(interp.scale_round(total, mult, 16), -128, 127).astype(np.int8)
        assert np.array_equal(got.reshape(1, c), want)


@settings(max_examples=4)
@given(st.sampled_from([16, 32]), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 30000), st.integers(1, 30000), st.integers(0, 2 ** 32 - 1))
def test_elementwise_add_relu(c: int, h: int, w: int, ma: int, mb: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (1, c, h, w), dtype=np.int8)
    b = rng.integers(-128, 128, (1, c, h, w), dtype=np.int8)
    # any multipliers on pynq_mul; powers of two (left shifts) on VTA's pynq
    for xa, xb, config in ((ma, mb, "pynq_mul"), (1 << ma % 15, 1 << mb % 15, "pynq")):
        chain = Chain((add_stage(xa, 0), round_clip_stage(0, 15, 0, 127)),
                      (scaled_operand("opnd0", xb),))
        got, _ = _run(WindowSpec("ewise", 1, c, h, w), chain, a, {"opnd0": b}, config=config)
        t = interp.wrap32(interp.wrap32(a.astype(np.int64) * xa).astype(np.int64)
                          + interp.wrap32(b.astype(np.int64) * xb))
        want = np.clip(interp.rounding_shift(t, 15), 0, 127).astype(np.int8)
        assert np.array_equal(got, want)


def test_relu_kernel_and_errors() -> None:
    x = np.random.default_rng(0).integers(-128, 128, (1, 16, 5, 5), dtype=np.int8)
    got, _ = _run(WindowSpec("ewise", 1, 16, 5, 5), Chain((clip_stage(0, 127),)), x)
    assert np.array_equal(got, np.maximum(x, 0))
    with pytest.raises(ShapeError, match="only max-pooling pads"):
        WindowSpec("sum", 1, 16, 7, 7, 3, 1, 1)
    with pytest.raises(ShapeError, match="kind must be one of max, sum, ewise"):
        WindowSpec("avg", 1, 16, 7, 7)
    with pytest.raises(ShapeError, match="does not fit the 2x2 input"):
        WindowSpec("max", 1, 16, 2, 2, 3)
