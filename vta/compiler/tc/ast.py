"""The TC syntax tree (what the parser builds) and the typed tree (what ``sema`` makes of it).

Untyped nodes keep the source position of their first token. Applications ``f(args)`` are
ambiguous in the grammar (a tensor read, a built-in, a cast); the type checker resolves them.

Typed nodes carry their scalar type; every conversion the typing rules imply is an explicit
``TCast`` (like clang's implicit-cast nodes), so the interpreter and the lowering follow the
typed tree without re-deriving the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.tc.source import Pos, Source

__all__ = [
    "Expr", "Num", "Ident", "Unary", "Binary", "Ternary", "Apply",
    "WhereRange", "WhereExists", "WhereLet", "Where", "Stmt", "Param", "Def", "TcFile",
    "TExpr", "TNum", "TSize", "TIndex", "TRead", "TUnary", "TBinary", "TSelect", "TCast",
    "TCall", "REDUCTIONS",
]

#: reduction operators of a statement (``O(i) +=! ...``): the operator token's name
REDUCTIONS = ("+", "*", "max", "min")


# ---------------------------------------------------------------------------- untyped


class Expr:
    """Base of untyped expressions."""

    __slots__ = ()
    pos: Pos


@dataclass(frozen=True, slots=True)
class Num(Expr):
    """A number literal; ``is_float`` when written with a point or an exponent."""

    value: int | float
    is_float: bool
    pos: Pos


@dataclass(frozen=True, slots=True)
class Ident(Expr):
    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    """``-a``, ``+a`` or ``!a``."""

    op: str
    a: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Ternary(Expr):
    cond: Expr
    t: Expr
    f: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Apply(Expr):
    """``name(args)``: a tensor read, a built-in call or a cast."""

    name: str
    args: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class WhereRange:
    """``where i in lo:hi`` (``lo`` included, ``hi`` excluded)."""

    var: str
    lo: Expr
    hi: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class WhereExists:
    """``where exists T(i, j)``: an access that takes part in range inference only."""

    access: Apply
    pos: Pos


@dataclass(frozen=True, slots=True)
class WhereLet:
    """``where x = expr``: ``x`` names ``expr`` in the statement (substituted where used)."""

    var: str
    value: Expr
    pos: Pos


Where = WhereRange | WhereExists | WhereLet


@dataclass(frozen=True, slots=True)
class Stmt:
    """``tensor(indices) op[!] rhs [where ...] [<=> f(...)]``; ``op`` is ``=`` or one of
    ``REDUCTIONS``; ``equivalent`` the text of TC's ``<=>`` annotation (reported only)."""

    tensor: str
    indices: tuple[Ident, ...]
    op: str
    bang: bool
    rhs: Expr
    where: tuple[Where, ...]
    pos: Pos
    op_pos: Pos
    equivalent: str | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """``dtype(D0, D1, ...) name``; a dimension is a size variable or an integer."""

    dtype: str
    dims: tuple[str | int, ...]
    name: str
    pos: Pos
    dim_pos: tuple[Pos, ...]


@dataclass(frozen=True, slots=True)
class Def:
    """A definition; ``typed_returns[k]`` the declared type and sizes of output ``k``
    (``-> (int32(M, N) O)``), None where only the name is given."""

    name: str
    params: tuple[Param, ...]
    returns: tuple[Ident, ...]
    stmts: tuple[Stmt, ...]
    pos: Pos
    typed_returns: tuple[Param | None, ...] = ()


@dataclass(frozen=True)
class TcFile:
    """Every ``def`` of one source."""

    defs: tuple[Def, ...]
    source: Source


# ---------------------------------------------------------------------------- typed


class TExpr:
    """Base of typed expressions: ``dtype`` is a name of ``vta.compiler.ir.expr.DTYPES``."""

    __slots__ = ()
    dtype: str


@dataclass(frozen=True, slots=True)
class TNum(TExpr):
    value: int | float
    dtype: str


@dataclass(frozen=True, slots=True)
class TSize(TExpr):
    """A size variable (an integer known when the definition is instantiated)."""

    name: str
    dtype: str = "int32"


@dataclass(frozen=True, slots=True)
class TIndex(TExpr):
    """An index variable of the statement."""

    name: str
    dtype: str = "int32"


@dataclass(frozen=True, slots=True)
class TRead(TExpr):
    """``tensor(indices)``; ``version`` is the statement that defined the value read (-1 for
    an input)."""

    tensor: str
    indices: tuple[TExpr, ...]
    dtype: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class TUnary(TExpr):
    """``-a`` (numeric) or ``!a`` (bool)."""

    op: str
    a: TExpr
    dtype: str


@dataclass(frozen=True, slots=True)
class TBinary(TExpr):
    """Arithmetic (``+ - * / % << >>``, both operands of ``dtype``), comparisons (``== != < <=
    > >=``, result bool) and logic (``&& ||``)."""

    op: str
    a: TExpr
    b: TExpr
    dtype: str


@dataclass(frozen=True, slots=True)
class TSelect(TExpr):
    cond: TExpr
    t: TExpr
    f: TExpr
    dtype: str


@dataclass(frozen=True, slots=True)
class TCast(TExpr):
    """Conversion to ``dtype`` (integer narrowing wraps; float to int truncates)."""

    a: TExpr
    dtype: str


@dataclass(frozen=True, slots=True)
class TCall(TExpr):
    """A built-in: ``max``/``min`` of two operands of ``dtype``, or a math function
    (``semantics.MATH``: ``exp``, ``log``, ...) of one float operand of ``dtype``."""

    fn: str
    args: tuple[TExpr, ...]
    dtype: str
