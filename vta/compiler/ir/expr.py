"""Scalar expressions shared by the tensor IR and the loop-nest IR.

Nodes are frozen, slotted dataclasses compared structurally, except ``Var``, whose identity is
the object (two variables named ``i`` are different variables; the printer makes names unique).
Python operators build expressions, folding integer constants as they go, so index arithmetic
produced by scheduling stays readable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any, ClassVar

from vta._dataclass_code import code_of
from vta.compiler.ir import semantics as sem
from vta.compiler.ir.semantics import Op
from vta.compiler.ir.visitor import child_slots, evolve, node_fields, slot_setters
from vta.dtypes import DTYPES as _DTYPE_TABLE

__all__ = ["strip_casts",
    "Expr", "Var", "IntImm", "FloatImm", "BinOp", "Add", "Sub", "Mul", "FloorDiv", "FloorMod",
    "Min", "Max", "Shr", "Shl", "BitAnd", "BitOr", "BitXor", "Div", "NextAfter", "Math", "Cmp",
    "And", "Or", "Not",
    "Select", "Cast", "Call", "ExprLike", "const", "as_expr", "min_", "max_", "bitwise_xor",
    "DTYPES", "is_const", "children", "walk", "free_vars", "substitute",
    "select",
]

#: scalar types the IR knows, with their width in bits (read from ``vta.dtypes.DTYPES``)
DTYPES: dict[str, int] = {n: d.bits for n, d in _DTYPE_TABLE.items()}


class Expr:
    """Base of scalar expressions. Subclasses are frozen dataclasses with a ``dtype``."""

    __slots__ = ()
    dtype: str

    # -- arithmetic builders (constant-folding for integers)
    def __add__(self, o: ExprLike) -> Expr:
        return _bin(Add, self, o)

    def __radd__(self, o: ExprLike) -> Expr:
        return _bin(Add, o, self)

    def __sub__(self, o: ExprLike) -> Expr:
        return _bin(Sub, self, o)

    def __rsub__(self, o: ExprLike) -> Expr:
        return _bin(Sub, o, self)

    def __mul__(self, o: ExprLike) -> Expr:
        return _bin(Mul, self, o)

    def __rmul__(self, o: ExprLike) -> Expr:
        return _bin(Mul, o, self)

    def __floordiv__(self, o: ExprLike) -> Expr:
        return _bin(FloorDiv, self, o)

    def __mod__(self, o: ExprLike) -> Expr:
        return _bin(FloorMod, self, o)

    def __rshift__(self, o: ExprLike) -> Expr:
        return _bin(Shr, self, o)

    def __lshift__(self, o: ExprLike) -> Expr:
        return _bin(Shl, self, o)

    def __neg__(self) -> Expr:
        return _bin(Sub, 0, self)

    def __and__(self, o: ExprLike) -> Expr:
        return And(self, as_expr(o))

    def __or__(self, o: ExprLike) -> Expr:
        return Or(self, as_expr(o))

    def __invert__(self) -> Expr:
        return Not(self)

    # comparisons build expressions (so ``==`` is not overloaded: use ``eq``)
    def __lt__(self, o: ExprLike) -> Expr:
        return Cmp("<", self, as_expr(o))

    def __le__(self, o: ExprLike) -> Expr:
        return Cmp("<=", self, as_expr(o))

    def __gt__(self, o: ExprLike) -> Expr:
        return Cmp(">", self, as_expr(o))

    def __ge__(self, o: ExprLike) -> Expr:
        return Cmp(">=", self, as_expr(o))

    def eq(self, o: ExprLike) -> Expr:
        return Cmp("==", self, as_expr(o))

    def ne(self, o: ExprLike) -> Expr:
        return Cmp("!=", self, as_expr(o))

    def astype(self, dtype: str) -> Expr:
        """Cast to ``dtype`` (integer narrowing wraps, as C does on two's complement)."""
        return self if self.dtype == dtype else Cast(dtype, self)

ExprLike = Expr | int | float


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable. Identity is the object; ``name`` is a printing hint only."""

    name: str
    dtype: str = "int32"

    def __repr__(self) -> str:
        return f"Var({self.name}@{id(self) & 0xFFFF:04x})"


@dataclass(frozen=True, slots=True)
class IntImm(Expr):
    value: int
    dtype: str = "int32"


@dataclass(frozen=True, slots=True)
class FloatImm(Expr):
    value: float
    dtype: str = "float32"


@dataclass(frozen=True, slots=True)
class BinOp(Expr):
    """Binary arithmetic; ``dtype`` is the operands' common type. Subclasses fix the operator."""

    a: Expr
    b: Expr
    dtype: str = "int32"

    symbol: ClassVar[str] = "?"
    #: the operator's meaning (``semantics.OPS``)
    op: ClassVar[Op]


@dataclass(frozen=True, slots=True)
class Add(BinOp):
    symbol: ClassVar[str] = "+"
    op: ClassVar[Op] = Op.ADD


@dataclass(frozen=True, slots=True)
class Sub(BinOp):
    symbol: ClassVar[str] = "-"
    op: ClassVar[Op] = Op.SUB


@dataclass(frozen=True, slots=True)
class Mul(BinOp):
    symbol: ClassVar[str] = "*"
    op: ClassVar[Op] = Op.MUL


@dataclass(frozen=True, slots=True)
class FloorDiv(BinOp):
    """Division rounding toward minus infinity (Python's ``//``)."""

    symbol: ClassVar[str] = "//"
    op: ClassVar[Op] = Op.FLOORDIV


@dataclass(frozen=True, slots=True)
class FloorMod(BinOp):
    """Remainder with the divisor's sign (Python's ``%``)."""

    symbol: ClassVar[str] = "%"
    op: ClassVar[Op] = Op.FLOORMOD


@dataclass(frozen=True, slots=True)
class Min(BinOp):
    symbol: ClassVar[str] = "min"
    op: ClassVar[Op] = Op.MIN


@dataclass(frozen=True, slots=True)
class Max(BinOp):
    symbol: ClassVar[str] = "max"
    op: ClassVar[Op] = Op.MAX


@dataclass(frozen=True, slots=True)
class Shr(BinOp):
    """Arithmetic shift right."""

    symbol: ClassVar[str] = ">>"
    op: ClassVar[Op] = Op.SHR


@dataclass(frozen=True, slots=True)
class Shl(BinOp):
    symbol: ClassVar[str] = "<<"
    op: ClassVar[Op] = Op.SHL


@dataclass(frozen=True, slots=True)
class BitAnd(BinOp):
    """Bitwise and of two's complement integers."""

    symbol: ClassVar[str] = "&"
    op: ClassVar[Op] = Op.BIT_AND


@dataclass(frozen=True, slots=True)
class BitOr(BinOp):
    symbol: ClassVar[str] = "|"
    op: ClassVar[Op] = Op.BIT_OR


@dataclass(frozen=True, slots=True)
class BitXor(BinOp):
    symbol: ClassVar[str] = "^"
    op: ClassVar[Op] = Op.BIT_XOR


@dataclass(frozen=True, slots=True)
class Div(BinOp):
    """True division of floats (``semantics.Op.DIV``); integers divide with ``FloorDiv``."""

    symbol: ClassVar[str] = "/"
    op: ClassVar[Op] = Op.DIV


@dataclass(frozen=True, slots=True)
class NextAfter(BinOp):
    """The next float after ``a`` toward ``b`` (``semantics.Op.NEXTAFTER``)."""

    symbol: ClassVar[str] = "nextafter"
    op: ClassVar[Op] = Op.NEXTAFTER


@dataclass(frozen=True, slots=True)
class Math(Expr):
    """A unary math function of a float (``fn`` names an entry of ``semantics.MATH``)."""

    fn: str
    a: Expr
    dtype: str = "float32"


@dataclass(frozen=True, slots=True)
class Cmp(Expr):
    """Comparison ``a op b`` with op in <, <=, >, >=, ==, != ; boolean result."""

    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class And(Expr):
    a: Expr
    b: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class Or(Expr):
    a: Expr
    b: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """``t if cond else f`` (both sides evaluated: no side effects in expressions)."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: str = "int32"


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """An opaque intrinsic call by name, for statements a target dialect executes itself.
    Scalar operators are typed nodes (``BinOp`` subclasses, each naming its
    ``semantics.Op``), never calls: no evaluator dispatches on ``name``."""

    name: str
    args: tuple[Expr, ...]
    dtype: str = "int32"


# ---------------------------------------------------------------------------- helpers


def _imm_maker() -> Callable[[int, str], IntImm]:
    """A function making ``IntImm(value, dtype)`` through its slots' own setters
    (``visitor.slot_setters``: what its ``__init__`` does, without that call's frame; the
    integer constants of index arithmetic are made by the ten thousand per compile), or the
    class itself where the setters are not its ``__init__``'s."""
    setters = slot_setters(IntImm)
    if setters is None:
        return IntImm
    set_value, set_dtype = setters
    new = object.__new__

    def imm(value: int, dtype: str) -> IntImm:
        out: IntImm = new(IntImm)
        set_value(out, value)
        set_dtype(out, dtype)
        return out
    return imm


#: ``IntImm(value, dtype)`` (``_imm_maker``)
_imm = _imm_maker()


def const(value: int | float, dtype: str | None = None) -> Expr:
    """A constant (``int32``/``float32`` unless ``dtype`` says otherwise; bools are ``bool``)."""
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if isinstance(value, int):
        return _imm(value, dtype or "int32")
    return FloatImm(float(value), dtype or "float32")


def as_expr(x: ExprLike) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, float)):
        return const(x)
    if hasattr(x, "__expr__"):  # e.g. an IterVar stands for its variable
        return x.__expr__()  # type: ignore[no-any-return]
    raise TypeError(f"cannot use {x!r} ({type(x).__name__}) as an expression")


