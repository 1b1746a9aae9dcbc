"""The TC frontend: parsing, type checking and isl range inference, with every error path.

Range inference is checked against the worked examples of TC's documentation (inverted and
strided indexing, average pooling, the stencil's rounds, preconditions) and the symbolic
domains ``vta tc show`` prints.
"""

from __future__ import annotations

import pytest

from vta.compiler.tc import (
    TcRangeError,
    TcSizeError,
    TcSyntaxError,
    TcTypeError,
    describe,
    load,
    parse_sizes,
)
from vta.compiler.tc import ast as A
from vta.compiler.tc.parser import parse, tokenize
from vta.compiler.tc.source import Source

# ---------------------------------------------------------------------------- parser


def test_tokens_glue_and_comments() -> None:
    toks = tokenize(Source("O(i) +=! A(i) # sum\n// line\nmax=! 1.5e3 .5"))
    texts = [(t.kind, t.text, t.glued) for t in toks]
    assert ("op", "+=", False) in texts and ("op", "!", True) in texts
    assert ("float", "1.5e3", False) in texts and ("float", ".5", False) in texts
    assert all(t.text not in ("sum", "line") for t in toks)


def test_parse_everything() -> None:
    src = """
    # a comment
    def f(int8(N, 3) A, fp32 s, int32(N) B) -> (O, P) {
        O(i, j) +=! A(i, k) * 2 + -B(i) where k in 0:3, exists B(j)
        P(i) max=! O(i, j) > 0 ? O(i, j) : int32(s)   // trailing comment
        P(i) min= 5
        O(i, j) *= (i == j) && !(i < 1) ? 1 : 0
    }
    def g(half(M) X) -> Y { Y(m) = fmax(X(m), 0) }
    """
    p = parse(src, "x.tc")
    f, g = p.defs
    assert [q.name for q in f.params] == ["A", "s", "B"]
    assert f.params[0].dims == ("N", 3) and f.params[1].dims == ()
    s0, s1, s2, s3 = f.stmts
    assert (s0.op, s0.bang) == ("+", True) and (s1.op, s1.bang) == ("max", True)
    assert (s2.op, s2.bang) == ("min", False) and (s3.op, s3.bang) == ("*", False)
    assert isinstance(s0.where[0], A.WhereRange) and isinstance(s0.where[1], A.WhereExists)
    assert isinstance(s1.rhs, A.Ternary)
    assert g.returns[0].name == "Y" and g.stmts[0].op == "="
    # precedence: * binds tighter than +, unary minus tighter than *
    rhs = s0.rhs
    assert isinstance(rhs, A.Binary) and rhs.op == "+"
    assert isinstance(rhs.a, A.Binary) and rhs.a.op == "*"
    assert isinstance(rhs.b, A.Unary)


def test_bang_needs_no_space() -> None:
    d = load("def f(int8(N) A) -> (O) { O(i) +=! A(i)\n O(i) += !(A(i) > 0) ? 1 : 0 }")
    assert d.cdef.stmts[0].bang and not d.cdef.stmts[1].bang


@pytest.mark.parametrize("src, line, col, msg", [
    ("def f(int8(N) A) -> (B) { B(i) = A(i) +* 2 }", 1, 40, "expected an expression"),
    ("def f(int8(N) A) -> (B) {\n  B(i) = A(i\n}", 3, 1, "',' or ')'"),
    ("def f(int8(N) A) -> (B) { B(i) == A(i) }", 1, 32, "expected an assignment"),
    ("def f(int8(N) A) -> (B) { B(i) =! A(i) }", 1, 33, "'=!' is not an operator"),
    ("def f(int8(N) A) (B) { B(i) = A(i) }", 1, 18, "'->'"),
    ("def f(int8(N A) -> (B) { B(i) = A(i) }", 1, 14, "',' or ')' in the sizes"),
    ("def f(int8(N) A) -> (B) { B(i) = A(i) where i 0:N }", 1, 47, "'in'"),
    ("def f(int8(N) A) -> (B) { B(i) = A(i) ", 1, 39, "'}' closing"),
    ("def f(int8(N) A) -> (B) { B(i) = A(i) $ }", 1, 39, "unexpected character '$'"),
    ("def f(int8(N) A) -> (B) { B(i) = A.0 }", 1, 35, "dimension specifiers"),
    ("", 1, 1, "no definition"),
    ("  B(i) = 1", 1, 3, "'def'"),
])
def test_syntax_errors(src: str, line: int, col: int, msg: str) -> None:
    with pytest.raises(TcSyntaxError) as e:
        parse(src, "bad.tc")
    text = str(e.value)
    assert text.startswith(f"bad.tc:{line}:{col}: ") and msg in text
    caret = text.splitlines()[-1]
    assert caret.strip() == "^" and caret.index("^") == 4 + col - 1


