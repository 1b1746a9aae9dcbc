"""The loop-nest IR: buffers, loops and stores, shared by the accelerator and GPU pipelines.

A schedule lowers tensor definitions into a ``PrimFunc`` made of these nodes; passes rewrite
it (each a pure function) and backends render or execute it. Nodes are frozen dataclasses with
structural equality; ``Buffer`` (like ``Var``) is identified by object.

Memory scopes: ``global`` (DRAM / device memory); the accelerator's scratchpads ``inp``,
``wgt``, ``acc``, ``out``, ``uop``; the GPU's ``shared`` and ``local`` (registers).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from vta.compiler.ir.expr import Expr, ExprLike, Var, as_expr
from vta.config import BUFFER_KINDS

__all__ = [
    "SCOPES", "Buffer", "BufferLoad", "Stmt", "BufferStore", "For", "ForKind", "SeqStmt",
    "IfThenElse", "LetStmt", "Allocate", "Evaluate", "Barrier", "AttrStmt", "PrimFunc", "seq",
    "AttrKey", "STAGE", "TENSORIZE", "TARGET",
]

T = TypeVar("T")


class AttrKey(Generic[T]):
    """A typed key of an ``AttrStmt`` or of a ``PrimFunc``'s attributes: how one pass hands
    information to a later one. Each key is defined once, by the layer that owns its meaning
    (the IR's here, the accelerator's in ``accel.vta_ir``, the GPU's in ``gpu.dialect``); ``T``
    is its value's type, which ``PrimFunc.attr`` returns. A second key with a taken name is an
    error, and a bare string where a key belongs is refused by the nodes."""

    _by_name: ClassVar[dict[str, AttrKey[Any]]] = {}
    __slots__ = ("name", "owner")
    name: str
    owner: str

    def __init__(self, name: str, owner: str) -> None:
        """``owner``: the defining module's ``__name__`` (a pickled key is looked up there)."""
        if name in AttrKey._by_name:
            raise ValueError(f"attribute key {name!r} is already defined (in "
                             f"{AttrKey._by_name[name].owner})")
        self.name, self.owner = name, owner
        AttrKey._by_name[name] = self

    @staticmethod
    def named(name: str) -> AttrKey[Any]:
        """The key called ``name`` (KeyError naming the defined ones otherwise)."""
        try:
            return AttrKey._by_name[name]
        except KeyError:
            raise KeyError(f"no attribute key {name!r} (defined: "
                           f"{', '.join(sorted(AttrKey._by_name))})") from None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"AttrKey({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_key, (self.owner, self.name))


def _restore_key(owner: str, name: str) -> AttrKey[Any]:
    """A key unpickled: the one object defined under ``name`` (importing its module first)."""
    importlib.import_module(owner)
    return AttrKey.named(name)


#: the stage of a schedule a statement computes (its name; ``lower`` marks every stage)
STAGE: AttrKey[str] = AttrKey("stage", __name__)
#: a region to tensorize (``intrin.TensorizeRegion`` from ``lower``; the GPU's WMMA intrinsic)
TENSORIZE: AttrKey[Any] = AttrKey("tensorize", __name__)
#: the target a kernel is written for (``"cuda"``)
TARGET: AttrKey[str] = AttrKey("target", __name__)


def _check_key(key: object, where: str) -> None:
    if not isinstance(key, AttrKey):
        raise TypeError(f"{where}: the key must be an AttrKey (vta.compiler.ir.stmt), got "
                        f"{key!r}")

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

    key: AttrKey[Any]
    value: Any
    body: Stmt

    #: the fields ``__post_init__`` checks, its only work: a copy keeping them (the
    #: rewriter's, ``expr.substitute``, around a rewritten body) is made without the check
    post_init_checks: ClassVar[tuple[str, ...]] = ("key",)

    def __post_init__(self) -> None:
        _check_key(self.key, "AttrStmt")


@dataclass(frozen=True)
class PrimFunc:
    """A lowered kernel: parameters are global buffers, in call order."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: tuple[tuple[AttrKey[Any], Any], ...] = field(default=())

    def __post_init__(self) -> None:
        for k, _ in self.attrs:
            _check_key(k, f"PrimFunc {self.name}")

    def attr(self, key: AttrKey[T], default: T | None = None) -> T | None:
        """The value of attribute ``key`` (``default`` when it is not set)."""
        for k, v in self.attrs:
            if k is key:
                return v  # type: ignore[no-any-return]
        return default

    def with_attr(self, key: AttrKey[T], value: T) -> PrimFunc:
        """The function with attribute ``key`` set to ``value`` (replacing an earlier value,
        which moves to the end: attributes keep the order they were last set in)."""
        attrs = (*((k, v) for k, v in self.attrs if k is not key), (key, value))
        return PrimFunc(self.name, self.params, self.body, attrs)

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