def is_const(e: Expr, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)


def _common(a: Expr, b: Expr) -> str:
    if a.dtype == b.dtype:
        return a.dtype
    # a bare int literal adapts to the other side
    if isinstance(a, IntImm) and a.dtype == "int32":
        return b.dtype
    if isinstance(b, IntImm) and b.dtype == "int32":
        return a.dtype
    fa, fb = a.dtype.startswith("float"), b.dtype.startswith("float")
    if fa != fb:
        return a.dtype if fa else b.dtype
    return a.dtype if DTYPES.get(a.dtype, 32) >= DTYPES.get(b.dtype, 32) else b.dtype


#: operators that fold exactly on integer constants typed as floats
_FLOAT_FOLDS = (Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.FLOORMOD, Op.MIN, Op.MAX)


@functools.lru_cache(maxsize=1 << 14, typed=True)
def _fold(cls: type[BinOp], x: int, y: int, dtype: str) -> int | None:
    """``x op y`` (``op``: the operator of ``cls``) folded at compile time as ``semantics``
    means it in ``dtype`` (integers wrap), or None where the operation has no meaning (a
    division by zero, a shift amount outside the type's width). Integer constants typed as
    floats fold exactly. Memoised (by the operands' types too): a pure function of its
    arguments, and index arithmetic folds the same few constants over and over, each through
    ``semantics.undefined``'s numpy tests of a division or a shift. Keyed by the class, whose
    hash is built in, rather than by its ``Op``, whose hash is ``Enum.__hash__`` (a Python
    call on every lookup)."""
    op = cls.op
    t = _DTYPE_TABLE[dtype]
    if not t.is_int:
        if (op in (Op.FLOORDIV, Op.FLOORMOD) and y == 0) or op not in _FLOAT_FOLDS:
            return None
        return sem.INT_OPS[op](x, y)
    if sem.undefined(op, x, y, t) is not None:
        return None
    r: int = sem.binary(op, x, y, t)
    return r


