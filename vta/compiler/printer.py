"""Text form of expressions, statements and functions (for ``--dump-ir`` and test diffs).

Variables and buffers are objects; the printer gives each a unique name (``i``, ``i_1``, ...)
in order of first appearance, so two different variables never print alike.
"""

from __future__ import annotations

from typing import Any

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler import tensor as T

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


_PREC = {"||": 1, "&&": 2, "cmp": 3, "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6}


def _e(e: Any, nm: Namer, parent: int = 0) -> str:
    if isinstance(e, E.Var):
        return nm(e, e.name)
    if isinstance(e, E.IntImm):
        return str(e.value) if e.dtype in ("int32", "bool") else f"{e.dtype}({e.value})"
    if isinstance(e, E.FloatImm):
        return f"{e.value!r}" if e.dtype == "float32" else f"{e.dtype}({e.value!r})"
    if isinstance(e, (E.Min, E.Max)):
        return f"{e.symbol}({_e(e.a, nm)}, {_e(e.b, nm)})"
    if isinstance(e, E.BinOp):
        p = _PREC[e.symbol]
        s = f"{_e(e.a, nm, p)} {e.symbol} {_e(e.b, nm, p + 1)}"
        return f"({s})" if p < parent else s
    if isinstance(e, E.Cmp):
        p = _PREC["cmp"]
        s = f"{_e(e.a, nm, p + 1)} {e.op} {_e(e.b, nm, p + 1)}"
        return f"({s})" if p < parent else s
    if isinstance(e, E.And):
        s = f"{_e(e.a, nm, 2)} && {_e(e.b, nm, 3)}"
        return f"({s})" if parent > 2 else s
    if isinstance(e, E.Or):
        s = f"{_e(e.a, nm, 1)} || {_e(e.b, nm, 2)}"
        return f"({s})" if parent > 1 else s
    if isinstance(e, E.Not):
        return f"!{_e(e.a, nm, 9)}"
    if isinstance(e, E.Select):
        return f"select({_e(e.cond, nm)}, {_e(e.t, nm)}, {_e(e.f, nm)})"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({_e(e.value, nm)})"
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(_e(a, nm) for a in e.args)})"
    if isinstance(e, S.BufferLoad):
        return f"{nm(e.buffer, e.buffer.name)}[{', '.join(_e(i, nm) for i in e.indices)}]"
    if isinstance(e, T.TensorRead):
        return f"{nm(e.tensor, e.tensor.name)}[{', '.join(_e(i, nm) for i in e.indices)}]"
    if isinstance(e, T.Reduce):
        axes = ", ".join(f"{nm(a.var, a.var.name)}<{a.extent}" for a in e.axes)
        return f"{e.combiner}({_e(e.source, nm)}, axis=[{axes}])"
    return repr(e)


def expr_str(e: Any, namer: Namer | None = None) -> str:
    return _e(e, namer or Namer())


def _s(s: Any, nm: Namer, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if isinstance(s, S.SeqStmt):
        for x in s.stmts:
            _s(x, nm, ind, out)
    elif isinstance(s, S.For):
        kind = "" if s.kind is S.ForKind.SERIAL else f"  # {s.kind.value}"
        if s.thread:
            kind += f" {s.thread}"
        lo = _e(s.min, nm)
        ext = _e(s.extent, nm)
        rng = f"range({ext})" if lo == "0" else f"range({lo}, {lo} + {ext})"
        out.append(f"{pad}for {nm(s.var, s.var.name)} in {rng}:{kind}")
        _s(s.body, nm, ind + 1, out)
    elif isinstance(s, S.BufferStore):
        idx = ", ".join(_e(i, nm) for i in s.indices)
        out.append(f"{pad}{nm(s.buffer, s.buffer.name)}[{idx}] = {_e(s.value, nm)}")
    elif isinstance(s, S.IfThenElse):
        out.append(f"{pad}if {_e(s.cond, nm)}:")
        _s(s.then_case, nm, ind + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            _s(s.else_case, nm, ind + 1, out)
    elif isinstance(s, S.LetStmt):
        out.append(f"{pad}{nm(s.var, s.var.name)} = {_e(s.value, nm)}")
        _s(s.body, nm, ind, out)
    elif isinstance(s, S.Allocate):
        b = s.buffer
        out.append(f"{pad}{nm(b, b.name)} = alloc({b.shape}, {b.dtype}, scope={b.scope})")
        _s(s.body, nm, ind, out)
    elif isinstance(s, S.Evaluate):
        out.append(f"{pad}{_e(s.value, nm)}")
    elif isinstance(s, S.Barrier):
        out.append(f"{pad}barrier({s.scope})")
    elif isinstance(s, S.AttrStmt):
        out.append(f"{pad}# attr {s.key} = {s.value}")
        _s(s.body, nm, ind, out)
    elif hasattr(s, "render"):  # target dialect statements print themselves
        out.extend(f"{pad}{line}" for line in s.render(lambda x: _e(x, nm), nm))
    else:
        out.append(f"{pad}{s!r}")


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
