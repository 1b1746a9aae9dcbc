"""A reference interpreter of the loop-nest IR on numpy arrays, with exact integer semantics.

``run_func(func, {buffer_or_name: array})`` executes a ``PrimFunc`` in place on the caller's
arrays. It is the oracle that lowering is tested against (lowered IR == numpy), so it follows
the IR's meaning literally: every operator and cast computes through
``vta.compiler.ir.semantics`` (integers wrap to their dtype, ``//`` and ``%`` floor, ``>>`` is
arithmetic; a division by zero or an out-of-range shift is an error). Annotations
(``AttrStmt``: stage, tensorize, ...) are transparent: a tensorized region runs as its scalar
loops. Loops of every kind (thread-bound, virtual-thread) run sequentially, which is the
loop-nest semantics the GPU and accelerator backends must preserve.

Speed: innermost perfect loop nests ending in one store are evaluated at once over numpy index
grids (one array axis per loop). That is exact when no iteration reads what another writes;
the two shapes lowering produces are recognised: element-wise stores (each iteration writes its
own element) and accumulations ``buf[i] = buf[i] + e`` (summed over the loops ``i`` does not
use). A loop over a sequence (a reduction's init then its update) whose iterations touch
disjoint elements is first distributed over the statements (loop fission), so each part can
become such a nest. Anything else runs the outermost loop one iteration at a time.
Integer results are exact whatever the order (wrapping addition is associative); float sums
over a vectorised reduction are added in numpy's order, so compare floats with a tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem
from vta.compiler.ir import stmt as S
from vta.compiler.ir.poly import linear_form
from vta.compiler.ir.visitor import Dispatch
from vta.errors import InterpError

__all__ = ["InterpError", "run_func"]

#: largest index grid evaluated at once (elements)
GRID_LIMIT = 1 << 21
#: value that fills a fresh allocation: reading before writing shows up as wrong results
_FILL = 0x5A


_np_dtype = sem.np_dtype


def run_func(func: S.PrimFunc, args: Mapping[Any, np.ndarray]) -> None:
    """Execute ``func``; ``args`` maps each parameter (its ``Buffer`` or its name) to an array
    of the buffer's shape and dtype, updated in place."""
    mem: dict[S.Buffer, np.ndarray] = {}
    for b in func.params:
        arr = args.get(b, args.get(b.name))
        if arr is None:
            raise InterpError(f"{func.name}: no array given for parameter {b.name}")
        if tuple(arr.shape) != b.shape or arr.dtype != _np_dtype(b.dtype):
            raise InterpError(f"{func.name}: parameter {b.name} expects {b.dtype}{list(b.shape)}, "
                              f"got {arr.dtype}{list(arr.shape)}")
        mem[b] = arr
    _Machine(func.name, mem).stmt(func.body, {})


Env = dict[E.Var, Any]