def _bin(cls: type[BinOp], a: ExprLike, b: ExprLike) -> Expr:
    # a bare ``int`` (``x * 4``) made ``const(b)`` directly, not through ``as_expr``
    ea = a if isinstance(a, Expr) else _imm(a, "int32") if type(a) is int else as_expr(a)
    eb = b if isinstance(b, Expr) else _imm(b, "int32") if type(b) is int else as_expr(b)
    dtype = ea.dtype if ea.dtype == eb.dtype else _common(ea, eb)
    # ``IntImm`` has no subclasses: its constants are read as ``is_const`` reads them
    ca = ea.value if type(ea) is IntImm else None
    cb = eb.value if type(eb) is IntImm else None
    if ca is not None and cb is not None:
        v = _fold(cls, ca, cb, dtype)  # type: ignore[arg-type]  # a class is hashable
        if v is not None:
            return _imm(v, dtype)
    # identities that keep scheduled index arithmetic small (each needs a constant side)
    if ca is None and cb is None:
        pass
    elif cls is Add:
        if ca == 0:
            return eb if eb.dtype == dtype else Cast(dtype, eb)
        if cb == 0:
            return ea if ea.dtype == dtype else Cast(dtype, ea)
    elif cls is Sub:
        if cb == 0:
            return ea
    elif cls is Mul:
        if ca == 1:
            return eb
        if cb == 1:
            return ea
        if (ca == 0 or cb == 0) and not dtype.startswith("float"):
            return _imm(0, dtype)
    elif cls is FloorDiv:
        if cb == 1:
            return ea
    elif cls is FloorMod:
        if cb == 1:
            return _imm(0, dtype)
    setters = _BIN_SETTERS.get(cls, _UNSEEN)
    if setters is _UNSEEN:
        setters = _BIN_SETTERS[cls] = slot_setters(cls)
    if setters is None:
        return cls(ea, eb, dtype)
    new = _new(cls)  # ``cls(ea, eb, dtype)`` without its ``__init__``'s frame
    set_a, set_b, set_dtype = setters
    set_a(new, ea)
    set_b(new, eb)
    set_dtype(new, dtype)
    return new


