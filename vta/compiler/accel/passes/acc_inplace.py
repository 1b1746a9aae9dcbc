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
        if sum(b.scope == "acc" for b in chain) > 1:  # else no pair: the stores go unread
            leaves = _Leaves(inner)
            while True:
                pair = _candidate(leaves, chain, taken)
                if pair is None:
                    break
                p, c = pair
                taken[c] = p
                leaves.merge(c, p)
                chain.remove(c)
            if taken:
                inner = _replace_buffers(inner, taken, leaves)
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


def _touched(s: S.Stmt) -> tuple[list[S.Buffer], set[S.Buffer]]:
    """The buffers ``s`` touches: a store's, a dialect statement's (``buffers()``), and those
    read by the loads under it (with repeats); and every buffer under ``s`` (what
    ``_replace_buffers`` would meet in it), from one walk."""
    out: list[S.Buffer] = []
    if isinstance(s, S.BufferStore):
        out.append(s.buffer)
    elif hasattr(s, "buffers") and callable(s.buffers):
        out.extend(s.buffers())
    named = set(out)
    for n in E.walk(s):
        if isinstance(n, S.BufferLoad):
            out.append(n.buffer)
        elif isinstance(n, S.Buffer):
            named.add(n)
    return out, named


#: a store's loads and whether its enclosing loops map one-to-one onto its index
#: (``_one_to_one``), as ``_candidate`` reads them
Reads = tuple[list[S.BufferLoad], bool]


class _Leaves:
    """The statements a chain's body stores through (``_stores``), in program order, with
    what the search for pairs (``_candidate``) reads of each, found once for all its rounds:
    the first and the last position touching each buffer (``_touched``), kept up to date as
    buffers are taken over (``merge``: a taken buffer's accesses become its taker's), so
    whether any store before or after a position touches a buffer is two lookups instead of
    a scan of the stores; each store's loads and index check, found when first asked."""

    def __init__(self, s: S.Stmt) -> None:
        self.items: list[tuple[S.Stmt, tuple[tuple[E.Var, int], ...]]] = list(_stores(s))
        self.named: list[set[S.Buffer]] = []
        self.first: dict[S.Buffer, int] = {}
        self.last: dict[S.Buffer, int] = {}
        for j, (st, _loops) in enumerate(self.items):
            touched, named = _touched(st)
            self.named.append(named)
            for b in touched:
                self.first.setdefault(b, j)
                self.last[b] = j
        self.reads: dict[int, Reads] = {}

    def merge(self, c: S.Buffer, p: S.Buffer) -> None:
        """``c`` is taken over by ``p``: a store touching ``c`` now touches ``p``."""
        if c in self.first:
            self.first[p] = min(self.first.get(p, self.first[c]), self.first[c])
            self.last[p] = max(self.last.get(p, self.last[c]), self.last[c])

    def touched_before(self, buf: S.Buffer, k: int) -> bool:
        """Whether a store before position ``k`` touches ``buf`` (a buffer not taken over)."""
        return self.first.get(buf, k) < k

    def touched_after(self, buf: S.Buffer, k: int) -> bool:
        """Whether a store after position ``k`` touches ``buf`` (a buffer not taken over)."""
        return self.last.get(buf, k) > k

    def read(self, k: int) -> Reads:
        """The loads of store ``k`` (a ``BufferStore``) and whether it writes each element
        once (``_one_to_one``)."""
        hit = self.reads.get(k)
        if hit is None:
            st, loops = self.items[k]
            assert isinstance(st, S.BufferStore)
            hit = self.reads[k] = ([n for n in E.walk(st.value) if isinstance(n, S.BufferLoad)],
                                   _one_to_one(st.indices, loops))
        return hit


def _candidate(leaves: _Leaves, chain: list[S.Buffer], taken: Taken
               ) -> tuple[S.Buffer, S.Buffer] | None:
    """The next (producer, consumer) pair of ``chain`` (see the module docstring) among the
    statement's stores (``leaves``) read as if the buffers ``taken`` over were replaced
    already: the pairs are found one after another on the same statement, which is then
    rewritten once (``_replace_buffers``) instead of once per pair. Reading through
    ``taken`` is the same as reading the replaced statement: a replacement changes buffers
    only, and the indices compared are loop variables and constants (``_one_to_one``), which
    it leaves as they are."""
    for k, (st, _loops) in enumerate(leaves.items):
        if not isinstance(st, S.BufferStore):
            continue
        c = _now(st.buffer, taken)
        if c.scope != "acc" or not any(b is c for b in chain):
            continue
        loads, one_to_one = leaves.read(k)
        if not one_to_one:
            continue
        if leaves.touched_before(c, k):
            continue
        for ld in loads:
            p = _now(ld.buffer, taken)
            if (p is c or p.scope != "acc" or not any(b is p for b in chain)
                    or p.shape != c.shape or p.dtype != c.dtype):
                continue
            if any(_now(x.buffer, taken) is p and x.indices != st.indices for x in loads):
                continue
            if leaves.touched_after(p, k):
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


def _replace_buffers(s: S.Stmt, taken: Taken, leaves: _Leaves) -> S.Stmt:
    """``s`` with every buffer ``taken`` over replaced by the one standing for it now; a
    store of ``leaves`` naming none of them is kept as it is, not walked (the epilogue's
    stores change; a copy's or a GEMM's long index expressions are not rebuilt), nor is a
    variable or a constant (``_names_buffers``)."""
    kept = {id(st) for (st, _loops), named in zip(leaves.items, leaves.named, strict=True)
            if named.isdisjoint(taken)}

    def replace(n: object) -> object:
        if id(n) in kept:
            return n
        return _now(n, taken) if isinstance(n, S.Buffer) and n in taken else None

    return E.substitute(s, replace, _names_buffers)


#: node classes without a buffer under them: what ``replace`` leaves (it replaces buffers)
_BUFFERLESS = (E.Var, E.IntImm, E.FloatImm)


def _names_buffers(cls: type) -> bool:
    """Whether ``_replace_buffers`` recurses into a node of this class: anything but a
    variable or a constant, which have no children and are not buffers (its replacement
    leaves them; most of the nodes under the statements it rewrites are loop bounds and
    indices)."""
    return cls not in _BUFFERLESS
