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


def _wrapper(t: sem.DType) -> Callable[[int], int]:
    lo, hi = int(t.min), int(t.max)

    def wrap(x: int) -> int:
        return x if lo <= x <= hi else sem.wrap(x, t)
    return wrap


def _binop(e: E.BinOp) -> IntFn:
    t = sem.DTYPES.get(e.dtype)
    if t is None or not t.is_int:
        return _cannot(e)
    fa, fb = _COMPILE(e.a), _COMPILE(e.b)
    op = e.op
    exact = sem.INT_OPS[op]
    wrap = _wrapper(t)
    if op in (sem.Op.FLOORDIV, sem.Op.FLOORMOD, sem.Op.SHR, sem.Op.SHL):
        def partial(env: Mapping[E.Var, int]) -> int:
            x, y = fa(env), fb(env)
            why = sem.undefined(op, x, y, t)
            if why is not None:
                raise CompileError(f"{why} in {e}")
            return wrap(exact(x, y))
        return partial
    lo, hi = int(t.min), int(t.max)

    def total(env: Mapping[E.Var, int]) -> int:
        r = exact(fa(env), fb(env))
        return r if lo <= r <= hi else sem.wrap(r, t)  # the wrap inline: the hot path
    return total


def _cast(e: E.Cast) -> IntFn:
    t = sem.DTYPES.get(e.dtype)
    if t is None or t.is_float:
        return _cannot(e)
    inner, wrap = _COMPILE(e.value), _wrapper(t)
    return lambda env: wrap(inner(env))


def _imm(e: E.IntImm) -> IntFn:
    t = sem.DTYPES.get(e.dtype)
    return _const(sem.wrap(e.value, t) if t is not None and t.is_int else e.value)


#: the compiled form of each node class (Python ints are constants)
_COMPILE: Dispatch[IntFn] = Dispatch("integer evaluation", {
    int: _const,
    E.IntImm: _imm,
    E.Var: _var,
    E.Cast: _cast,
    E.BinOp: _binop,
}, default=_cannot)
