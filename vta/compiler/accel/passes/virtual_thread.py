"""Virtual threads: expand ``vthread`` loops into interleaved copies (VTA's InjectVirtualThread).

Pre:  scratchpad allocation gave every buffer allocated inside a vthread loop one copy per
      thread (its SRAM base is ``c + vt * entries``); micro-ops have been generated.
Post: no ``For(kind=VTHREAD)`` remains. The thread loop is pushed inward (threads are
      independent: each has its own buffers) through loops that do not depend on it,
      sequences, allocations and composite stages (a stage with other stages attached inside
      it, as ``lower`` emits the output stage and the reduction), down to each leaf stage;
      there the stage is duplicated once per thread with ``vt`` replaced by the thread's index
      (bound loop variables renamed), wrapped in ``AttrStmt(VTHREAD, t)``; consecutive
      stages are duplicated as one block per thread. The result interleaves the threads stage
      by stage: thread 1's loads sit in program order next to thread 0's compute, so the load
      module can run ahead while compute works, once tokens (next pass) allow it. A thread
      loop with stages before or after it (a tile's reduction loop between the accumulator
      reset and the epilogue and store) is skewed: each thread's reset joins its first
      iteration and its epilogue and store its last, so one thread's store overlaps the other
      thread's last step and no reset waits on the store of the tile before (with a separate
      ALU pipeline, one thread's epilogue runs beside the other's GEMMs).
"""

from __future__ import annotations

from collections.abc import Iterator

from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.accel.vta_ir import VTHREAD
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import child_slots
from vta.config import HwConfig

__all__ = ["inject_virtual_thread", "fresh_vars"]


def _statements(s: S.Stmt) -> Iterator[S.Stmt]:
    """Every statement under ``s`` (itself included), not descending into expressions (a
    compute instruction's micro-op list is thousands of them), one at a time (a question
    answered by the first ones stops there: ``_composite``, ``_skewable``)."""
    stack = [s]
    pop, push, stmt = stack.pop, stack.append, S.Stmt
    while stack:
        n = pop()
        yield n
        for name in child_slots(type(n)) or ():
            v = getattr(n, name)
            if type(v) is tuple:
                stack.extend([x for x in v if isinstance(x, stmt)])
            elif isinstance(v, stmt):
                push(v)