# ---------------------------------------------------------------------------- types


def _types(src: str) -> dict[str, str]:
    return {n: t.dtype for n, t in load(src).cdef.tensors.items()}


def test_typing_rules() -> None:
    t = _types("""def f(int8(N) A, int16(N) B, fp16(N) H, fp32(N) F) -> (P, Q, R, S, T, U, V) {
        P(i) = A(i) * B(i)
        Q(i) = fmax(A(i), 0)
        R(i) = H(i) + 1
        S(i) +=! A(j) * A(i) where j in 0:N
        T(i) max=! A(j) where j in 0:N, i in 0:N
        U(i) = int8(F(i))
        V(i) = A(i) > 0 ? H(i) : H(i)
    }""")
    assert t == {"A": "int8", "B": "int16", "H": "float16", "F": "float32", "P": "int32",
                 "Q": "int8", "R": "float32", "S": "int32", "T": "int8", "U": "int8",
                 "V": "float16"}


def test_gemm_operands_are_cast_to_int32() -> None:
    d = load("def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }")
    st = d.cdef.stmts[0]
    assert st.reduce == ("k",) and st.lhs == ("m", "n") and st.dtype == "int32"
    mul = st.rhs
    assert isinstance(mul, A.TBinary) and mul.op == "*"
    assert isinstance(mul.a, A.TCast) and mul.a.dtype == "int32"
    assert isinstance(mul.a.a, A.TRead) and mul.a.a.tensor == "A"


def test_rewritten_tensor_keeps_its_type() -> None:
    d = load("def f(int8(N) A) -> (O) { O(i) = A(i)\n O(i) += A(i) * 100 }")
    st = d.cdef.stmts[1]
    assert st.dtype == "int8" and st.prev == 0 and isinstance(st.rhs, A.TCast)


@pytest.mark.parametrize("body, msg", [
    ("O(i) = Z(i)", "unknown tensor or function 'Z'"),
    ("O(i) = A(i, i)", "tensor A has 1 dimensions, read here with 2 indices"),
    ("O(i) = A", "tensor A is used without indices"),
    ("O(i) = A(i) + N(i)", "N is a size variable, not a tensor"),
    ("O(i) = O(i) + 1", "tensor O is read before any statement defines it"),
    ("A(i) = 1", "cannot write input tensor A"),
    ("O(i, i) = A(i)", "index i appears twice on the left-hand side"),
    ("O(N) = A(0)", "left-hand index N must be an index variable"),
    ("O(i) = A(j)", "index j appears on the right but not on the left"),
    ("T(i) += A(i)\n O(i) = T(i)", "'+=' without '!' accumulates into the existing values of T"),
    ("O(i) = A(i) > 0", "the value is a condition (bool)"),
    ("O(i) = A(i) > 0 ? 1.5 : 2 > 1", "'?:' needs a number"),
    ("O(i) = A(i) ? 1 : 0", "the condition of '?:' needs a condition"),
    ("O(i) = F(i) % 2", "'%' needs integer operands"),
    ("O(i) = F(i) % 2.0", "'%' needs integer operands"),
    ("O(i) = exp(A(i), 2)", "exp takes one argument"),
    ("O(i) = A(i) where x = 2, x = 3", "already a name"),
    ("O(i) = A(F(i))", "an index must be an integer expression"),
    ("O(i) = foo(A(i))", "unknown tensor or function 'foo'"),
    ("O(i) = fmax(A(i))", "fmax takes 2 arguments, got 1"),
    ("O(i) = int8(A(i), 1)", "cast int8(x) takes one argument"),
    ("O(i) = A(i) where k in 0:2", "where clause constrains k, which the statement does not use"),
    ("O(i) +=! A(k) where k in 0:2, k in 0:3", "index k has two where clauses"),
    ("O(i) +=! A(k) where k in 0:i", "not index i"),
    ("O(i) = 4294967296", "does not fit int32"),
    ("O(i) = !A(i)", "'!' needs a condition"),
    ("O(i) = A(i)\n O(i, j) = A(i)", "O has 1 dimensions, written here with 2 indices"),
])
def test_type_errors(body: str, msg: str) -> None:
    src = f"def f(int8(N) A, fp32(N) F) -> (O) {{\n  {body}\n}}"
    with pytest.raises(TcTypeError) as e:
        load(src, "t.tc")
    text = str(e.value)
    assert msg in text, text
    assert text.startswith("t.tc:") and text.splitlines()[-1].strip() == "^"