#: per ``BinOp`` class: the setters of its slots ``a``, ``b``, ``dtype`` where filling them on
#: ``object.__new__(cls)`` is what ``cls(a, b, dtype)`` does (``visitor.slot_setters``: every
#: built-in operator), else None (``_bin`` calls the class)
_BIN_SETTERS: dict[type, Any] = {}
_new = object.__new__


def select(cond: ExprLike, t: ExprLike, f: ExprLike) -> Expr:
    """``t if cond else f`` typed like the branches (a bare int literal adapts to the other)."""
    et, ef = as_expr(t), as_expr(f)
    dtype = _common(et, ef)
    et = et if et.dtype == dtype else Cast(dtype, et)
    if ef.dtype != dtype:
        ef = IntImm(ef.value, dtype) if isinstance(ef, IntImm) else Cast(dtype, ef)
    return Select(as_expr(cond), et, ef, dtype)


def bitwise_xor(a: ExprLike, b: ExprLike) -> Expr:
    """Integer ``a ^ b`` on the two's complement bits (folded when both are constants)."""
    return _bin(BitXor, a, b)


def min_(a: ExprLike, b: ExprLike) -> Expr:
    """The smaller of ``a`` and ``b`` (element-wise in a compute: ``min_(x[i], 127)``)."""
    return _bin(Min, a, b)


def max_(a: ExprLike, b: ExprLike) -> Expr:
    """The larger of ``a`` and ``b`` (``max_(x[i], 0)`` is a ReLU)."""
    return _bin(Max, a, b)


# ---------------------------------------------------------------------------- traversal


def children(node: Any) -> Iterator[Any]:
    """Direct IR children of a dataclass node (expressions, statements, tuples of them)."""
    names = child_slots(type(node))
    if not names:
        return
    nodes = _IS_NODE  # ``node_fields(cls) is not None``, one lookup per child
    for name in names:
        v = getattr(node, name)
        if type(v) is tuple:
            for x in v:
                if nodes[type(x)]:
                    yield x
        elif nodes[type(v)]:
            yield v


