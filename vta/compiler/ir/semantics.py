"""What each scalar operator of the IR means: the one table every evaluator reads.

Constant folding (``expr``), the loop-nest interpreter (``interp``), the SIMT emulator
(``vta.gpu.emulator``), index evaluation (``compile_int``, which the accelerator passes use)
and the TC interpreter all compute through this module, and the CUDA renderer
(``vta.gpu.cuda``) renders code that computes the same bits. ``tests/compiler/
test_semantics_diff.py`` draws random typed expressions and loop nests and checks that they
agree. Types are ``vta.dtypes.DType``.

The meaning, for a node of dtype ``t`` (a binary node's ``dtype`` is its result type; its
operands' values are taken as the integers they are, not first converted to ``t``):

* **Integers wrap.** ``+ - * <<`` compute the exact integer result and reduce it to ``t``'s
  width, two's complement for signed types (``int32``: ``2**31`` is ``-2**31``). A narrowing
  cast wraps the same way. Values of integer type are always in range: there is no wider
  intermediate that escapes the wrap, whether a value is a numpy array or a Python ``int``.
* **Division floors.** ``//`` rounds toward minus infinity and ``%`` takes the divisor's sign
  (Python's ``//`` and ``%``; on floats numpy's ``floor_divide`` and ``mod``). Division or
  remainder by zero, and ``t.min // -1`` / ``t.min % -1`` on a signed type, have no meaning
  (C leaves them undefined): folding leaves such a node alone and the evaluators raise. The
  CUDA form is C's truncating ``/`` and ``%`` where both operands are provably non-negative
  (there floor and truncation agree), else the prelude's ``vta_floordiv``/``vta_floormod``.
* **Shifts.** ``>>`` is arithmetic on signed types (it floors: ``-1 >> 1 == -1``), logical on
  unsigned; ``<<`` wraps. The amount must lie in ``[0, bits)`` of ``t``; any other amount has
  no meaning (C leaves it undefined), so folding leaves it and the evaluators raise.
* **min / max** on integers are exact; on floats they are C's ``fmin``/``fmax`` (a NaN
  operand is ignored), which is what CUDA's ``min``/``max`` and ``__hmin``/``__hmax`` do,
  with ``-0.0`` ordered below ``+0.0`` (IEEE 754-2019 ``minimumNumber``/``maximumNumber``):
  C leaves the sign of ``fmin(+0.0, -0.0)`` open and numpy's answer depends on whether its
  SIMD loop or its scalar loop ran, so the IR fixes it (``FMIN``/``FMAX``, which also
  reduce and accumulate in place in any order to the same bits).
* **Comparisons** compare the operands' values exactly; ``and``/``or``/``not`` are logical.
* **True division** (``/``, ``Op.DIV``) is defined on floats only: IEEE division in the node's
  type (``x / 0`` is ``inf`` or NaN, as C and numpy give); integer division is ``//``.
* **Math functions** (``MATH``: ``exp log tanh sqrt rsqrt fabs``) are unary nodes on floats,
  numpy's meaning in the node's type (``log`` of a negative value and ``sqrt`` of one are NaN,
  ``log(0)`` is ``-inf``, ``rsqrt(x)`` is ``1 / sqrt(x)``); CUDA renders the C math function of
  the same name (``expf``, ``rsqrtf``, ...; ``float16`` through ``float``), which may differ in
  the last bits (CUDA documents 1-2 ulp for ``expf``/``logf``/``rsqrtf``): float results are
  compared with a tolerance.
* **nextafter** (``Op.NEXTAFTER``, floats only): the next value of ``a``'s type after ``a``
  toward ``b`` (C's ``nextafter``/``nextafterf``; numpy's ``nextafter``), exact.
* **Bitwise calls** (``bitwise_and/or/xor``) act on the two's complement bits.
* **Floats** are IEEE in their own width: each ``float16`` operation is rounded to
  ``float16``. Casts from a float to an integer truncate toward zero; a value outside the
  target's range (or NaN) has no meaning. CUDA may contract ``a * b + c`` into one fused
  multiply-add, so float results on the GPU are compared with a tolerance, never bit for bit.

``binary(op, a, b, t)`` applies an operator to Python ints (result: a Python int) or numpy
values (result: numpy values of ``t``); ``undefined(op, a, b, t)`` says why an application has
no meaning (or None); ``cast(x, t)`` converts. ``INT_OPS`` gives the exact Python-int
operators for code that reasons about integers symbolically (affine analysis, intervals).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from vta.dtypes import DTYPES, DType, dtype

__all__ = ["Op", "OpDef", "OPS", "FloatMinMax", "FMIN", "FMAX", "MathDef", "MATH", "math",
           "INT_OPS", "CMP", "wrap", "binary", "undefined", "cast",
           "compare", "np_dtype", "DType", "DTYPES", "dtype"]


class Op(Enum):
    """The IR's binary scalar operators (the expression node classes and the typed calls
    name one each)."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    FLOORDIV = "//"
    FLOORMOD = "%"
    MIN = "min"
    MAX = "max"
    SHR = ">>"
    SHL = "<<"
    BIT_AND = "&"
    BIT_OR = "|"
    BIT_XOR = "^"
    DIV = "/"
    NEXTAFTER = "nextafter"


