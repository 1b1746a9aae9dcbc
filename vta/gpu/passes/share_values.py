"""Pass: bind each value a statement computes more than once to a local, once.

Why. An expression is a DAG: a fused stage reads the running value more than once (Horner's
shift-and-add multiplier ``h = (h << g) + x`` per term, the even-rounding stage's ``x`` twice,
``clip(rounding(x + h))`` after it), and the stage constructors share the Python object. A
consumer that walks it as a tree does the shared work once per *path*: stage after stage the
paths multiply, and the per-channel shift-add small CNN's convolution rendered as 2,960,960
characters (lines of 24,059) that nvcc took 79 s to compile, the emulator evaluated each path
again, and every ``walk`` (verifier, renderer) visited each path. After this pass every shared
value is a ``LetStmt`` before its statement (``const int t3 = ...;`` in CUDA, one evaluation in
the emulator) and the text grows linearly with the stage terms.

Before: a lowered body (``bind_threads`` ran, or a hand-mapped kernel's frame,
``kernels.common.finish``). After: in every ``BufferStore`` (value and indices), ``LetStmt``
value and ``IfThenElse`` condition, no subexpression that reads memory or calls (a
``BufferLoad``, an ``E.Call``, or anything computed from one) occurs twice, structurally,
where it is evaluated unconditionally: each such value is bound once, in dependency order,
by ``LetStmt``s wrapping the statement (fresh ``Var``s ``t0, t1, ...``). The same values (an
expression has no side effects); the pass is idempotent (a second run changes nothing).

What is not bound, and why:
* index and predicate arithmetic (no load, no call: thread indices, loop counters,
  constants) stays inline where it is used: it does not nest stage over stage, nvcc folds it
  itself, and the kernels' text (and its golden files) keep their shape;
* a value used only under a ``select``'s branch or the right side of ``&&``/``||`` (C
  evaluates those only when taken): hoisting it would issue a load the guard prevents (a
  padded element out of bounds). It stays inline; a value it shares with the unconditional
  part is still bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import child_slots, evolve, node_fields

__all__ = ["share_values", "share_stmt", "bind_shared", "distinct_nodes"]

#: node class -> its fields whose child C evaluates only when a guard allows it
_GUARDED: dict[type, tuple[str, ...]] = {E.Select: ("t", "f"), E.And: ("b",), E.Or: ("b",)}


def share_values(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with its shared values bound to locals (module docstring); ``func`` itself
    when none is."""
    body = share_stmt(func.body)
    return func if body is func.body else func.with_body(body)


def share_stmt(body: S.Stmt) -> S.Stmt:
    """``body`` with every statement's shared values bound (``share_values`` on a body; the
    hand-mapped kernels' frame runs it before the function exists)."""
    names = (f"t{k}" for k in itertools.count())
    return _Sharer(names).stmt(body)


class _Sharer:
    """Rewrites statements, numbering the locals it makes across the whole body."""

    def __init__(self, names: Iterator[str]) -> None:
        self.names = names

    def stmt(self, s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.SeqStmt):
            stmts = tuple(self.stmt(x) for x in s.stmts)
            return s if all(a is b for a, b in zip(stmts, s.stmts, strict=True)) \
                else evolve(s, stmts=stmts)
        if isinstance(s, S.BufferStore):
            binds, (value, *idx) = bind_shared((s.value, *s.indices), self.names)
            return _wrap(binds, s if not binds else evolve(s, value=value, indices=tuple(idx)))
        if isinstance(s, S.LetStmt):
            binds, (value,) = bind_shared((s.value,), self.names)
            body = self.stmt(s.body)
            if not binds and body is s.body:
                return s
            return _wrap(binds, evolve(s, value=value, body=body))
        if isinstance(s, S.IfThenElse):
            binds, (cond,) = bind_shared((s.cond,), self.names)
            then = self.stmt(s.then_case)
            other = self.stmt(s.else_case) if s.else_case is not None else None
            if not binds and then is s.then_case and other is s.else_case:
                return s
            return _wrap(binds, evolve(s, cond=cond, then_case=then, else_case=other))
        if isinstance(s, (S.For, S.Allocate, S.AttrStmt)):
            body = self.stmt(s.body)
            return s if body is s.body else evolve(s, body=body)
        return s  # a barrier, an evaluation, a dialect statement: nothing of ours inside


def _wrap(binds: list[tuple[E.Var, E.Expr]], s: S.Stmt) -> S.Stmt:
    """``s`` under ``LetStmt``s of ``binds`` (the first outermost)."""
    for var, value in reversed(binds):
        s = S.LetStmt(var, value, s)
    return s


