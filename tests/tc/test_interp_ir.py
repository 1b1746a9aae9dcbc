"""The TC interpreter against numpy written by hand, and the tensor IR a definition lowers to
(lowered with a plain schedule, run by the loop-nest IR interpreter) against the TC interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler import create_schedule, run_func
from vta.compiler.ir.lower import lower
from vta.compiler.tc import load
from vta.compiler.tc.frontend import Definition, random_inputs
from vta.compiler.tc.interp import CHUNK, NP_DTYPE


def _run(src: str, sizes: dict[str, int], seed: int = 0
         ) -> tuple[Definition, dict[str, np.ndarray], dict[str, np.ndarray]]:
    d = load(src)
    c = d.at(sizes)
    ins = random_inputs(d, c, seed)
    return d, ins, d.interpret(c, ins)


def test_matmul_and_wrapping() -> None:
    _, ins, out = _run("def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }",
                       {"M": 5, "N": 7, "K": 9})
    want = (ins["A"].astype(np.int64) @ ins["B"].astype(np.int64).T).astype(np.int32)
    assert out["C"].dtype == np.int32 and np.array_equal(out["C"], want)
    # int32 products wrap: 2^20 * 2^20 = 2^40 = 0 mod 2^32
    d = load("def sq(int32(N) A) -> (O) { O(i) = A(i) * A(i) }")
    c = d.at({"N": 2})
    o = d.interpret(c, {"A": np.array([1 << 20, -3], np.int32)})["O"]
    assert o.tolist() == [0, 9]


def test_strided_conv_against_numpy() -> None:
    src = ("def conv(int8(N,C,H,W) I, int8(K,C,R,S) W1) -> (O) {\n"
           "  O(n,k,h,w) +=! I(n, c, 2*h + r, 2*w + s) * W1(k, c, r, s)\n}")
    _, ins, out = _run(src, {"N": 2, "C": 3, "H": 9, "W": 8, "K": 4, "R": 3, "S": 2})
    x, w = ins["I"].astype(np.int64), ins["W1"].astype(np.int64)
    want = np.zeros((2, 4, 4, 4), np.int64)
    for r in range(3):
        for s in range(2):
            win = x[:, :, r:r + 7:2, s:s + 7:2]
            want += np.einsum("nchw,kc->nkhw", win, w[:, :, r, s])
    assert np.array_equal(out["O"], want.astype(np.int32))


def test_maxpool_prod_and_identity_fill() -> None:
    _, ins, out = _run("def p(int8(N,H,W) I) -> (O) {\n"
                       "  O(n,h,w) max=! I(n, 2*h + r, 2*w + s) where r in 0:2, s in 0:2\n}",
                       {"N": 2, "H": 6, "W": 5})
    x = ins["I"]
    want = np.maximum.reduce([x[:, r:r + 6:2, s:s + 4:2] for r in range(2) for s in range(2)])
    assert np.array_equal(out["O"], want[:, :3, :2])
    d = load("def q(int32(N) A) -> (O) { O(i) *=! A(i + k) where k in 0:3 }")
    a = np.array([1, 2, 3, 4, 5], np.int32)
    assert d.interpret(d.at({"N": 5}), {"A": a})["O"].tolist() == [6, 24, 60]
    # an output whose range starts above 0: the identity below it (int32's minimum for an
    # int32 value, the promoted A(i - 2) + 0), zeros for '='
    d = load("def s(int8(N) A) -> (O) { O(i) max=! A(i - 2) + 0 }")
    o = d.interpret(d.at({"N": 3}), {"A": np.array([4, -5, 6], np.int8)})["O"]
    assert o.dtype == np.int32 and o.tolist() == [-2147483648, -2147483648, 4, -5, 6]
    d = load("def z(int8(N) A) -> (O) { O(i) = A(i - 2) }")
    assert d.interpret(d.at({"N": 2}), {"A": np.array([4, -5], np.int8)})["O"].tolist() == \
        [0, 0, 4, -5]
    d = load("def t(int8(N) A) -> (O) { O(i) max=! A(i - 2) }")
    assert d.interpret(d.at({"N": 2}), {"A": np.array([4, -5], np.int8)})["O"].tolist() == \
        [-128, -128, 4, -5]


def test_rewrites_and_partial_ranges() -> None:
    src = """def f(int16(N) A) -> (O) {
        O(i) = A(i) * 2
        O(i) += A(i) >> 1 where i in 1:3
        O(i) max=! A(i) where i in 0:2
    }"""
    d = load(src)
    a = np.array([3, -7, 10, 1], np.int16)
    out = d.interpret(d.at({"N": 4}), {"A": a})["O"]
    # A*2 = [6, -14, 20, 2]; += A >> 1 on 1:3 gives [6, -18, 25, 2]; max=! resets everything
    # to the int32 identity and writes only 0:2
    assert out.tolist() == [3, -7, -2147483648, -2147483648]


def test_chunked_evaluation_matches() -> None:
    src = "def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }"
    sizes = {"M": 64, "N": 64, "K": 600}
    assert 64 * 64 * 600 > CHUNK
    _, ins, out = _run(src, sizes)
    want = (ins["A"].astype(np.int64) @ ins["B"].astype(np.int64).T).astype(np.int32)
    assert np.array_equal(out["C"], want)


PROGRAMS = [
    ("def mlp(int8(B,M) I, int8(N,M) W, int32(N) b) -> (O) {\n"
     "  T(i, j) +=! I(i, k) * W(j, k)\n"
     "  O(i, j) = int8(fmin(fmax((T(i, j) >> 4) + b(j), 0), 127))\n}",
     {"B": 3, "M": 20, "N": 6}),
    ("def f(int16(N) A, int16(N) B) -> (O, P) {\n  O(i) = A(i) * 2\n  O(i) += B(i) >> 1\n"
     "  O(i) *= A(i) > 0 ? 3 : -1\n  P(i) +=! A(k) * B(i) where k in 1:3\n"
     "  O(i) max= P(i) where i in 1:4\n}", {"N": 6}),
    ("def g(fp32(N, M) A, fp16(M) V) -> (O) {\n  O(i) +=! A(i, j) * V(j)\n}", {"N": 4, "M": 7}),
    ("def h(int8(N) A) -> (O) { O(i) = A(10 - i) }", {"N": 6}),
    ("def k(int32(N, M) A) -> (O) { O(i) *=! A(i, j) }", {"N": 3, "M": 4}),
    ("def c(fp16(N) A, int8(N) B) -> (O, Q) {\n  O(i) = int8(A(i) * 3.0) + B(i)\n"
     "  Q(i) = fp16(abs(B(i)) + A(i))\n}", {"N": 5}),
    ("def s(int8(N) A) -> (O) { O(i) min=! A(2 * i + k) - A(i / 2) where k in 0:3 }", {"N": 9}),
]


@pytest.mark.parametrize("src, sizes", PROGRAMS)
def test_ir_equals_interpreter(src: str, sizes: dict[str, int]) -> None:
    d, ins, ref = _run(src, sizes, seed=3)
    f = d.to_ir(sizes)
    func = lower(create_schedule(list(f.outputs)), f.args, d.name)
    c = d.at(sizes)
    arrays = {**{k: v.copy() for k, v in ins.items()},
              **{o: np.zeros(c.shapes[o], NP_DTYPE[d.cdef.tensors[o].dtype])
                 for o in d.cdef.outputs}}
    run_func(func, arrays)
    for o in d.cdef.outputs:
        if d.cdef.tensors[o].dtype.startswith("float"):
            np.testing.assert_allclose(arrays[o], ref[o], rtol=1e-3, atol=1e-3)
        else:
            assert np.array_equal(arrays[o], ref[o]), o
