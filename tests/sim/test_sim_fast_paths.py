"""The machine's narrow-dtype shortcuts give the same bits as the definitions they shortcut:
``alu_shortcut`` against each built-in ALU function's semantics followed by the wrap to the
acc dtype, and ``add_wrapped`` against ``apply_sums``, on every acc dtype a config allows,
full-range values, every immediate width and shift amount (left shifts included)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import vta.testing as vt
from vta.config import HwConfig
from vta.isa import Alu, AluOp
from vta.isa.builtins import ALU
from vta.sim.kernels import Sram, add_wrapped, alu_shortcut, apply_sums

_ACC = st.sampled_from(["int16", "int32"])


def _hw(acc: str, shift_bits: int = 5) -> HwConfig:
    acc_bytes = 64 * 4 * np.dtype(acc).itemsize  # as many acc entries as out (64 of 4 lanes)
    return vt.small_hw(**{"gemm.acc_dtype": acc, "scratchpad.acc": acc_bytes,
                          "alu.shift_bits": shift_bits,
                          "alu.ops": ["min", "max", "add", "shr", "mul"], "stock": False})


def _values(draw: st.DrawFn, dtype: np.dtype, n: int) -> np.ndarray:
    info = np.iinfo(dtype)
    edge = st.sampled_from([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max])
    return np.array(draw(st.lists(st.integers(info.min, info.max) | edge, min_size=n,
                                  max_size=n)), dtype=dtype).reshape(-1, 1)


@settings(max_examples=400, deadline=None)
@given(st.data(), _ACC, st.sampled_from(list(AluOp)), st.booleans(), st.integers(1, 12),
       st.integers(2, 8))
def test_alu_shortcut_matches_the_definition(data: st.DataObject, acc: str, op: AluOp,
                                                 use_imm: bool, n: int, shift_bits: int
                                                 ) -> None:
    hw = _hw(acc, shift_bits)
    dt = np.dtype(acc)
    dst = _values(data.draw, dt, n)
    src = None if use_imm else _values(data.draw, dt, n)
    imm = data.draw(st.integers(-(1 << 15), (1 << 15) - 1) | st.integers(-40, 40)) \
        if use_imm else 0
    insn = Alu(op, False, 0, 1, 1, 1, 0, 0, 0, 0, use_imm, imm)
    fn = alu_shortcut(insn, dt, hw)
    got = None if fn is None else fn(dst, src, None)
    d = ALU[op]
    operands = {} if src is None else {"src": src.astype(np.int64)}
    want = d.update(insn, dst.astype(np.int64), operands, hw).astype(dt)
    if got is None:  # declined: only where the shortcut would not be exact
        info = np.iinfo(dt)
        assert (op is AluOp.SHR and not use_imm) or \
            (op in (AluOp.MIN, AluOp.MAX) and use_imm and not info.min <= imm <= info.max)
        return
    assert got.dtype == dt
    np.testing.assert_array_equal(got, want)
    into = dst.copy()  # computed into the destination's own entries (a view of acc)
    fn(into, src, into)
    np.testing.assert_array_equal(into, want)


@settings(max_examples=200, deadline=None)
@given(st.data(), _ACC, st.integers(1, 10))
def test_add_wrapped_matches_apply_sums(data: st.DataObject, acc: str, n: int) -> None:
    hw = _hw(acc)
    a, b = Sram(hw), Sram(hw)
    dt = np.dtype(acc)
    lanes = a.data["acc"].shape[1:]
    start = _values(data.draw, dt, n * int(np.prod(lanes))).reshape(n, *lanes)
    sums = np.array(data.draw(st.lists(st.integers(-(1 << 40), 1 << 40),
                                       min_size=start.size, max_size=start.size)),
                    dtype=np.int64).reshape(start.shape)
    for s in (a, b):
        s.data["acc"][:n] = start
    apply_sums(a, slice(0, n), sums)
    add_wrapped(b, slice(0, n), sums.astype(dt))
    for kind in ("acc", "out"):
        np.testing.assert_array_equal(a.data[kind], b.data[kind])