def walk(node: Any) -> Iterator[Any]:
    """Pre-order traversal of every dataclass node under ``node`` (itself included); only the
    fields that can hold nodes are read (``visitor.child_slots``: a leaf has none). A node's
    children are pushed last first (its child fields in reverse, a tuple's items in reverse),
    so the first is the next popped: the order of a recursive pre-order walk."""
    stack = [node]
    pop, push = stack.pop, stack.append
    slots = _RSLOTS.get
    nodes = _IS_NODE
    while stack:
        n = pop()
        yield n
        names = slots(type(n), _UNSEEN)
        if names is _UNSEEN:
            names = _rslots(type(n))
        if not names:
            continue
        for name in names:
            v = getattr(n, name)
            if type(v) is tuple:
                for x in reversed(v):
                    if nodes[type(x)]:
                        push(x)
            elif nodes[type(v)]:
                push(v)


#: per class: whether its instances are nodes (``visitor.node_fields`` is not None), and its
#: ``visitor.child_slots``; filled on first sight of a class, read by the traversals' inner
#: loops as one dict lookup instead of a function call per child
class _NodeKinds(dict[type, bool]):
    """``_IS_NODE``'s table: a class missing from it is looked up (``visitor.node_fields``)
    and recorded, so an indexing answers for any class (``_rebuilders``' code indexes it)."""

    def __missing__(self, cls: type) -> bool:
        k = self[cls] = node_fields(cls) is not None
        return k


_IS_NODE: dict[type, bool] = _NodeKinds()


class _PlainKinds(dict[type, bool]):
    """``_PLAIN``'s table: whether a class is an expression class other than ``IntImm`` (an
    operand ``_bin`` neither folds nor converts), recorded on first sight of the class."""

    def __missing__(self, cls: type) -> bool:
        k = self[cls] = issubclass(cls, Expr) and cls is not IntImm
        return k


#: per class: whether ``_bin`` takes an operand of it as it is, with nothing to fold (an
#: expression, not a constant): ``_rebuilders``' code for a ``BinOp`` reads it
_PLAIN: dict[type, bool] = _PlainKinds()
_SLOTS: dict[type, tuple[str, ...] | None] = {}
_UNSEEN: Any = object()


def _is_node(cls: type) -> bool:
    k = _IS_NODE[cls] = node_fields(cls) is not None
    return k


def _slots(cls: type) -> tuple[str, ...] | None:
    names = _SLOTS[cls] = child_slots(cls)
    return names


#: per class: its ``visitor.child_slots`` last first (``walk`` pushes the last child first)
_RSLOTS: dict[type, tuple[str, ...] | None] = {}


def _rslots(cls: type) -> tuple[str, ...] | None:
    names = child_slots(cls)
    out = _RSLOTS[cls] = None if names is None else names[::-1]
    return out


def free_vars(e: Any) -> set[Var]:
    """The variables under ``e`` (``e`` itself included). A variable or a constant, most of the
    indices the passes ask about, is answered without a walk: neither has children."""
    cls = type(e)
    if cls is Var:
        return {e}
    if cls is IntImm:
        return set()
    return {n for n in walk(e) if isinstance(n, Var)}


def substitute(node: Any, mapping: dict[Var, Any] | Callable[[Any], Any | None],
               descend: Callable[[type], bool] | None = None) -> Any:
    """Rebuild ``node`` replacing variables (a dict) or any node (a callable returning a
    replacement, or None to recurse). Returns ``node`` itself when nothing changed. The one
    rewriter of the IR: ``descend(cls)`` (default: every node class) limits where it
    recurses to the children of the classes it accepts (statement rewrites skip
    expressions), asked once per class and remembered with the function (``_kinds``: pass
    a module-level one)."""
    kinds = _IS_NODE if descend is None else _kinds(descend)
    if isinstance(mapping, dict):
        return _rewrite_vars(node, (mapping, {}), kinds, {})
    return _rewrite(node, mapping, kinds, {})


class _DescendKinds(dict[type, bool]):
    """``_kinds``' table for one ``descend``: whether the rewriter recurses into a child of a
    class (a node class that ``descend`` accepts), recorded on first sight of the class, so
    the rebuilders ask it as one lookup per child, as ``_IS_NODE`` without a ``descend``."""

    def __init__(self, descend: Callable[[type], bool]) -> None:
        super().__init__()
        self.descend = descend

    def __missing__(self, cls: type) -> bool:
        k = self[cls] = _IS_NODE[cls] and bool(self.descend(cls))
        return k


