"""Range inference against TC's documented algorithm (docs/source/inference.rst of Tensor
Comprehensions): rounds, each resolving the indices that appear alone in some access, for
every value of the indices resolved before; reads of a defined tensor kept inside the region
its producers wrote; TC's negative minima reported. Every expected range below is worked out
by hand from that description (the arithmetic is in the comments), at concrete sizes."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.tc import TcRangeError, describe, load
from vta.config import HwConfig
from vta.run.targets import AccelTarget, CudaEmuTarget
from vta.run.tc import run_gpu, run_vta

PADDED = """def padded(float(N,C,H,W) I, float(M,C,KH,KW) W1) -> (pad, tmp) {
  pad(n, c, h, w) = I(n, c, h - 2 - 3, w - 3 - 4)
  tmp(n, m, h, w) +=! pad(n, c, 2 * h + kh, 3 * w + kw) * W1(m, c, kh, kw)
}"""
PADDED_SIZES = {"N": 1, "C": 2, "H": 9, "W": 10, "M": 3, "KH": 3, "KW": 2}


def _ranges(src: str, sizes: dict[str, int], k: int = 0) -> dict[str, tuple[int, int]]:
    return load(src).at(sizes).ranges[k]


def test_padded_conv_reads_the_written_region() -> None:
    c = load(PADDED).at(PADDED_SIZES)
    # pad: 0 <= h - 5 < H gives 5 <= h < H + 5 = 14; 0 <= w - 7 < W gives 7 <= w < 17
    assert c.ranges[0] == {"n": (0, 1), "c": (0, 2), "h": (5, 14), "w": (7, 17)}
    # tmp against pad's written rows 5..13, kh in 0:3: 5 <= 2h (h >= 3) and 2h + 2 <= 13
    # (h <= 5); columns 7..16, kw in 0:2: 7 <= 3w (w >= 3) and 3w + 1 <= 16 (w <= 5).
    # TC: mins 3, 3; extents ((H - KH) + 1) / 2 = 3 and ((W - KW) + 1) / 3 = 3
    assert c.ranges[1]["h"] == (3, 6) and c.ranges[1]["w"] == (3, 6)
    assert c.shapes["pad"] == (1, 2, 14, 17) and c.shapes["tmp"] == (1, 3, 6, 6)


def test_padded_conv_runs_on_both_targets() -> None:
    d = load(PADDED)
    v = run_vta(d, PADDED_SIZES, AccelTarget(HwConfig.load("pynq")))
    g = run_gpu(d, PADDED_SIZES, CudaEmuTarget())
    assert v.passed and g.passed
    # only written rows are read: every tmp point is a full 3 x 2 window of I
    rng = np.random.default_rng(0)
    i = rng.standard_normal((1, 2, 9, 10)).astype(np.float32)
    w1 = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    out = d.interpret(d.at(PADDED_SIZES), {"I": i, "W1": w1})["tmp"]
    want = np.zeros((1, 3, 6, 6))
    for h in range(3, 6):
        for w in range(3, 6):
            win = i[0, :, 2 * h - 5:2 * h - 5 + 3, 3 * w - 7:3 * w - 7 + 2]
            want[0, :, h, w] = np.einsum("chw,mchw->m", win, w1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_weird_conv_resolves_in_the_third_round() -> None:
    src = """def weird(float(B,IP,H,W) input, float(OP,IP,KH,KW) weight) -> (output) {
      output(b, op, h, w) +=! input(b, ip, 2 * h + 3 * w + kh, 2 * w + kw) * weight(op, ip, kh, kw)
    }"""
    r = _ranges(src, {"B": 1, "IP": 2, "H": 20, "W": 7, "OP": 1, "KH": 3, "KW": 2})
    # round 1: kh in 0:3, kw in 0:2 (weight); round 2: 2w + 1 <= 6, w in 0:3;
    # round 3: 2h + 3*2 + 2 <= 19, h <= 5: h in 0:6 (TC: ((17 - (5/2)*3)/2) + 1 = 6)
    assert r == {"b": (0, 1), "op": (0, 1), "h": (0, 6), "w": (0, 3), "ip": (0, 2),
                 "kh": (0, 3), "kw": (0, 2)}
    # the same shape of problem with the two-index form of the issue
    r2 = _ranges("def f(float(H, W) I, float(KH, KW) K) -> (O) {\n"
                 "  O(h, w) +=! I(h + w + kh, w + kw) * K(kh, kw)\n}",
                 {"H": 10, "W": 6, "KH": 2, "KW": 3})
    # kw in 0:3 -> w + 2 <= 5, w in 0:4; kh in 0:2 -> h + 3 + 1 <= 9, h in 0:6
    assert r2["w"] == (0, 4) and r2["h"] == (0, 6)


def test_negative_minimum_is_reported_as_tc_infers_it() -> None:
    d = load("def shift(float(I_0) I) -> (O) { O(i) = I(i + 5) }")
    # 0 <= i + 5 < I_0: TC's range -5:I_0 - 5 (min -5, extent I_0); stored from 0
    assert d.at({"I_0": 8}).ranges[0] == {"i": (0, 3)}
    assert d.ranges.range_text(0, "i", tc=True) == "-5:I_0 - 5"
    assert "TC's ranges: i in -5:I_0 - 5" in describe(d)
    # Shift1D: 0 <= i - 1 < I_0 gives 1 <= i < I_0 + 1 (TC: min 1, extent I_0)
    d1 = load("def shift(float(I_0) I) -> (O) { O(i) = I(i - 1) }")
    assert d1.at({"I_0": 8}).ranges[0] == {"i": (1, 9)} and not d1.ranges.stmts[0].tc_ranges


@pytest.mark.parametrize("src, sizes, want", [
    # ConvGrad's d_I: kh in 0:3; 0 <= h - kh < OH for every kh: 2 <= h < 4
    # (TC: min KH - 1 = 2, extent OH - KH + 1 = 2)
    ("def g(float(N,M,OH,OW) d_O, float(M,C,KH,KW) W1) -> (d_I) {\n"
     "  d_I(n, c, h, w) +=! d_O(n, m, h - kh, w - kw) * W1(m, c, kh, kw)\n}",
     {"N": 1, "M": 2, "OH": 4, "OW": 5, "C": 1, "KH": 3, "KW": 2},
     {"n": (0, 1), "c": (0, 1), "h": (2, 4), "w": (1, 5), "m": (0, 2), "kh": (0, 3),
      "kw": (0, 2)}),
    # TCA: j in 0:I_0, k in 0:I_2; 0 <= i + j < I_1 for every j: i in 0:I_1 - I_0 + 1
    ("def f(float(I_0, I_1, I_2) I) -> (O) { O(i) +=! I(j, i + j, k) }",
     {"I_0": 3, "I_1": 7, "I_2": 2}, {"i": (0, 5), "j": (0, 3), "k": (0, 2)}),
    # PartialCopy: the where clause fixes i in 3:N - 1
    ("def f(float(N, M) I) -> (O) { O(i, j) = I(i, j) where i in 3:N-1 }",
     {"N": 10, "M": 4}, {"i": (3, 9), "j": (0, 4)}),
    # UnambiguousRotate, N = 25: 10 + i - j < 25 and i + j < 30 for i in 0:10 and both >= 0:
    # 0 <= j <= 10 (TC: min 20 - min(N, 20) = 0, extent min(M - 10, 10) + min(N, 20) - 19)
    ("def f(float(N, M) I) -> (O) { O(i, j) = I(10 + i - j, i + j) where i in 0:10 }",
     {"N": 25, "M": 30}, {"i": (0, 10), "j": (0, 11)}),
    # the same at N = 15: 10 + i - j < 15 for i = 9 gives j >= 5 (TC: min 5, extent 6)
    ("def f(float(N, M) I) -> (O) { O(i, j) = I(10 + i - j, i + j) where i in 0:10 }",
     {"N": 15, "M": 30}, {"i": (0, 10), "j": (5, 11)}),
])
def test_tc_inference_cases(src: str, sizes: dict[str, int],
                            want: dict[str, tuple[int, int]]) -> None:
    assert _ranges(src, sizes) == want


def test_second_statement_sees_the_first_ones_region() -> None:
    # TCF: O2's region is j in 0:min(B_0, A_1), k in 0:min(B_1, A_2), l in 0:B_2, and O3 reads
    # O2(j, k, l): k in 0:min(C_0, B_1, A_2), l in 0:min(C_1, B_2), m in 0:C_2
    src = """def fun(float(A_0, A_1, A_2) A, float(B_0, B_1, B_2) B,
                     float(C_0, C_1, C_2) C) -> (O2, O3) {
      O2(j, k, l) +=! B(j, k, l) + A(i, j, k)
      O3(k, l, m) +=! C(k, l, m) + O2(j, k, l)
    }"""
    c = load(src).at({"A_0": 2, "A_1": 5, "A_2": 6, "B_0": 4, "B_1": 3, "B_2": 7,
                      "C_0": 8, "C_1": 9, "C_2": 10})
    assert c.shapes["O2"] == (4, 3, 7) and c.shapes["O3"] == (3, 7, 10)


@pytest.mark.parametrize("src", [
    "def f(float(I_0, I_1, I_2) A) -> (O) { O(i) +=! A(i + j, i + j, i + j) }",  # TCB
    "def f(float(N, M) I) -> (O) { O(i, j) = I(10 + i - j, i + j) }",  # AmbiguousRotate
    "def f() -> (O) { O(i, j) = 3 }",  # PartialAssignWithoutWhere
])
def test_tc_refusals(src: str) -> None:
    with pytest.raises(TcRangeError, match=r"ambiguous|no tensor read"):
        load(src)