class FloatMinMax:
    """Float ``min``/``max`` as the IR means them: C's ``fmin``/``fmax`` (a NaN operand is
    ignored) with ``-0.0 < +0.0``. The order makes the operator commutative and associative
    on every value, so an elementwise call, a reduction (``reduce``) and an in-place
    scatter (``at``) give the same bits whatever order the operands meet in; the
    ``np.fmin``/``np.fmax`` underneath are free to pick either zero."""

    def __init__(self, base: np.ufunc, low: bool) -> None:
        self.base = base
        self.low = low  # min: a -0.0 among the zeros wins; max: a +0.0 does

    def _zero_wins(self, v: Any) -> Any:
        """Where ``v`` is the zero that wins a tie of zeros."""
        sign = np.signbit(v)
        return np.equal(v, 0) & (sign if self.low else ~sign)

    def _settle(self, r: Any, winner: Any) -> Any:
        """``r`` with each zero given the winning sign where ``winner`` says one took part."""
        z = np.asarray(0.0 if not self.low else -0.0, dtype=np.asarray(r).dtype)
        zero = np.equal(r, 0)
        return np.where(zero, np.where(winner, z, -z), r)

    def __call__(self, a: Any, b: Any) -> Any:
        r = self.base(a, b)
        return self._settle(r, self._zero_wins(a) | self._zero_wins(b))

    def reduce(self, v: Any, axis: Any = None, keepdims: bool = False) -> Any:
        r = self.base.reduce(v, axis=axis, keepdims=keepdims)
        return self._settle(r, np.any(self._zero_wins(v), axis=axis, keepdims=keepdims))

    def at(self, acc: np.ndarray, idx: Any, vals: Any) -> None:
        """``acc[idx] = op(acc[idx], vals)`` in place, repeated indices combining in turn."""
        winner = self._zero_wins(acc)
        np.logical_or.at(winner, idx, self._zero_wins(vals))
        self.base.at(acc, idx, vals)
        acc[...] = self._settle(acc, winner)


#: the IR's float ``min`` and ``max`` (the module docstring)
FMIN = FloatMinMax(np.fmin, low=True)
FMAX = FloatMinMax(np.fmax, low=False)


@dataclass(frozen=True, slots=True)
class OpDef:
    """One operator's meaning: ``exact`` on Python ints (before the wrap), ``int_np`` on int64
    numpy values (before the wrap; exact for every type up to 32 bits, wrapping mod 2**64
    for 64-bit types, which the wrap to 64 bits does not change), ``float_np`` on floats of
    the node's type (None: not defined on floats)."""

    op: Op
    exact: Callable[[int, int], int] | None
    int_np: Callable[[Any, Any], Any] | None
    float_np: Callable[[Any, Any], Any] | None


