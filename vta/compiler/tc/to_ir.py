"""Lowering of a checked TC definition to the tensor IR (``vta.compiler.ir.tensor``).

``to_ir(cdef, concrete)`` builds, at concrete sizes, what a user would write with the Python
API: a ``placeholder`` per input, and per statement a ``compute`` over the statement's domain
(a ``Reduce`` over ``reduce_axis``es when it has reduction indices), so every schedule
primitive, the tensorizer and both targets apply to it.

Per statement ``k`` writing tensor ``T`` with left-hand ranges ``[lo_d, hi_d)`` over a shape
``S``:

* ``core``: ``compute(hi - lo, ...)`` with index ``v_d = axis_d + lo_d`` (reduction indices
  likewise) and the typed right-hand side; a reduction operator makes it a ``Reduce`` with the
  combiner ``sum``/``prod``/``max``/``min`` (the ``!`` forms' identity is ``lower``'s init);
* the new version of ``T``: ``core`` itself when it covers ``S`` and nothing is combined;
  otherwise an element-wise ``compute(S, ...)`` that places ``core`` (``select`` on the
  range) over the starting value: zeros (new tensor, ``=``), the identity (``!`` forms) or the
  previous version (a tensor written again), combining with the previous version for a
  reduction operator without ``!``.

Versions are separate tensors (SSA), so a read always names the value it sees. The final
version of a tensor carries its name; earlier ones ``T_v<k>``, separate cores ``T_r<k>``.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import Reduce, Tensor, compute, placeholder, reduce_axis
from vta.compiler.tc import ast as A
from vta.compiler.tc.ranges import Concrete
from vta.compiler.tc.sema import CheckedDef, CheckedStmt, identity, is_float

__all__ = ["COMBINER", "StmtIR", "TcFunc", "to_ir", "translate"]

#: TC reduction operator -> tensor-IR combiner
COMBINER = {"+": "sum", "*": "prod", "max": "max", "min": "min"}

_BIN = {"+": E.Add, "-": E.Sub, "*": E.Mul, "/": E.FloorDiv, "%": E.FloorMod, "<<": E.Shl,
        ">>": E.Shr}


@dataclass(frozen=True)
class StmtIR:
    """Statement ``stmt`` in the tensor IR: ``core`` computes its domain, ``final`` is the
    tensor version it produces (``core`` itself when nothing is placed or combined)."""

    stmt: CheckedStmt
    core: Tensor
    final: Tensor


@dataclass(frozen=True)
class TcFunc:
    """A TC definition in the tensor IR at concrete sizes."""

    cdef: CheckedDef
    concrete: Concrete
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    stmts: tuple[StmtIR, ...]

    @property
    def args(self) -> list[Tensor]:
        """``lower``'s argument list: inputs (parameter order), then outputs (return order)."""
        return [*self.inputs, *self.outputs]


def _num(value: int | float, dtype: str) -> E.Expr:
    return E.FloatImm(float(value), dtype) if dtype.startswith("float") else \
        E.IntImm(int(value), dtype)


def translate(e: A.TExpr, index: Mapping[str, E.Expr], sizes: Mapping[str, int],
              tensors: Mapping[tuple[str, int], Tensor]) -> E.Expr:
    """The tensor-IR expression of a typed TC expression: index variables by ``index``, reads
    of ``(tensor, version)`` by ``tensors``."""
    def go(x: A.TExpr) -> E.Expr:
        if isinstance(x, A.TNum):
            return _num(x.value, x.dtype)
        if isinstance(x, A.TSize):
            return E.IntImm(sizes[x.name], "int32")
        if isinstance(x, A.TIndex):
            return index[x.name]
        if isinstance(x, A.TRead):
            t = tensors[(x.tensor, x.version)]
            return t[tuple(go(i) for i in x.indices)]
        if isinstance(x, A.TCast):
            return E.Cast(x.dtype, go(x.a))
        if isinstance(x, A.TUnary):
            a = go(x.a)
            return E.Not(a) if x.op == "!" else E.Sub(_num(0, x.dtype), a, x.dtype)
        if isinstance(x, A.TBinary):
            a, b = go(x.a), go(x.b)
            if x.op == "/" and is_float(x.dtype):
                return E.Div(a, b, x.dtype)
            if x.op in _BIN:
                return _BIN[x.op](a, b, x.dtype)
            if x.op == "&&":
                return E.And(a, b)
            if x.op == "||":
                return E.Or(a, b)
            return E.Cmp(x.op, a, b)
        if isinstance(x, A.TSelect):
            return E.Select(go(x.cond), go(x.t), go(x.f), x.dtype)
        assert isinstance(x, A.TCall)
        if len(x.args) == 1:
            return E.Math(x.fn, go(x.args[0]), x.dtype)
        cls = {"max": E.Max, "min": E.Min, "nextafter": E.NextAfter}[x.fn]
        return cls(go(x.args[0]), go(x.args[1]), x.dtype)

    return go(e)


