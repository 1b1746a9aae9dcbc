"""In-place epilogue: element-wise stages on acc write over the buffer they read.

``lower`` gives every stage its own buffer: the reduction ``conv_acc``, then ``res_shr =
conv_acc >> 8``, ``res_bias = res_shr + bias``, ... each an acc buffer of the tile's size. The
accelerator's ALU only updates in place (``acc[dst] = op(acc[dst], imm or acc[src])``) and the
acc scratchpad is the scarcest, so a consumer stage takes over its producer's buffer whenever
that is exact (TVM's StorageRewrite in-place rule):

Pre:  bound inference has run; buffers allocated by ``Allocate`` chains (lower's placement).
Post: for a store ``C[i] = f(P[i], ...)`` where ``P`` and ``C`` are acc buffers of one
      ``Allocate`` chain with the same shape and dtype, every read of ``P`` in the store is at
      the store's own index ``i``, the store's enclosing loops inside the chain map one-to-one
      onto ``i`` (each element written once), ``C`` is not touched before that store and ``P``
      not after it (program order inside the chain, which has no loop around it), ``C`` is
      replaced by ``P`` and its allocation removed. Each element is then read and written by
      the same iteration, so the result is the same; chains (shr -> bias -> clip) collapse
      onto the reduction's buffer. Other statements are unchanged.
"""

from __future__ import annotations

from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig

__all__ = ["reuse_acc_buffers"]


def reuse_acc_buffers(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if not isinstance(s, S.Allocate):
            return None
        chain: list[S.Buffer] = []
        inner: S.Stmt = s
        while isinstance(inner, S.Allocate):
            chain.append(inner.buffer)
            inner = inner.body
        body = inner
        inner = map_stmt(inner, rewrite)
        n = len(chain)
        while True:
            pair = _candidate(inner, chain)
            if pair is None:
                break
            p, c = pair
            inner = _replace_buffer(inner, c, p)
            chain.remove(c)
        if inner is body and len(chain) == n:
            return s
        for b in reversed(chain):
            inner = S.Allocate(b, inner)
        return inner

    body = map_stmt(func.body, rewrite)
    return func if body is func.body else func.with_body(body)


def _stores(s: S.Stmt, loops: tuple[tuple[E.Var, int], ...] = ()):  # type: ignore[no-untyped-def]
    """(store, enclosing loops) in program order."""
    if isinstance(s, S.BufferStore):
        yield s, loops
    elif isinstance(s, S.SeqStmt):
        for x in s.stmts:
            yield from _stores(x, loops)
    elif isinstance(s, S.For):
        n = s.extent.value if isinstance(s.extent, E.IntImm) else -1
        yield from _stores(s.body, (*loops, (s.var, n)))
    elif isinstance(s, S.IfThenElse):
        yield from _stores(s.then_case, loops)
        if s.else_case is not None:
            yield from _stores(s.else_case, loops)
    elif isinstance(getattr(s, "body", None), S.Stmt):
        yield from _stores(s.body, loops)  # type: ignore[attr-defined]
    else:  # a dialect statement: treat as touching everything it names
        yield s, loops


def _touches(s: S.Stmt | E.Expr, buf: S.Buffer) -> bool:
    if isinstance(s, S.BufferStore) and s.buffer is buf:
        return True
    if hasattr(s, "buffers") and callable(s.buffers) and not isinstance(s, S.BufferStore):
        if any(b is buf for b in s.buffers()):
            return True
    return any(isinstance(n, S.BufferLoad) and n.buffer is buf for n in E.walk(s))


def _candidate(inner: S.Stmt, chain: list[S.Buffer]) -> tuple[S.Buffer, S.Buffer] | None:
    stores = list(_stores(inner))
    for k, (st, loops) in enumerate(stores):
        if not isinstance(st, S.BufferStore):
            continue
        c = st.buffer
        if c.scope != "acc" or not any(b is c for b in chain):
            continue
        if not _one_to_one(st.indices, loops):
            continue
        if any(_touches(x, c) for x, _ in stores[:k]):
            continue
        loads = [n for n in E.walk(st.value) if isinstance(n, S.BufferLoad)]
        for ld in loads:
            p = ld.buffer
            if (p is c or p.scope != "acc" or not any(b is p for b in chain)
                    or p.shape != c.shape or p.dtype != c.dtype):
                continue
            if any(x.buffer is p and x.indices != st.indices for x in loads):
                continue
            if any(_touches(x, p) for x, _ in stores[k + 1:]):
                continue
            return p, c
    return None


def _one_to_one(idx: tuple[E.Expr, ...], loops: tuple[tuple[E.Var, int], ...]) -> bool:
    """Every index is a distinct loop variable or a constant, and every enclosing loop of more
    than one iteration indexes: each element is written by exactly one iteration."""
    vs = [i for i in idx if isinstance(i, E.Var)]
    if len(vs) != len(set(vs)) or not all(isinstance(i, (E.Var, E.IntImm)) for i in idx):
        return False
    return all(v in vs for v, n in loops if n != 1)


def _replace_buffer(s: S.Stmt, old: S.Buffer, new: S.Buffer) -> S.Stmt:
    return E.substitute(s, lambda n: new if n is old else None)
