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
        taken: dict[S.Buffer, S.Buffer] = {}  # each buffer taken over -> the one taking it
        stores = list(_stores(inner))
        touched: dict[int, list[S.Buffer]] = {}  # ``_touched`` of each store, by position
        while True:
            pair = _candidate(stores, touched, chain, taken)
            if pair is None:
                break
            p, c = pair
            taken[c] = p
            chain.remove(c)
        if taken:
            inner = _replace_buffers(inner, taken)
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


#: buffers taken over so far (``_candidate``): each -> the buffer that took it over
Taken = dict[S.Buffer, S.Buffer]


def _now(b: S.Buffer, taken: Taken) -> S.Buffer:
    """The buffer ``b`` stands for once the buffers ``taken`` over are replaced."""
    while b in taken:
        b = taken[b]
    return b


def _touched(s: S.Stmt) -> list[S.Buffer]:
    """The buffers ``s`` touches: a store's, a dialect statement's (``buffers()``), and those
    read by the loads under it (with repeats)."""
    out: list[S.Buffer] = []
    if isinstance(s, S.BufferStore):
        out.append(s.buffer)
    elif hasattr(s, "buffers") and callable(s.buffers):
        out.extend(s.buffers())
    out.extend(n.buffer for n in E.walk(s) if isinstance(n, S.BufferLoad))
    return out


def _candidate(stores: list[tuple[S.Stmt, tuple[tuple[E.Var, int], ...]]],
               touched: dict[int, list[S.Buffer]], chain: list[S.Buffer], taken: Taken
               ) -> tuple[S.Buffer, S.Buffer] | None:
    """The next (producer, consumer) pair of ``chain`` (see the module docstring) among the
    statement's ``stores`` (``_stores``) read as if the buffers ``taken`` over were replaced
    already: the pairs are found one after another on the same statement, which is then
    rewritten once (``_replace_buffers``) instead of once per pair, and what each store
    touches is found once (``touched``, by position, filled on first need). Reading through
    ``taken`` is the same as reading the replaced statement: a replacement changes buffers
    only, and the indices compared are loop variables and constants (``_one_to_one``), which
    it leaves as they are."""
    def touches(j: int, buf: S.Buffer) -> bool:
        t = touched.get(j)
        if t is None:
            t = touched[j] = _touched(stores[j][0])
        return any(_now(b, taken) is buf for b in t)

    for k, (st, loops) in enumerate(stores):
        if not isinstance(st, S.BufferStore):
            continue
        c = _now(st.buffer, taken)
        if c.scope != "acc" or not any(b is c for b in chain):
            continue
        if not _one_to_one(st.indices, loops):
            continue
        if any(touches(j, c) for j in range(k)):
            continue
        loads = [n for n in E.walk(st.value) if isinstance(n, S.BufferLoad)]
        for ld in loads:
            p = _now(ld.buffer, taken)
            if (p is c or p.scope != "acc" or not any(b is p for b in chain)
                    or p.shape != c.shape or p.dtype != c.dtype):
                continue
            if any(_now(x.buffer, taken) is p and x.indices != st.indices for x in loads):
                continue
            if any(touches(j, p) for j in range(k + 1, len(stores))):
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


def _replace_buffers(s: S.Stmt, taken: Taken) -> S.Stmt:
    """``s`` with every buffer ``taken`` over replaced by the one standing for it now."""
    def replace(n: object) -> S.Buffer | None:
        return _now(n, taken) if isinstance(n, S.Buffer) and n in taken else None

    return E.substitute(s, replace)