def bind_shared(roots: tuple[E.Expr, ...], names: Iterator[str]
                ) -> tuple[list[tuple[E.Var, E.Expr]], tuple[E.Expr, ...]]:
    """The values among ``roots`` (one statement's expressions) to bind, as ``(var, value)``
    in dependency order (a value refers only to the variables before it), and ``roots``
    rewritten to read them; no bindings and ``roots`` themselves when nothing is shared. The
    work is linear in the distinct nodes: each is visited once (identity), structurally
    equal ones merged (``_Dag``)."""
    dag = _Dag()
    canon = tuple(dag.canon(r) for r in roots)
    chosen = dag.shared(canon)
    if not chosen:
        return [], roots
    ordered = [n for n in dag.post if id(n) in chosen]
    memo: dict[int, Any] = {}
    binds = []
    for n in ordered:
        value = _replace(n, memo, top=True)
        var = E.Var(next(names), n.dtype)
        memo[id(n)] = var
        binds.append((var, value))
    return binds, tuple(_replace(r, memo) for r in canon)


class _Dag:
    """The distinct nodes of some expressions: structurally equal nodes merged into one
    (hash-consing, keyed by their children's identities, so no deep comparison), each node's
    use count (its distinct parents' references) and whether it reads memory or calls."""

    def __init__(self) -> None:
        self.by_id: dict[int, Any] = {}      # id(node) -> its canonical node
        self.by_key: dict[tuple[Any, ...], Any] = {}
        self.keep: list[Any] = []            # the originals stay alive: their ids stay unique
        self.post: list[Any] = []            # canonical nodes, children first
        self.data: set[int] = set()          # ids of canonical nodes that read memory or call
        self.kids: dict[int, list[tuple[str, Any]]] = {}

    def canon(self, n: Any) -> Any:
        hit = self.by_id.get(id(n))
        if hit is not None:
            return hit
        names = child_slots(type(n))
        if not names or isinstance(n, E.Var):
            c = n  # a leaf: a variable (its identity), a constant, a thread index
            kids: list[tuple[str, Any]] = []
        else:
            changes: dict[str, Any] = {}
            kids = []
            key: list[Any] = [type(n)]
            for f in node_fields(type(n)) or ():
                v = getattr(n, f)
                if f in names and isinstance(v, tuple):
                    cv = tuple(self.canon(x) if isinstance(x, E.Expr) else x for x in v)
                    kids += [(f, x) for x in cv if isinstance(x, E.Expr)]
                    key.append(tuple(id(x) for x in cv))
                    if any(a is not b for a, b in zip(cv, v, strict=True)):
                        changes[f] = cv
                elif f in names and isinstance(v, E.Expr):
                    cv = self.canon(v)
                    kids.append((f, cv))
                    key.append(id(cv))
                    if cv is not v:
                        changes[f] = cv
                else:
                    key.append(v if _hashable(v) else id(v))
            k = tuple(key)
            c = self.by_key.get(k)
            if c is None:
                c = evolve(n, **changes) if changes else n
                self.by_key[k] = c
        self.keep.append(n)
        self.by_id[id(n)] = c
        if id(c) not in self.kids:
            self.kids[id(c)] = kids
            self.by_id[id(c)] = c
            self.post.append(c)
            if isinstance(c, (S.BufferLoad, E.Call)) or any(id(x) in self.data for _, x in kids):
                self.data.add(id(c))
        return c

    def shared(self, roots: tuple[Any, ...]) -> set[int]:
        """Ids of the nodes to bind: reading memory or calling, not leaves, used twice or
        more, and evaluated whenever the statement runs (not only under a guard)."""
        uses: dict[int, int] = {}
        for r in roots:
            uses[id(r)] = uses.get(id(r), 0) + 1
        for n in self.post:
            for _, x in self.kids[id(n)]:
                uses[id(x)] = uses.get(id(x), 0) + 1
        always: set[int] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            if id(n) in always:
                continue
            always.add(id(n))
            guarded = _GUARDED.get(type(n), ())
            stack += [x for f, x in self.kids[id(n)] if f not in guarded]
        return {i for i in self.data if uses.get(i, 0) > 1 and i in always}


def _replace(n: Any, memo: dict[int, Any], top: bool = False) -> Any:
    """Canonical node ``n`` with each bound node under it (in ``memo`` as its variable; ``n``
    itself too unless ``top``) replaced, rebuilt without refolding (the same operators)."""
    if not top:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
    names = child_slots(type(n))
    if not names or isinstance(n, E.Var):
        return n
    changes: dict[str, Any] = {}
    for f in names:
        v = getattr(n, f)
        if isinstance(v, tuple):
            nv = tuple(_replace(x, memo) if isinstance(x, E.Expr) else x for x in v)
            if any(a is not b for a, b in zip(nv, v, strict=True)):
                changes[f] = nv
        elif isinstance(v, E.Expr):
            nv = _replace(v, memo)
            if nv is not v:
                changes[f] = nv
    out = evolve(n, **changes) if changes else n
    if not top:
        memo[id(n)] = out
    return out


def distinct_nodes(node: Any) -> int:
    """The IR nodes reachable from ``node``, each counted once however many parents share it:
    the size of the DAG, which the text of a kernel should be linear in (a tree walk counts
    every path)."""
    seen: set[int] = set()
    keep, stack = [], [node]  # ``keep``: the nodes stay alive, so their ids stay unique
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        keep.append(n)
        for f in child_slots(type(n)) or ():
            v = getattr(n, f)
            stack += [x for x in (v if type(v) is tuple else (v,))
                      if node_fields(type(x)) is not None]
    return len(seen)


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True
