"""``lower(schedule, args)``: from a scheduled tensor program to the loop-nest IR.

The contract is docs/ir.md ("The lowering contract"); in short: parameters are the global
buffers of ``args``; each stage becomes a loop nest over its leaf axes (fresh variables, split
values ``outer * factor + inner``, guards where a split does not divide), wrapped in
``AttrStmt(STAGE, name)``; a reduction gets an init nest right before its outermost reduction
loop; a stage computed at another's loop is emitted inside that loop, its buffer allocated
there and sized by bound inference (vta.compiler.ir.regions); readers index it relative to its
base; inlined stages are substituted; tensorized regions are wrapped in
``AttrStmt(TENSORIZE, TensorizeRegion)`` after checking they match: the region carries the
intrinsic and its ``Match`` translated to the lowered loops and buffers, so both back ends
lower it from the intrinsic's definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vta.compiler.ir import expr as E
from vta.compiler.ir import intrin as intrin_mod
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.regions import Loop, StageRegion, infer_regions, tensor_reads
from vta.compiler.ir.relations import root_values, split_guards
from vta.compiler.ir.schedule import (
    INLINE,
    AttachAt,
    Schedule,
    Stage,
    describe_split,
    nondividing_splits,
)
from vta.compiler.ir.tensor import IterVar, PlaceholderOp, Reduce, Tensor, TensorRead
from vta.errors import LowerError, ScheduleError

__all__ = ["LowerError", "lower"]


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", *,
          whole_tiles: bool = False) -> S.PrimFunc:
    """Lower ``sch`` to a ``PrimFunc`` whose parameters are ``args`` (inputs, then outputs).
    A tensorized stage must not need a guard (a split that does not divide, or a tile running
    past the tensor); with ``whole_tiles`` (targets whose pipelines take no guards, like the
    accelerator's) no stage may: the ``ScheduleError`` names the split and the factors that
    divide."""
    return _Lowering(sch, list(args), name, whole_tiles).run()


def _identity(combiner: str, dtype: str) -> E.Expr:
    if combiner in ("sum", "prod"):
        one = int(combiner == "prod")
        return E.const(float(one) if dtype.startswith("float") else one, dtype)
    bits = E.DTYPES[dtype]
    if dtype.startswith("float"):
        return E.const(float("-inf") if combiner == "max" else float("inf"), dtype)
    if dtype.startswith("uint"):
        lo, hi = 0, 2 ** bits - 1
    else:
        lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    return E.const(lo if combiner == "max" else hi, dtype)


def _zero(b: E.Expr, v: E.Expr) -> bool:
    """Whether ``b + v`` is ``v`` itself: ``b`` the constant 0 of ``v``'s type."""
    return type(b) is E.IntImm and b.value == 0 and b.dtype == v.dtype


def _combine(combiner: str, acc: E.Expr, x: E.Expr) -> E.Expr:
    if combiner == "sum":
        return acc + x
    if combiner == "prod":
        return acc * x
    return E.max_(acc, x) if combiner == "max" else E.min_(acc, x)


@dataclass
class _Emitted:
    """What the lowering knows about a stage once bounds are inferred."""

    stage: Stage
    buffer: S.Buffer
    bounds: StageRegion


class _Lowering:
    def __init__(self, sch: Schedule, args: list[Tensor], name: str, whole_tiles: bool) -> None:
        self.sch, self.args, self.name = sch, args, name
        self.whole_tiles = whole_tiles
        self.params: dict[Tensor, S.Buffer] = {}
        self.live = [st for st in sch.stages if st.attach != INLINE]
        self.bodies: dict[Stage, E.Expr] = {}
        self.env: dict[Stage, list[Loop]] = {}
        self.loopvar: dict[IterVar, E.Var] = {}
        self.info: dict[Tensor, _Emitted] = {}
        self.attached: dict[int, list[Stage]] = {}

    # ------------------------------------------------------------------ setup

    def run(self) -> S.PrimFunc:
        self._check_args()
        for st in self.live:
            self.bodies[st] = self._inline(st.op.body)
            for iv in st.leaf_iter_vars:
                self.loopvar[iv] = E.Var(iv.name)
        for st in self.live:
            self._env(st, [])
        reads = {st: tensor_reads(self.bodies[st]) for st in self.live}  # each body walked once
        self._check_inputs(reads)
        bounds = infer_regions(self.sch, self.live, reads, self.env, self.loopvar)
        for st in self.live:
            b = bounds[st]
            buf = self.params.get(st.tensor)
            if buf is None:
                shape = (2, *b.extent) if st.double_buffered else b.extent
                buf = S.Buffer(st.name, shape, st.tensor.dtype, st.scope)
            self.info[st.tensor] = _Emitted(st, buf, b)
            if isinstance(st.attach, AttachAt):
                self.attached.setdefault(id(st.attach.axis), []).append(st)
        roots = [st for st in self.live if not isinstance(st.attach, AttachAt)]
        body = S.seq(*(self._stage(st) for st in roots))
        for st in reversed(roots):
            if st.tensor not in self.params:
                body = S.Allocate(self.info[st.tensor].buffer, body)
        return S.PrimFunc(self.name, tuple(self.params[t] for t in self.args), body)

    def _check_args(self) -> None:
        for t in self.args:
            if t in self.params:
                raise LowerError(f"tensor {t.name} appears twice in args")
            st = self.sch.stage_of(t)
            if st is None and not isinstance(t.op, PlaceholderOp):
                raise LowerError(f"argument {t.name} is not a tensor of this schedule")
            if st is not None and st.attach is not None:
                how = "inlined" if st.attach == INLINE else "attached"
                raise LowerError(f"argument {t.name} is a global buffer, so its stage must be "
                                 f"computed at the root (it is {how})")
            self.params[t] = S.Buffer(t.name, t.shape, t.dtype, "global")
        for out in self.sch.outputs:
            if out not in self.params:
                raise LowerError(f"output {out.name} is missing from args")

    def _check_inputs(self, reads: Mapping[Stage, list[TensorRead]]) -> None:
        for st in self.live:
            for n in reads[st]:
                if isinstance(n.tensor.op, PlaceholderOp) and n.tensor not in self.params:
                    raise LowerError(f"stage {st.name} reads input {n.tensor.name}, which is "
                                     f"not in args")

    def _inline(self, body: E.Expr) -> E.Expr:
        """Substitute the definitions of inlined stages into ``body`` (recursively)."""
        def fn(n: object) -> E.Expr | None:
            if isinstance(n, TensorRead):
                st = self.sch.stage_of(n.tensor)
                idx = tuple(E.substitute(i, fn) for i in n.indices)
                if st is not None and st.attach == INLINE:
                    sub = dict(zip((a.var for a in st.op.axes), idx, strict=True))
                    return self._inline(E.substitute(st.op.body, sub))
                return TensorRead(n.tensor, idx, n.dtype)
            return None

        return E.substitute(body, fn)

    def _env(self, st: Stage, seen: list[Stage]) -> list[Loop]:
        if st in self.env:
            return self.env[st]
        if st in seen:
            raise LowerError(f"stages {', '.join(s.name for s in seen)} are computed at each "
                             f"other's loops (a cycle)")
        if not isinstance(st.attach, AttachAt):
            self.env[st] = []
            return []
        p, axis = st.attach.stage, st.attach.axis
        if p.attach == INLINE:
            raise LowerError(f"stage {st.name} is computed at {p.name}.{axis.name}, but "
                             f"{p.name} is inlined")
        if not any(iv is axis for iv in p.leaf_iter_vars):
            raise LowerError(f"stage {st.name} is computed at {p.name}.{axis.name}, which is "
                             f"no longer a leaf axis of {p.name} (split or fused afterwards)")
        outer = self._env(p, [*seen, st])
        self.env[st] = [*outer, *((p, iv) for iv in p._outer_of(axis))]
        return self.env[st]

    # ------------------------------------------------------------------ emission

    def _load(self, n: TensorRead) -> E.Expr:
        """A read of a tensor as a load of its buffer, relative to the buffer's base."""
        if n.tensor in self.info:
            em = self.info[n.tensor]
            idx = tuple(poly.simplify(i - b)
                        for i, b in zip(n.indices, em.bounds.base, strict=True))
            return S.BufferLoad(em.buffer, self._parity(em.stage) + idx, n.dtype)
        return S.BufferLoad(self.params[n.tensor], tuple(poly.simplify(i) for i in n.indices),
                            n.dtype)

    def _value(self, e: E.Expr, roots: Mapping[E.Var, E.Expr]) -> E.Expr:
        """``e`` with the stage's axis variables replaced by their ``roots`` values and every
        tensor read made a load of its buffer (``_load``), in one rewrite: a read's indices
        are substituted first, so the load's base offset applies to the values (the same IR
        as substituting the variables everywhere, then rewriting the reads: a read is never a
        constant, so the folds of their parents match)."""
        def fn(n: object) -> E.Expr | None:
            if isinstance(n, E.Var):
                v = roots.get(n)
                return None if v is None else E.as_expr(v)
            if isinstance(n, TensorRead):
                idx = tuple(E.substitute(i, fn) for i in n.indices)
                return self._load(TensorRead(n.tensor, idx, n.dtype))
            return None

        return E.substitute(e, fn)

    def _stage(self, st: Stage) -> S.Stmt:
        em = self.info[st.tensor]
        ext = dict(em.bounds.extents)
        leaves = st.leaf_iter_vars
        val = root_values(st, {iv: self.loopvar[iv] for iv in leaves}, ext)
        # at a base of 0, ``b + v`` is ``v``: a loop variable or what ``root_values`` made
        # (``simplify``'s own output, or a division of one by a constant), which ``simplify``
        # gives back equal, so it is not rebuilt (a root stage's every axis)
        roots = {iv.var: val[iv] if _zero(b, val[iv]) else poly.simplify(b + val[iv])
                 for iv, b in zip(st.axis, em.bounds.base, strict=True)}
        roots.update({iv.var: val[iv] for iv in st.reduce_axis})
        body = self.bodies[st]
        store_idx = self._parity(st) + tuple(val[iv] for iv in st.axis)
        guards = self._guards(st, val, ext)
        if guards is not None and (st.tensorized or self.whole_tiles):
            raise self._guard_error(st, ext)
        if isinstance(body, Reduce):
            acc = S.BufferLoad(em.buffer, store_idx, em.buffer.dtype)
            value = _combine(body.combiner, acc, self._value(body.source, roots))
        else:
            value = self._value(body, roots)
        inner: S.Stmt = S.BufferStore(em.buffer, value, store_idx)
        if guards:
            inner = S.IfThenElse(guards, inner)
        first_reduce = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), None)
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            inner = self._with_attached(iv, inner)
            attr = st.iter_attrs.get(iv)
            loop: S.Stmt = S.For(self.loopvar[iv], E.const(0), E.const(ext[iv]), inner,
                                 attr.kind if attr else S.ForKind.SERIAL,
                                 attr.thread if attr else None)
            if iv in st.tensorized:
                loop = self._tensorize(st, iv, loop, ext)
            if k == first_reduce:
                assert isinstance(body, Reduce)
                loop = S.seq(self._init(st, body, k, ext), loop)
            inner = loop
        return S.AttrStmt(S.STAGE, st.name, inner)

    def _guard_error(self, st: Stage, ext: Mapping[IterVar, int]) -> ScheduleError:
        """A stage whose body would need a guard where none is allowed: name the split that
        leaves a partial tile (the stage's own, or one of the loops it is computed in)."""
        if st.tensorized:
            iv = next(iter(st.tensorized))
            head = (f"tensorize with {st.tensorized[iv].name} on stage {st.name} axis "
                    f"{iv.name}: the region would need a guard against a partial tile, and one "
                    f"instruction per tile cannot be guarded: ")
        else:
            head = (f"stage {st.name} would need a guard against a partial tile, and this "
                    f"target's pipeline takes whole tiles only: ")
        own = nondividing_splits(st, dict(ext))
        if own:
            return ScheduleError(head + describe_split(st, own[0], dict(ext)))
        em = self.info[st.tensor]
        dims = [a.name for a, o in zip(st.axis, em.bounds.overhang, strict=True) if o]
        for p, _ in reversed(self.env[st]):
            pext = dict(self.info[p.tensor].bounds.extents)
            bad = nondividing_splits(p, pext)
            if bad:
                return ScheduleError(
                    head + f"it is computed inside stage {p.name}'s tiles, and "
                    + describe_split(p, bad[0], pext)
                    + f" (the last tile of {st.name} runs past {', '.join(dims) or 'its axes'})")
        return ScheduleError(head + f"its tile runs past the end of axes "
                             f"{', '.join(dims)}; choose tiles that divide them")

    def _parity(self, st: Stage) -> tuple[E.Expr, ...]:
        """The leading index of a double-buffered stage: its attach loop's variable mod 2."""
        if not st.double_buffered:
            return ()
        assert isinstance(st.attach, AttachAt)
        return (self.loopvar[st.attach.axis] % 2,)

    def _guards(self, st: Stage, val: Mapping[IterVar, E.Expr], ext: Mapping[IterVar, int],
                spatial_only: bool = False) -> E.Expr | None:
        em = self.info[st.tensor]
        conds = [c for iv, c in split_guards(st, dict(val), dict(ext))
                 if not (spatial_only and iv.kind == "reduce")]
        for iv, b, over in zip(st.axis, em.bounds.base, em.bounds.overhang, strict=True):
            if over:
                conds.append(poly.simplify(b + val[iv]) < iv.extent)
        out: E.Expr | None = None
        for c in conds:
            out = c if out is None else E.And(out, c)
        return out

    def _init(self, st: Stage, body: Reduce, first_reduce: int,
              ext: Mapping[IterVar, int]) -> S.Stmt:
        """``out = identity`` over the spatial leaves inside the outermost reduction loop."""
        em = self.info[st.tensor]
        leaves = st.leaf_iter_vars
        inside = [iv for iv in leaves[first_reduce:] if iv.kind == "spatial"]
        fresh = {iv: E.Var(iv.name) for iv in inside}
        vals = {iv: fresh.get(iv, self.loopvar[iv]) if iv.kind == "spatial" else E.const(0)
                for iv in leaves}
        val = root_values(st, vals, dict(ext))
        idx = self._parity(st) + tuple(val[iv] for iv in st.axis)
        stmt: S.Stmt = S.BufferStore(em.buffer, _identity(body.combiner, em.buffer.dtype), idx)
        guard = self._guards(st, val, ext, spatial_only=True)
        if guard is not None:
            stmt = S.IfThenElse(guard, stmt)
        for iv in reversed(inside):
            attr = st.iter_attrs.get(iv)
            stmt = S.For(fresh[iv], E.const(0), E.const(ext[iv]), stmt,
                         attr.kind if attr else S.ForKind.SERIAL, attr.thread if attr else None)
        return stmt

    def _with_attached(self, iv: IterVar, rest: S.Stmt) -> S.Stmt:
        stages = self.attached.get(id(iv), [])
        if not stages:
            return rest
        out = S.seq(*(self._stage(a) for a in stages), rest)
        for a in reversed(stages):
            out = S.Allocate(self.info[a.tensor].buffer, out)
        return out

    def _tensorize(self, st: Stage, iv: IterVar, loop: S.Stmt,
                   ext: Mapping[IterVar, int]) -> S.Stmt:
        intrin = st.tensorized[iv]
        k = st.leaf_iter_vars.index(iv)
        region = st.leaf_iter_vars[k:]
        for r in region[1:]:
            if self.attached.get(id(r)):
                names = ", ".join(a.name for a in self.attached[id(r)])
                raise ScheduleError(f"tensorize on stage {st.name} axis {iv.name}: stages "
                                    f"{names} are computed inside the tensorized region")
        m = intrin_mod.match(region, st, intrin, ext)
        if isinstance(m, str):
            raise ScheduleError(f"tensorize with {intrin.name} on stage {st.name} axis "
                                f"{iv.name}: {m}")
        buffers = {d: self._buffer_of(t) for d, t in m.tensors.items()}
        loops = {d: self.loopvar[r] for d, r in m.axes.items()}
        return S.AttrStmt(S.TENSORIZE, intrin_mod.TensorizeRegion(intrin, m, loops, buffers), loop)

    def _buffer_of(self, t: Tensor) -> S.Buffer:
        """The buffer holding tensor ``t`` in the lowered function."""
        return self.info[t].buffer if t in self.info else self.params[t]
