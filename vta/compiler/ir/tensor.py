"""The tensor IR: placeholders and ``compute`` definitions with reduction axes.

This is what users (and the TC frontend, later) write; a schedule turns it into the loop-nest IR
(``vta.compiler.ir.stmt``). Tensors, operations and iteration variables are identified by object,
so two tensors both named ``A`` never alias.

Example::

    A = placeholder((M, K), "int8", "A")
    B = placeholder((N, K), "int8", "B")
    k = reduce_axis(K, "k")
    C = compute((M, N), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"), k),
                "C")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from vta.compiler.ir.expr import DTYPES, Cast, Expr, ExprLike, Var, as_expr, walk
from vta.errors import TensorIRError

__all__ = ["tensor_reads",
    "IterVar", "Tensor", "TensorRead", "Reduce", "Operation", "PlaceholderOp", "ComputeOp",
    "placeholder", "compute", "reduce_axis", "sum_", "cast", "TensorIRError", "input_tensors",
    "post_order",
]


@dataclass(frozen=True, slots=True, eq=False)
class IterVar:
    """An iteration axis ``var`` in ``[0, extent)``; ``kind`` is ``"spatial"`` or ``"reduce"``."""

    var: Var
    extent: int
    kind: str = "spatial"

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.extent}, {self.kind})"

    def __expr__(self) -> Var:
        """In an expression an axis stands for its variable (``oh * 2 + kh``)."""
        return self.var

    def __add__(self, o: ExprLike) -> Expr:
        return self.var + o

    def __radd__(self, o: ExprLike) -> Expr:
        return o + self.var

    def __sub__(self, o: ExprLike) -> Expr:
        return self.var - o

    def __rsub__(self, o: ExprLike) -> Expr:
        return o - self.var

    def __mul__(self, o: ExprLike) -> Expr:
        return self.var * o

    def __rmul__(self, o: ExprLike) -> Expr:
        return o * self.var

    def __floordiv__(self, o: ExprLike) -> Expr:
        return self.var // o

    def __mod__(self, o: ExprLike) -> Expr:
        return self.var % o


@dataclass(frozen=True, slots=True)
class TensorRead(Expr):
    """``tensor[indices]`` inside a compute body."""

    tensor: Tensor
    indices: tuple[Expr, ...]
    dtype: str = "int32"


@dataclass(frozen=True, slots=True)
class Reduce(Expr):
    """A commutative reduction of ``source`` over ``axes`` (``combiner``: sum, prod, min or
    max; ``lower`` initialises the output with the combiner's identity)."""

    combiner: str
    source: Expr
    axes: tuple[IterVar, ...]
    dtype: str = "int32"


class Operation:
    """Base of the operations that produce tensors."""

    __slots__ = ()
    name: str


@dataclass(frozen=True, slots=True, eq=False)
class PlaceholderOp(Operation):
    """An input: its data comes from the caller."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True, eq=False)
class ComputeOp(Operation):
    """``out[axes] = body``; ``body`` may be a ``Reduce`` (then its axes are reduction axes)."""

    name: str
    axes: tuple[IterVar, ...]
    body: Expr
    dtype: str
    tag: str = ""

    @property
    def reduce_axes(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.axes)


@dataclass(frozen=True, slots=True, eq=False)
class Tensor:
    """The output of an operation. Index it to read it in another compute: ``A[i, k]``."""

    op: Operation
    shape: tuple[int, ...]
    dtype: str

    #: a read refers to the tensor; traversals of the reading body do not enter its definition
    _ir_opaque: ClassVar[bool] = True

    @property
    def name(self) -> str:
        """The name of the operation producing it (the name arrays are passed by)."""
        return self.op.name

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __getitem__(self, idx: ExprLike | IterVar | tuple[ExprLike | IterVar, ...]) -> TensorRead:
        items = idx if isinstance(idx, tuple) else (idx,)
        if len(items) != len(self.shape):
            raise TensorIRError(f"tensor {self.name}: indexed with {len(items)} indices, "
                                f"has {len(self.shape)} dimensions {self.shape}")
        exprs = tuple(i.var if isinstance(i, IterVar) else as_expr(i) for i in items)
        return TensorRead(self, exprs, self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


def _check_shape(name: str, shape: Sequence[int]) -> tuple[int, ...]:
    out = tuple(shape)
    for d in out:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise TensorIRError(f"tensor {name}: shape {out} must be positive integers")
    return out


def _check_dtype(name: str, dtype: str) -> str:
    if dtype not in DTYPES:
        raise TensorIRError(f"tensor {name}: unknown dtype {dtype!r} "
                            f"(expected one of {', '.join(DTYPES)})")
    return dtype


def placeholder(shape: Sequence[int], dtype: str = "int8", name: str = "data") -> Tensor:
    """An input tensor."""
    s = _check_shape(name, shape)
    op = PlaceholderOp(name, s, _check_dtype(name, dtype))
    return Tensor(op, s, dtype)


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    """A reduction axis over ``[0, extent)``."""
    if isinstance(extent, bool) or not isinstance(extent, int) or extent <= 0:
        raise TensorIRError(f"reduce axis {name}: extent must be a positive integer, "
                            f"got {extent!r}")
    return IterVar(Var(name), extent, "reduce")


def sum_(expr: ExprLike, axis: IterVar | Sequence[IterVar]) -> Reduce:
    """Sum ``expr`` over one or more reduction axes."""
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    e = as_expr(expr)
    return Reduce("sum", e, axes, e.dtype)


def cast(value: ExprLike, dtype: str) -> Expr:
    """``value`` converted to ``dtype`` (integers wrap when narrowing, as on both targets);
    the same as ``value.astype(dtype)``."""
    e = as_expr(value)
    return e if e.dtype == dtype else Cast(_check_dtype("cast", dtype), e)


def _axis_names(fcompute: Callable[..., ExprLike], name: str, shape: tuple[int, ...]
                ) -> list[str]:
    """One axis name per dimension: the function's parameter names, or ``i0, i1, ...`` for a
    ``lambda *i`` (TVM's convention)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        raise TensorIRError(f"compute {name}: fcompute must be a Python function taking one "
                            f"argument per dimension, got {fcompute!r}") from None
    # parameters with a default value (a closure's captured state) are not axes
    params = [p for p in params if p.default is inspect.Parameter.empty]
    if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return [f"{params[0].name}{d}" for d in range(len(shape))]
    named = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                             inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if len(named) != len(params) or len(named) != len(shape):
        takes = f"({', '.join(str(p) for p in params)})"
        raise TensorIRError(f"compute {name}: shape {shape} has {len(shape)} dimensions but the "
                            f"function's parameters are {takes} (give one parameter per "
                            f"dimension, or *i for all of them)")
    return [p.name for p in named]


def compute(shape: Sequence[int], fcompute: Callable[..., ExprLike], name: str = "compute",
            dtype: str | None = None, tag: str = "") -> Tensor:
    """Define ``out[i0, i1, ...] = fcompute(i0, i1, ...)``; axis names come from the function's
    parameters (``lambda *i`` is accepted: the axes are then ``i0, i1, ...``, and ``i`` is the
    tuple of them, so ``A[i]`` reads ``A`` at the same position)."""
    s = _check_shape(name, shape)
    names = _axis_names(fcompute, name, s)
    axes = tuple(IterVar(Var(p), d, "spatial") for p, d in zip(names, s, strict=True))
    body = as_expr(fcompute(*(a.var for a in axes)))
    if dtype is not None and body.dtype != dtype:
        if isinstance(body, Reduce):
            body = Reduce(body.combiner, body.source.astype(dtype), body.axes, dtype)
        else:
            body = body.astype(dtype)
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise TensorIRError(f"compute {name}: a reduction must be the whole body, "
                                f"not nested inside it")
    op = ComputeOp(name, axes, body, _check_dtype(name, body.dtype), tag)
    return Tensor(op, s, body.dtype)


def tensor_reads(body: Expr) -> list[TensorRead]:
    """Every tensor read in ``body``, in walk order (repeats included)."""
    return [n for n in walk(body) if isinstance(n, TensorRead)]


def input_tensors(op: Operation) -> list[Tensor]:
    """Tensors read by ``op``'s body, in first-read order, without repeats."""
    if not isinstance(op, ComputeOp):
        return []
    seen: list[Tensor] = []
    for node in walk(op.body):
        if isinstance(node, TensorRead) and all(node.tensor is not t for t in seen):
            seen.append(node.tensor)
    return seen


def post_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor reachable from ``outputs``, producers before consumers."""
    order: list[Tensor] = []

    def visit(t: Tensor) -> None:
        if any(t is o for o in order):
            return
        for i in input_tensors(t.op):
            visit(i)
        order.append(t)

    for t in outputs:
        visit(t)
    return order