class _Machine:
    def __init__(self, name: str, mem: dict[S.Buffer, np.ndarray]) -> None:
        self.name = name
        self.mem = mem
        #: loops distributed over their body's statements (None: not distributable), by id
        self.fissions: dict[int, S.Stmt | None] = {}

    def fail(self, msg: str) -> InterpError:
        return InterpError(f"{self.name}: {msg}")

    # ------------------------------------------------------------------ statements

    def stmt(self, s: S.Stmt, env: Env) -> None:
        _STMT(s, self, env)

    def seq(self, s: S.SeqStmt, env: Env) -> None:
        for x in s.stmts:
            self.stmt(x, env)

    def branch(self, s: S.IfThenElse, env: Env) -> None:
        if bool(self.expr(s.cond, env, None)):
            self.stmt(s.then_case, env)
        elif s.else_case is not None:
            self.stmt(s.else_case, env)

    def allocate(self, s: S.Allocate, env: Env) -> None:
        b = s.buffer
        self.mem[b] = np.full(b.shape, _FILL, dtype=_np_dtype(b.dtype))
        self.stmt(s.body, env)
        del self.mem[b]

    def unsupported(self, s: S.Stmt, env: Env) -> None:
        if isinstance(s, S.Evaluate):
            raise self.fail(f"cannot execute intrinsic call {s.value}")
        raise self.fail(f"cannot execute {type(s).__name__} statements (a target dialect "
                        f"statement; interpret the IR before the target pass)")

    def loop(self, s: S.For, env: Env) -> None:
        nest = _perfect_nest(s)
        if nest is not None:
            loops, conds, lets, store = nest
            size = 1
            for f in loops:
                size *= int(self.expr(f.extent, env, None))
            if size <= GRID_LIMIT and self.vector(loops, conds, lets, store, env):
                return
        if id(s) not in self.fissions:
            self.fissions[id(s)] = _fission(s)
        split = self.fissions[id(s)]
        if split is not None:
            self.stmt(split, env)
            return
        lo = int(self.expr(s.min, env, None))
        n = int(self.expr(s.extent, env, None))
        for i in range(lo, lo + n):
            env[s.var] = i
            self.stmt(s.body, env)
        env.pop(s.var, None)

    # ------------------------------------------------------------------ vectorised nests

    def vector(self, loops: list[S.For], conds: list[E.Expr], lets: list[tuple[E.Var, E.Expr]],
               store: S.BufferStore, env: Env) -> bool:
        """Run a perfect nest over index grids; False when that would not be exact."""
        nvars = {f.var for f in loops}
        for f in loops:
            if E.free_vars(f.min) & nvars or E.free_vars(f.extent) & nvars:
                return False
        genv = dict(env)
        nd = len(loops)
        for d, f in enumerate(loops):
            lo, n = int(self.expr(f.min, env, None)), int(self.expr(f.extent, env, None))
            shape = [1] * nd
            shape[d] = n
            genv[f.var] = np.arange(lo, lo + n, dtype=np.int64).reshape(shape)
        grid = tuple(int(np.shape(genv[f.var])[d]) for d, f in enumerate(loops))
        for v, e in lets:
            genv[v] = self.expr(e, genv, None)
        mask = None
        for c in conds:
            m = np.broadcast_to(np.asarray(self.expr(c, genv, mask), dtype=bool), grid)
            mask = m if mask is None else np.logical_and(mask, m)
        used = set().union(*(E.free_vars(i) for i in store.indices)) if store.indices else set()
        for v, e in lets:
            if used & {v}:
                used |= E.free_vars(e)
        red_axes = tuple(d for d, f in enumerate(loops) if f.var not in used)
        acc = _accumulation(store)
        if acc is not None:
            fn, rhs = acc
            return self.accumulate(store, fn, rhs, red_axes, grid, genv, mask)
        if red_axes or _reads_other(store):
            return False
        return self.assign(store, grid, genv, mask)

    def _indices(self, store: S.BufferStore, env: Env, grid: tuple[int, ...],
                 mask: np.ndarray | None) -> tuple[np.ndarray, ...]:
        buf = store.buffer
        arr = self.mem.get(buf)
        if arr is None:
            raise self.fail(f"store to {buf.name} outside its allocation")
        idx = tuple(np.broadcast_to(np.asarray(self.expr(i, env, mask), dtype=np.int64), grid)
                    for i in store.indices)
        self.check_bounds(buf, arr, idx, mask, "store to")
        return idx

    def assign(self, store: S.BufferStore, grid: tuple[int, ...], env: Env,
               mask: np.ndarray | None) -> bool:
        arr = self.mem[store.buffer]
        idx = self._indices(store, env, grid, mask)
        clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, arr.shape, strict=True))
        flat = (np.ravel_multi_index(clipped, arr.shape) if idx
                else np.zeros(grid, dtype=np.int64))
        sel = flat if mask is None else flat[mask]
        if np.unique(sel).size != sel.size:
            return False  # several iterations write one element: order matters, go scalar
        val = self.cast(self.expr(store.value, env, mask), store.buffer.dtype)
        val = np.broadcast_to(val, grid)
        if mask is None:
            arr[idx] = val
        else:
            arr[tuple(i[mask] for i in idx)] = val[mask]
        return True

    def accumulate(self, store: S.BufferStore, fn: Any, rhs: E.Expr,
                   red_axes: tuple[int, ...], grid: tuple[int, ...], env: Env,
                   mask: np.ndarray | None) -> bool:
        arr = self.mem[store.buffer]
        dt = store.buffer.dtype
        idx = self._indices(store, env, grid, mask)
        val = np.broadcast_to(self.expr(rhs, env, mask), grid)
        wide = np.int64 if not dt.startswith("float") else np.float64
        val = val.astype(wide)
        if mask is not None:
            val = np.where(mask, val, _ufunc_identity(fn, wide))
        if red_axes:
            val = fn.reduce(val, axis=red_axes, keepdims=True)
            idx = tuple(i[tuple(slice(0, 1) if d in red_axes else slice(None)
                                for d in range(len(grid)))] for i in idx)
            if mask is not None:
                mask = np.asarray(mask.any(axis=red_axes, keepdims=True))
        if mask is not None:
            idx = tuple(np.broadcast_to(i, mask.shape)[mask] for i in idx)
            val = np.broadcast_to(val, mask.shape)[mask]
        if not idx:  # a 0-rank buffer: every point combines into its one element
            flat_val = np.ravel(val)
            if flat_val.size:
                arr[()] = self.cast(fn(arr[()].astype(wide), fn.reduce(flat_val)), dt)
            return True
        cur = arr[idx].astype(wide)
        tmp = np.broadcast_to(cur, np.broadcast(cur, val).shape).copy()
        flat_idx = tuple(np.broadcast_to(i, tmp.shape).ravel() for i in idx)
        flat = np.ravel_multi_index(flat_idx, arr.shape) if idx else np.zeros(1, dtype=np.int64)
        if np.unique(flat).size == flat.size:
            arr[flat_idx] = self.cast(fn(tmp, np.broadcast_to(val, tmp.shape)).ravel(), dt)
        else:
            acc = arr.astype(wide)
            fn.at(acc, flat_idx, np.broadcast_to(val, tmp.shape).ravel())
            arr[...] = self.cast(acc, dt)
        return True

    def check_bounds(self, buf: S.Buffer, arr: np.ndarray, idx: tuple[np.ndarray, ...],
                     mask: np.ndarray | None, what: str) -> tuple[np.ndarray, ...]:
        """Fail on an out-of-range index of an active lane; clamp the inactive ones."""
        out = []
        for d, (i, n) in enumerate(zip(idx, arr.shape, strict=True)):
            bad = (i < 0) | (i >= n)
            if np.any(bad):
                live = bad if mask is None else bad & mask
                if np.any(live):
                    where = tuple(np.argwhere(live)[0])
                    value = int(np.broadcast_to(i, np.shape(live))[where])
                    raise self.fail(f"{what} {buf.name}: index {value} out of range [0, {n}) "
                                    f"in dimension {d}")
                i = np.clip(i, 0, n - 1)
            out.append(i)
        return tuple(out)

    def store(self, s: S.BufferStore, env: Env) -> None:
        arr = self.mem.get(s.buffer)
        if arr is None:
            raise self.fail(f"store to {s.buffer.name} outside its allocation")
        idx = tuple(np.asarray(self.expr(i, env, None), dtype=np.int64) for i in s.indices)
        self.check_bounds(s.buffer, arr, idx, None, "store to")
        arr[tuple(int(i) for i in idx)] = self.cast(self.expr(s.value, env, None), s.buffer.dtype)

    # ------------------------------------------------------------------ expressions

    @staticmethod
    def cast(x: Any, dtype: str) -> Any:
        return sem.cast(x, sem.dtype(dtype))

    def expr(self, e: E.Expr, env: Env, mask: np.ndarray | None) -> Any:
        return _EXPR(e, self, env, mask)

    def var(self, e: E.Var, env: Env) -> Any:
        try:
            return env[e]
        except KeyError:
            raise self.fail(f"variable {e.name} is not bound") from None

    def select(self, e: E.Select, env: Env, mask: np.ndarray | None) -> Any:
        c = np.asarray(self.expr(e.cond, env, mask), dtype=bool)
        mt = c if mask is None else mask & c
        mf = ~c if mask is None else mask & ~c
        t = self.expr(e.t, env, mt)
        f = self.expr(e.f, env, mf)
        return self.cast(np.where(c, t, f), e.dtype)

    def logic(self, fn: np.ufunc, e: Any, env: Env, mask: np.ndarray | None) -> Any:
        args = [self.expr(x, env, mask) for x in (e.a, getattr(e, "b", None)) if x is not None]
        return fn(*args)

    def unknown(self, e: E.Expr, env: Env, mask: np.ndarray | None) -> Any:
        raise self.fail(f"cannot evaluate {type(e).__name__} ({e})")

    def binop(self, e: E.BinOp, env: Env, mask: np.ndarray | None) -> Any:
        """``a op b`` as ``semantics`` means it (an undefined case is an error)."""
        a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
        t = sem.dtype(e.dtype)
        why = sem.undefined(e.op, a, b, t, mask)
        if why is not None:
            raise self.fail(f"{why} in {e}")
        return sem.binary(e.op, a, b, t)

    def load(self, e: S.BufferLoad, env: Env, mask: np.ndarray | None) -> Any:
        arr = self.mem.get(e.buffer)
        if arr is None:
            raise self.fail(f"load from {e.buffer.name} outside its allocation")
        idx = [np.asarray(self.expr(i, env, mask), dtype=np.int64) for i in e.indices]
        if idx:
            shape = np.broadcast_shapes(*(np.shape(i) for i in idx),
                                        *(() if mask is None else (np.shape(mask),)))
            idx = [np.broadcast_to(i, shape) for i in idx]
            m = None if mask is None else np.broadcast_to(mask, shape)
            idx = list(self.check_bounds(e.buffer, arr, tuple(idx), m, "load from"))
        return arr[tuple(idx)]