OPS: dict[Op, OpDef] = {d.op: d for d in (
    OpDef(Op.ADD, operator.add, np.add, np.add),
    OpDef(Op.SUB, operator.sub, np.subtract, np.subtract),
    OpDef(Op.MUL, operator.mul, np.multiply, np.multiply),
    OpDef(Op.FLOORDIV, operator.floordiv, np.floor_divide, np.floor_divide),
    OpDef(Op.FLOORMOD, operator.mod, np.mod, np.mod),
    OpDef(Op.MIN, min, np.minimum, FMIN),
    OpDef(Op.MAX, max, np.maximum, FMAX),
    OpDef(Op.SHR, operator.rshift, np.right_shift, None),
    OpDef(Op.SHL, operator.lshift, np.left_shift, None),
    OpDef(Op.BIT_AND, operator.and_, np.bitwise_and, None),
    OpDef(Op.BIT_OR, operator.or_, np.bitwise_or, None),
    OpDef(Op.BIT_XOR, operator.xor, np.bitwise_xor, None),
    OpDef(Op.DIV, None, None, np.true_divide),
    OpDef(Op.NEXTAFTER, None, None, np.nextafter),
)}

#: each operator exactly on Python ints (no wrap): for symbolic reasoning about integers
INT_OPS: dict[Op, Callable[[int, int], int]] = {op: d.exact for op, d in OPS.items()
                                                if d.exact is not None}


def _rsqrt(x: Any) -> Any:
    return np.reciprocal(np.sqrt(x))


@dataclass(frozen=True, slots=True)
class MathDef:
    """A unary math function on floats: ``np_fn`` its meaning (numpy, in the value's type),
    ``cuda`` the C math function of the ``float`` version (``double``: without the ``f``)."""

    name: str
    np_fn: Callable[[Any], Any]
    cuda: str


#: the IR's unary math functions (``vta.compiler.ir.expr.Math`` names one), by name
MATH: dict[str, MathDef] = {d.name: d for d in (
    MathDef("exp", np.exp, "expf"),
    MathDef("log", np.log, "logf"),
    MathDef("tanh", np.tanh, "tanhf"),
    MathDef("sqrt", np.sqrt, "sqrtf"),
    MathDef("rsqrt", _rsqrt, "rsqrtf"),
    MathDef("fabs", np.abs, "fabsf"),
)}


def math(fn: str, x: Any, t: DType) -> Any:
    """Math function ``fn`` (``MATH``) of ``x`` in the float type ``t`` (numpy values of ``t``)."""
    if t.kind != "float":
        raise TypeError(f"math function {fn} is defined on floats, not {t.name}")
    npt = t.np
    with np.errstate(all="ignore"):  # IEEE: inf and NaN are values
        return _scalar(np.asarray(MATH[fn].np_fn(np.asarray(x, npt)), npt))

#: comparisons, by the ``Cmp`` node's operator (numpy ufuncs: also exact on Python ints)
CMP: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal}

_PY_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}


def np_dtype(t: str | DType) -> np.dtype[Any]:
    """The numpy dtype of IR type ``t``."""
    return (t if isinstance(t, DType) else dtype(t)).np


def wrap(x: int, t: DType) -> int:
    """Python int ``x`` reduced to the integer type ``t`` (two's complement when signed)."""
    if t.kind == "bool":
        return int(x != 0)
    m = 1 << t.bits
    x &= m - 1
    if t.kind == "int" and x >> (t.bits - 1):
        x -= m
    return x


def _any(bad: Any, mask: Any) -> bool:
    if mask is not None:
        bad = np.logical_and(bad, mask)
    return bool(np.any(bad))


