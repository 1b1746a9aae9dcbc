"""Pass: insert ``Barrier`` where shared memory needs one.

Before: ``bind_threads`` ran (the body is one SPMD program; thread indices are ``ThreadIndex``).
After: between any two accesses to the same ``shared`` buffer by possibly different threads, at
least one of them a write, there is a ``Barrier`` on every path: before a read of data written
since the last barrier (read-after-write), and before overwriting data read since the last
barrier (write-after-read, which is what a loop-carried reuse of a staging buffer needs).
Loop-carried pairs are checked with the loop variable advanced by one, and a barrier goes at the
end of the loop body when needed. Existing barriers are kept. No barrier is placed under a
thread-dependent condition (that would deadlock): such a need is an error.

Two accesses are known disjoint when their first indices provably differ, either as constants or
as ``e % n`` and ``(e + c) % n`` with ``n`` the buffer's first dimension and ``c % n != 0`` - the
shape double buffering produces - so a double-buffered stage needs one barrier per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import GpuLoweringError
from vta.gpu.dialect import ThreadIndex, WmmaLoad, WmmaStore, affine_terms

__all__ = ["insert_barriers"]


@dataclass(frozen=True)
class _Access:
    buffer: S.Buffer
    write: bool
    first: E.Expr | None  # the first index (version) or None when unknown


@dataclass
class _Summary:
    head: list[_Access] = field(default_factory=list)  # before the first barrier
    tail: list[_Access] = field(default_factory=list)  # after the last barrier
    synced: bool = False


def _const_diff(a: E.Expr, b: E.Expr) -> int | None:
    fa, fb = affine_terms(a), affine_terms(b)
    if fa is None or fb is None:
        return None
    keys = set(fa) | set(fb)
    diff = {k: fa.get(k, 0) - fb.get(k, 0) for k in keys}
    if any(v for k, v in diff.items() if k != 1):
        return None
    return diff.get(1, 0)


def _disjoint(x: _Access, y: _Access) -> bool:
    if x.first is None or y.first is None:
        return False
    n = x.buffer.shape[0]
    a, b = x.first, y.first
    if isinstance(a, E.FloorMod) and isinstance(b, E.FloorMod):
        if E.is_const(a.b, n) and E.is_const(b.b, n):
            d = _const_diff(a.a, b.a)
            return d is not None and d % n != 0
        return False
    if isinstance(a, E.FloorMod) or isinstance(b, E.FloorMod):
        return False
    d = _const_diff(a, b)
    return d is not None and d != 0


def _conflict(xs: list[_Access], ys: list[_Access]) -> bool:
    for x in xs:
        for y in ys:
            # read-after-write and write-after-read need a barrier; two writes of one element
            # by different threads would be a race no barrier fixes (the emulator reports it)
            if x.buffer is y.buffer and x.write != y.write and not _disjoint(x, y):
                return True
    return False


def _accesses(s: S.Stmt, tvars: set[E.Var]) -> list[_Access]:
    """Shared-memory accesses of a statement without inner structure (store, eval, wmma).
    The first index is kept as the access's version only when every thread agrees on it."""
    out: list[_Access] = []

    def load(b: S.Buffer, idx: tuple[E.Expr, ...], write: bool) -> None:
        if b.scope == "shared":
            first = idx[0] if idx and not _thread_dependent(idx[0], tvars) else None
            out.append(_Access(b, write, first))

    exprs: list[E.Expr] = []
    if isinstance(s, S.BufferStore):
        load(s.buffer, s.indices, True)
        exprs = [s.value, *s.indices]
    elif isinstance(s, WmmaLoad):
        load(s.src, s.offset, False)
        exprs = list(s.exprs())
    elif isinstance(s, WmmaStore):
        load(s.dst, s.offset, True)
        exprs = list(s.exprs())
    elif isinstance(s, S.Evaluate):
        exprs = [s.value]
    else:
        exprs = list(getattr(s, "exprs", lambda: ())())
    for e in exprs:
        for n in E.walk(e):
            if isinstance(n, S.BufferLoad):
                load(n.buffer, n.indices, False)
    return out


