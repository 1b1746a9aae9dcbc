"""Type checking of a parsed TC definition: names, arities, dtypes and statement forms.

``check(program, entry)`` resolves every name (size variables, tensors, index variables: one
namespace, as in TC), types every expression by the rules below and returns a ``CheckedDef``
whose statements carry typed trees (``ast.T*``) with every conversion explicit.

Typing rules (docs/tc.md):

* types: ``int8``, ``int16``, ``int32``, ``fp16`` (``half``, ``float16``), ``fp32`` (``float``,
  ``float32``); comparisons and ``&&``/``||``/``!`` give ``bool``;
* arithmetic (``+ - * / % << >>``) promotes as C does: integers narrower than 32 bits become
  ``int32``, ``fp16`` becomes ``fp32``, then both operands take the common type (any float
  operand makes it ``fp32``); ``/`` and ``%`` on integers round toward minus infinity;
  ``/`` on floats has no IR node yet and is refused, as are ``%``, ``<<``, ``>>`` on floats;
* ``max``/``min``/``fmax``/``fmin`` and the branches of ``c ? a : b`` take the common type
  *without* promotion, and an integer literal takes the other operand's type (so
  ``fmax(A(i), 0)`` with ``A`` int8 is int8);
* integer literals are ``int32``, others ``fp32``; casts are ``int8(x)``, ``fp32(x)``, ...;
* a statement's type is its right-hand side's; ``+=``/``*=`` accumulate in the promoted type
  (int8 products sum in int32); a tensor written again keeps its first type (the value is
  converted, as C's assignment does);
* index expressions are integer and affine in the index variables: ``+``, ``-``, ``*`` by an
  integer constant, ``/`` and ``%`` by a positive integer constant; size variables may be
  added (they are parameters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vta.compiler.ir.semantics import MATH
from vta.compiler.tc import ast as A
from vta.compiler.tc.source import Pos, Source
from vta.dtypes import dtype
from vta.errors import TcTypeError

__all__ = ["DTYPE_NAMES", "MATH_NAMES", "affine_problem", "TensorInfo", "CheckedStmt",
           "CheckedDef", "check", "promote",
           "identity", "is_float"]

#: TC type names -> IR dtype names
DTYPE_NAMES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
               "uint8": "uint8", "uint16": "uint16", "bool": "bool",
               "fp16": "float16", "half": "float16", "float16": "float16",
               "fp32": "float32", "float": "float32", "float32": "float32",
               "fp64": "float64", "float64": "float64", "double": "float64"}
_INT_RANGE = {n: (int(dtype(n).min), int(dtype(n).max))
              for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16")}
#: integer types by rank (C's conversion rank, narrowest first)
_INT_ORDER = ("bool", "int8", "uint8", "int16", "uint16", "int32", "int64")
_BUILTINS = ("max", "min", "fmax", "fmin", "abs", "nextafter", "nextafterf")
#: TC's unary math built-ins (CUDA's names, with and without the ``f`` of the float version)
#: -> the IR's math functions (``vta.compiler.ir.semantics.MATH``)
MATH_NAMES = {**{n: n for n in MATH}, **{f"{n}f": n for n in MATH}}
_NAMES = (*_BUILTINS, *MATH_NAMES)


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def promote(dtype: str) -> str:
    """C's promotion for arithmetic: integers narrower than 32 bits (and bool) to int32, fp16
    to fp32; int64, fp32 and fp64 stay."""
    if is_float(dtype):
        return "float64" if dtype == "float64" else "float32"
    return "int64" if dtype == "int64" else "int32"


def _common(a: str, b: str) -> str:
    """The common type of two operands (C's usual conversions, without the promotion: two
    fp16 stay fp16; a signed and an unsigned integer of one width meet at the next width)."""
    if is_float(a) or is_float(b):
        if "float64" in (a, b):
            return "float64"
        return "float16" if a == b == "float16" else "float32"
    hi, lo = (a, b) if _INT_ORDER.index(a) >= _INT_ORDER.index(b) else (b, a)
    ra, rb = _INT_RANGE[hi], _INT_RANGE[lo]
    if ra[0] <= rb[0] and rb[1] <= ra[1]:
        return hi
    return _INT_ORDER[_INT_ORDER.index(hi) + 1]


def identity(op: str, dtype: str) -> int | float:
    """The identity of reduction ``op`` in ``dtype`` (the initial value of the ``!`` forms)."""
    if op == "+":
        return 0.0 if is_float(dtype) else 0
    if op == "*":
        return 1.0 if is_float(dtype) else 1
    if is_float(dtype):
        return float("-inf") if op == "max" else float("inf")
    lo, hi = _INT_RANGE[dtype]
    return lo if op == "max" else hi


@dataclass(frozen=True)
class TensorInfo:
    """An input (``dims`` from its declaration) or a tensor the statements define."""

    name: str
    dtype: str
    kind: str  # "input", "output" or "temporary"
    dims: tuple[str | int, ...] = ()
    #: an input without declared sizes: the starting values of this tensor (``O(i) += ...``
    #: on a new output accumulates into values the caller gives), shaped like it
    shape_of: str | None = None
    #: an output's declared sizes (``-> (int32(M, N) O)``), checked against the inferred shape
    declared: tuple[str | int, ...] | None = None


@dataclass(frozen=True)
class CheckedStmt:
    """One statement, typed.

    ``lhs`` are the output's index variables, ``reduce`` the reduction variables (used on the
    right or in ``where`` clauses, not on the left; first-use order), ``rhs`` the typed value
    in the statement's ``dtype``; ``ranges`` the ``where i in lo:hi`` bounds (typed size
    expressions), ``exists`` the ``where exists`` reads; ``prev`` the statement that defined
    the value this one updates (-1: the tensor is new); ``init`` the input that holds the
    starting values of a new tensor accumulated into without ``!`` (TC: the caller's values);
    ``equivalent`` TC's ``<=>`` annotation (reported, not checked)."""

    index: int
    tensor: str
    op: str
    bang: bool
    lhs: tuple[str, ...]
    reduce: tuple[str, ...]
    rhs: A.TExpr
    dtype: str
    ranges: tuple[tuple[str, A.TExpr, A.TExpr], ...]
    exists: tuple[A.TRead, ...]
    prev: int
    pos: Pos
    text: str
    var_pos: dict[str, Pos] = field(default_factory=dict)
    init: str | None = None
    equivalent: str | None = None

    @property
    def vars(self) -> tuple[str, ...]:
        return (*self.lhs, *self.reduce)

    @property
    def label(self) -> str:
        """How reports name the statement: ``statement 2 (O2(i) = fmax(...))``."""
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"statement {self.index + 1} ({text})"


@dataclass(frozen=True)
class CheckedDef:
    """A checked definition: its inputs in parameter order, outputs in return order, size
    variables (first-declared order), statements and every tensor's info."""

    name: str
    source: Source
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[str, ...]
    sizes: tuple[str, ...]
    stmts: tuple[CheckedStmt, ...]
    tensors: dict[str, TensorInfo]
    pos: Pos

    def last_def(self, tensor: str) -> int:
        """The statement whose value of ``tensor`` is final."""
        return max(s.index for s in self.stmts if s.tensor == tensor)


class _Checker:
    def __init__(self, d: A.Def, src: Source, defs: frozenset[str] = frozenset()) -> None:
        self.d, self.src, self.defs = d, src, defs
        self.sizes: list[str] = []
        self.tensors: dict[str, TensorInfo] = {}
        self.defined: dict[str, int] = {}  # tensor -> statement of its latest value

    def err(self, msg: str, pos: Pos) -> TcTypeError:
        return TcTypeError(msg, self.src, pos)

    # ------------------------------------------------------------------ signature

    def signature(self) -> None:
        seen: dict[str, Pos] = {}
        for p in self.d.params:
            if p.dtype not in DTYPE_NAMES:
                raise self.err(f"unknown type {p.dtype!r} of parameter {p.name} (expected one "
                               f"of {', '.join(DTYPE_NAMES)})", p.pos)
            if p.name in seen:
                raise self.err(f"parameter {p.name} is declared twice", p.pos)
            seen[p.name] = p.pos
            for dim, dpos in zip(p.dims, p.dim_pos, strict=True):
                if isinstance(dim, int):
                    if dim < 1:
                        raise self.err(f"size {dim} of {p.name} must be positive", dpos)
                elif dim not in self.sizes:
                    self.sizes.append(dim)
            self.tensors[p.name] = TensorInfo(p.name, DTYPE_NAMES[p.dtype], "input", p.dims)
        for s in self.sizes:
            if s in self.tensors:
                raise self.err(f"{s} is both a size variable and a tensor", self._param_pos(s))
            if s in DTYPE_NAMES or s in _NAMES:
                raise self.err(f"size variable {s} shadows a built-in name", self._param_pos(s))
        outs: list[str] = []
        for r in self.d.returns:
            if r.name in self.tensors:
                raise self.err(f"output {r.name} is an input parameter; outputs are defined by "
                               f"the statements", r.pos)
            if r.name in self.sizes:
                raise self.err(f"output {r.name} is a size variable", r.pos)
            if r.name in outs:
                raise self.err(f"output {r.name} is listed twice", r.pos)
            outs.append(r.name)
        self.outputs = tuple(outs)
        self.declared: dict[str, A.Param] = {}
        for r, typed in zip(self.d.returns, self.d.typed_returns or (None,) * len(outs),
                            strict=True):
            if typed is None:
                continue
            if typed.dtype not in DTYPE_NAMES:
                raise self.err(f"unknown type {typed.dtype!r} of output {typed.name} (expected "
                               f"one of {', '.join(DTYPE_NAMES)})", typed.pos)
            for dim, dpos in zip(typed.dims, typed.dim_pos, strict=True):
                if isinstance(dim, str) and dim not in self.sizes:
                    raise self.err(f"size {dim} of output {typed.name} is not a size of any "
                                   f"input", dpos)
                if isinstance(dim, int) and dim < 1:
                    raise self.err(f"size {dim} of {typed.name} must be positive", dpos)
            self.declared[r.name] = typed

    def _param_pos(self, size: str) -> Pos:
        for p in self.d.params:
            for dim, dpos in zip(p.dims, p.dim_pos, strict=True):
                if dim == size:
                    return dpos
        return self.d.pos

    # ------------------------------------------------------------------ statements

    def statement(self, k: int, st: A.Stmt) -> CheckedStmt:
        name = st.tensor
        info = self.tensors.get(name)
        if info is not None and info.kind == "input":
            raise self.err(f"cannot write input tensor {name}", st.pos)
        if name in self.sizes:
            raise self.err(f"{name} is a size variable, not a tensor", st.pos)
        if name in DTYPE_NAMES or name in _NAMES:
            raise self.err(f"{name} is a built-in name, not a tensor", st.pos)
        self.var_pos: dict[str, Pos] = {}
        self.var_order: list[str] = []
        lhs: list[str] = []
        for ix in st.indices:
            if ix.name in self.sizes or ix.name in self.tensors or ix.name in DTYPE_NAMES:
                raise self.err(f"left-hand index {ix.name} must be an index variable, but it "
                               f"names a {'size variable' if ix.name in self.sizes else 'tensor'}"
                               if ix.name not in DTYPE_NAMES else
                               f"left-hand index {ix.name} is a type name", ix.pos)
            if ix.name in lhs:
                raise self.err(f"index {ix.name} appears twice on the left-hand side", ix.pos)
            lhs.append(ix.name)
            self._use(ix.name, ix.pos)
        prev = self.defined.get(name, -1)
        if prev >= 0 and len(lhs) != self.ranks[name]:
            raise self.err(f"{name} has {self.ranks[name]} dimensions, written here with "
                           f"{len(lhs)} indices", st.pos)
        self.current = name
        init = None
        if st.op != "=" and not st.bang and prev < 0:
            if name not in self.outputs:
                raise self.err(f"'{st.op}=' without '!' accumulates into the existing values of "
                               f"{name}, but {name} is a temporary that no earlier statement "
                               f"defines; write '{st.op}=!' to start from the identity",
                               st.op_pos)
            init = f"{name}_init"  # TC: the caller's values of the output
            if init in self.tensors or init in self.sizes:
                raise self.err(f"'{st.op}=' into output {name} takes its starting values as "
                               f"input {init}, a name already in use", st.op_pos)
        self.lets: dict[str, A.TExpr] = {}
        for w in st.where:
            if isinstance(w, A.WhereLet):
                if w.var in self.sizes or w.var in self.tensors or w.var in lhs \
                        or w.var in self.lets or w.var in DTYPE_NAMES or w.var in _NAMES:
                    raise self.err(f"'where {w.var} = ...' names {w.var}, which is already a "
                                   f"name in this statement", w.pos)
                self.lets[w.var] = self.expr(w.value)
        rhs = self.expr(st.rhs)
        exists: list[A.TRead] = []
        ranges: list[tuple[str, A.TExpr, A.TExpr]] = []
        for w in st.where:
            if isinstance(w, A.WhereExists):
                r = self.expr(w.access)
                if not isinstance(r, A.TRead):
                    raise self.err("'where exists' takes a tensor read", w.pos)
                exists.append(r)
        for w in st.where:
            if isinstance(w, A.WhereRange):
                if w.var not in self.var_pos:
                    raise self.err(f"where clause constrains {w.var}, which the statement does "
                                   f"not use", w.pos)
                if any(v == w.var for v, _, _ in ranges):
                    raise self.err(f"index {w.var} has two where clauses", w.pos)
                ranges.append((w.var, self.size_expr(w.lo), self.size_expr(w.hi)))
        if rhs.dtype == "bool":
            raise self.err("the value is a condition (bool); write 'c ? a : b' to choose "
                           "values", st.rhs.pos)
        reduce = tuple(v for v in self.var_order if v not in lhs)
        if reduce and st.op == "=":
            raise self.err(f"index {', '.join(reduce)} appears on the right but not on the left "
                           f"(a reduction): use a reduction operator ('+=!', 'max=!', ...)",
                           self.var_pos[reduce[0]])
        dtype = rhs.dtype if st.op in ("=", "max", "min") else promote(rhs.dtype)
        decl = self.declared.get(name)
        if prev >= 0:
            dtype = self.tensors[name].dtype
        elif decl is not None:
            dtype = DTYPE_NAMES[decl.dtype]
            if len(decl.dims) != len(lhs):
                raise self.err(f"output {name} is declared with {len(decl.dims)} dimensions, "
                               f"written here with {len(lhs)} indices", st.pos)
        rhs = _convert(rhs, dtype)
        if info is None:
            kind = "output" if name in self.outputs else "temporary"
            self.tensors[name] = TensorInfo(name, dtype, kind,
                                            declared=decl.dims if decl is not None else None)
            self.ranks[name] = len(lhs)
            if init is not None:
                self.tensors[init] = TensorInfo(init, dtype, "input", shape_of=name)
        elif len(lhs) != self.ranks[name]:
            raise self.err(f"{name} has {self.ranks[name]} dimensions, written here with "
                           f"{len(lhs)} indices", st.pos)
        self.defined[name] = k
        line = re.split(r"#|//", self.src.line(st.pos.line)[st.pos.col - 1:])[0]
        text = " ".join(line.split()).rstrip("}").rstrip()
        return CheckedStmt(k, name, st.op, st.bang, tuple(lhs), reduce, rhs, dtype,
                           tuple(ranges), tuple(exists), prev, st.pos, text, dict(self.var_pos),
                           init, st.equivalent)

    def _use(self, var: str, pos: Pos) -> None:
        if var not in self.var_pos:
            self.var_pos[var] = pos
            self.var_order.append(var)

    # ------------------------------------------------------------------ expressions

    def expr(self, e: A.Expr) -> A.TExpr:
        if isinstance(e, A.Num):
            if e.is_float:
                return A.TNum(float(e.value), "float32")
            lo, hi = _INT_RANGE["int32"]
            if not lo <= int(e.value) <= hi:
                raise self.err(f"integer literal {e.value} does not fit int32", e.pos)
            return A.TNum(int(e.value), "int32")
        if isinstance(e, A.Ident):
            if e.name in self.sizes:
                return A.TSize(e.name)
            if e.name in self.lets:
                return self.lets[e.name]
            if e.name in self.tensors and self._rank(e.name) == 0 \
                    and (self.tensors[e.name].kind == "input" or e.name in self.defined):
                return self.read(A.Apply(e.name, (), e.pos))  # a 0-rank tensor: 'a' is 'a()'
            if e.name in self.tensors:
                raise self.err(f"tensor {e.name} is used without indices", e.pos)
            if e.name in DTYPE_NAMES or e.name in _NAMES:
                raise self.err(f"{e.name} is a built-in name, not a value", e.pos)
            self._use(e.name, e.pos)
            return A.TIndex(e.name)
        if isinstance(e, A.Unary):
            a = self.expr(e.a)
            if e.op == "!":
                self._want_bool(a, e.a.pos, "'!'")
                return A.TUnary("!", a, "bool")
            self._want_num(a, e.a.pos, f"unary '{e.op}'")
            if isinstance(a, A.TNum) and e.op == "-":  # a negative literal
                lo, _ = _INT_RANGE["int32"]
                if isinstance(a.value, int) and -a.value < lo:
                    raise self.err(f"integer literal -{a.value} does not fit int32", e.pos)
                return A.TNum(-a.value, a.dtype)
            a = _convert(a, promote(a.dtype))
            return a if e.op == "+" else A.TUnary("-", a, a.dtype)
        if isinstance(e, A.Binary):
            return self.binary(e)
        if isinstance(e, A.Ternary):
            c = self.expr(e.cond)
            self._want_bool(c, e.cond.pos, "the condition of '?:'")
            t, f = self.expr(e.t), self.expr(e.f)
            self._want_num(t, e.t.pos, "'?:'")
            self._want_num(f, e.f.pos, "'?:'")
            dt = _adapt(t, f)
            return A.TSelect(c, _convert(t, dt), _convert(f, dt), dt)
        assert isinstance(e, A.Apply)
        return self.apply(e)

    def binary(self, e: A.Binary) -> A.TExpr:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("&&", "||"):
            self._want_bool(a, e.a.pos, f"'{e.op}'")
            self._want_bool(b, e.b.pos, f"'{e.op}'")
            return A.TBinary(e.op, a, b, "bool")
        self._want_num(a, e.a.pos, f"'{e.op}'")
        self._want_num(b, e.b.pos, f"'{e.op}'")
        dt = _common(promote(a.dtype), promote(b.dtype))
        if e.op in ("%", "<<", ">>") and is_float(dt):
            raise self.err(f"'{e.op}' needs integer operands, got {a.dtype} and {b.dtype}", e.pos)
        ca, cb = _convert(a, dt), _convert(b, dt)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            return A.TBinary(e.op, ca, cb, "bool")
        return A.TBinary(e.op, ca, cb, dt)

    def apply(self, e: A.Apply) -> A.TExpr:
        if e.name in self.tensors and (self.tensors[e.name].kind == "input"
                                       or e.name in self.defined):
            return self.read(e)
        if e.name in DTYPE_NAMES:
            if len(e.args) != 1:
                raise self.err(f"cast {e.name}(x) takes one argument, got {len(e.args)}", e.pos)
            a = self.expr(e.args[0])
            return _convert(a, DTYPE_NAMES[e.name], explicit=True)
        if e.name in MATH_NAMES:
            if len(e.args) != 1:
                raise self.err(f"{e.name} takes one argument, got {len(e.args)}", e.pos)
            x = self.expr(e.args[0])
            self._want_num(x, e.args[0].pos, e.name)
            ft = x.dtype if is_float(x.dtype) else "float32"
            return A.TCall(MATH_NAMES[e.name], (_convert(x, ft),), ft)
        if e.name.startswith("nextafter"):
            if len(e.args) != 2:
                raise self.err(f"{e.name} takes 2 arguments, got {len(e.args)}", e.pos)
            args = [self.expr(x) for x in e.args]
            for x, ax in zip(args, e.args, strict=True):
                self._want_num(x, ax.pos, e.name)
            dt = _common(args[0].dtype, args[1].dtype)
            dt = dt if is_float(dt) else "float32"
            if dt == "float16":
                raise self.err(f"{e.name} of fp16 values is not supported (CUDA has no half "
                               f"nextafter)", e.pos)
            return A.TCall("nextafter", (_convert(args[0], dt), _convert(args[1], dt)), dt)
        if e.name in _BUILTINS:
            want = 1 if e.name == "abs" else 2
            if len(e.args) != want:
                raise self.err(f"{e.name} takes {want} argument{'s' * (want > 1)}, got "
                               f"{len(e.args)}", e.pos)
            args = [self.expr(x) for x in e.args]
            for x, ax in zip(args, e.args, strict=True):
                self._want_num(x, ax.pos, e.name)
            if e.name == "abs":
                x = _convert(args[0], promote(args[0].dtype))
                zero = A.TNum(0.0 if is_float(x.dtype) else 0, x.dtype)
                return A.TSelect(A.TBinary("<", x, zero, "bool"), A.TUnary("-", x, x.dtype), x,
                                 x.dtype)
            dt = _adapt(args[0], args[1])
            fn = e.name.lstrip("f")
            return A.TCall(fn, (_convert(args[0], dt), _convert(args[1], dt)), dt)
        if e.name in self.tensors or e.name == self.current:
            raise self.err(f"tensor {e.name} is read before any statement defines it", e.pos)
        if e.name in self.sizes:
            raise self.err(f"{e.name} is a size variable, not a tensor or function", e.pos)
        if e.name in self.defs:
            raise self.err(f"not supported: calling definition {e.name} from another "
                           f"definition (inline its statements)", e.pos)
        raise self.err(f"unknown tensor or function {e.name!r}", e.pos)

    def _rank(self, name: str) -> int:
        info = self.tensors[name]
        if info.shape_of is not None:
            return self.ranks[info.shape_of]
        return len(info.dims) if info.kind == "input" else self.ranks.get(name, -1)

    def read(self, e: A.Apply) -> A.TRead:
        info = self.tensors[e.name]
        rank = self._rank(e.name)
        if len(e.args) != rank:
            raise self.err(f"tensor {e.name} has {rank} dimensions, read here with "
                           f"{len(e.args)} indices", e.pos)
        idx = tuple(self.index_expr(a, affine=False) for a in e.args)
        return A.TRead(e.name, idx, info.dtype, self.defined.get(e.name, -1))

    def index_expr(self, e: A.Expr, affine: bool = True) -> A.TExpr:
        """A typed index expression, checked to be integer, and affine with ``affine``. A
        read's index need not be: a data-dependent index (``A(B(i))``, a gather) or a
        non-affine one (``A(i % j)``) takes no part in range inference and is checked against
        the tensor's bounds when the program runs."""
        t = self.expr(e)
        if t.dtype not in _INT_RANGE or t.dtype == "bool":
            raise self.err(f"an index must be an integer expression, this one is {t.dtype}",
                           e.pos)
        why = affine_problem(t)
        if why and affine:
            raise self.err(f"index expression is not affine: {why}", e.pos)
        return t

    def size_expr(self, e: A.Expr) -> A.TExpr:
        """A bound of a ``where`` range: sizes and integers only."""
        t = self.index_expr(e)
        for n in _walk(t):
            if isinstance(n, A.TIndex):
                raise self.err(f"a range bound may use size variables and integers only, not "
                               f"index {n.name}", e.pos)
        return t

    def _want_num(self, a: A.TExpr, pos: Pos, what: str) -> None:
        if a.dtype == "bool":
            raise self.err(f"{what} needs a number, got a condition (bool)", pos)

    def _want_bool(self, a: A.TExpr, pos: Pos, what: str) -> None:
        if a.dtype != "bool":
            raise self.err(f"{what} needs a condition (a comparison), got {a.dtype}", pos)

    # ------------------------------------------------------------------ whole definition

    def run(self) -> CheckedDef:
        self.ranks: dict[str, int] = {}
        self.lets = {}
        self.current = ""
        self.signature()
        if not self.d.stmts:
            raise self.err(f"definition {self.d.name} has no statements", self.d.pos)
        stmts = [self.statement(k, s) for k, s in enumerate(self.d.stmts)]
        for r in self.d.returns:
            if r.name not in self.defined:
                raise self.err(f"output {r.name} is never defined by a statement", r.pos)
        inputs = tuple(t for t in self.tensors.values() if t.kind == "input")
        return CheckedDef(self.d.name, self.src, inputs, self.outputs, tuple(self.sizes),
                          tuple(stmts), dict(self.tensors), self.d.pos)


def _walk(e: A.TExpr) -> list[A.TExpr]:
    out = [e]
    if isinstance(e, A.TRead):
        for i in e.indices:
            out += _walk(i)
    elif isinstance(e, (A.TUnary, A.TCast)):
        out += _walk(e.a)
    elif isinstance(e, A.TBinary):
        out += _walk(e.a) + _walk(e.b)
    elif isinstance(e, A.TSelect):
        out += _walk(e.cond) + _walk(e.t) + _walk(e.f)
    elif isinstance(e, A.TCall):
        for x in e.args:
            out += _walk(x)
    return out


def _const(e: A.TExpr) -> int | None:
    """The value of an integer expression without variables or sizes, else None."""
    if isinstance(e, A.TNum) and isinstance(e.value, int):
        return e.value
    if isinstance(e, A.TCast):
        return _const(e.a)
    if isinstance(e, A.TUnary) and e.op == "-":
        v = _const(e.a)
        return None if v is None else -v
    if isinstance(e, A.TBinary) and e.op in ("+", "-", "*"):
        a, b = _const(e.a), _const(e.b)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    return None


def affine_problem(e: A.TExpr) -> str | None:
    """Why the integer expression ``e`` is not affine in the index variables (None if it is)."""
    if isinstance(e, (A.TNum, A.TSize, A.TIndex)):
        return None
    if isinstance(e, A.TCast):
        return affine_problem(e.a)
    if isinstance(e, A.TRead):
        return f"it reads tensor {e.tensor} (data-dependent indices are not supported)"
    if isinstance(e, A.TUnary) and e.op == "-":
        return affine_problem(e.a)
    if isinstance(e, A.TBinary) and e.op in ("+", "-"):
        return affine_problem(e.a) or affine_problem(e.b)
    if isinstance(e, A.TBinary) and e.op == "*":
        if _const(e.a) is None and _const(e.b) is None:
            return "'*' needs an integer constant on one side"
        return affine_problem(e.a) or affine_problem(e.b)
    if isinstance(e, A.TBinary) and e.op in ("/", "%"):
        c = _const(e.b)
        if c is None or c <= 0:
            return f"'{e.op}' needs a positive integer constant on the right"
        return affine_problem(e.a)
    if isinstance(e, A.TSelect) or isinstance(e, A.TCall):
        return "conditional and built-in values cannot index"
    if isinstance(e, A.TBinary):
        return f"operator '{e.op}'"
    return f"{type(e).__name__}"


def _convert(e: A.TExpr, dtype: str, explicit: bool = False) -> A.TExpr:
    if e.dtype == dtype:
        return e
    if isinstance(e, A.TNum) and not explicit:
        v = float(e.value) if is_float(dtype) else e.value
        if not is_float(dtype) and isinstance(v, int):
            lo, hi = _INT_RANGE.get(dtype, (-(1 << 31), (1 << 31) - 1))
            if lo <= v <= hi:
                return A.TNum(v, dtype)
        elif is_float(dtype):
            return A.TNum(v, dtype)
    return A.TCast(e, dtype)


def _adapt(a: A.TExpr, b: A.TExpr) -> str:
    """Common type without promotion; an integer literal takes the other side's type."""
    for lit, other in ((a, b), (b, a)):
        if isinstance(lit, A.TNum) and isinstance(lit.value, int) and lit.dtype == "int32":
            if is_float(other.dtype):
                return other.dtype
            lo, hi = _INT_RANGE[other.dtype]
            if lo <= lit.value <= hi:
                return other.dtype
    return _common(a.dtype, b.dtype)


def check(program: A.TcFile, entry: str | None = None) -> CheckedDef:
    """Type-check the definition ``entry`` of ``program`` (the only one when None)."""
    names: dict[str, A.Def] = {}
    for d in program.defs:
        if d.name in names:
            raise TcTypeError(f"definition {d.name} is defined twice", program.source, d.pos)
        names[d.name] = d
    if entry is None:
        if len(program.defs) != 1:
            raise TcTypeError(f"the file defines {', '.join(names)}; choose one with --entry",
                              program.source)
        d = program.defs[0]
    elif entry not in names:
        raise TcTypeError(f"no definition named {entry!r} (defined: {', '.join(names)})",
                          program.source)
    else:
        d = names[entry]
    return _Checker(d, program.source, frozenset(names)).run()