def undefined(op: Op, a: Any, b: Any, t: DType, mask: Any = None) -> str | None:
    """Why ``a op b`` in type ``t`` has no meaning (for some active lane: ``mask``, if given,
    selects the lanes that count), or None when it has one."""
    if t.kind not in ("int", "uint"):
        return None
    if op in (Op.FLOORDIV, Op.FLOORMOD):
        if _any(np.equal(b, 0), mask):
            return "division by zero"
        if t.kind == "int" and _any(np.equal(a, t.min) & np.equal(b, -1), mask):
            return f"{t.name} overflow in {t.min} {op.value} -1"
    elif op in (Op.SHR, Op.SHL):
        if _any(np.less(b, 0) | np.greater_equal(b, t.bits), mask):
            return f"shift amount outside [0, {t.bits}) for {t.name}"
    return None


def binary(op: Op, a: Any, b: Any, t: DType) -> Any:
    """``a op b`` as the IR means it in type ``t`` (the module docstring): Python ints give a
    Python int, anything else numpy values of ``t``. The caller has checked ``undefined``."""
    d = OPS[op]
    if t.kind in ("int", "uint"):
        if d.exact is None:
            raise TypeError(f"operator {op.value} is not defined on {t.name}")
        ta, tb = type(a), type(b)
        if ta is int and tb is int:
            return wrap(d.exact(a, b), t)
        npt = t.np
        if op in (Op.FLOORDIV, Op.FLOORMOD):  # lanes masked off may divide by zero
            with np.errstate(divide="ignore", over="ignore"):
                return _int_np(d, a, b, ta, tb, npt, t)
        return _int_np(d, a, b, ta, tb, npt, t)
    if t.kind == "float":
        if d.float_np is None:
            raise TypeError(f"operator {op.value} is not defined on {t.name}")
        npt = t.np
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # IEEE: inf, NaN
            return _scalar(np.asarray(d.float_np(np.asarray(a, npt), np.asarray(b, npt)), npt))
    raise TypeError(f"operator {op.value} is not defined on {t.name}")


def _int_np(d: OpDef, a: Any, b: Any, ta: type, tb: type, npt: np.dtype[Any], t: DType) -> Any:
    assert d.int_np is not None
    if _native(a, ta, npt, t) and _native(b, tb, npt, t):
        # numpy's own operator on values of t wraps exactly as the exact result does
        return _scalar(d.int_np(a, b))
    r = d.int_np(np.asarray(a, np.int64), np.asarray(b, np.int64))
    return _scalar(r.astype(npt))


def _native(x: Any, tx: type, npt: np.dtype[Any], t: DType) -> bool:
    """Whether numpy computes on ``x`` in ``t`` itself (an array or scalar of ``t``, or a
    Python int that ``t`` holds: numpy takes it at ``t``'s type)."""
    if tx is int:
        return bool(t.min <= x <= t.max)
    return getattr(x, "dtype", None) == npt


def _scalar(r: Any) -> Any:
    return r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r


def compare(op: str, a: Any, b: Any) -> Any:
    """``a op b`` on the operands' values (a Python bool for Python scalars)."""
    if type(a) is int and type(b) is int:
        return _PY_CMP[op](a, b)
    return CMP[op](a, b)


def cast(x: Any, t: DType) -> Any:
    """``x`` converted to ``t``: integers wrap, floats truncate toward zero into integers,
    anything nonzero is ``True`` as a bool. A Python int cast to an integer type stays a
    Python int; anything else becomes numpy values of ``t``."""
    if type(x) is int and t.kind in ("int", "uint"):
        return wrap(x, t)
    a = np.asarray(x)
    npt = t.np
    if a.dtype == npt:
        return x
    if t.kind in ("int", "uint") and a.dtype.kind == "f":
        return _scalar(np.trunc(a).astype(np.int64).astype(npt))
    if a.dtype.kind == "f" or t.kind == "float":
        # a value past a float type's range is +-inf (IEEE 754 rounding, as a GPU gives it):
        # the result, not a warning
        with np.errstate(over="ignore"):
            return _scalar(a.astype(npt))
    return _scalar(a.astype(npt))