#: per ``descend`` function given to ``substitute``: its table (``_DescendKinds``)
_DESCEND_KINDS: dict[Callable[[type], bool], _DescendKinds] = {}


def _kinds(descend: Callable[[type], bool]) -> dict[type, bool]:
    """The table of ``descend`` (``_DescendKinds``), made on its first use. At most 32 are
    kept: a caller making a new function per call gets a new table each time, not a table
    that grows for the life of the process."""
    kinds = _DESCEND_KINDS.get(descend)
    if kinds is None:
        if len(_DESCEND_KINDS) >= 32:
            _DESCEND_KINDS.clear()
        kinds = _DESCEND_KINDS[descend] = _DescendKinds(descend)
    return kinds


def _rewrite(node: Any, fn: Callable[[Any], Any | None],
             kinds: dict[type, bool], memo: dict[int, Any]) -> Any:
    # ``memo``: a subtree shared by many parents (a micro-op list's common base expression) is
    # rewritten once per call, keyed by its id: every key is a node of the tree being
    # rewritten (the rewriter recurses only into the children of the nodes it is given, never
    # into a replacement), which is immutable and held by its root for the whole call, so the
    # ids are stable; the memo holds the results only (never None: a node or its replacement)
    done = memo.get(id(node))
    if done is not None:
        return done
    out = fn(node)
    if out is None:
        cls = type(node)
        rebuild = _REBUILD_FN.get(cls)
        if rebuild is None:
            rebuild = _rebuilders(cls)[0]
        out = rebuild(node, fn, kinds, memo) if rebuild is not _LEAF else node
    memo[id(node)] = out
    return out


def _rewrite_vars(node: Any, maps: tuple[dict[Var, Any], dict[Var, Expr]],
                  kinds: dict[type, bool], memo: dict[int, Any]) -> Any:
    """``_rewrite`` with the function of a variable mapping inlined (``maps``: the mapping and
    its values made expressions, each once, when first met): a variable is looked up, a node
    without children (a constant) is itself; neither needs the memo (the answer is the same
    object every time)."""
    cls = type(node)
    if cls is Var:
        mapping, made = maps
        out = made.get(node)
        if out is None:
            # a variable the mapping leaves is recorded as itself: a rebuilder reads it from
            # ``made`` directly next time (``_rebuilders``)
            out = made[node] = as_expr(mapping[node]) if node in mapping else node
        return out
    rebuild = _REBUILD_VARS.get(cls)
    if rebuild is None:
        rebuild = _rebuilders(cls)[1]
    if rebuild is _LEAF:
        return node
    done = memo.get(id(node))
    if done is not None:
        return done
    out = rebuild(node, maps, kinds, memo)
    memo[id(node)] = out
    return out


#: per class: its rebuilder for ``_rewrite`` / ``_rewrite_vars`` (``_rebuilders``), or
#: ``_LEAF`` for a class without children (a constant, a variable, anything not a node)
_REBUILD_FN: dict[type, Any] = {}
_REBUILD_VARS: dict[type, Any] = {}
_LEAF: Any = object()


