"""Each instruction's meaning, against numpy computed by hand, on both simulators."""

from __future__ import annotations

import numpy as np
import pytest
from _sim_helpers import run_both
from strategies import small_hw

from vta.isa import Alu, AluOp, Deps, Finish, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import run_reference, simulate

PUSH, POP = Deps(push_next=True), Deps(pop_prev=True)



@pytest.fixture(scope="module")
def wide():
    """Out entries as wide as acc, so a STORE shows full accumulator values; ALU MUL enabled
    (vta's extension) so every ALU function is tested."""
    hw = small_hw()
    return hw.with_changes(**{"gemm.out_dtype": "int32", "scratchpad.out": hw.scratchpad.acc,
                              "alu.ops": ["min", "max", "add", "shr", "mul"]})


def _acc_program(hw, n_in, body, n_out, load=None):
    """LOAD.UOP, LOAD.ACC of X, ``body`` (compute instructions), STORE n_out entries to Y."""
    b = ProgramBuilder(hw)
    x = b.alloc("X", "acc", n_in)
    y = b.alloc("Y", "out", n_out)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(0, 0, 0), Uop(0, 8, 0)])
    b.emit(Load(MemType.UOP, 0, u.base, 1, 2, 2))
    b.emit(load or Load(MemType.ACC, 0, x.base, 1, n_in, n_in))
    b.extend(body)
    b.emit(Store(MemType.OUT, 0, y.base, 1, n_out, n_out, deps=POP))
    b.emit(Finish())
    return b.build()


def test_padded_strided_load(wide):
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, (20, 1, 4), dtype=np.int32)
    # 3 rows of 2 entries, rows 5 apart, from X+1; pads y0=1 y1=0 x0=2 x1=1 -> 4 x 5 image
    load = Load(MemType.ACC, 0, 1, 3, 2, 5, 1, 0, 2, 1)
    body = [Alu(AluOp.ADD, False, 0, 1, 20, 1, 1, 0, 1, 0, True, 0, deps=PUSH)]  # acc -> out
    p = _acc_program(wide, 20, body, 20, load=load)
    out = run_both(p, wide, {"X": x})["Y"]
    rows = np.stack([x[1 + 5 * r: 3 + 5 * r] for r in range(3)])  # (3, 2, 1, 4)
    expect = np.pad(rows, ((1, 0), (2, 1), (0, 0), (0, 0))).reshape(20, 1, 4)
    np.testing.assert_array_equal(out, expect)


def test_gemm_accumulates_and_resets(pynq):
    rng = np.random.default_rng(2)
    b = ProgramBuilder(pynq)
    a_al, w_al = b.alloc("A", "inp", 3), b.alloc("W", "wgt", 2)
    c_al, u_al = b.alloc("C", "out", 6), b.alloc("U", "uop", 0)
    # acc[o*2 + j] = sum over the two weights w of inp[o] . wgt[w]^T ... then one row reset
    b.add_uops("U", [Uop(0, 0, 0), Uop(0, 0, 1), Uop(1, 0, 1)])
    b.extend([
        Load(MemType.UOP, 0, u_al.base, 1, 3, 3),
        Load(MemType.INP, 0, a_al.base, 1, 3, 3),
        Load(MemType.WGT, 0, w_al.base, 1, 2, 2, deps=PUSH),
        Gemm(True, 0, 1, 6, 1, 1, 0, 0, 0, 0, 0, deps=Deps(pop_prev=True)),
        Gemm(False, 0, 3, 3, 1, 2, 0, 1, 0, 0, 0),
        Gemm(True, 0, 1, 1, 2, 0, 1, 0, 0, 0, 0, deps=PUSH),  # reset acc 0 and 1 again
        Store(MemType.OUT, 0, c_al.base, 1, 6, 6, deps=POP),
        Finish(),
    ])
    inp = rng.integers(-128, 128, (3, 1, 16), dtype=np.int8)
    wgt = rng.integers(-128, 128, (2, 16, 16), dtype=np.int8)
    out = run_both(b.build(), pynq, {"A": inp, "W": wgt})["C"]
    i64, w64 = inp.astype(np.int64)[:, 0], wgt.astype(np.int64)
    acc = np.zeros((6, 16), dtype=np.int64)
    for o in range(3):
        acc[2 * o] += i64[o] @ w64[0].T + i64[o] @ w64[1].T
        acc[2 * o + 1] += i64[o] @ w64[1].T
    # the last GEMM resets acc 0 and 1, and (vta.cc gemm() lines 302-306) writes to out the low
    # bits of what it would have accumulated: acc + inp[0] . wgt[0]^T
    acc[:2] += i64[0] @ w64[0].T
    np.testing.assert_array_equal(out[:, 0], acc.astype(np.int32).astype(np.int8))


def _alu_expect(op, x, y):
    x, y = x.astype(np.int64), np.asarray(y, dtype=np.int64)
    if op == AluOp.MIN:
        r = np.minimum(x, y)
    elif op == AluOp.MAX:
        r = np.maximum(x, y)
    elif op == AluOp.ADD:
        r = x + y
    elif op == AluOp.MUL:
        r = x * y
    else:  # SHR by the low 5 bits of the operand, signed (vta.cc alu() line 376): floor
        # division by 2**s, or multiplication by 2**-s modulo 2**32
        y = (np.broadcast_to(y, x.shape) + 16) % 32 - 16
        r = np.array([xi >> min(s, 63) if s >= 0 else (int(xi) << min(-s, 40)) for xi, s in
                      zip(x.ravel().tolist(), y.ravel().tolist(), strict=True)], dtype=object)
        r = np.array([int(v) % 2**32 for v in r], dtype=np.uint64).astype(np.int64).reshape(x.shape)
    return (r % 2**32).astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("use_imm", [True, False])
