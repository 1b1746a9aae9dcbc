"""Virtual threads: expand ``vthread`` loops into interleaved copies (VTA's InjectVirtualThread).

Pre:  scratchpad allocation gave every buffer allocated inside a vthread loop one copy per
      thread (its SRAM base is ``c + vt * entries``); micro-ops have been generated.
Post: no ``For(kind=VTHREAD)`` remains. The thread loop is pushed inward (threads are
      independent: each has its own buffers) through loops that do not depend on it,
      sequences, allocations and composite stages (a stage with other stages attached inside
      it, as ``lower`` emits the output stage and the reduction), down to each leaf stage;
      there the stage is duplicated once per thread with ``vt`` replaced by the thread's index
      (bound loop variables renamed), wrapped in ``AttrStmt("vthread", t)``; consecutive
      stages are duplicated as one block per thread. The result interleaves the threads stage
      by stage: thread 1's
      loads sit in program order next to thread 0's compute, so the load module can run
      ahead while compute works, once tokens (next pass) allow it.
"""

from __future__ import annotations

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes._common import map_stmt
from vta.config import HwConfig

__all__ = ["inject_virtual_thread", "fresh_vars"]


def fresh_vars(s: S.Stmt) -> S.Stmt:
    """A copy of ``s`` whose loop variables are new ``Var`` objects (so copies bind distinct)."""
    bound = [n.var for n in E.walk(s) if isinstance(n, S.For)]
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
    return (isinstance(s, S.AttrStmt) and s.key == "stage"
            and any(isinstance(n, S.AttrStmt) and n.key == "stage" for n in E.walk(s.body)))


def _pushable(s: S.Stmt, vt: E.Var) -> bool:
    return (isinstance(s, (S.SeqStmt, S.Allocate)) or _composite(s)
            or (isinstance(s, S.For) and vt not in E.free_vars(s.extent) | E.free_vars(s.min)))


def _unroll(run: list[S.Stmt], vt: E.Var, n: int) -> S.Stmt | None:
    """One copy of a run of stages per thread, thread after thread."""
    if not run:
        return None
    block = S.seq(*run)
    if vt not in E.free_vars(block):
        return block  # shared by all threads: keep one copy
    return S.seq(*(S.AttrStmt("vthread", t, fresh_vars(E.substitute(block, {vt: E.IntImm(t)})))
                   for t in range(n)))


def _push(s: S.Stmt, vt: E.Var, n: int) -> S.Stmt:
    if isinstance(s, S.SeqStmt):
        # consecutive stages stay together per thread (thread 0's loads, then thread 1's),
        # so a module's queue never has one thread's work stuck behind the other's
        out: list[S.Stmt | None] = []
        run: list[S.Stmt] = []
        for x in s.stmts:
            if _pushable(x, vt):
                out.append(_unroll(run, vt, n))
                run = []
                out.append(_push(x, vt, n))
            else:
                run.append(x)
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