#: accumulations vectorised as reductions: integers exact in int64 (then wrapped), floats in
#: float64 (``semantics``: min/max on floats are ``FMIN``/``FMAX``, fmin/fmax with -0 < +0)
_ACCUMULATORS: dict[type, tuple[Any, Any]] = {
    E.Add: (np.add, np.add), E.Max: (np.maximum, sem.FMAX), E.Min: (np.minimum, sem.FMIN)}

#: what each statement does when interpreted (``vta.compiler.ir.visitor.Dispatch``)
_STMT: Dispatch[None] = Dispatch("loop-nest interpreter", {
    S.SeqStmt: lambda s, m, env: m.seq(s, env),
    S.For: lambda s, m, env: m.loop(s, env),
    S.BufferStore: lambda s, m, env: m.store(s, env),
    S.IfThenElse: lambda s, m, env: m.branch(s, env),
    S.LetStmt: lambda s, m, env: m.stmt(s.body, {**env, s.var: m.expr(s.value, env, None)}),
    S.Allocate: lambda s, m, env: m.allocate(s, env),
    S.AttrStmt: lambda s, m, env: m.stmt(s.body, env),
    # loops run one after another: every barrier is already satisfied
    S.Barrier: lambda s, m, env: None,
}, default=lambda s, m, env: m.unsupported(s, env))