@pytest.mark.parametrize("op", list(AluOp))
def test_alu_op(wide, op, use_imm):
    rng = np.random.default_rng(int(op) * 2 + use_imm)
    x = rng.integers(-2**31, 2**31, (16, 1, 4), dtype=np.int64).astype(np.int32)
    if op == AluOp.SHR:
        x[8:] = rng.integers(-40, 41, (8, 1, 4))  # shift amounts, beyond +-31 included
    imm = {AluOp.SHR: -3, AluOp.MUL: 30001}.get(op, -12345)
    # dst = i (0..7), src = i + 8
    alu = Alu(op, False, 1, 2, 8, 1, 1, 0, 1, 0, use_imm, imm if use_imm else 0, deps=PUSH)
    out = run_both(_acc_program(wide, 16, [alu], 16), wide, {"X": x})["Y"]
    expect = _alu_expect(op, x[:8], imm if use_imm else x[8:])
    np.testing.assert_array_equal(out[:8], expect)
    np.testing.assert_array_equal(out[8:], 0)  # never written by the ALU: out still zero


@pytest.mark.parametrize("amount,value,expect", [
    (0, -7, -7), (1, -7, -4), (31, -7, -1), (32, -7, -1), (100, 5, 0), (-1, 3, 6),
    (-31, 1, -2**31), (-32, 1, 0), (-100, -1, 0), (-4, 0x12345678, 0x23456780),
])
def test_shr_range_with_full_amounts(wide, amount, value, expect):
    """``alu.shift_bits: 32``: SHR reads its whole 32-bit operand as the amount (vta.cc reads
    5 bits: tests/sim/test_sim_edges.py), so any amount >= 31 gives 0 or -1 and any <= -32
    gives 0."""
    hw = wide.with_changes(**{"alu.shift_bits": 32})
    x = np.zeros((16, 1, 4), dtype=np.int32)
    x[0], x[8] = value, amount
    alu = Alu(AluOp.SHR, False, 1, 2, 1, 1, 0, 0, 0, 0, False, 0, deps=PUSH)
    out = run_both(_acc_program(hw, 16, [alu], 1), hw, {"X": x})["Y"]
    assert out[0, 0, 0] == expect


def test_mul_wraps_and_out_narrows(pynq):
    """int32 wraparound in acc, then out keeps the low 8 bits (two's complement); on pynq with
    ALU MUL (vta's extension, the pynq_mul variant)."""
    pynq = pynq.with_mul()
    x = np.zeros((16, 1, 16), dtype=np.int32)
    x[0, 0, :3] = [2**30, 0x1234567, -0x181]
    alu = Alu(AluOp.MUL, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 4, deps=PUSH)
    out = run_both(_acc_program(pynq, 16, [alu], 1), pynq, {"X": x})["Y"]
    # 2**32 wraps to 0; 0x1234567 * 4 = 0x48D159C -> low byte 0x9C = -100; -0x604 -> 0xFC = -4
    assert out[0, 0, :3].tolist() == [0, -100, -4]


def test_alu_loop_order(wide):
    """A later micro-op sees an earlier one's write: acc[i] += acc[i-1] is a prefix sum."""
    x = np.arange(1, 17, dtype=np.int32).repeat(4).reshape(16, 1, 4)
    b_alu = Alu(AluOp.ADD, False, 0, 1, 7, 1, 1, 0, 1, 0, False, 0, deps=PUSH)
    p = _acc_program(wide, 16, [], 8)
    b = ProgramBuilder(wide)
    for a in p.allocations:
        b.alloc(a.name, a.kind, a.elems if a.kind != "uop" else 0)
    b.add_uops("U", [Uop(1, 0, 0)])  # dst 1 + o, src 0 + o
    b.extend([Load(MemType.UOP, 0, p.allocation("U").base, 1, 1, 1),
              Load(MemType.ACC, 0, p.allocation("X").base, 1, 16, 16), b_alu,
              Store(MemType.OUT, 0, p.allocation("Y").base, 1, 8, 8, deps=POP), Finish()])
    out = run_both(b.build(), wide, {"X": x})["Y"]
    assert out[1:8, 0, 0].tolist() == np.cumsum(np.arange(1, 9))[1:].tolist()
    # the hazard counter sees each op reading the entry the previous op is still writing
    hazards = simulate(b.build(), wide, {"X": x}).stats.acc_hazards
    assert hazards is not None and hazards > 0


def test_instructions_after_finish_are_ignored(pynq):
    b = ProgramBuilder(pynq)
    a = b.alloc("A", "acc", 1)
    b.extend([Finish(), Load(MemType.ACC, 5000, a.base, 1, 1, 1)])  # would be out of range
    r = simulate(b.build(), pynq)
    assert r.stats.insn_counts == {"FINISH": 1}
    assert run_reference(b.build(), pynq)["A"].shape == (1, 1, 16)
