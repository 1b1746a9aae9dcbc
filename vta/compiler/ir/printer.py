"""Text form of expressions, statements and functions (for ``--dump-ir`` and test diffs).

Variables and buffers are objects; the printer gives each a unique name (``i``, ``i_1``, ...)
in order of first appearance, so two different variables never print alike.
"""

from __future__ import annotations

from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir import tensor as T
from vta.compiler.ir.visitor import Dispatch

__all__ = ["expr_str", "stmt_str", "func_str", "Namer"]


class Namer:
    """Assigns unique printable names to Vars, Buffers and Tensors (by identity)."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}
        self._used: set[str] = set()
        self._keep: list[Any] = []  # keep objects alive so ids stay unique

    def __call__(self, obj: Any, hint: str) -> str:
        key = id(obj)
        if key not in self._names:
            name, n = hint or "v", 0
            while name in self._used:
                n += 1
                name = f"{hint}_{n}"
            self._used.add(name)
            self._names[key] = name
            self._keep.append(obj)
        return self._names[key]


_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "cmp": 6, "<<": 7, ">>": 7, "+": 8, "-": 8,
         "*": 9, "//": 9, "/": 9, "%": 9}


def _paren(s: str, p: int, parent: int) -> str:
    return f"({s})" if p < parent else s


def _binop(e: Any, nm: Namer, parent: int) -> str:
    p = _PREC[e.symbol]
    return _paren(f"{_e(e.a, nm, p)} {e.symbol} {_e(e.b, nm, p + 1)}", p, parent)


def _cmp(e: Any, nm: Namer, parent: int) -> str:
    p = _PREC["cmp"]
    return _paren(f"{_e(e.a, nm, p + 1)} {e.op} {_e(e.b, nm, p + 1)}", p, parent)


def _indexed(name: str, idx: Any, nm: Namer) -> str:
    return f"{name}[{', '.join(_e(i, nm) for i in idx)}]"


#: the printer's meaning of each expression node (``vta.compiler.ir.visitor.Dispatch``)
_EXPR: Dispatch[str] = Dispatch("printer", {
    E.Var: lambda e, nm, p: nm(e, e.name),
    E.IntImm: lambda e, nm, p: (str(e.value) if e.dtype in ("int32", "bool")
                                else f"{e.dtype}({e.value})"),
    E.FloatImm: lambda e, nm, p: (f"{e.value!r}" if e.dtype == "float32"
                                  else f"{e.dtype}({e.value!r})"),
    E.Min: lambda e, nm, p: f"{e.symbol}({_e(e.a, nm)}, {_e(e.b, nm)})",
    E.Max: lambda e, nm, p: f"{e.symbol}({_e(e.a, nm)}, {_e(e.b, nm)})",
    E.NextAfter: lambda e, nm, p: f"{e.symbol}({_e(e.a, nm)}, {_e(e.b, nm)})",
    E.BinOp: _binop,
    E.Cmp: _cmp,
    E.And: lambda e, nm, p: _paren(f"{_e(e.a, nm, 2)} && {_e(e.b, nm, 3)}", 2, p),
    E.Or: lambda e, nm, p: _paren(f"{_e(e.a, nm, 1)} || {_e(e.b, nm, 2)}", 1, p),
    E.Not: lambda e, nm, p: f"!{_e(e.a, nm, 9)}",
    E.Select: lambda e, nm, p: f"select({_e(e.cond, nm)}, {_e(e.t, nm)}, {_e(e.f, nm)})",
    E.Cast: lambda e, nm, p: f"{e.dtype}({_e(e.value, nm)})",
    E.Call: lambda e, nm, p: f"{e.name}({', '.join(_e(a, nm) for a in e.args)})",
    E.Math: lambda e, nm, p: f"{e.fn}({_e(e.a, nm)})",
    S.BufferLoad: lambda e, nm, p: _indexed(nm(e.buffer, e.buffer.name), e.indices, nm),
    T.TensorRead: lambda e, nm, p: _indexed(nm(e.tensor, e.tensor.name), e.indices, nm),
    T.Reduce: lambda e, nm, p: (
        f"{e.combiner}({_e(e.source, nm)}, axis=["
        + ", ".join(f"{nm(a.var, a.var.name)}<{a.extent}" for a in e.axes) + "])"),
}, default=lambda e, nm, p: repr(e))


def _e(e: Any, nm: Namer, parent: int = 0) -> str:
    return _EXPR(e, nm, parent)


def expr_str(e: Any, namer: Namer | None = None) -> str:
    return _e(e, namer or Namer())


def _for(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    kind = "" if s.kind is S.ForKind.SERIAL else f"  # {s.kind.value}"
    if s.thread:
        kind += f" {s.thread}"
    lo, ext = _e(s.min, nm), _e(s.extent, nm)
    rng = f"range({ext})" if lo == "0" else f"range({lo}, {lo} + {ext})"
    out.append(f"{'  ' * ind}for {nm(s.var, s.var.name)} in {rng}:{kind}")
    _s(s.body, nm, ind + 1, out)


def _if(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    out.append(f"{pad}if {_e(s.cond, nm)}:")
    _s(s.then_case, nm, ind + 1, out)
    if s.else_case is not None:
        out.append(f"{pad}else:")
        _s(s.else_case, nm, ind + 1, out)


def _line(text: Any, body: str | None = None) -> Any:
    """A rule printing one line (``text(s, nm)``), then the statement's ``body`` if named."""
    def rule(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
        out.append("  " * ind + text(s, nm))
        if body is not None:
            _s(getattr(s, body), nm, ind, out)
    return rule


def _seq(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    for x in s.stmts:
        _s(x, nm, ind, out)


def _other(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if hasattr(s, "render"):  # target dialect statements print themselves
        out.extend(f"{pad}{line}" for line in s.render(lambda x: _e(x, nm), nm))
    else:
        out.append(f"{pad}{s!r}")


#: the printer's meaning of each statement node
_STMT: Dispatch[None] = Dispatch("printer", {
    S.SeqStmt: _seq,
    S.For: _for,
    S.IfThenElse: _if,
    S.BufferStore: _line(lambda s, nm: f"{_indexed(nm(s.buffer, s.buffer.name), s.indices, nm)}"
                                       f" = {_e(s.value, nm)}"),
    S.LetStmt: _line(lambda s, nm: f"{nm(s.var, s.var.name)} = {_e(s.value, nm)}", "body"),
    S.Allocate: _line(lambda s, nm: f"{nm(s.buffer, s.buffer.name)} = alloc({s.buffer.shape}, "
                                    f"{s.buffer.dtype}, scope={s.buffer.scope})", "body"),
    S.Evaluate: _line(lambda s, nm: _e(s.value, nm)),
    S.Barrier: _line(lambda s, nm: f"barrier({s.scope})"),
    S.AttrStmt: _line(lambda s, nm: f"# attr {s.key} = {s.value}", "body"),
}, default=_other)


def _s(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    _STMT(s, nm, ind, out)


def stmt_str(s: Any, namer: Namer | None = None) -> str:
    out: list[str] = []
    _s(s, namer or Namer(), 0, out)
    return "\n".join(out)


def func_str(f: S.PrimFunc) -> str:
    nm = Namer()
    params = ", ".join(f"{nm(b, b.name)}: {b.dtype}{list(b.shape)}" for b in f.params)
    out = [f"def {f.name}({params}):"]
    _s(f.body, nm, 1, out)
    return "\n".join(out)


# The nodes print themselves with this module's text (``str(expr)``, ``str(func)``). The
# printer sits above the nodes it prints, so it installs their ``__str__`` rather than the
# nodes importing it; ``vta.compiler.ir`` imports this module first, so every node prints.
E.Expr.__str__ = expr_str  # type: ignore[method-assign,assignment]
S.Stmt.__str__ = stmt_str  # type: ignore[method-assign,assignment]
S.PrimFunc.__str__ = func_str  # type: ignore[method-assign,assignment]