#: what each expression evaluates to (numpy values, vectorised over index grids)
_EXPR: Dispatch[Any] = Dispatch("loop-nest interpreter", {
    E.Var: lambda e, m, env, mask: m.var(e, env),
    E.IntImm: lambda e, m, env, mask: _imm(e),
    E.FloatImm: lambda e, m, env, mask: _np_dtype(e.dtype).type(e.value),
    S.BufferLoad: lambda e, m, env, mask: m.load(e, env, mask),
    E.Select: lambda e, m, env, mask: m.select(e, env, mask),
    E.Cast: lambda e, m, env, mask: m.cast(m.expr(e.value, env, mask), e.dtype),
    E.Cmp: lambda e, m, env, mask: sem.CMP[e.op](m.expr(e.a, env, mask), m.expr(e.b, env, mask)),
    E.And: lambda e, m, env, mask: m.logic(np.logical_and, e, env, mask),
    E.Or: lambda e, m, env, mask: m.logic(np.logical_or, e, env, mask),
    E.Not: lambda e, m, env, mask: m.logic(np.logical_not, e, env, mask),
    E.BinOp: lambda e, m, env, mask: m.binop(e, env, mask),
    E.Math: lambda e, m, env, mask: sem.math(e.fn, m.expr(e.a, env, mask), sem.dtype(e.dtype)),
}, default=lambda e, m, env, mask: m.unknown(e, env, mask))


def _imm(e: E.IntImm) -> Any:
    """An integer constant's value in its type (wrapped to it; int64 numpy scalars for integers,
    so index grids and counters stay exact before each operator's own wrap)."""
    t = sem.dtype(e.dtype)
    if t.is_int:
        return np.int64(sem.wrap(e.value, t))
    return t.np.type(e.value)


def _ufunc_identity(fn: Any, dtype: type) -> Any:
    if fn is np.add:
        return 0
    info = np.iinfo(dtype) if dtype is np.int64 else np.finfo(dtype)
    return info.min if fn is np.maximum or fn is sem.FMAX else info.max


