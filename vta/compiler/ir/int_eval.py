"""Integer evaluation of index expressions: one compiled form, read from ``semantics``.

``compile_int(e)`` walks ``e`` once and returns a function of an environment (variable ->
Python int) computing ``e``'s value as ``semantics`` defines it: each operator's exact result
wrapped to its node's type, casts wrapping to theirs, and an error (``CompileError``) where the
operation has no meaning (a division by zero, a shift amount outside the type's width) or a
variable is unbound. ``evaluate(e, env)`` is the same computation for one environment. The
accelerator passes evaluate DMA fields, micro-op indices and loop bounds with it, under many
environments (a tile loop), so the closures stay small: an operator on ``int32`` whose operands
cannot leave 32 bits costs one Python operation and one range check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    fa, fb = _COMPILE(e.a), _COMPILE(e.b)
    op = e.op
    exact = sem.INT_OPS[op]
    lo, hi = int(t.min), int(t.max)  # every closure wraps inline (a call less per value)
    if op in (sem.Op.FLOORDIV, sem.Op.FLOORMOD, sem.Op.SHR, sem.Op.SHL):
        def partial(env: Mapping[E.Var, int]) -> int:
            x, y = fa(env), fb(env)
            why = sem.undefined(op, x, y, t)
            if why is not None:
                raise CompileError(f"{why} in {e}")
            r = exact(x, y)
            return r if lo <= r <= hi else sem.wrap(r, t)
        return partial
    ka, kb = _constant(e.a), _constant(e.b)
    if kb is not None:  # a clamp's bound, an offset: the constant read once, here
        def total_b(env: Mapping[E.Var, int]) -> int:
            r = exact(fa(env), kb)
            return r if lo <= r <= hi else sem.wrap(r, t)
        return total_b
    if ka is not None:
        def total_a(env: Mapping[E.Var, int]) -> int:
            r = exact(ka, fb(env))
            return r if lo <= r <= hi else sem.wrap(r, t)
        return total_a

    def total(env: Mapping[E.Var, int]) -> int:
        r = exact(fa(env), fb(env))
        return r if lo <= r <= hi else sem.wrap(r, t)  # the wrap inline: the hot path
    return total


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
    inner = _COMPILE(e.value)
    lo, hi = int(t.min), int(t.max)

    def cast(env: Mapping[E.Var, int]) -> int:
        x = inner(env)
        return x if lo <= x <= hi else sem.wrap(x, t)  # the wrap inline, as _binop's
    return cast


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