@pytest.mark.parametrize("src, msg", [
    ("def f(int8(N) A) -> (O) { O(i) = A(i) }\ndef f(int8(N) A) -> (O) { O(i) = A(i) }",
     "definition f is defined twice"),
    ("def f(int128(N) A) -> (O) { O(i) = A(i) }", "unknown type 'int128'"),
    ("def f(int8(N) A) -> (int9(N) O) { O(i) = A(i) }", "unknown type 'int9' of output O"),
    ("def f(int8(N) A) -> (int8(M) O) { O(i) = A(i) }", "size M of output O is not a size"),
    ("def f(int8(N) A, int8(N) A) -> (O) { O(i) = A(i) }", "parameter A is declared twice"),
    ("def f(int8(N) A, int8(A) B) -> (O) { O(i) = A(i) }",
     "A is both a size variable and a tensor"),
    ("def f(int8(N) A) -> (A) { A(i) = 1 }", "output A is an input parameter"),
    ("def f(int8(N) A) -> (O, O) { O(i) = A(i) }", "output O is listed twice"),
    ("def f(int8(N) A) -> (O, P) { O(i) = A(i) }", "output P is never defined"),
    ("def f(int8(0) A) -> (O) { O(i) = A(i) }", "size 0 of A must be positive"),
    ("def f(int8(N) A) -> (O) { }", "has no statements"),
])
def test_signature_errors(src: str, msg: str) -> None:
    with pytest.raises(TcTypeError, match=msg):
        load(src)


def test_entry_selection() -> None:
    src = "def f(int8(N) A) -> (O) { O(i) = A(i) }\ndef g(int8(N) A) -> (O) { O(i) = A(i) }"
    assert load(src, entry="g").name == "g"
    with pytest.raises(TcTypeError, match="choose one with --entry"):
        load(src)
    with pytest.raises(TcTypeError, match="no definition named 'h'"):
        load(src, entry="h")


# ---------------------------------------------------------------------------- ranges


def _ranges(src: str, sizes: dict[str, int]) -> list[dict[str, tuple[int, int]]]:
    return list(load(src).at(sizes).ranges)


def test_tc_worked_examples() -> None:
    # inverted indexing: 0 <= 10 - i < I gives 9 - I <= i < 11 (cut at 0 for an output)
    assert _ranges("def r(int8(I) B) -> (A) { A(i) = B(10 - i) }", {"I": 5})[0] == {"i": (6, 11)}
    # constant stride: 0 <= 2i < I gives i < (I + 1) / 2
    assert _ranges("def s(int8(I) B) -> (A) { A(i) = B(2*i) }", {"I": 7})[0] == {"i": (0, 4)}
    # strided with offsets: the intersection, i < I / 2
    assert _ranges("def p(int8(I) B) -> (A) { A(i) = B(2*i) + B(2*i + 1) }",
                   {"I": 7})[0] == {"i": (0, 3)}
    # the same with a where clause: conjunction over k's range
    assert _ranges("def p(int8(I) B) -> (A) { A(i) +=! B(2*i + k) where k in 0:2 }",
                   {"I": 7})[0] == {"i": (0, 3), "k": (0, 2)}
    # the stencil: k from K(k) in round one, then i from B(i + k)
    assert _ranges("def c(int8(N) B, int8(M) K) -> (A) { A(i) +=! B(i + k) * K(k) }",
                   {"N": 10, "M": 3})[0] == {"i": (0, 8), "k": (0, 3)}


