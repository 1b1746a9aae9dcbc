"""The ISA's edges as VTA's HLS design computes them (apache/tvm-vta@d4a15f6
hardware/xilinx/src/vta.cc, cited by line below), on both simulators, against bytes derived by
hand from those lines; and the config fields that offer the fixes (``alu.shift_bits``,
``alu.reset``, ``gemm.reset_out``) both ways.

Each program is assembly text run by the reference interpreter and the cycle-level machine,
which must agree on every allocation (``run_both``) before the expected bytes are checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from _sim_helpers import run_both
from hypothesis import given
from hypothesis import strategies as st

import vta.sim.machine
from vta.config import HwConfig
from vta.errors import SimError
from vta.isa import Alu, AluOp, Finish, Program, assemble
from vta.sim import run_reference, simulate


@pytest.fixture(scope="module")
def wide(pynq: HwConfig) -> HwConfig:
    """pynq with int32 out entries, so that a STORE shows whole accumulator values (the ALU's
    semantics are pynq's: 5-bit shift amounts, the reset flag ignored)."""
    return pynq.with_changes(**{"gemm.out_dtype": "int32", "scratchpad.out": pynq.scratchpad.acc})


# ------------------------------------------------------------------------------ SHR

X = 0x12345678
#: (amount written, amount vta.cc shifts by, 0x12345678 shifted, -7 shifted)
SHR_CASES = [
    (3, 3, 0x02468ACF, -1),
    (15, 15, 0x00002468, -1),
    (16, -16, 0x56780000, -7 * 2**16),
    (24, -8, 0x34567800, -7 * 2**8),
    (31, -1, 0x2468ACF0, -14),
    (32, 0, 0x12345678, -7),
    (-1, -1, 0x2468ACF0, -14),
    (-16, -16, 0x56780000, -7 * 2**16),
    (-17, 15, 0x00002468, -1),
    (100, 4, 0x01234567, -1),
]


def _acc_alu_program(n: int, body: str) -> str:
    """Micro-ops (k, k + n, 0) for k < n, LOAD.ACC 2n entries of X, ``body``, STORE n entries
    of out to Y."""
    uops = "\n".join(f".uop U {k} {k + n} 0" for k in range(n))
    return f"""
.alloc X acc {2 * n}
.alloc Y out {n}
.alloc U uop {n}
{uops}
LOAD.UOP sram=0 dram=U+0 y=1 x={n} stride={n}
LOAD.ACC sram=0 dram=X+0 y=1 x={2 * n} stride={2 * n}
{body}
STORE.OUT sram=0 dram=Y+0 y=1 x={n} stride={n} | pop_prev
FINISH
"""


def test_shr_immediate_is_five_signed_bits(wide: HwConfig) -> None:
    """vta.cc line 375: ``src_1 = use_imm ? (acc_T) imm : src``; line 376: ``aluop_shr_arg_T
    shft_by = src_1.range(VTA_SHR_ARG_BIT_WIDTH - 1, 0)``, where ``aluop_shr_arg_T`` is
    ``ap_int<VTA_SHR_ARG_BIT_WIDTH>`` (vta.h:111) and ``VTA_SHR_ARG_BIT_WIDTH`` is
    ``VTA_LOG_ACC_WIDTH`` = 5 (hw_spec_const.h:156): the low 5 bits, signed, -16..15. Line
    393: ``shr_val = src_0 >> shft_by``, an ``ap_int`` shift, which shifts left by ``-shft_by``
    for a negative amount, in the 32-bit ``acc_T`` (wrapping). By hand, for 0x12345678 and -7:
    3 -> 0x02468ACF, -1; 15 -> 0x2468, -1; 16 = 0b10000 -> -16: 0x56780000 (the low 16 bits
    moved up), -7 * 2**16; 24 = 0b11000 -> -8: 0x34567800, -1792; 31 -> -1: 0x2468ACF0, -14;
    32 -> 0: unchanged; -17 = ...101111 -> 0b01111 = 15; 100 = 0b1100100 -> 0b00100 = 4:
    0x01234567, -1."""
    n = len(SHR_CASES)
    x = np.zeros((2 * n, 1, 16), dtype=np.int32)
    x[:n, 0, 0], x[:n, 0, 1] = X, -7
    body = "\n".join(f"ALU.SHR uop={k}:{k + 1} iter=1,1 dst=0,0 src=0,0 imm={a}"
                     + (" | push_next" if k == n - 1 else "")
                     for k, (a, *_) in enumerate(SHR_CASES))
    out = run_both(_acc_alu_program(n, body), wide, {"X": x})["Y"]
    assert out[:, 0, 0].tolist() == [c[2] for c in SHR_CASES]
    assert out[:, 0, 1].tolist() == [c[3] for c in SHR_CASES]
    assert not out[:, 0, 2:].any()


def test_shr_register_amount_is_five_signed_bits(wide: HwConfig) -> None:
    """The same bits of a register operand (vta.cc line 375: ``src_1 = src_tensor[i][b]``,
    then line 376): lane ``j`` of entry 0 (0x12345678) shifted by lane ``j`` of entry 1. Beyond
    the table of ``test_shr_immediate_is_five_signed_bits``: 0 -> unchanged; 1 -> 0x091A2B3C;
    5 -> 0x0091A2B3; 20 = 0b10100 -> -12: 0x45678000; -20 = ...01100 -> 12: 0x00012345;
    47 = 0b101111 -> 15: 0x2468."""
    extra = [(0, 0x12345678), (1, 0x091A2B3C), (5, 0x0091A2B3), (20, 0x45678000),
             (-20, 0x00012345), (47, 0x2468)]
    amounts = [c[0] for c in SHR_CASES] + [a for a, _ in extra]
    expect = [c[2] for c in SHR_CASES] + [v for _, v in extra]
    x = np.zeros((2, 1, 16), dtype=np.int32)
    x[0], x[1, 0] = X, amounts
    out = run_both(_acc_alu_program(1, "ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0 | push_next"),
                   wide, {"X": x})["Y"]
    assert out[0, 0].tolist() == expect


def _shift_model(x: np.ndarray, amount: np.ndarray, bits: int) -> np.ndarray:
    """The rule, written independently: the low ``bits`` bits of the amount, signed; right
    (floor) for >= 0, left modulo 2**32 for < 0."""
    s = ((amount.astype(np.int64) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
    out = []
    for xi, si in zip(x.astype(np.int64).ravel().tolist(), s.ravel().tolist(), strict=True):
        v = xi >> si if si >= 0 else xi << -si
        out.append((v + 2**31) % 2**32 - 2**31)
    return np.array(out, dtype=np.int64).reshape(x.shape)


@given(st.sampled_from([None, 6, 32]), st.booleans(),
       st.lists(st.integers(-2**31, 2**31 - 1), min_size=16, max_size=16),
       st.lists(st.integers(-2**15, 2**15 - 1), min_size=16, max_size=16))
def test_shr_matches_the_signed_bits_rule(shift_bits: int | None, use_imm: bool,
                                          values: list[int], amounts: list[int]) -> None:
    """Random values and amounts (the immediate: the first amount; else one per lane):
    reference == machine == ``_shift_model`` with ``alu.shift_bits`` bits (None: pynq's 5)."""
    pynq = HwConfig.load("pynq")
    changes: dict[str, object] = {"gemm.out_dtype": "int32", "scratchpad.out": 131072}
    if shift_bits is not None:
        changes["alu.shift_bits"] = shift_bits
    hw = pynq.with_changes(**changes)
    x = np.zeros((2, 1, 16), dtype=np.int32)
    x[0, 0], x[1, 0] = values, amounts
    imm = f" imm={amounts[0]}" if use_imm else ""
    out = run_both(_acc_alu_program(1, f"ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0{imm}"
                                       " | push_next"), hw, {"X": x})["Y"]
    amount = np.full(16, amounts[0]) if use_imm else np.array(amounts)
    np.testing.assert_array_equal(out[0, 0], _shift_model(x[0, 0], amount, shift_bits or 5))


def test_shift_bits_variant_reads_more_bits(wide: HwConfig) -> None:
    """``alu.shift_bits: 6`` (amounts -32..31): 16 and 24 shift right, 32 = 0b100000 is -32
    (everything shifted out: 0), 100 = 0b1100100 -> 0b100100 = -28 (left 28: 0x80000000 from
    0x12345678, whose bit 3 lands on bit 31)."""
    hw = wide.with_changes(**{"alu.shift_bits": 6})
    cases = [(16, 0x1234), (24, 0x12), (32, 0), (100, -2**31)]
    x = np.zeros((2 * len(cases), 1, 16), dtype=np.int32)
    x[:len(cases), 0, 0] = X
    body = "\n".join(f"ALU.SHR uop={k}:{k + 1} iter=1,1 dst=0,0 src=0,0 imm={a}"
                     + (" | push_next" if k == len(cases) - 1 else "")
                     for k, (a, _) in enumerate(cases))
    out = run_both(_acc_alu_program(len(cases), body), hw, {"X": x})["Y"]
    assert out[:, 0, 0].tolist() == [v for _, v in cases]


# ------------------------------------------------------------------------------ ALU reset


ALU_RESET = _acc_alu_program(1, """ALU.ADD reset uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=5
ALU.ADD uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=1 | push_next""")


def test_alu_ignores_the_reset_flag(wide: HwConfig) -> None:
    """vta.cc's ``alu()`` (lines 327-413) never reads ``insn.reset_reg`` (``gemm()`` does, line
    304): ``ALU.ADD reset imm=5`` adds 5. Entry 0 holds 1..16: after it and ``ADD imm=1``,
    out holds 7..22."""
    x = np.zeros((2, 1, 16), dtype=np.int32)
    x[0, 0] = np.arange(1, 17)
    out = run_both(ALU_RESET, wide, {"X": x})["Y"]
    assert out[0, 0].tolist() == list(range(7, 23))


def test_alu_reset_variant_zeroes(wide: HwConfig) -> None:
    """``alu.reset: zero``: the reset zeroes the entry (nothing read), so ``ADD imm=1`` gives 1
    in every lane."""
    hw = wide.with_changes(**{"alu.reset": "zero"})
    x = np.zeros((2, 1, 16), dtype=np.int32)
    x[0, 0] = np.arange(1, 17)
    out = run_both(ALU_RESET, hw, {"X": x})["Y"]
    assert out[0, 0].tolist() == [1] * 16


# ------------------------------------------------------------------------------ LOAD


def _identity_gemm_inputs() -> dict[str, np.ndarray]:
    """inp entry 0 one-hot at lane 0; weight entry ``j``'s first column ``16 j + o``, so a
    GEMM of inp 0 with weight entry ``j`` gives ``16 j + o`` in lane ``o``."""
    a = np.zeros((1, 1, 16), dtype=np.int8)
    a[0, 0, 0] = 1
    w = np.zeros((6, 16, 16), dtype=np.int8)
    for j in range(6):
        w[j, :, 0] = 16 * j + np.arange(16)
    return {"A": a, "W": w}


def test_weight_load_ignores_pads(pynq: HwConfig) -> None:
    """vta.cc ``load()`` line 220 loads WGT with ``load_2d`` (lines 76-94): ``y_size`` rows of
    ``x_size`` entries, ``sram_idx += x_size``, no pad fields. ``y=2 x=2 stride=3
    pad=1,1,1,1`` from W+0 writes wgt 0..3 = W0, W1, W3, W4 (rows 0 and 3 of DRAM), and a
    padded LOAD of no rows writes nothing (wgt 4, 5 stay zero). A GEMM of the one-hot inp 0
    with wgt ``j`` into acc ``j`` gives lane o: 16 * (0, 1, 3, 4, -, -)[j] + o."""
    text = """
.alloc A inp 1
.alloc W wgt 6
.alloc Y out 6
.alloc U uop 6
""" + "".join(f".uop U {j} 0 {j}\n" for j in range(6)) + """
LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1
LOAD.WGT sram=0 dram=W+0 y=2 x=2 stride=3 pad=1,1,1,1
LOAD.WGT sram=4 dram=W+5 y=0 x=1 stride=1 pad=1,1,1,1 | push_next
LOAD.UOP sram=0 dram=U+0 y=1 x=6 stride=6 | pop_prev
GEMM uop=0:6 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=6 stride=6 | pop_prev
FINISH
"""
    out = run_both(text, pynq, _identity_gemm_inputs())["Y"]
    lanes = np.arange(16)
    expect = [16 * j + lanes for j in (0, 1, 3, 4)] + [0 * lanes, 0 * lanes]
    np.testing.assert_array_equal(out[:, 0], np.stack(expect))


def test_uop_load_copies_x_size_micro_ops(pynq: HwConfig) -> None:
    """vta.cc ``compute()`` lines 482-486: a LOAD of UOP is ``memcpy(&uop_mem[sram_base],
    &uops[dram_base], x_size * sizeof(uop_T))``: ``x_size`` micro-ops, whatever ``y_size``,
    ``x_stride`` and the pads say. V (dst 5, 6, 7) goes to uop 0..2; ``y=3 x=2 stride=2
    pad=1,1,1,1`` from U then overwrites uop 0, 1 with U0, U1 (dst 1, 2) and leaves uop 2 (V2,
    dst 7); ``y=0 x=2`` from U+2 still copies U2, U3 (dst 3, 4) to uop 3, 4. GEMMs over uop 0..4
    (inp one-hot, wgt 0's first column 0..15) write 0..15 to out 1, 2, 7, 3, 4; out 0, 5, 6 stay
    zero."""
    text = """
.alloc A inp 1
.alloc W wgt 6
.alloc Y out 8
.alloc U uop 4
.alloc V uop 3
.uop U 1 0 0
.uop U 2 0 0
.uop U 3 0 0
.uop U 4 0 0
.uop V 5 0 0
.uop V 6 0 0
.uop V 7 0 0
LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1
LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 | push_next
LOAD.UOP sram=0 dram=V+0 y=1 x=3 stride=3 | pop_prev
LOAD.UOP sram=0 dram=U+0 y=3 x=2 stride=2 pad=1,1,1,1
LOAD.UOP sram=3 dram=U+2 y=0 x=2 stride=2
GEMM uop=0:5 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=8 stride=8 | pop_prev
FINISH
"""
    out = run_both(text, pynq, _identity_gemm_inputs())["Y"][:, 0]
    written = [1, 2, 3, 4, 7]
    np.testing.assert_array_equal(out[written], np.tile(np.arange(16), (5, 1)))
    assert not out[[0, 5, 6]].any()


def test_loads_without_rows_write_their_pads(pynq: HwConfig) -> None:
    """vta.cc ``load_pad_2d`` (lines 47-73): ``reset_mem`` of ``y_offset_0 = x_width * y_pad_0``
    entries (line 61, ``x_width = x_pad_0 + x_size + x_pad_1``, lines 200-201), then per row
    ``x_pad_0`` zeros, the data, ``x_pad_1`` zeros (lines 64-70), then ``y_offset_1`` (line 72),
    whether or not there are rows. INP 0..5 = A0..A5 (lane i of A_j: 10 j + i - 50); ``y=0 x=2
    pad=1,0,0,0`` at 0 zeroes (0 + 2 + 0) x 1 = 2 entries (inp 0, 1); ``y=1 x=0 pad=0,0,1,0`` at
    4 zeroes x_pad_0 = 1 entry (inp 4). A GEMM of inp ``j`` with the identity weight into acc
    ``j`` gives A2, A3, A5 in out 2, 3, 5, zeros in 0, 1, 4. ACC the same (``compute()`` line
    489): X = 1..6 per entry, ``y=0 x=3 pad=0,1,0,0`` at 1 zeroes (0 + 3 + 0) x 1 = 3 entries
    (acc 1..3); ``ADD imm=0`` copies acc to out: 1, 0, 0, 0, 5, 6."""
    text = """
.alloc A inp 6
.alloc W wgt 1
.alloc X acc 6
.alloc Y out 6
.alloc Z out 6
.alloc U uop 6
""" + "".join(f".uop U {j} {j} 0\n" for j in range(6)) + """
LOAD.INP sram=0 dram=A+0 y=1 x=6 stride=6
LOAD.INP sram=0 dram=A+0 y=0 x=2 stride=2 pad=1,0,0,0
LOAD.INP sram=4 dram=A+0 y=1 x=0 stride=0 pad=0,0,1,0
LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 | push_next
LOAD.UOP sram=0 dram=U+0 y=1 x=6 stride=6 | pop_prev
GEMM uop=0:6 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=6 stride=6 | pop_prev push_prev
LOAD.ACC sram=0 dram=X+0 y=1 x=6 stride=6 | pop_next
LOAD.ACC sram=1 dram=X+0 y=0 x=3 stride=3 pad=0,1,0,0
ALU.ADD uop=0:6 iter=1,1 dst=0,0 src=0,0 imm=0 | push_next
STORE.OUT sram=0 dram=Z+0 y=1 x=6 stride=6 | pop_prev
FINISH
"""
    a = (10 * np.arange(6)[:, None] + np.arange(16)[None, :] - 50).astype(np.int8)
    x = np.repeat(np.arange(1, 7, dtype=np.int32), 16).reshape(6, 1, 16)
    inputs = {"A": a[:, None, :], "W": np.eye(16, dtype=np.int8)[None], "X": x}
    ref = run_both(text, pynq, inputs)
    expect = a.copy()
    expect[[0, 1, 4]] = 0
    np.testing.assert_array_equal(ref["Y"][:, 0], expect)
    assert ref["Z"][:, 0, 0].tolist() == [1, 0, 0, 0, 5, 6]


# ------------------------------------------------------------------------------ GEMM reset

GEMM_RESET = """
.alloc A inp 1
.alloc W wgt 1
.alloc X acc 2
.alloc Y out 2
.alloc Z out 2
.alloc U uop 2
.uop U 0 0 0
.uop U 1 0 0
LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1
LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 | push_next
LOAD.UOP sram=0 dram=U+0 y=1 x=2 stride=2 | pop_prev
LOAD.ACC sram=0 dram=X+0 y=1 x=2 stride=2
ALU.ADD uop=0:2 iter=1,1 dst=0,0 src=0,0 imm=0
GEMM reset uop=1:2 iter=1,1 dst=0,0 src=0,0 wgt=0,0
GEMM reset uop=0:1 iter=2,1 dst=0,0 src=0,0 wgt=0,0 | push_next
STORE.OUT sram=0 dram=Y+0 y=1 x=2 stride=2 | pop_prev push_prev
ALU.ADD uop=0:2 iter=1,1 dst=0,0 src=0,0 imm=0 | pop_next push_next
STORE.OUT sram=0 dram=Z+0 y=1 x=2 stride=2 | pop_prev
FINISH
"""


def _gemm_reset_inputs() -> dict[str, np.ndarray]:
    """A = (1, 2, 0, ...), weight row o = (o, 1, 0, ...): A . W[o] = o + 2. X0 lane o = 100 +
    o, X1 lane o = 120 + o."""
    a = np.zeros((1, 1, 16), dtype=np.int8)
    a[0, 0, :2] = 1, 2
    w = np.zeros((1, 16, 16), dtype=np.int8)
    w[0, :, 0], w[0, :, 1] = np.arange(16), 1
    x = np.stack([100 + np.arange(16), 120 + np.arange(16)]).astype(np.int32)
    return {"A": a, "W": w, "X": x[:, None, :]}


LANES = np.arange(16)


def test_gemm_reset_writes_the_sum_to_out(pynq: HwConfig) -> None:
    """vta.cc ``gemm()`` lines 291-306: ``accum = a_tensor`` (the accumulator), ``accum +=
    tmp`` (inp . wgt), then ``a_tensor = reset_reg ? 0 : accum`` but ``o_tensor =
    accum.range(VTA_OUT_WIDTH - 1, 0)`` whatever the reset: acc gets 0, out the low 8 bits of
    acc + inp . wgt. Entry 1, reset once: int8(120 + o + o + 2) = 122 + 2o, which wraps from o
    = 3 (128 -> -128; o = 15: 152 -> -104). Entry 0, reset twice in one instruction: the
    second execution reads the 0 the first wrote, so out = o + 2 (not 102 + 2o). A second
    STORE after ``ADD imm=0`` shows both accumulators 0."""
    ref = run_both(GEMM_RESET, pynq, _gemm_reset_inputs())
    expect = np.stack([LANES + 2, 122 + 2 * LANES]).astype(np.int32).astype(np.int8)
    np.testing.assert_array_equal(ref["Y"][:, 0], expect)
    assert expect[1, 3] == -128 and expect[1, 15] == -104
    assert not ref["Z"].any()


@pytest.mark.parametrize("reset_out", ["keep", "zero"])
def test_gemm_reset_out_variants(pynq: HwConfig, reset_out: str) -> None:
    """``gemm.reset_out``: ``keep`` (the Chisel design, TensorGemm.scala:217 ``out.valid :=
    acc_i.valid & ~valid_reset``) leaves out as the ``ADD imm=0`` before the resets wrote it,
    int8(X): 100 + o, and int8(120 + o) (wrapping from o = 8); ``zero`` writes 0. Either way
    the accumulators are 0."""
    hw = pynq.with_changes(**{"gemm.reset_out": reset_out})
    ref = run_both(GEMM_RESET, hw, _gemm_reset_inputs())
    before = np.stack([100 + LANES, 120 + LANES]).astype(np.int8)
    np.testing.assert_array_equal(ref["Y"][:, 0], before if reset_out == "keep" else 0 * before)
    assert not ref["Z"].any()


@given(st.sampled_from(["sum", "keep", "zero"]),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                min_size=1, max_size=6),
       st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_gemm_reset_matches_a_model(reset_out: str, uops: list[tuple[int, int, int]],
                                    iters: int, seed: int) -> None:
    """Random reset GEMMs (destinations repeating within the instruction): reference ==
    machine == a sequential numpy model of vta.cc's lines 291-306 (``sum``) or of the
    variants."""
    hw = HwConfig.load("pynq").with_changes(**{"gemm.reset_out": reset_out})
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (4, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 16, 16), dtype=np.int8)
    x = rng.integers(-2**31, 2**31, (4, 1, 16), dtype=np.int64).astype(np.int32)
    n = len(uops)
    text = "\n".join([
        ".alloc A inp 4", ".alloc W wgt 4", ".alloc X acc 4", ".alloc Y out 4",
        f".alloc U uop {n + 1}", *(f".uop U {d} {s} {g}" for d, s, g in uops), ".uop U 0 0 0",
        "LOAD.INP sram=0 dram=A+0 y=1 x=4 stride=4",
        "LOAD.WGT sram=0 dram=W+0 y=1 x=4 stride=4 | push_next",
        f"LOAD.UOP sram=0 dram=U+0 y=1 x={n + 1} stride={n + 1} | pop_prev",
        "LOAD.ACC sram=0 dram=X+0 y=1 x=4 stride=4",
        f"ALU.MAX uop={n}:{n + 1} iter=4,1 dst=1,0 src=1,0 imm=-5",  # out = int8(max(X, -5))
        f"GEMM reset uop=0:{n} iter={iters},1 dst=0,0 src=0,0 wgt=0,0 | push_next",
        "STORE.OUT sram=0 dram=Y+0 y=1 x=4 stride=4 | pop_prev", "FINISH"])
    out = run_both(text, hw, {"A": a, "W": w, "X": x})["Y"][:, 0]
    acc = np.maximum(x[:, 0].astype(np.int64), -5)
    want = acc.astype(np.int32).astype(np.int8)
    for _ in range(iters):
        for d, s, g in uops:
            total = acc[d] + a[s, 0].astype(np.int64) @ w[g].astype(np.int64).T
            acc[d] = 0
            if reset_out == "sum":
                want[d] = total.astype(np.int32).astype(np.int8)
            elif reset_out == "zero":
                want[d] = 0
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("reset_out", ["sum", "keep", "zero"])
def test_generic_kernel_resets_agree(pynq: HwConfig, reset_out: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine runs a GEMM reset in ``gemm.FastGemm.reset`` and any other definition's
    reset in ``kernels.exec_microop`` (one execution at a time for ``sum``); routed through
    the latter, GEMM gives the reference's bytes too."""
    monkeypatch.setattr(vta.sim.machine, "GEMM", object())  # no GEMM takes the fast path
    hw = pynq.with_changes(**{"gemm.reset_out": reset_out})
    ref = run_both(GEMM_RESET, hw, _gemm_reset_inputs())
    assert not ref["Z"].any()


# ------------------------------------------------------------------------------ MUL


def test_mul_is_refused_where_alu_ops_leave_it_out(pynq: HwConfig) -> None:
    """ALU function 4 (MUL) is our extension: neither vta.cc's ``alu()`` (MIN, MAX, ADD, SHR)
    nor the Chisel decoder (functions 0-3) has it. A config whose ``alu.ops`` leaves it out
    refuses it by name in the assembler and in both simulators."""
    hw = pynq.with_changes(**{"alu.ops": ["min", "max", "add", "shr"]})
    with pytest.raises(Exception, match="MUL is not enabled"):
        assemble("ALU.MUL uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=3\nFINISH", hw)
    program = Program((Alu(AluOp.MUL, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 3), Finish()), (), {})
    for run in (run_reference, simulate):
        with pytest.raises(SimError, match=r"instruction 0 \(ALU.MUL.*MUL is not enabled"):
            run(program, hw)