def _rebuilders(cls: type) -> tuple[Any, Any]:
    """The functions ``(node, arg, kinds, memo) -> node'`` rebuilding an instance of
    ``cls`` with each child rewritten by ``_rewrite`` (``arg``: its function) and by
    ``_rewrite_vars`` (``arg``: its maps), or ``_LEAF`` twice when ``cls`` has no fields that
    can hold nodes; made once per class and recorded in ``_REBUILD_FN`` and ``_REBUILD_VARS``.

    Each reads ``cls``'s child fields as attributes, in field order (the callable sees the
    children as a pre-order walk does), a tuple field item by item (``_rebuild_tuple``), and
    recurses into a child whose class ``kinds`` accepts (``substitute``'s ``descend``, as a
    table by class: ``_IS_NODE`` without one); it returns ``node``
    itself when no child changed. A changed ``BinOp`` is folded again (``_bin``: the
    substitution may have made both sides constant), or made directly where both of its
    operands are expressions of one type and neither is a constant (what ``_bin`` returns
    then: most of a thread's copy, whose operands are fresh variables); any other changed
    node is made as ``visitor.evolve`` makes it, field by field through the slots' setters
    where ``slot_setters`` allows, else by ``evolve`` itself. The code is generated per class
    (``_rebuilder_text``: no loop over field names, no dict of changes): the rewriter's cost
    is mostly these rebuilds."""
    names = _SLOTS.get(cls, _UNSEEN)
    if names is _UNSEEN:
        names = _slots(cls)
    if not names:
        _REBUILD_FN[cls] = _REBUILD_VARS[cls] = _LEAF
        return _LEAF, _LEAF
    scope: dict[str, Any] = {"_cls": cls, "_tup": _rebuild_tuple, "_bin": _bin,
                             "_evolve": evolve, "_new": object.__new__, "_Var": Var,
                             "_Imm": IntImm, "_tupv": _rebuild_tuple_vars}
    fns = []
    for rec in (_rewrite, _rewrite_vars):
        env = {**scope, "_rec": rec}
        exec(_compiled(_rebuilder_text(cls, names, env, rec is _rewrite_vars)), env)
        fns.append(env["rebuild"])
    _REBUILD_FN[cls], _REBUILD_VARS[cls] = fns
    return fns[0], fns[1]


def _rebuilder_text(cls: type, names: tuple[str, ...], scope: dict[str, Any],
                    of_vars: bool) -> str:
    """The source of ``_rebuilders``' function for ``cls`` (its child fields ``names``; the
    setters it reads put in ``scope``): for ``_rewrite_vars`` (``of_vars``) a variable child
    is read from the mapping's made values directly where it was met before (``made``
    records every variable it answered, mapped or not) and a constant child is kept, without
    ``_rewrite_vars``' call (its answers for them); a tuple's items likewise
    (``_rebuild_tuple_vars``)."""
    lines = ["def rebuild(node, arg, kinds, memo):"]
    if of_vars:
        lines.append(" made = arg[1]")
    for k, n in enumerate(names):
        lines.append(f" v{k} = node.{n}")
        if of_vars:
            lines += [f" t{k} = type(v{k})",
                      f" if t{k} is _Var and kinds[t{k}]:",
                      f"  n{k} = made.get(v{k})",
                      f"  if n{k} is None: n{k} = _rec(v{k}, arg, kinds, memo)",
                      f" elif t{k} is _Imm: n{k} = v{k}",
                      f" elif t{k} is tuple: n{k} = _tupv(v{k}, _rec, arg, kinds, memo)",
                      f" elif kinds[t{k}]: n{k} = _rec(v{k}, arg, kinds, memo)"]
        else:
            lines += [f" if type(v{k}) is tuple: n{k} = _tup(v{k}, _rec, arg, kinds, memo)",
                      f" elif kinds[type(v{k})]: n{k} = _rec(v{k}, arg, kinds, memo)"]
        lines.append(f" else: n{k} = v{k}")
    same = " and ".join(f"n{k} is v{k}" for k in range(len(names)))
    lines.append(f" if {same}: return node")
    setters = slot_setters(cls)
    if issubclass(cls, BinOp) and names == ("a", "b"):
        if setters is not None and node_fields(cls) == ("a", "b", "dtype"):
            # ``_bin``'s own result where it has nothing to fold: two operands of one type,
            # neither a constant (``_PLAIN``), made as ``_bin`` makes it, without its call
            scope.update({"_plain": _PLAIN, "_sa": setters[0], "_sb": setters[1],
                          "_sd": setters[2]})
            lines += [" if _plain[type(n0)] and _plain[type(n1)] and n0.dtype == n1.dtype:",
                      "  new = _new(_cls)", "  _sa(new, n0)", "  _sb(new, n1)",
                      "  _sd(new, n0.dtype)", "  return new"]
        lines.append(" return _bin(_cls, n0, n1)")
    elif setters is not None:
        scope.update({f"_s{k}": f for k, f in enumerate(setters)})
        lines.append(" new = _new(_cls)")
        for k, f in enumerate(node_fields(cls) or ()):
            lines.append(f" _s{k}(new, {f'n{names.index(f)}' if f in names else f'node.{f}'})")
        lines.append(" return new")
    else:
        lines += _kept_checks(cls, names, scope)
        lines.append(" ch = {}")
        lines += [f" if n{k} is not v{k}: ch[{n!r}] = n{k}" for k, n in enumerate(names)]
        lines.append(" return _evolve(node, **ch)")
    return "\n".join(lines) + "\n"


