"""Integer evaluation of index expressions: one compiled form, read from ``semantics``.

``compile_int(e)`` walks ``e`` once and returns a function of an environment (variable ->
Python int) computing ``e``'s value as ``semantics`` defines it: each operator's exact result
wrapped to its node's type, casts wrapping to theirs, and an error (``CompileError``) where the
operation has no meaning (a division by zero, a shift amount outside the type's width) or a
variable is unbound. ``evaluate(e, env)`` is the same computation for one environment. The
accelerator passes evaluate DMA fields, micro-op indices and loop bounds with it, under many
environments (a tile loop), so the compiled form is small: a linear tree is one sum wrapped once
(``_affine``), and any other tree one generated Python expression (``_text``), where an
operator costs one Python operation and one range check, none where its operands' spans keep
it in range.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from vta._dataclass_code import code_of
from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem
from vta.compiler.ir.visitor import Dispatch
from vta.errors import CompileError

__all__ = ["IntFn", "compile_int", "evaluate"]

IntFn = Callable[[Mapping[E.Var, int]], int]


def compile_int(e: Any) -> IntFn:
    """A function of the environment computing integer expression ``e`` (the module
    docstring); ``e`` may also be a Python int."""
    return _COMPILE(e)


def evaluate(e: Any, env: Mapping[E.Var, int]) -> int:
    """The value of integer expression ``e`` under ``env`` (every free variable bound)."""
    return _COMPILE(e)(env)


def _var(e: E.Var) -> IntFn:
    def var(env: Mapping[E.Var, int]) -> int:
        try:
            return env[e]
        except KeyError:
            raise CompileError(f"variable {e.name} is not bound where it is evaluated") from None
    return var


def _const(v: int) -> IntFn:
    return lambda env: v


def _cannot(e: Any) -> IntFn:
    def cannot(env: Mapping[E.Var, int]) -> int:
        raise CompileError(f"cannot evaluate {e} as an integer")
    return cannot


#: operators whose result wrapped once equals the result of wrapping after every step (they are
#: ring operations: two's complement wrapping is arithmetic modulo 2**bits)
_RING = (sem.Op.ADD, sem.Op.SUB, sem.Op.MUL)


def _linear(e: E.Expr, t: sem.DType, terms: dict[E.Var, int]) -> int | None:
    """Add ``e`` (a ``t``-typed tree of ``+``, ``-`` and ``*`` by a constant over variables and
    constants) into ``terms`` (variable -> coefficient, in the order a depth-first,
    left-first evaluation first reads them) and return its constant part; None where ``e`` is
    not such a tree (``terms`` is then to be dropped). Constants count as ``_imm`` reads them;
    everything is exact Python integers."""
    if isinstance(e, E.Var):
        terms[e] = terms.get(e, 0) + 1
        return 0
    if isinstance(e, E.IntImm):
        ct = sem.DTYPES.get(e.dtype)
        return sem.wrap(e.value, ct) if ct is not None and ct.is_int else e.value
    if not isinstance(e, E.BinOp) or e.op not in _RING or e.dtype != t.name:
        return None
    if e.op is sem.Op.MUL:
        a, b = _linear_part(e.a, t), _linear_part(e.b, t)
        if a is None or b is None or (a[0] and b[0]):
            return None  # a product of two variables: not linear
        (ta, ca), (tb, cb) = a, b
        for v, k in ta.items():
            terms[v] = terms.get(v, 0) + k * cb
        for v, k in tb.items():
            terms[v] = terms.get(v, 0) + k * ca
        return ca * cb
    ca0 = _linear(e.a, t, terms)
    if ca0 is None:
        return None
    if e.op is sem.Op.ADD:
        cb0 = _linear(e.b, t, terms)
        return None if cb0 is None else ca0 + cb0
    sub = _linear_part(e.b, t)
    if sub is None:
        return None
    for v, k in sub[0].items():
        terms[v] = terms.get(v, 0) - k
    return ca0 - sub[1]


def _linear_part(e: E.Expr, t: sem.DType) -> tuple[dict[E.Var, int], int] | None:
    terms: dict[E.Var, int] = {}
    c = _linear(e, t, terms)
    return None if c is None else (terms, c)


def _affine(e: E.BinOp, t: sem.DType, terms: dict[E.Var, int], c0: int) -> IntFn:
    """``c0 + sum(k * v)`` wrapped once to ``t``: what the nested closures compute for a
    linear tree (``_linear``; wrapping commutes with ring operations), with one Python
    expression instead of a call per node. Every variable is read (also one whose
    coefficient cancelled), and the first unbound one in evaluation order is the error."""
    lo, hi = int(t.min), int(t.max)
    order = tuple(terms)
    items = tuple(terms.items())

    def unbound(env: Mapping[E.Var, int]) -> CompileError:
        v = next(x for x in order if x not in env)
        return CompileError(f"variable {v.name} is not bound where it is evaluated")

    if len(items) == 1:
        ((v1, k1),) = items

        def one(env: Mapping[E.Var, int]) -> int:
            try:
                r = c0 + env[v1] * k1
            except KeyError:
                raise unbound(env) from None
            return r if lo <= r <= hi else sem.wrap(r, t)
        return one
    if len(items) == 2:
        (v1, k1), (v2, k2) = items

        def two(env: Mapping[E.Var, int]) -> int:
            try:
                r = c0 + env[v1] * k1 + env[v2] * k2
            except KeyError:
                raise unbound(env) from None
            return r if lo <= r <= hi else sem.wrap(r, t)
        return two

    def many(env: Mapping[E.Var, int]) -> int:
        try:
            r = c0 + sum(env[v] * k for v, k in items)
        except KeyError:
            raise unbound(env) from None
        return r if lo <= r <= hi else sem.wrap(r, t)
    return many


def _binop(e: E.BinOp) -> IntFn:
    t = sem.DTYPES.get(e.dtype)
    if t is None or not t.is_int:
        return _cannot(e)
    terms: dict[E.Var, int] = {}
    c0 = _linear(e, t, terms)
    if c0 is not None and terms:
        return _affine(e, t, terms, c0)
    src = _Source()
    return _generated(_apply(e, t, src, 0)[0], src)


#: the operators whose exact result may be undefined (a division by zero, a shift amount out of
#: range): evaluated by a call that checks (``_partial``)
_PARTIAL = (sem.Op.FLOORDIV, sem.Op.FLOORMOD, sem.Op.SHR, sem.Op.SHL)
#: exact operators written as Python's own operators (by the function ``INT_OPS`` gives, so
#: only where it is that function): ``+ - *``, and ``min``/``max`` as a comparison choosing
#: the first operand on a tie, as the built-ins do
_INFIX: dict[Any, str] = {operator.add: "+", operator.sub: "-", operator.mul: "*"}
_CHOICE: dict[Any, str] = {min: "<=", max: ">="}
#: nesting below which a subtree is compiled as a function of its own and called (Python's
#: parser refuses 200 nested parentheses; a DMA field nests about ten)
_MAX_DEPTH = 24

#: bounds of a generated value: every value it can take lies in ``[lo, hi]`` (infinite ends:
#: unbounded)
_Span = tuple[float, float]
_ANY: _Span = (-math.inf, math.inf)


class _Source:
    """The text of one generated function computing an expression tree (``_generated``) and the
    objects its names stand for, in order: the variables (``env[_a0]``) and the helpers (the
    exact operators, the wrapping types, compiled subtrees), and the constants."""

    def __init__(self) -> None:
        self.args: list[Any] = []
        self.names: dict[int, str] = {}  # id of a variable or a helper -> its argument name
        self.temps = 0

    def name(self, obj: Any) -> str:
        """The argument name standing for ``obj`` (one per object)."""
        n = self.names.get(id(obj))
        if n is None:
            n = self.names[id(obj)] = f"_a{len(self.args)}"
            self.args.append(obj)
        return n

    def const(self, v: int) -> str:
        """An argument name standing for the integer ``v``, one per occurrence: the text is
        then the same for trees that differ only in their constants (a layer's candidates,
        a stage's tiles), so they share its compiled code."""
        self.args.append(v)
        return f"_a{len(self.args) - 1}"

    def temp(self) -> str:
        self.temps += 1
        return f"_r{self.temps - 1}"

    def wrapped(self, value: str, span: _Span, t: sem.DType) -> tuple[str, _Span]:
        """``value`` (every value of it in ``span``) wrapped to ``t``: as is where ``span`` lies
        in ``t``'s range (wrapping changes nothing there), else the range test inline and
        ``sem.wrap`` only outside it (as every closure of this module wraps)."""
        lo, hi = int(t.min), int(t.max)
        if lo <= span[0] and span[1] <= hi:
            return f"({value})", span
        r = self.temp()
        return f"({r} if {lo} <= ({r} := {value}) <= {hi} else _wrap({r}, {self.name(t)}))", \
            (lo, hi)


def _text(e: Any, src: _Source, depth: int) -> tuple[str, _Span]:
    """Python source computing ``e`` under ``env`` as ``compile_int(e)`` does, node by node,
    and the span of its values: a variable is read from ``env`` (a missing one raises
    ``KeyError``, which the generated function turns into the unbound variable's error), a
    constant is its value, a linear subtree one sum wrapped once (``_linear``), any other
    integer operator or cast its exact result wrapped (``_Source.wrapped``: not where its
    operands' spans keep it in range, as in the clamps ``min(max(x, 0), n)``); anything else,
    and a subtree ``_MAX_DEPTH`` deep, is the call of its own compiled function."""
    cls = type(e)
    if cls is E.Var:
        return f"env[{src.name(e)}]", _ANY
    if cls is int:
        return src.const(e), (e, e)
    if cls is E.IntImm:
        v = _constant(e)
        assert v is not None
        return src.const(v), (v, v)
    if depth >= _MAX_DEPTH or not isinstance(e, (E.BinOp, E.Cast)):
        return f"{src.name(_COMPILE(e))}(env)", _ANY
    t = sem.DTYPES.get(e.dtype)
    if isinstance(e, E.Cast):
        if t is None or t.is_float:
            return f"{src.name(_cannot(e))}(env)", _ANY
        return src.wrapped(*_text(e.value, src, depth + 1), t)
    if t is None or not t.is_int:
        return f"{src.name(_cannot(e))}(env)", _ANY
    terms: dict[E.Var, int] = {}
    c0 = _linear(e, t, terms)
    if c0 is not None and terms:
        return src.wrapped(" + ".join([src.const(c0), *(f"env[{src.name(v)}] * {src.const(k)}"
                                                    for v, k in terms.items())]), _ANY, t)
    return _apply(e, t, src, depth)


def _apply(e: E.BinOp, t: sem.DType, src: _Source, depth: int) -> tuple[str, _Span]:
    """``_text`` of a ``t``-typed operator node that is not linear: its exact operator on its
    operands' texts, wrapped."""
    exact = sem.INT_OPS[e.op]  # (an operator without an exact integer meaning: refused here)
    (a, sa), (b, sb) = _text(e.a, src, depth + 1), _text(e.b, src, depth + 1)
    if e.op in _PARTIAL:
        return f"{src.name(_partial(e, t))}({a}, {b})", (int(t.min), int(t.max))
    infix, choice = _INFIX.get(exact), _CHOICE.get(exact)
    if infix is not None:
        return src.wrapped(f"{a} {infix} {b}", _span(exact, sa, sb), t)
    if choice is not None:
        x, y = src.temp(), src.temp()
        return src.wrapped(f"({x} if ({x} := {a}) {choice} ({y} := {b}) else {y})",
                           _span(exact, sa, sb), t)
    return src.wrapped(f"{src.name(exact)}({a}, {b})", _ANY, t)


def _span(exact: Callable[[int, int], int], a: _Span, b: _Span) -> _Span:
    """The span of ``exact(x, y)`` for ``x`` in ``a`` and ``y`` in ``b`` (``+ - * min max``:
    monotone in each operand, so the ends' results bound it)."""
    if exact is operator.add:
        return a[0] + b[0], a[1] + b[1]
    if exact is operator.sub:
        return a[0] - b[1], a[1] - b[0]
    if exact is min or exact is max:
        return exact(a[0], b[0]), exact(a[1], b[1])
    if math.inf in (abs(a[0]), abs(a[1]), abs(b[0]), abs(b[1])):
        return _ANY  # (an infinite end times 0 has no value)
    ends = [x * y for x in a for y in b]
    return min(ends), max(ends)


def _partial(e: E.BinOp, t: sem.DType) -> Callable[[int, int], int]:
    """``e``'s operator on its operands' values: an error where it has no meaning
    (``sem.undefined``), else its exact result wrapped to ``t``."""
    op = e.op
    exact = sem.INT_OPS[op]
    lo, hi = int(t.min), int(t.max)

    def partial(x: int, y: int) -> int:
        why = sem.undefined(op, x, y, t)
        if why is not None:
            raise CompileError(f"{why} in {e}")
        r = exact(x, y)
        return r if lo <= r <= hi else sem.wrap(r, t)
    return partial


def _generated(body: str, src: _Source) -> IntFn:
    """The generated function returning ``body`` (``_text``, its names ``src``'s): a tree's
    whole computation in one call (a DMA field's clamps ``min(max(x - c, 0), n)`` and their
    sums: flatten evaluates every field of every DMA per tile) instead of one closure per node.
    The code is made once per text (``_maker``: the text names its variables, helpers and
    constants by position, so trees differing only in those share it)."""
    return _maker(body, len(src.args))(*src.args)


@functools.lru_cache(maxsize=2048)
def _maker(body: str, nargs: int) -> Callable[..., IntFn]:
    """The maker of generated functions computing ``body`` (``_text``), its arguments the
    objects the names ``_a0`` .. stand for; an unbound variable's ``KeyError`` becomes the
    error ``_var`` raises. Generated from ``_text``'s output alone (names, integers, operators);
    its code kept across processes with vta's dataclass methods (``vta._dataclass_code.code_of``:
    compiling the texts, a DMA field's long sums, was about 0.5 % of a serial cold run)."""
    params = ", ".join(f"_a{k}" for k in range(nargs))
    src = (f"def make({params}):\n"
           f"    def fn(env):\n"
           f"        try:\n"
           f"            return {body}\n"
           f"        except KeyError as k:\n"
           f"            raise _unbound(k) from None\n"
           f"    return fn\n")
    scope: dict[str, Any] = {"_wrap": sem.wrap, "_unbound": _unbound}
    exec(code_of(src), scope)  # generated from the expression's structure alone
    made: Callable[..., IntFn] = scope["make"]
    return made


def _unbound(k: KeyError) -> CompileError:
    """The error of reading an unbound variable (``_var``'s), from ``env``'s ``KeyError``."""
    v = k.args[0]
    return CompileError(f"variable {v.name} is not bound where it is evaluated")


def _constant(e: E.Expr) -> int | None:
    """The value ``compile_int(e)`` returns under every environment when ``e`` is a
    constant (``_imm``'s), else None: an operator total on a constant operand reads it
    directly instead of calling its closure (the padding clamps ``max(x - c, 0)``,
    ``min(.., n)`` of every DMA field the passes evaluate per tile)."""
    if not isinstance(e, E.IntImm):
        return None
    t = sem.DTYPES.get(e.dtype)
    return sem.wrap(e.value, t) if t is not None and t.is_int else e.value


def _cast(e: E.Cast) -> IntFn:
    t = sem.DTYPES.get(e.dtype)
    if t is None or t.is_float:
        return _cannot(e)
    src = _Source()
    return _generated(src.wrapped(*_text(e.value, src, 1), t)[0], src)


def _imm(e: E.IntImm) -> IntFn:
    v = _constant(e)
    assert v is not None
    return _const(v)


#: the compiled form of each node class (Python ints are constants)
_COMPILE: Dispatch[IntFn] = Dispatch("integer evaluation", {
    int: _const,
    E.IntImm: _imm,
    E.Var: _var,
    E.Cast: _cast,
    E.BinOp: _binop,
}, default=_cannot)
