"""The loop-nest IR: buffers, loops and stores, shared by the accelerator and GPU pipelines.

A schedule lowers tensor definitions into a ``PrimFunc`` made of these nodes; passes rewrite
it (each a pure function) and backends render or execute it. Nodes are frozen dataclasses with
structural equality; ``Buffer`` (like ``Var``) is identified by object.

Memory scopes: ``global`` (DRAM / device memory); the accelerator's scratchpads ``inp``,
``wgt``, ``acc``, ``out``, ``uop``; the GPU's ``shared`` and ``local`` (registers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from vta.compiler.ir.expr import Expr, ExprLike, Var, as_expr
from vta.config import BUFFER_KINDS

__all__ = [
    "SCOPES", "Buffer", "BufferLoad", "Stmt", "BufferStore", "For", "ForKind", "SeqStmt",
    "IfThenElse", "LetStmt", "Allocate", "Evaluate", "Barrier", "AttrStmt", "PrimFunc", "seq",
]

SCOPES = ("global", *BUFFER_KINDS, "shared", "warp", "local")


@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """A multi-dimensional array in a memory scope. Identity is the object."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"buffer {self.name}: unknown scope {self.scope!r} "
                             f"(expected one of {', '.join(SCOPES)})")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def load(self, *indices: ExprLike) -> BufferLoad:
        return BufferLoad(self, tuple(as_expr(i) for i in indices), self.dtype)

    def store(self, value: ExprLike, *indices: ExprLike) -> BufferStore:
        return BufferStore(self, as_expr(value), tuple(as_expr(i) for i in indices))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


@dataclass(frozen=True, slots=True)
class BufferLoad(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: str = "int32"


class Stmt:
    """Base of statements."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]


class ForKind(Enum):
    SERIAL = "serial"
    UNROLLED = "unrolled"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    #: a virtual thread: iterations are independent copies interleaved for latency hiding
    VTHREAD = "vthread"
    #: bound to a GPU thread index; ``For.thread`` names it (blockIdx.x, threadIdx.y, ...)
    THREAD_BINDING = "thread_binding"


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """``for var in [min, min + extent): body``."""

    var: Var
    min: Expr
    extent: Expr
    body: Stmt
    kind: ForKind = ForKind.SERIAL
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    """``buffer`` exists (in its scope) for the extent of ``body``."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (an intrinsic ``Call``)."""

    value: Expr


@dataclass(frozen=True, slots=True)
class Barrier(Stmt):
    """All threads of a block reach this point before any continues (``__syncthreads``)."""

    scope: str = "shared"


@dataclass(frozen=True, slots=True)
class AttrStmt(Stmt):
    """An annotation ``key = value`` over ``body`` (pragmas, tensorize marks, pipeline info)."""

    key: str
    value: Any
    body: Stmt


@dataclass(frozen=True)
class PrimFunc:
    """A lowered kernel: parameters are global buffers, in call order."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: tuple[tuple[str, Any], ...] = field(default=())

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_body(self, body: Stmt) -> PrimFunc:
        return self if body is self.body else PrimFunc(self.name, self.params, body, self.attrs)


def seq(*stmts: Stmt | None) -> Stmt:
    """A sequence, flattening nested sequences and dropping Nones; one statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
