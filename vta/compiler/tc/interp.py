"""The reference interpreter of TC: numpy, straight from the language's semantics.

``interpret(cdef, concrete, inputs)`` runs a checked definition at concrete ranges
(``ranges.instantiate``) and returns every tensor it defines. It uses no compiler code (no
tensor IR, no schedule, no lowering): it is what every compiled result, on the accelerator
and on the GPU, is checked against.

Semantics (docs/tc.md), per statement in order:

* the tensor's new value starts as: its previous value (a tensor written again, without
  ``!``), the reduction's identity everywhere (the ``!`` forms), or zeros (a new tensor
  written with ``=``);
* the right-hand side is evaluated at every point of the statement's rectangular domain; all
  reads see the values from *before* the statement;
* ``=`` stores the value at the left-hand point; a reduction operator combines the values
  of all points with the same left-hand indices, then combines that with the starting value;
* arithmetic is typed as the typed tree says (every conversion explicit) and means what the
  IR's operators mean (``vta.compiler.ir.semantics``, read here): integers wrap (two's
  complement), ``/`` and ``%`` on integers floor, ``>>`` is arithmetic, casts to narrower
  integers wrap, ``max``/``min`` on floats ignore NaN (C's ``fmax``). (A division by zero
  is not reported here: sema's range checks are where TC refuses programs.)

Large domains are evaluated in chunks (whole index grids up to ``CHUNK`` points at once,
looping over reduction indices first), so memory stays bounded. Integer results do not
depend on the order of a reduction (wrapping addition and multiplication are associative);
float sums do, so compiled float results are compared with a tolerance.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from vta.compiler.ir import semantics as sem
from vta.compiler.tc import ast as A
from vta.compiler.tc.ranges import Concrete, render
from vta.compiler.tc.sema import DTYPE_NAMES, CheckedDef, CheckedStmt, identity, is_float
from vta.errors import TcRangeError, TcSizeError

__all__ = ["interpret", "CHUNK", "NP_DTYPE"]

#: largest number of domain points evaluated at once
CHUNK = 1 << 21

#: TC's scalar types -> numpy scalar types (read from ``vta.dtypes.DTYPES``)
NP_DTYPE: dict[str, Any] = {n: sem.dtype(n).np.type for n in (*DTYPE_NAMES.values(), "bool")}


def interpret(cdef: CheckedDef, concrete: Concrete,
              inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor ``cdef`` defines (final values), computed from ``inputs`` (by name, of the
    declared shapes and dtypes)."""
    env: dict[str, np.ndarray] = {}
    for t in cdef.inputs:
        if t.name not in inputs:
            raise TcSizeError(f"{cdef.name}: no value given for input {t.name}", cdef.source)
        a = np.asarray(inputs[t.name])
        want = concrete.shapes[t.name]
        if a.shape != want or a.dtype != NP_DTYPE[t.dtype]:
            raise TcSizeError(f"{cdef.name}: input {t.name} must be {t.dtype}{list(want)}, got "
                              f"{a.dtype}{list(a.shape)}", cdef.source)
        env[t.name] = a
    with np.errstate(all="ignore"):
        for st in cdef.stmts:
            env[st.tensor] = _statement(st, concrete, env, cdef)
    return {k: v for k, v in env.items() if k not in inputs}


class _OutOfBounds(Exception):
    """A read's index outside its tensor (a gather's data): reported with the statement."""

    def __init__(self, read: A.TRead, dim: int, value: int, size: int) -> None:
        super().__init__()
        self.read, self.dim, self.value, self.size = read, dim, value, size


def _statement(st: CheckedStmt, c: Concrete, env: dict[str, np.ndarray],
               cdef: CheckedDef) -> np.ndarray:
    """The new value of ``st.tensor`` (a gather out of bounds: ``TcRangeError``)."""
    try:
        return _statement_value(st, c, env)
    except _OutOfBounds as e:
        raise TcRangeError(
            f"{st.label}: {render(e.read)} reads index {e.value} of dimension {e.dim} of "
            f"{e.read.tensor} (size {e.size}): a data-dependent index out of bounds",
            cdef.source, st.pos) from None