def test_conv_domain_is_symbolic() -> None:
    d = load("def conv(int8(N,C,H,W) I, int8(K,C,R,S) W1) -> (O) {\n"
             "  O(n, k, h, w) +=! I(n, c, 2*h + r, 2*w + s) * W1(k, c, r, s)\n}")
    dom = str(d.ranges.stmts[0].domain)
    assert "S1[n, k, h, w, c, r, s]" in dom and "2h <= H - R" in dom
    c = d.at({"N": 1, "C": 3, "H": 9, "W": 8, "K": 4, "R": 3, "S": 2})
    assert c.shapes["O"] == (1, 4, 4, 4) and c.points(0) == 1 * 4 * 4 * 4 * 3 * 3 * 2


def test_show_text() -> None:
    d = load("def mlp(int8(B,M) I, int8(N,M) W) -> (O) {\n"
             "  T(b, n) +=! I(b, m) * W(n, m)\n  O(b, n) = fmax(T(b, n), 0)\n}", "mlp.tc")
    text = describe(d, d.at({"B": 2, "M": 32, "N": 16}))
    assert "Statement 1 (T(b, n) +=! I(b, m) * W(n, m))" in text
    assert "domain: [B, M, N] -> { S1[b, n, m] : 0 <= b < B and 0 <= n < N and 0 <= m < M }" \
        in text
    assert "reduction: sum over m" in text
    assert "T: temporary int32 (B, N) = [2, 16]" in text
    assert "O: output int32 (B, N) = [2, 16]" in text
    assert "(1,024 points)" in text


def test_precondition_is_reported_and_checked() -> None:
    d = load("def f(int8(N) B, int8(M) C, int8(K) D) -> (A) { A(i, j) = B(i) * C(i + j) * D(j) }")
    assert "precondition: C(i + j) stays in bounds only when" in describe(d)
    assert d.at({"N": 2, "M": 5, "K": 4}).shapes["A"] == (2, 4)
    with pytest.raises(TcRangeError, match=r"C\(i \+ j\) reads outside C \(shape \[5\]\)"):
        d.at({"N": 3, "M": 5, "K": 4})


@pytest.mark.parametrize("src, msg", [
    ("def f(int8(N) A) -> (O) { O(i) +=! A(i + j) }",
     "the range of index i, j is ambiguous: every access that uses them (A(i + j))"),
    ("def f(int8(N) A) -> (O) { O(i, j) = A(i) }",
     "index j is used by no tensor read"),
    ("def f(int8(N) A) -> (O) { O(i) = A(i % 2) }",
     "the range of index i is unbounded"),
    ("def f(int8(N) A) -> (O) { O(i) = A(i) where i in -3:0 }",
     "no value of index i keeps every access in bounds"),
    ("def f(int8(N) A) -> (O) { O(i) = A(i * i) }",
     "index i appears only in non-affine or data-dependent indices (A(i * i))"),
    ("def f(int8(N) A) -> (O) { O(i) = A(i / N) }",
     "index i appears only in non-affine or data-dependent indices (A(i / N))"),
    ("def f(int32(N) A) -> (O) { O(i, j) = A(A(i) + j) }",
     "index j appears only in non-affine or data-dependent indices (A(A(i) + j))"),
])
def test_range_errors(src: str, msg: str) -> None:
    with pytest.raises(TcRangeError) as e:
        load(src, "r.tc")
    assert msg in str(e.value) and str(e.value).startswith("r.tc:1:")


def test_empty_range_at_sizes() -> None:
    d = load("def c(int8(N) B, int8(M) K) -> (A) { A(i) +=! B(i + k) * K(k) }")
    with pytest.raises(TcRangeError, match="index i has an empty range at sizes N=2, M=3"):
        d.at({"N": 2, "M": 3})


@pytest.mark.parametrize("sizes, msg", [
    ({"N": 2}, "needs a value for size M"),
    ({"N": 2, "M": 3, "Q": 1}, "has no size variable 'Q'"),
    ({"N": 0, "M": 3}, "size N must be a positive integer"),
])
def test_size_errors(sizes: dict[str, int], msg: str) -> None:
    d = load("def c(int8(N) B, int8(M) K) -> (A) { A(i) +=! B(i + k) * K(k) }")
    with pytest.raises(TcSizeError, match=msg):
        d.at(sizes)


@pytest.mark.parametrize("text, msg", [
    ("N", "expected NAME=VALUE"), ("N=x", "not an integer"), ("N=1,N=2", "given twice"),
])
def test_parse_sizes_errors(text: str, msg: str) -> None:
    assert parse_sizes("N=1, C=64") == {"N": 1, "C": 64}
    with pytest.raises(TcSizeError, match=msg):
        parse_sizes(text)
