"""TC's language as TC's own programs write it: float division, the math built-ins, scalars
(0-rank tensors), the element types, '+=' into an output's existing values, constant
left-hand indices, 'where x = expr', the '<=>' annotation, typed returns, data-dependent and
non-affine indices, float max/min reductions. Each program runs on the TC interpreter, on the
accelerator target (the host takes what the integer GEMM core and ALU cannot) and in the GPU
emulator (every kernel also compiled to PTX), and every output is compared with a numpy
reference written here, independently of the interpreter: integers equal, floats close."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from vta.compiler.tc import TcRangeError, TcSyntaxError, TcTypeError, describe, load
from vta.config import HwConfig
from vta.errors import EmulatorError, InterpError
from vta.run.targets import AccelTarget, CudaEmuTarget
from vta.run.tc import run_gpu, run_vta

Arrays = dict[str, np.ndarray]
RNG = np.random.default_rng(7)


def _f(*shape: int, dt: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _i(lo: int, hi: int, *shape: int, dt: type = np.int32) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(dt)


def _same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    assert got.shape == np.shape(want), (name, got.shape, np.shape(want))
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    else:
        assert got.dtype == np.asarray(want).dtype, (name, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)


def _everywhere(src: str, sizes: dict[str, int], inputs: Arrays, want: Arrays,
                nvcc_check: Callable[[list[str]], None], entry: str | None = None) -> None:
    """``src`` on the interpreter, the accelerator target and the GPU emulator, each output
    against ``want``."""
    d = load(src, "t.tc", entry)
    got = d.interpret(d.at(sizes), inputs)
    for name, w in want.items():
        _same(got[name], w, f"interpreter {name}")
    v = run_vta(d, sizes, AccelTarget(HwConfig.load("pynq")), inputs)
    assert v.passed, v.mismatches
    for name, w in want.items():
        _same(v.outputs[name], w, f"accelerator target {name}")
    assert len(v.placement) == len(d.cdef.stmts)
    g = run_gpu(d, sizes, CudaEmuTarget(), inputs=inputs)
    assert g.passed, g.mismatches
    for name, w in want.items():
        _same(g.outputs[name], w, f"cuda-emu {name}")
    nvcc_check(g.sources)


NvccCheck = Callable[[list[str]], None]


def test_float_division(nvcc_check: NvccCheck) -> None:
    a, b = _f(9), np.abs(_f(9)) + 0.5
    src = """def f(float(N) A, float(N) B, double(N) X) -> (O, Q, D) {
      O(i) = A(i) / B(i)
      Q(i) = 1.0 / 8.0 + A(i) / N
      D(i) = X(i) / 3
    }"""
    x = _f(9, dt=np.float64)
    _everywhere(src, {"N": 9}, {"A": a, "B": b, "X": x},
                {"O": a / b, "Q": 0.125 + a / 9, "D": x / 3}, nvcc_check)


def test_math_builtins(nvcc_check: NvccCheck) -> None:
    a = _f(11)
    x = _f(11, dt=np.float64)
    src = """def m(float(N) A, double(N) X) -> (E, L, S, R, T, F, D, Nx) {
      E(i) = exp(A(i))
      L(i) = log(fabs(A(i)) + 1.0) + logf(2.0)
      S(i) = sqrtf(fabs(A(i)))
      R(i) = rsqrt(fabs(A(i)) + 0.5)
      T(i) = tanh(A(i))
      F(i) = fabsf(A(i))
      D(i) = exp(X(i)) + sqrt(fabs(X(i)))
      Nx(i) = nextafter(A(i), 10.0)
    }"""
    want = {"E": np.exp(a.astype(np.float64)), "L": np.log(np.abs(a) + 1.0) + np.log(2.0),
            "S": np.sqrt(np.abs(a)), "R": 1 / np.sqrt(np.abs(a) + 0.5), "T": np.tanh(a),
            "F": np.abs(a), "D": np.exp(x) + np.sqrt(np.abs(x)),
            "Nx": np.nextafter(a, np.float32(10.0))}
    _everywhere(src, {"N": 11}, {"A": a, "X": x}, want, nvcc_check)
    # nextafter is exact: one float step
    d = load(src)
    out = d.interpret(d.at({"N": 11}), {"A": a, "X": x})["Nx"]
    assert np.array_equal(out, np.nextafter(a, np.float32(10.0)))


def test_math_on_an_integer_is_float32() -> None:
    d = load("def m(int8(N) A) -> (O) { O(i) = exp(A(i)) }")
    assert d.cdef.tensors["O"].dtype == "float32"


def test_element_types(nvcc_check: NvccCheck) -> None:
    u, v = _i(0, 256, 10, dt=np.uint8), _i(0, 1 << 16, 10, dt=np.uint16)
    big, x = _i(-(1 << 40), 1 << 40, 10, dt=np.int64), _f(10, dt=np.float64)
    m = _i(0, 2, 10, dt=np.bool_)
    src = """def t(uint8(N) U, uint16(N) V, int64(N) L, double(N) X, bool(N) M)
             -> (O, W, Y, P, S) {
      O(i) = int64(U(i)) * L(i) + V(i)
      W(i) = U(i) + V(i)
      Y(i) = uint8(V(i))
      P(i) = M(i) ? X(i) * 2.0 : -X(i)
      S +=! int64(U(i)) * L(i)
    }"""
    want = {"O": u.astype(np.int64) * big + v, "W": u.astype(np.int32) + v.astype(np.int32),
            "Y": v.astype(np.uint8), "P": np.where(m, x * 2, -x),
            "S": np.int64((u.astype(np.int64) * big).sum())}
    _everywhere(src, {"N": 10}, {"U": u, "V": v, "L": big, "X": x, "M": m}, want, nvcc_check)
    d = load(src)
    assert {n: d.cdef.tensors[n].dtype for n in want} == {
        "O": "int64", "W": "int32", "Y": "uint8", "P": "float64", "S": "int64"}


def test_zero_rank_tensors(nvcc_check: NvccCheck) -> None:
    a, s, k = _f(6), np.float32(1.5), np.int32(3)
    src = """def z(float(N) A, float s, int32 k) -> (O, T, Z, M, P) {
      O(i) = A(i) * s + s()
      T = A(0) + float(k)
      Z +=! A(r)
      M() max=! A(r)
      P(i) = A(i) - Z
    }"""
    want = {"O": a * s + s, "T": np.float32(a[0] + 3), "Z": np.float64(a.sum()),
            "M": np.float32(a.max()), "P": a - a.sum()}
    _everywhere(src, {"N": 6}, {"A": a, "s": np.asarray(s), "k": np.asarray(k)}, want,
                nvcc_check)


def test_accumulate_into_the_outputs_values(nvcc_check: NvccCheck) -> None:
    b, c0 = _i(-100, 100, 4, 5), _i(-1000, 1000, 4)
    src = "def acc(int32(N, K) B) -> (C) { C(i) += B(i, k) }"
    d = load(src)
    assert d.cdef.stmts[0].init == "C_init"
    assert "C_init: input int32 (N) (the starting values of C)" in describe(d)
    want = (c0 + b.sum(axis=1)).astype(np.int32)
    _everywhere(src, {"N": 4, "K": 5}, {"B": b, "C_init": c0}, {"C": want}, nvcc_check)
    f, f0 = _f(3, 4), _f(3)
    _everywhere("def m(float(N, K) B) -> (C) { C(i) max= B(i, k) }", {"N": 3, "K": 4},
                {"B": f, "C_init": f0}, {"C": np.maximum(f0, f.max(axis=1))}, nvcc_check)


def test_constant_left_hand_indices(nvcc_check: NvccCheck) -> None:
    a = _f(5)
    src = """def c(float(N) A) -> (O, P) {
      O(i) = A(i)
      O(0) = 5.0
      P(3) = A(1) * 2.0
    }"""
    o = a.copy()
    o[0] = 5.0
    _everywhere(src, {"N": 5}, {"A": a}, {"O": o, "P": np.array([0, 0, 0, a[1] * 2],
                                                                 np.float32)}, nvcc_check)


def test_where_let_and_equivalent(nvcc_check: NvccCheck) -> None:
    a = _f(4, 6)
    src = """def w(float(N, M) A) -> (O, S) {
      O(i, j) = x * x + y where x = A(i, j) + 1.0, y = 2.0
      S(i) +=! A(i, j) <=> sum(A, 1)
    }"""
    d = load(src)
    assert "equivalent (<=>, reported, not checked): sum(A, 1)" in describe(d)
    assert d.cdef.stmts[1].equivalent == "sum(A, 1)"
    _everywhere(src, {"N": 4, "M": 6}, {"A": a},
                {"O": (a + 1) ** 2 + 2, "S": a.astype(np.float64).sum(axis=1)}, nvcc_check)


def test_typed_returns(nvcc_check: NvccCheck) -> None:
    a = _i(-128, 128, 7, dt=np.int8)
    src = """def t(int8(N) A) -> (int32(N) O, float(N) F, int8(N) Q) {
      O(i) = A(i) * 3
      F(i) = A(i) + 1
      Q(i) = A(i) * 3
    }"""
    want = {"O": a.astype(np.int32) * 3, "F": a.astype(np.float32) + 1,
            "Q": (a.astype(np.int32) * 3).astype(np.int8)}
    _everywhere(src, {"N": 7}, {"A": a}, want, nvcc_check)
    bad = load("def t(int8(N) A, int8(M) B) -> (int32(M) O) { O(i) = A(i) }")
    with pytest.raises(TcRangeError, match=r"output O is declared \[3\] but its inferred shape "
                                           r"is \[5\]"):
        bad.at({"N": 5, "M": 3})


def test_gathers_and_non_affine_indices(nvcc_check: NvccCheck) -> None:
    a, idx, j = _i(-1000, 1000, 8), _i(0, 8, 6), _i(0, 3, 5)
    src = """def g(int32(N) A, int32(K) I, int32(L) J) -> (O, R, Q) {
      O(k) = A(I(k)) + A(I(k) % 4)
      R(i, l) = A(i) + A((i + l) % N) + J(l)
      Q(l) = A(l % (J(l) + 1))
    }"""
    n = np.arange(8)[:, None]
    l_ = np.arange(5)
    want = {"O": a[idx] + a[idx % 4], "R": a[:, None] + a[(n + l_) % 8] + j,
            "Q": a[l_ % (j + 1)]}
    _everywhere(src, {"N": 8, "K": 6, "L": 5}, {"A": a, "I": idx, "J": j}, want, nvcc_check)


def test_gather_out_of_bounds_is_named() -> None:
    d = load("def g(float(N) A, int32(K) I) -> (O) { O(k) = A(I(k)) }", "g.tc")
    ins = {"A": _f(4), "I": np.array([0, -1, 2], np.int32)}
    with pytest.raises(TcRangeError, match=r"g.tc:1:.*A\(I\(k\)\) reads index -1 of dimension 0 "
                                           r"of A \(size 4\)"):
        d.interpret(d.at({"N": 4, "K": 3}), ins)
    with pytest.raises(InterpError, match="load from A: index -1 out of range"):
        run_vta(d, {"N": 4, "K": 3}, AccelTarget(HwConfig.load("pynq")), ins, check=False)
    with pytest.raises(EmulatorError, match="load from A"):
        run_gpu(d, {"N": 4, "K": 3}, CudaEmuTarget(), inputs=ins, check=False)


def test_float_max_then_min(nvcc_check: NvccCheck) -> None:
    """Float max=!/min=! start from -inf/inf (CUDA: the bits, no literal), and a second
    reduction into the same output gets its own kernel."""
    a, b = _f(5, 7), _f(5, 7)
    src = """def mm(float(N, M) A, float(N, M) B) -> (O, P) {
      O(i) max=! A(i, j)
      O(i) min= B(i, j)
      P(i) min=! A(i, j)
    }"""
    _everywhere(src, {"N": 5, "M": 7}, {"A": a, "B": b},
                {"O": np.minimum(a.max(axis=1), b.min(axis=1)), "P": a.min(axis=1)},
                nvcc_check)


@pytest.mark.parametrize("src, err, msg", [
    ("def f(float(N) A) -> (O) { O(i) = A.0 }", TcSyntaxError,
     "not supported: dimension specifiers"),
    ("def f(float(N) A) -> (O) { O(i + 1) = A(i) }", TcSyntaxError,
     "expected ',' or ')' after an index"),
    ("def f(float(N) A) -> (O) { O(-1) = A(0) }", TcSyntaxError,
     "not supported: '-' as a left-hand index"),
    ("def g(float(N) A) -> (O) { O(i) = A(i) }\n"
     "def f(float(N) A) -> (O) { O(i) = g(A(i)) }", TcTypeError,
     "not supported: calling definition g"),
    ("def f(half(N) A) -> (O) { O(i) = nextafter(A(i), A(i)) }", TcTypeError,
     "nextafter of fp16 values is not supported"),
    ("def f(float(N) A) -> (O) { O(i) = A(i) <=> }", TcSyntaxError,
     "expected a name after '<=>'"),
    ("def f(float(N) A) -> (O) { O(i) = A(i) where in 0:N }", TcSyntaxError,
     "expected 'in' (as in 'where i in 0:N') or '=' (as in 'where x = expr')"),
])
def test_refusals_are_named(src: str, err: type[Exception], msg: str) -> None:
    with pytest.raises(err, match=None) as e:
        load(src, "t.tc", "f")
    assert msg in str(e.value)