def _statement_value(st: CheckedStmt, c: Concrete, env: dict[str, np.ndarray]) -> np.ndarray:
    dt = NP_DTYPE[st.dtype]
    shape = c.shapes[st.tensor]
    ranges = c.ranges[st.index]
    if st.prev >= 0 and not st.bang:
        out = env[st.tensor].copy()
    elif st.init is not None:  # accumulating into the caller's values
        out = env[st.init].astype(dt, copy=True)
    elif st.op != "=":
        out = np.full(shape, identity(st.op, st.dtype), dt)
    else:
        out = np.zeros(shape, dt)
    vars_ = list(st.vars)
    ext = [ranges[v][1] - ranges[v][0] for v in vars_]
    nl = len(st.lhs)
    # loop over reduction indices first, then output indices, until the rest fits a chunk
    order = list(range(nl, len(vars_))) + list(range(nl))
    looped: list[int] = []
    while looped != order and int(np.prod([ext[i] for i in range(len(vars_))
                                            if i not in looped], dtype=np.int64)) > CHUNK:
        looped.append(order[len(looped)])
    for point in itertools.product(*(range(ext[i]) for i in looped)):
        fixed = dict(zip(looped, point, strict=True))
        grids: dict[str, np.ndarray] = {}
        for i, v in enumerate(vars_):
            lo, hi = ranges[v]
            shp = [1] * len(vars_)
            if i in fixed:
                g = np.array([lo + fixed[i]], np.int32)
            else:
                g = np.arange(lo, hi, dtype=np.int32)
                shp[i] = hi - lo
            grids[v] = g.reshape(shp)
        chunk_shape = tuple(1 if i in fixed else ext[i] for i in range(len(vars_)))
        value = np.broadcast_to(_eval(st.rhs, grids, c.sizes, env), chunk_shape)
        region = tuple(slice(ranges[v][0] + fixed[i], ranges[v][0] + fixed[i] + 1) if i in fixed
                       else slice(ranges[v][0], ranges[v][1]) for i, v in enumerate(st.lhs))
        if st.op == "=":
            out[region] = value.reshape(chunk_shape[:nl]).astype(dt)
            continue
        part = _reduce(st.op, value, tuple(range(nl, len(vars_))), dt)
        out[region] = _combine(st.op, out[region], part.reshape(chunk_shape[:nl]))
    return out


def _reduce(op: str, v: np.ndarray, axes: tuple[int, ...], dt: Any) -> np.ndarray:
    if not axes:
        return v.astype(dt)
    if op == "+":
        return np.sum(v, axis=axes, dtype=dt)
    if op == "*":
        return np.prod(v, axis=axes, dtype=dt)
    fn = sem.FMAX if op == "max" else sem.FMIN
    return np.asarray(fn.reduce(v, axis=axes)).astype(dt)


def _combine(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op == "+":
        return (a + b).astype(a.dtype)
    if op == "*":
        return (a * b).astype(a.dtype)
    return np.asarray((sem.FMAX if op == "max" else sem.FMIN)(a, b)).astype(a.dtype)


#: TC's arithmetic operators as the IR's (``semantics.OPS``; TC's ``/`` is the IR's ``//``)
_ARITH: dict[str, sem.Op] = {"+": sem.Op.ADD, "-": sem.Op.SUB, "*": sem.Op.MUL,
                             "/": sem.Op.FLOORDIV, "%": sem.Op.FLOORMOD, "<<": sem.Op.SHL,
                             ">>": sem.Op.SHR}
_LOGIC = {"&&": np.logical_and, "||": np.logical_or}


def _eval(e: A.TExpr, grids: Mapping[str, np.ndarray], sizes: Mapping[str, int],
          env: Mapping[str, np.ndarray]) -> np.ndarray:
    """The value of ``e`` over the index grids (numpy arrays of ``e.dtype``, broadcast)."""
    dt = NP_DTYPE[e.dtype]
    if isinstance(e, A.TNum):
        return np.asarray(e.value, dt)
    if isinstance(e, A.TSize):
        return np.asarray(sizes[e.name], dt)
    if isinstance(e, A.TIndex):
        return grids[e.name].astype(dt)
    if isinstance(e, A.TRead):
        arr = env[e.tensor]
        idx = tuple(_eval(i, grids, sizes, env).astype(np.intp) for i in e.indices)
        for d, (i, n) in enumerate(zip(idx, arr.shape, strict=True)):
            bad = (i < 0) | (i >= n)
            if np.any(bad):  # only a data-dependent index can: range inference bounds the rest
                value = int(np.asarray(i)[np.nonzero(bad)][0]) if np.ndim(i) else int(i)
                raise _OutOfBounds(e, d, value, n)
        return np.asarray(arr[idx])
    if isinstance(e, A.TCast):
        return np.asarray(_eval(e.a, grids, sizes, env)).astype(dt)
    if isinstance(e, A.TUnary):
        a = _eval(e.a, grids, sizes, env)
        return np.logical_not(a) if e.op == "!" else np.negative(a).astype(dt)
    if isinstance(e, A.TBinary):
        a, b = _eval(e.a, grids, sizes, env), _eval(e.b, grids, sizes, env)
        if e.op in _ARITH:
            op = sem.Op.DIV if e.op == "/" and is_float(e.dtype) else _ARITH[e.op]
            return np.asarray(sem.binary(op, a, b, sem.dtype(e.dtype)))
        r = sem.CMP[e.op](a, b) if e.op in sem.CMP else _LOGIC[e.op](a, b)
        return np.asarray(r).astype(dt)
    if isinstance(e, A.TSelect):
        c = _eval(e.cond, grids, sizes, env)
        return np.where(c, _eval(e.t, grids, sizes, env), _eval(e.f, grids, sizes, env)
                        ).astype(dt)
    assert isinstance(e, A.TCall)
    if len(e.args) == 1:  # a math function
        return np.asarray(sem.math(e.fn, _eval(e.args[0], grids, sizes, env),
                                   sem.dtype(e.dtype)))
    a, b = (_eval(x, grids, sizes, env) for x in e.args)
    op = {"max": sem.Op.MAX, "min": sem.Op.MIN, "nextafter": sem.Op.NEXTAFTER}[e.fn]
    return np.asarray(sem.binary(op, a, b, sem.dtype(e.dtype)))