def _thread_dependent(e: E.Expr, tvars: set[E.Var]) -> bool:
    return any(isinstance(n, ThreadIndex) or (isinstance(n, E.Var) and n in tvars)
               for n in E.walk(e))


class _Planner:
    def __init__(self, fname: str) -> None:
        self.fname = fname
        self.tvars: set[E.Var] = set()  # variables whose value differs between threads

    def seq(self, stmts: list[S.Stmt]) -> tuple[list[S.Stmt], _Summary]:
        out: list[S.Stmt] = []
        summ = _Summary()
        pending: list[_Access] = []
        for st in stmts:
            new, sub = self.plan(st)
            if _conflict(pending, sub.head):
                out.append(S.Barrier())
                if not summ.synced:
                    summ.head, summ.synced = pending, True
                pending = []
            if isinstance(new, S.Barrier):
                if not summ.synced:
                    summ.head, summ.synced = pending, True
                pending = []
            elif sub.synced:
                if not summ.synced:
                    summ.head, summ.synced = pending + sub.head, True
                pending = list(sub.tail)
            else:
                pending = pending + sub.head
            out.append(new)
        if not summ.synced:
            summ.head = pending
        summ.tail = pending
        return out, summ

    def plan(self, s: S.Stmt) -> tuple[S.Stmt, _Summary]:
        if isinstance(s, S.Barrier):
            return s, _Summary(synced=True)
        if isinstance(s, S.SeqStmt):
            stmts, summ = self.seq(list(s.stmts))
            return S.seq(*stmts), summ
        if isinstance(s, S.LetStmt):
            if _thread_dependent(s.value, self.tvars):
                self.tvars.add(s.var)
            body, summ = self.plan(s.body)
            return S.LetStmt(s.var, s.value, body), summ
        if isinstance(s, S.Allocate):
            body, summ = self.plan(s.body)
            return S.Allocate(s.buffer, body), summ
        if isinstance(s, S.AttrStmt):
            body, summ = self.plan(s.body)
            return S.AttrStmt(s.key, s.value, body), summ
        if isinstance(s, S.For):
            return self.loop(s)
        if isinstance(s, S.IfThenElse):
            then, st = self.plan(s.then_case)
            els, se = self.plan(s.else_case) if s.else_case is not None else (None, _Summary())
            if (st.synced or se.synced) and _thread_dependent(s.cond, self.tvars):
                raise GpuLoweringError(
                    f"{self.fname}: a barrier would sit under the thread-dependent condition "
                    f"{s.cond}; threads that skip it would deadlock the block")
            summ = _Summary(st.head + se.head, st.tail + se.tail, st.synced or se.synced)
            if st.synced != se.synced:  # one path has no barrier: its accesses stay pending
                summ.tail = st.tail + se.tail + (st.head if not st.synced else se.head)
            return S.IfThenElse(s.cond, then, els), summ
        acc = _accesses(s, self.tvars)
        return s, _Summary(head=acc, tail=acc)

    def loop(self, s: S.For) -> tuple[S.Stmt, _Summary]:
        if _thread_dependent(s.extent, self.tvars) or _thread_dependent(s.min, self.tvars):
            self.tvars.add(s.var)
        body, summ = self.plan(s.body)
        single = isinstance(s.extent, E.IntImm) and s.extent.value == 1
        if not single:
            nxt = s.var + 1
            shifted = [_Access(a.buffer, a.write,
                               None if a.first is None else E.substitute(a.first, {s.var: nxt}))
                       for a in summ.head]
            if _conflict(summ.tail, shifted):
                if s.var in self.tvars:
                    raise GpuLoweringError(
                        f"{self.fname}: loop {s.var.name} has a thread-dependent trip count "
                        f"and needs a barrier between iterations")
                body = S.seq(body, S.Barrier())
                summ = _Summary(head=summ.head, tail=[], synced=True)
        return S.For(s.var, s.min, s.extent, body, s.kind, s.thread), summ


def insert_barriers(func: S.PrimFunc) -> S.PrimFunc:
    """Insert the barriers shared-memory staging needs (see the module docstring)."""
    body, _ = _Planner(func.name).plan(func.body)
    return func.with_body(body)