def _perfect_nest(s: S.For) -> tuple[list[S.For], list[E.Expr], list[tuple[E.Var, E.Expr]],
                                      S.BufferStore] | None:
    """The loops, guards, lets and store of a perfect nest rooted at ``s``, or None."""
    loops: list[S.For] = []
    conds: list[E.Expr] = []
    lets: list[tuple[E.Var, E.Expr]] = []
    cur: S.Stmt = s
    while True:
        if isinstance(cur, S.For):
            loops.append(cur)
            cur = cur.body
        elif isinstance(cur, S.AttrStmt):
            cur = cur.body
        elif isinstance(cur, S.IfThenElse) and cur.else_case is None:
            conds.append(cur.cond)
            cur = cur.then_case
        elif isinstance(cur, S.LetStmt):
            lets.append((cur.var, cur.value))
            cur = cur.body
        elif isinstance(cur, S.BufferStore):
            return loops, conds, lets, cur
        else:
            return None


def _loads_of(e: E.Expr, buf: S.Buffer) -> list[S.BufferLoad]:
    return [n for n in E.walk(e) if isinstance(n, S.BufferLoad) and n.buffer is buf]


def _accumulation(store: S.BufferStore) -> tuple[Any, E.Expr] | None:
    """``buf[i] = buf[i] (+|max|min) e`` with ``e`` not reading ``buf``: (ufunc, e)."""
    v = store.value
    fns = _ACCUMULATORS.get(type(v))
    if fns is None:
        return None
    fn = fns[1] if sem.dtype(v.dtype).is_float else fns[0]
    assert isinstance(v, E.BinOp)
    for acc, rhs in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, S.BufferLoad) and acc.buffer is store.buffer \
                and acc.indices == store.indices and not _loads_of(rhs, store.buffer):
            return fn, rhs
    return None


def _reads_other(store: S.BufferStore) -> bool:
    """Whether the value reads the stored buffer anywhere but the stored element."""
    return any(ld.indices != store.indices for ld in _loads_of(store.value, store.buffer))


def _fission(loop: S.For) -> S.Stmt | None:
    """``for v: (a; b)`` as ``(for v: a); (for v: b)`` when that is exact (iterations touch
    disjoint elements, see ``_independent``), recursing into nested loops; else None."""
    body = loop.body
    while isinstance(body, S.AttrStmt):
        body = body.body
    if isinstance(body, S.For):
        inner = _fission(body)
        if inner is None:
            return None
        body = inner
    if not isinstance(body, S.SeqStmt) or not _independent(loop.var, body):
        return None
    return S.SeqStmt(tuple(S.For(loop.var, loop.min, loop.extent, x, loop.kind, loop.thread)
                           for x in body.stmts))


def _independent(v: E.Var, body: S.Stmt) -> bool:
    """Whether distinct values of ``v`` touch distinct elements of every buffer ``body``
    writes: each such buffer is accessed with one index tuple, which has a dimension
    ``c*v + (variables bound outside body)``; and nothing is allocated inside."""
    inner: set[E.Var] = set()
    access: dict[S.Buffer, set[tuple[E.Expr, ...]]] = {}
    stored: set[S.Buffer] = set()
    for n in E.walk(body):
        if isinstance(n, S.Allocate):
            return False
        if isinstance(n, (S.For, S.LetStmt)):
            inner.add(n.var)
        elif isinstance(n, S.BufferStore):
            stored.add(n.buffer)
            access.setdefault(n.buffer, set()).add(n.indices)
        elif isinstance(n, S.BufferLoad):
            access.setdefault(n.buffer, set()).add(n.indices)
        elif isinstance(n, S.Stmt) and not isinstance(n, (S.SeqStmt, S.IfThenElse, S.AttrStmt)):
            return False  # dialect statements: unknown effects
    for b in stored:
        if len(access[b]) != 1:
            return False
        (idx,) = access[b]
        if not any(_own_dim(linear_form(i)[0], v, inner) for i in idx):
            return False
    return True


def _own_dim(terms: dict[E.Expr, int], v: E.Var, inner: set[E.Var]) -> bool:
    return terms.get(v, 0) != 0 and all(
        not (E.free_vars(a) & inner) for a in terms if a is not v)