def _mentions(node: object, var: E.Var) -> bool:
    """Whether ``var`` occurs under ``node`` (each shared subtree visited once)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n is var:
            return True
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(E.children(n))
    return False


def fresh_vars(s: S.Stmt) -> S.Stmt:
    """A copy of ``s`` whose loop variables are new ``Var`` objects (so copies bind distinct)."""
    bound = [n.var for n in _statements(s) if isinstance(n, S.For)]
    if not bound:
        return s
    return E.substitute(s, {v: E.Var(v.name, v.dtype) for v in bound})


def inject_virtual_thread(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.For) and s.kind is S.ForKind.VTHREAD:
            assert isinstance(s.extent, E.IntImm)
            return _push(map_stmt(s.body, rewrite), s.var, s.extent.value)
        return None

    return func.with_body(map_stmt(func.body, rewrite))


def _composite(s: S.Stmt) -> bool:
    return (isinstance(s, S.AttrStmt) and s.key is S.STAGE
            and any(isinstance(n, S.AttrStmt) and n.key is S.STAGE
                    for n in _statements(s.body)))


def _pushable(s: S.Stmt, vt: E.Var) -> bool:
    return (isinstance(s, (S.SeqStmt, S.Allocate)) or _composite(s)
            or (isinstance(s, S.For) and vt not in E.free_vars(s.extent) | E.free_vars(s.min)))


def _unroll(run: list[S.Stmt], vt: E.Var, n: int,
            pinned: dict[E.Var, E.Expr] | None = None) -> S.Stmt | None:
    """One copy of a run of stages per thread, thread after thread (``pinned``: variables
    the copies also replace, a peeled loop's)."""
    if not run:
        return None
    block = S.seq(*run)
    if not _mentions(block, vt):
        return E.substitute(block, pinned) if pinned else block  # shared: one copy
    bound = [x.var for x in _statements(block) if isinstance(x, S.For)]

    def copy(t: int) -> S.Stmt:  # the thread's index and fresh loop variables, in one pass
        fresh: dict[E.Var, E.Expr] = {v: E.Var(v.name, v.dtype) for v in bound}
        return E.substitute(block, {vt: E.IntImm(t), **fresh, **(pinned or {})})

    return S.seq(*(S.AttrStmt(VTHREAD, t, copy(t)) for t in range(n)))


def _spliced(stmts: tuple[S.Stmt, ...], vt: E.Var) -> list[S.Stmt]:
    """``stmts`` with each composite stage whose body ends in a thread loop replaced by its
    body's statements (the stage marker is only a name), so that loop meets the stages after
    it and can be skewed (``_skewed``)."""
    out: list[S.Stmt] = []
    for x in stmts:
        if _composite(x):
            assert isinstance(x, S.AttrStmt)
            body = list(x.body.stmts) if isinstance(x.body, S.SeqStmt) else [x.body]
            if body and _skewable(body[-1], vt):
                out.extend(_spliced(tuple(body), vt))
                continue
        out.append(x)
    return out


def _skewable(s: S.Stmt, vt: E.Var) -> bool:
    """A loop every thread runs (its bounds do not depend on the thread) over per-thread
    work, of a known trip count, inside a tile (a loop over whole tiles allocates their
    accumulators: its iterations are interleaved stage by stage already)."""
    return (isinstance(s, S.For) and s.kind is S.ForKind.SERIAL and _pushable(s, vt)
            and isinstance(s.extent, E.IntImm) and isinstance(s.min, E.IntImm)
            and s.extent.value >= 1 and _mentions(s.body, vt)
            and not any(isinstance(x, S.Allocate) and x.buffer.scope == "acc"
                        for x in _statements(s.body)))


def _skewed(head: list[S.Stmt], loop: S.For, tail: list[S.Stmt], vt: E.Var,
            n: int) -> list[S.Stmt | None]:
    """``head; for i: body; tail`` with the threads skewed by a stage: each thread's head runs
    just before its first iteration and its tail just after its last, so thread 1's head (the
    reset of its accumulator) waits behind thread 0's first step rather than the store of the
    previous tile, and thread 0's tail (its epilogue and store) overlaps thread 1's last step."""
    assert isinstance(loop.extent, E.IntImm) and isinstance(loop.min, E.IntImm)
    ext, lo = loop.extent.value, loop.min.value

    def at(k: int) -> dict[E.Var, E.Expr]:  # the loop variable of iteration k
        return {loop.var: E.IntImm(lo + k)}

    if ext == 1:
        return [_unroll([*head, loop.body, *tail], vt, n, at(0))]
    middle = None
    if ext > 2:
        middle = _push(S.For(loop.var, E.IntImm(lo + 1), E.IntImm(ext - 2), loop.body,
                             loop.kind, loop.thread), vt, n)
    return [_unroll([*head, loop.body], vt, n, at(0)), middle,
            _unroll([loop.body, *tail], vt, n, at(ext - 1))]


def _push(s: S.Stmt, vt: E.Var, n: int) -> S.Stmt:
    if isinstance(s, S.SeqStmt):
        # consecutive stages stay together per thread (thread 0's loads, then thread 1's),
        # so a module's queue never has one thread's work stuck behind the other's; the
        # stages around a thread loop are skewed with its first and last iterations
        stmts = _spliced(s.stmts, vt)
        out: list[S.Stmt | None] = []
        run: list[S.Stmt] = []
        k = 0
        while k < len(stmts):
            x = stmts[k]
            if not _pushable(x, vt):
                run.append(x)
                k += 1
                continue
            j = k + 1
            while j < len(stmts) and not _pushable(stmts[j], vt):
                j += 1
            tail = list(stmts[k + 1:j])
            if _skewable(x, vt) and (run or tail):
                assert isinstance(x, S.For)
                out += _skewed(run, x, tail, vt, n)
                run, k = [], j
                continue
            out.append(_unroll(run, vt, n))
            run = []
            out.append(_push(x, vt, n))
            k += 1
        out.append(_unroll(run, vt, n))
        return S.seq(*out)
    if isinstance(s, S.For) and _pushable(s, vt):
        return S.For(s.var, s.min, s.extent, _push(s.body, vt, n), s.kind, s.thread)
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, _push(s.body, vt, n))
    if _composite(s):
        assert isinstance(s, S.AttrStmt)
        return S.AttrStmt(s.key, s.value, _push(s.body, vt, n))
    return _unroll([s], vt, n) or s