def _combine(op: str, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr:
    cls = {"+": E.Add, "*": E.Mul, "max": E.Max, "min": E.Min}[op]
    return cls(a, b, dtype)


class _Builder:
    def __init__(self, cdef: CheckedDef, c: Concrete) -> None:
        self.cdef, self.c = cdef, c
        self.tensors: dict[tuple[str, int], Tensor] = {}
        self.inputs = []
        for t in cdef.inputs:
            ph = placeholder(c.shapes[t.name], t.dtype, t.name)
            self.tensors[(t.name, -1)] = ph
            self.inputs.append(ph)

    def statement(self, st: CheckedStmt) -> StmtIR:
        rng = self.c.ranges[st.index]
        shape = self.c.shapes[st.tensor]
        final_name = st.tensor if self.cdef.last_def(st.tensor) == st.index \
            else f"{st.tensor}_v{st.index + 1}"
        ext = tuple(rng[v][1] - rng[v][0] for v in st.lhs)
        cover = all(rng[v][0] == 0 for v in st.lhs) and ext == shape
        prev = self.tensors.get((st.tensor, st.prev)) if st.prev >= 0 else \
            self.tensors.get((st.init, -1)) if st.init is not None else None
        combine_prev = prev is not None and st.op != "=" and not st.bang
        direct = cover and not combine_prev
        core_name = final_name if direct else f"{st.tensor}_r{st.index + 1}"
        raxes = {v: reduce_axis(rng[v][1] - rng[v][0], v) for v in st.reduce}

        def body(*axes: E.Var) -> E.Expr:
            index: dict[str, E.Expr] = {}
            for v, a in zip(st.lhs, axes, strict=True):
                index[v] = a + rng[v][0] if rng[v][0] else a
            for v, ra in raxes.items():
                index[v] = ra.var + rng[v][0] if rng[v][0] else ra.var
            value = translate(st.rhs, index, self.c.sizes, self.tensors)
            if raxes:
                return Reduce(COMBINER[st.op], value, tuple(raxes.values()), st.dtype)
            return value

        core = _compute(ext, st.lhs, body, core_name)
        if direct:
            return StmtIR(st, core, core)

        def place(*axes: E.Var) -> E.Expr:
            inside: E.Expr | None = None
            rel = []
            for v, a, n in zip(st.lhs, axes, shape, strict=True):
                lo, hi = rng[v]
                rel.append(a - lo if lo else a)
                for cond in ([a >= lo] if lo else []) + ([a < hi] if hi < n else []):
                    inside = cond if inside is None else E.And(inside, cond)
            value: E.Expr = core[tuple(rel)]
            if combine_prev:
                assert prev is not None
                value = _combine(st.op, prev[axes], value, st.dtype)
            if inside is None:
                return value
            fill: E.Expr
            if prev is not None and not st.bang:
                fill = prev[axes]
            else:
                fill = _num(0 if st.op == "=" else identity(st.op, st.dtype), st.dtype)
            return E.Select(inside, value, fill, st.dtype)

        final = _compute(shape, st.lhs, place, final_name)
        return StmtIR(st, core, final)

    def run(self) -> TcFunc:
        stmts = []
        for st in self.cdef.stmts:
            s = self.statement(st)
            self.tensors[(st.tensor, st.index)] = s.final
            stmts.append(s)
        outs = tuple(self.tensors[(o, self.cdef.last_def(o))] for o in self.cdef.outputs)
        return TcFunc(self.cdef, self.c, tuple(self.inputs), outs, tuple(stmts))


def _compute(shape: tuple[int, ...], names: tuple[str, ...], fn: Callable[..., E.Expr],
             name: str) -> Tensor:
    """``compute`` with axes named after the TC index variables (``compute`` reads the
    function's parameter names)."""
    def f(*axes: E.Var) -> E.Expr:
        return fn(*axes)

    params = [inspect.Parameter(n if not keyword.iskeyword(n) else f"{n}_",
                                inspect.Parameter.POSITIONAL_ONLY) for n in names]
    f.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return compute(shape, f, name)


def to_ir(cdef: CheckedDef, concrete: Concrete) -> TcFunc:
    """``cdef`` at ``concrete`` sizes in the tensor IR."""
    return _Builder(cdef, concrete).run()