def _kept_checks(cls: type, names: tuple[str, ...], scope: dict[str, Any]) -> list[str]:
    """Lines of ``_rebuilders``' code making a changed node of a class whose ``__post_init__``
    only checks the fields it names (``post_init_checks``: an ``AttrStmt``'s key) through its
    slots' setters where every one of those fields is kept (the node had passed the check with
    them), before the ``evolve`` that calls the class (and the check) otherwise; none for any
    other class (its setters set in ``scope``)."""
    checks = getattr(cls, "post_init_checks", None)
    setters = slot_setters(cls, checked=True) if checks is not None else None
    if checks is None or setters is None:
        return []
    kept = " and ".join([f"n{names.index(f)} is v{names.index(f)}" for f in checks
                         if f in names] or ["True"])
    scope.update({f"_c{k}": f for k, f in enumerate(setters)})
    lines = [f" if {kept}:", "  new = _new(_cls)"]
    for k, f in enumerate(node_fields(cls) or ()):
        lines.append(f"  _c{k}(new, {f'n{names.index(f)}' if f in names else f'node.{f}'})")
    return [*lines, "  return new"]


@functools.cache
def _compiled(src: str) -> CodeType:
    """``src`` compiled, once per text: the rebuilders of classes with the same fields (every
    ``BinOp``) share one compilation (the text names no class; each is run in its class's
    scope), its code kept across processes with vta's dataclass methods
    (``vta._dataclass_code.code_of``). Field names only (identifiers), as ``visitor.evolve``
    generates its copiers."""
    return code_of(src, "<rebuild>")


def _rebuild_tuple(v: tuple[Any, ...], rec: Callable[..., Any], arg: Any,
                   kinds: dict[type, bool], memo: dict[int, Any]) -> tuple[Any, ...]:
    """A tuple field's items, each rewritten by ``rec`` where ``kinds`` accepts its class (as
    ``_rebuilders``' code does a field); ``v`` itself when none changed."""
    items: list[Any] | None = None  # made at the first child that changed
    for j, x in enumerate(v):
        if kinds[type(x)]:
            y = rec(x, arg, kinds, memo)
            if y is not x and items is None:
                items = list(v[:j])
        else:
            y = x
        if items is not None:
            items.append(y)
    return v if items is None else tuple(items)


def _rebuild_tuple_vars(v: tuple[Any, ...], rec: Callable[..., Any],
                        arg: tuple[dict[Var, Any], dict[Var, Expr]],
                        kinds: dict[type, bool], memo: dict[int, Any]) -> tuple[Any, ...]:
    """``_rebuild_tuple`` for ``_rewrite_vars`` (``rec``; ``arg``: its maps): a variable item
    met before is read from the made values and a constant item kept, without the call (as
    ``_rebuilder_text``'s code reads such a field)."""
    items: list[Any] | None = None  # made at the first child that changed
    made = arg[1]
    for j, x in enumerate(v):
        t = type(x)
        if t is IntImm:
            y = x
        elif kinds[t]:
            y = made.get(x) if t is Var else None
            if y is None:
                y = rec(x, arg, kinds, memo)
            if y is not x and items is None:
                items = list(v[:j])
        else:
            y = x
        if items is not None:
            items.append(y)
    return v if items is None else tuple(items)


def strip_casts(e: Expr) -> Expr:
    """``e`` without the casts around it (a contraction's operand, whatever it is widened to)."""
    while isinstance(e, Cast):
        e = e.value
    return e
