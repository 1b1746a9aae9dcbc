"""Schedules: how the loops of each tensor definition are split, ordered, placed and mapped.

A ``Schedule`` holds one ``Stage`` per compute tensor reachable from the outputs. Primitives
mutate the stage (a schedule is a builder, like TVM's) and record their effect as small frozen
relation records; ``lower`` (vta.compiler.ir.lower) turns the result into the immutable loop-nest
IR. Every primitive checks that it is legal and refuses with a ``ScheduleError`` naming the
stage, the axis and the reason.

Example (a tiled GEMM staged through the accelerator's scratchpads)::

    s = create_schedule([C])
    CL = s.cache_write(C, "acc")
    AL = s.cache_read(A, "inp", [CL]); BL = s.cache_read(B, "wgt", [CL])
    io, jo, ii, ji = s[C].tile(*s[C].axis, 16, 16)
    s[CL].compute_at(s[C], jo)
    ko, ki = s[CL].split(s[CL].reduce_axis[0], 16)
    s[AL].compute_at(s[CL], ko); s[BL].compute_at(s[CL], ko)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, overload

from vta.compiler.ir import expr as E
from vta.compiler.ir import intrin, poly
from vta.compiler.ir.relations import Fuse, Split, ceil_div, leaf_extents
from vta.compiler.ir.stmt import SCOPES, ForKind
from vta.compiler.ir.tensor import ComputeOp, IterVar, Tensor, TensorRead, post_order
from vta.errors import ScheduleError

if TYPE_CHECKING:
    from vta.compiler.ir.intrin import TensorIntrinsic

__all__ = [
    "ScheduleError", "Schedule", "Stage", "Split", "Fuse", "AttachAt", "INLINE", "THREAD_TAGS",
    "create_schedule", "divisors", "describe_split", "nondividing_splits",
]

#: GPU thread indices a loop can be bound to
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z")


Relation = Split | Fuse


@dataclass(frozen=True, slots=True)
class LoopAttr:
    """How a leaf loop runs: its ``ForKind`` and, when bound, the thread index."""

    kind: ForKind = ForKind.SERIAL
    thread: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class AttachAt:
    """The stage is computed inside ``stage``'s loop over ``axis``."""

    stage: Stage
    axis: IterVar


#: attach marker of an inlined stage (its body is substituted into its readers)
INLINE = "inline"


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class Stage:
    """The schedule of one tensor: its current definition, leaf axes and placement.

    ``op`` is the stage's definition; ``cache_read``/``cache_write`` rewrite it, while the
    ``tensor`` the user holds stays the identity of the stage."""

    def __init__(self, sch: Schedule, tensor: Tensor, op: ComputeOp, is_output: bool) -> None:
        self.schedule = sch
        self.tensor = tensor
        self.op = op
        self.is_output = is_output
        self.scope = "global"
        self.relations: list[Relation] = []
        self.leaf_iter_vars: list[IterVar] = [*op.axes, *op.reduce_axes]
        self.iter_attrs: dict[IterVar, LoopAttr] = {}
        self.tensorized: dict[IterVar, TensorIntrinsic] = {}
        self.attach: AttachAt | str | None = None
        self.double_buffered = False

    # ------------------------------------------------------------------ views

    @property
    def name(self) -> str:
        """The stage's name (its tensor's; ``cache_read``/``cache_write`` add the scope)."""
        return self.op.name

    @property
    def axis(self) -> tuple[IterVar, ...]:
        """The root spatial axes (one per output dimension)."""
        return self.op.axes

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        """The root reduction axes."""
        return self.op.reduce_axes

    @property
    def all_iter_vars(self) -> list[IterVar]:
        """Root axes and every axis a split or fuse made."""
        out = [*self.op.axes, *self.op.reduce_axes]
        for r in self.relations:
            out += [r.outer, r.inner] if isinstance(r, Split) else [r.fused]
        return out

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    # ------------------------------------------------------------------ checks

    def _fail(self, what: str, axis: IterVar | None, why: str) -> ScheduleError:
        at = f" axis {axis.name}" if axis is not None else ""
        return ScheduleError(f"{what} on stage {self.name}{at}: {why}")

    def _leaf_index(self, axis: IterVar, what: str) -> int:
        for k, iv in enumerate(self.leaf_iter_vars):
            if iv is axis:
                return k
        if any(iv is axis for iv in self.all_iter_vars):
            raise self._fail(what, axis, "the axis was already split or fused; use its leaves "
                             f"({', '.join(i.name for i in self.leaf_iter_vars)})")
        raise self._fail(what, axis, "not an axis of this stage (leaf axes: "
                         f"{', '.join(i.name for i in self.leaf_iter_vars)})")

    def _check_loop_free(self, axis: IterVar, what: str) -> None:
        if axis in self.iter_attrs or axis in self.tensorized:
            raise self._fail(what, axis, "the axis is already bound, unrolled, a virtual thread "
                             "or tensorized; transform loops before annotating them")

    # ------------------------------------------------------------------ loop transformations

    def split(self, axis: IterVar, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split ``axis`` into ``(outer, inner)`` with ``inner`` of extent ``factor`` (or
        ``outer`` of extent ``nparts``); a factor that does not divide the extent makes
        lowering guard the body."""
        k = self._leaf_index(axis, "split")
        self._check_loop_free(axis, "split")
        if (factor is None) == (nparts is None):
            raise self._fail("split", axis, "give exactly one of factor= and nparts=")
        n = factor if factor is not None else nparts
        if not _is_int(n) or n is None or n <= 0:
            key = "factor" if factor is not None else "nparts"
            raise self._fail("split", axis, f"{key} must be a positive integer, got {n!r}")
        assert n is not None
        inner_ext = n if factor is not None else ceil_div(axis.extent, n)
        outer_ext = ceil_div(axis.extent, n) if factor is not None else n
        outer = IterVar(E.Var(f"{axis.name}_o"), outer_ext, axis.kind)
        inner = IterVar(E.Var(f"{axis.name}_i"), inner_ext, axis.kind)
        self.relations.append(Split(axis, outer, inner, factor, nparts))
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        if self.tensorized:
            first = next(iter(self.tensorized))
            try:
                self._check_tiles(f"split after tensorize with {self.tensorized[first].name}",
                                  axis, leaf_extents(self, {iv: iv.extent for iv in
                                                            (*self.axis, *self.reduce_axis)}))
            except ScheduleError:
                self.relations.pop()
                self.leaf_iter_vars[k:k + 2] = [axis]
                raise
        return outer, inner

    def reorder(self, *axes: IterVar) -> None:
        """Put ``axes`` in this order, in the leaf positions they occupy now. Refused when it
        would break a dependence that the stage's (commutative) reduction does not excuse."""
        pos = [self._leaf_index(a, "reorder") for a in axes]
        if len(set(pos)) != len(pos):
            raise self._fail("reorder", None, "an axis is listed twice: "
                             f"{', '.join(a.name for a in axes)}")
        new = list(self.leaf_iter_vars)
        for p, a in zip(sorted(pos), axes, strict=True):
            new[p] = a
        self._check_order(new, "reorder")
        self.leaf_iter_vars = new

    def tile(self, x: IterVar, y: IterVar, x_factor: int,
             y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split ``x`` and ``y`` and order the result ``xo, yo, xi, yi``."""
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, outer: IterVar, inner: IterVar) -> IterVar:
        """Fuse two adjacent leaf loops (``outer`` directly outside ``inner``) into one."""
        ko = self._leaf_index(outer, "fuse")
        ki = self._leaf_index(inner, "fuse")
        for a in (outer, inner):
            self._check_loop_free(a, "fuse")
        if ki != ko + 1:
            raise self._fail("fuse", outer, f"{outer.name} and {inner.name} are not adjacent "
                             f"with {outer.name} directly outside (leaf order: "
                             f"{', '.join(i.name for i in self.leaf_iter_vars)})")
        if outer.kind != inner.kind:
            raise self._fail("fuse", outer, f"cannot fuse a {outer.kind} axis with a "
                             f"{inner.kind} axis ({inner.name})")
        fused = IterVar(E.Var(f"{outer.name}_{inner.name}_f"), outer.extent * inner.extent,
                        outer.kind)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[ko:ki + 1] = [fused]
        return fused

    # ------------------------------------------------------------------ loop annotations

    def unroll(self, axis: IterVar) -> None:
        """Unroll the loop over ``axis`` (the GPU renders ``#pragma unroll``)."""
        self._leaf_index(axis, "unroll")
        self._check_loop_free(axis, "unroll")
        self.iter_attrs[axis] = LoopAttr(ForKind.UNROLLED)

    def vectorize(self, axis: IterVar) -> None:
        """Run the loop over ``axis`` as one vector operation (a GPU copy of contiguous
        elements becomes one wide move); the loop semantics are unchanged."""
        self._leaf_index(axis, "vectorize")
        self._check_loop_free(axis, "vectorize")
        self._check_parallel(axis, "vectorize")
        self.iter_attrs[axis] = LoopAttr(ForKind.VECTORIZED)

    def bind(self, axis: IterVar, thread: str) -> None:
        """Map the loop over ``axis`` to a GPU thread index (``blockIdx.x``, ``threadIdx.y``...)."""
        self._leaf_index(axis, "bind")
        self._check_loop_free(axis, "bind")
        if thread not in THREAD_TAGS:
            raise self._fail("bind", axis, f"unknown thread {thread!r} (expected one of "
                             f"{', '.join(THREAD_TAGS)})")
        self._check_parallel(axis, f"bind to {thread}")
        self.iter_attrs[axis] = LoopAttr(ForKind.THREAD_BINDING, thread)

    @overload
    def virtual_thread(self, axis: IterVar) -> IterVar: ...

    @overload
    def virtual_thread(self, axis: IterVar, nthreads: int) -> tuple[IterVar, IterVar]: ...

    def virtual_thread(self, axis: IterVar,
                       nthreads: int | None = None) -> IterVar | tuple[IterVar, IterVar]:
        """Mark ``axis`` as virtual threads (independent iterations the accelerator interleaves
        to hide latency, each with its own copy of the buffers). With ``nthreads``, first split
        ``axis`` into that many parts and mark the outer: returns ``(vthread, inner)``."""
        if nthreads is not None:
            outer, inner = self.split(axis, nparts=nthreads)
            self.virtual_thread(outer)
            return outer, inner
        self._leaf_index(axis, "virtual_thread")
        self._check_loop_free(axis, "virtual_thread")
        self._check_parallel(axis, "virtual_thread")
        self.iter_attrs[axis] = LoopAttr(ForKind.VTHREAD)
        return axis

    def tensorize(self, axis: IterVar, intrinsic: TensorIntrinsic) -> None:
        """Replace the loops from ``axis`` inward by ``intrinsic``; refused unless the region
        computes exactly the intrinsic's declaration (shape, dtypes, access pattern)."""
        k = self._leaf_index(axis, "tensorize")
        region = self.leaf_iter_vars[k:]
        extents = leaf_extents(self, {iv: iv.extent for iv in (*self.axis, *self.reduce_axis)})
        what = f"tensorize with {intrinsic.name}"
        m = intrin.match(region, self, intrinsic, extents)
        if isinstance(m, str):
            fused = [r for r in self.relations if isinstance(r, Fuse) and r.fused in region]
            if fused:
                f = fused[0]
                loops = (*intrinsic.op.axes, *intrinsic.op.reduce_axes)
                want = ", ".join(f"{a.name}:{a.extent}" for a in loops)
                m += (f"; axis {f.fused.name} fuses {f.outer.name} and {f.inner.name} "
                      f"({extents[f.outer]} x {extents[f.inner]}), where the intrinsic needs "
                      f"separate loops ({want}): fuse outside the region or not at all")
            raise self._fail(what, axis, m)
        self._check_tiles(what, axis, extents)
        self.tensorized[axis] = intrinsic

    def _check_tiles(self, what: str, axis: IterVar, extents: dict[IterVar, int]) -> None:
        """A tensorized stage's body cannot be guarded, so its splits must divide: checked here
        for what the schedule knows exactly (reduction axes, and every axis of an output, which
        stays at the root); ``lower`` checks the rest with the extents bound inference gives."""
        exact = [r for r in nondividing_splits(self, extents)
                 if self.is_output or r.parent.kind == "reduce"]
        if exact:
            raise self._fail(what, axis, f"{describe_split(self, exact[0], extents)}. A "
                             f"tensorized region is one instruction per tile, so its tiles "
                             f"cannot be guarded against the partial last one")

    # ------------------------------------------------------------------ placement

    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop over ``axis``, only the region that
        ``parent``'s iterations under that loop read."""
        if self.is_output:
            raise self._fail("compute_at", axis, "an output stage is computed at the root")
        if parent is self:
            raise self._fail("compute_at", axis, "cannot attach a stage to itself")
        if parent.attach == INLINE:
            raise self._fail("compute_at", axis, f"{parent.name} is inlined, it has no loops")
        if not any(iv is axis for iv in parent.leaf_iter_vars):
            raise self._fail("compute_at", axis, f"{axis.name} is not a leaf axis of "
                             f"{parent.name} (its leaf axes: "
                             f"{', '.join(i.name for i in parent.leaf_iter_vars)})")
        if not self.schedule._reads_transitively(parent, self):
            raise self._fail("compute_at", axis, f"{parent.name} does not read {self.name}")
        if any(iv in parent.tensorized for iv in parent._outer_of(axis)):
            raise self._fail("compute_at", axis, f"{axis.name} lies inside a tensorized region")
        self.attach = AttachAt(parent, axis)

    def compute_root(self) -> None:
        """Compute this stage at the root (undoes ``compute_at``/``compute_inline``)."""
        self.attach = None

    def compute_inline(self) -> None:
        """Substitute this stage's body into every reader (e.g. padding into a copy)."""
        if self.is_output:
            raise self._fail("compute_inline", None, "an output must be computed")
        if self.op.reduce_axes:
            raise self._fail("compute_inline", None, "a reduction cannot be inlined")
        for st in self.schedule.stages:
            if isinstance(st.attach, AttachAt) and st.attach.stage is self:
                raise self._fail("compute_inline", None,
                                 f"stage {st.name} is computed at one of its loops")
        self.attach = INLINE

    def double_buffer(self) -> None:
        """Give this attached stage two buffers, used alternately by successive iterations of
        the loop it is computed at (``buf[it % 2]``): the copy for the next iteration does not
        overwrite what the current one reads, so one barrier per iteration suffices on a GPU."""
        if not isinstance(self.attach, AttachAt):
            raise self._fail("double_buffer", None, "the stage must be computed at a loop "
                             "(compute_at) first")
        self.double_buffered = True

    def set_scope(self, scope: str) -> None:
        """Keep this stage's buffer in memory ``scope`` (e.g. an epilogue kept in ``acc``)."""
        _check_scope(scope, f"set_scope on stage {self.name}")
        if self.is_output:
            raise self._fail("set_scope", None, "an output lives in global memory")
        self.scope = scope

    # ------------------------------------------------------------------ legality helpers

    def _outer_of(self, axis: IterVar) -> list[IterVar]:
        """Leaf axes from the outermost down to ``axis`` included."""
        k = next(i for i, iv in enumerate(self.leaf_iter_vars) if iv is axis)
        return self.leaf_iter_vars[:k + 1]

    def _check_order(self, new_leaves: list[IterVar], what: str) -> None:
        if independent(self, exempt_reduction=True):
            return
        deps = _dependence_key(self, exempt_reduction=True)
        if deps is None:
            return
        bad = _order_violation(deps, leaf_schedule_text(self, new_leaves))
        if bad is not None:
            raise self._fail(what, None, f"the new loop order breaks the dependence {bad}")

    def _check_parallel(self, axis: IterVar, what: str) -> None:
        if axis.kind == "reduce":
            raise self._fail(what, axis, "a reduction axis carries the accumulation into the "
                             "same output element; its iterations cannot run in parallel")
        if independent(self, exempt_reduction=False):
            return
        deps = _dependence_key(self, exempt_reduction=False)
        if deps is None:
            return
        level = next(i for i, iv in enumerate(self.leaf_iter_vars) if iv is axis)
        if _carried(deps, leaf_schedule_text(self, self.leaf_iter_vars), level):
            raise self._fail(what, axis, "the loop carries a dependence; its iterations "
                             "cannot run in parallel")


class Schedule:
    """The stages of every compute tensor reachable from ``outputs``, producers first."""

    def __init__(self, outputs: Sequence[Tensor]) -> None:
        self.outputs = tuple(outputs)
        self.stages: list[Stage] = []
        self._by_tensor: dict[Tensor, Stage] = {}
        for t in post_order(self.outputs):
            if isinstance(t.op, ComputeOp):
                self._add(Stage(self, t, t.op, any(t is o for o in self.outputs)))

    def _add(self, st: Stage, before: Stage | None = None) -> None:
        self._by_tensor[st.tensor] = st
        if before is None:
            self.stages.append(st)
        else:
            self.stages.insert(self.stages.index(before), st)

    def __getitem__(self, tensor: Tensor | str) -> Stage:
        """The stage of ``tensor`` (or of the compute tensor named ``tensor``)."""
        if isinstance(tensor, str):
            return self._by_name(tensor)
        st = self._by_tensor.get(tensor)
        if st is None:
            kind = "an input (placeholder)" if not isinstance(tensor.op, ComputeOp) else \
                "not part of this schedule"
            raise ScheduleError(f"tensor {tensor.name} has no stage: it is {kind}")
        return st

    def _by_name(self, name: str) -> Stage:
        found = [st for st in self.stages if st.name == name]
        if len(found) != 1:
            names = ", ".join(st.name for st in self.stages)
            why = "no stage" if not found else f"{len(found)} stages"
            raise ScheduleError(f"{why} named {name!r} in the schedule (stages: {names}); "
                                f"index it by tensor")
        return found[0]

    def stage_of(self, tensor: Tensor) -> Stage | None:
        """The stage of ``tensor``, or None for a placeholder or a tensor not scheduled here."""
        return self._by_tensor.get(tensor)

    def readers(self, tensor: Tensor) -> list[Stage]:
        """Stages whose current definition reads ``tensor`` directly."""
        return [s for s in self.stages if tensor in reads_of(s.op.body)]

    def _reads_transitively(self, consumer: Stage, producer: Stage) -> bool:
        todo, seen = [consumer], set()
        while todo:
            st = todo.pop()
            for t in reads_of(st.op.body):
                if t is producer.tensor:
                    return True
                inner = self._by_tensor.get(t)
                if inner is not None and inner not in seen:
                    seen.add(inner)
                    todo.append(inner)
        return False

    # ------------------------------------------------------------------ caching

    def cache_read(self, tensor: Tensor, scope: str,
                   readers: Sequence[Tensor | Stage]) -> Tensor:
        """A copy of ``tensor`` in ``scope`` that ``readers`` read instead of ``tensor``;
        schedule the copy (``compute_at``) to load just the region a tile needs."""
        _check_scope(scope, f"cache_read of {tensor.name}")
        if not readers:
            raise ScheduleError(f"cache_read of {tensor.name}: no readers given")
        stages = [r if isinstance(r, Stage) else self[r] for r in readers]
        for st in stages:
            if tensor not in reads_of(st.op.body):
                raise ScheduleError(f"cache_read of {tensor.name} into {scope}: stage "
                                    f"{st.name} does not read {tensor.name}")
        cache = _copy_tensor(tensor, f"{tensor.name}_{scope}")
        for st in stages:
            st.op = _replace_reads(st.op, tensor, cache)
        cst = Stage(self, cache, cache.op, False)  # type: ignore[arg-type]
        cst.scope = scope
        self._add(cst, before=min(stages, key=self.stages.index))
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a buffer of ``scope`` (returned, to be scheduled) and make
        ``tensor``'s own stage a copy of it back to ``tensor``'s buffer."""
        _check_scope(scope, f"cache_write of {tensor.name}")
        st = self[tensor]
        if st.relations or st.attach is not None or st.iter_attrs or st.tensorized:
            raise ScheduleError(f"cache_write of {tensor.name}: apply cache_write before "
                                f"scheduling the stage's loops or placement")
        op = st.op
        axes = tuple(IterVar(E.Var(a.name), a.extent) for a in op.axes)
        body = E.substitute(op.body, {a.var: b.var for a, b in zip(op.axes, axes, strict=True)})
        cop = ComputeOp(f"{op.name}_{scope}", axes, body, op.dtype, op.tag)
        cache = Tensor(cop, tensor.shape, tensor.dtype)
        st.op = ComputeOp(op.name, op.axes, TensorRead(cache, tuple(a.var for a in op.axes),
                                                       cache.dtype), op.dtype, op.tag)
        st.leaf_iter_vars = list(op.axes)
        cst = Stage(self, cache, cop, False)
        cst.scope = scope
        self._add(cst, before=st)
        return cache


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A default schedule (every stage at the root, loops in definition order)."""
    return Schedule((outputs,) if isinstance(outputs, Tensor) else tuple(outputs))


# --------------------------------------------------------------------------- helpers


def _check_scope(scope: str, what: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(f"{what}: unknown scope {scope!r} (expected one of "
                            f"{', '.join(SCOPES)})")


def reads_of(body: E.Expr) -> list[Tensor]:
    """Tensors read in ``body``, first-read order, no repeats (memoised per body object:
    bodies are immutable and scheduling asks this of every stage for every primitive)."""
    hit = _READS.get(id(body))
    if hit is not None and hit[0] is body:
        return list(hit[1])
    out: list[Tensor] = []
    for n in E.walk(body):
        if isinstance(n, TensorRead) and all(n.tensor is not t for t in out):
            out.append(n.tensor)
    if len(_READS) >= _READS_MAX:
        _READS.clear()
    _READS[id(body)] = (body, tuple(out))  # the body is held: its id stays its own
    return out


#: ``reads_of``'s memo: id of a body -> (the body, its reads); bounded
_READS: dict[int, tuple[E.Expr, tuple[Tensor, ...]]] = {}
_READS_MAX = 4096


def _copy_tensor(src: Tensor, name: str) -> Tensor:
    axes = tuple(IterVar(E.Var(f"ax{d}"), n) for d, n in enumerate(src.shape))
    body = TensorRead(src, tuple(a.var for a in axes), src.dtype)
    return Tensor(ComputeOp(name, axes, body, src.dtype), src.shape, src.dtype)


def _replace_reads(op: ComputeOp, old: Tensor, new: Tensor) -> ComputeOp:
    def fn(n: object) -> E.Expr | None:
        if isinstance(n, TensorRead) and n.tensor is old:
            return TensorRead(new, tuple(E.substitute(i, fn) for i in n.indices), n.dtype)
        return None

    return ComputeOp(op.name, op.axes, E.substitute(op.body, fn), op.dtype, op.tag)


def divisors(n: int) -> list[int]:
    """The factors that split an axis of extent ``n`` into whole tiles."""
    return [d for d in range(1, n + 1) if n % d == 0]


def describe_split(stage: Stage, r: Split, ext: dict[IterVar, int]) -> str:
    """``the split of j by factor 3 in stage C (extent 4: 2 tiles of 3 cover 6)`` and the
    factors that would divide the extent."""
    n = ext[r.parent]
    how = f"factor {r.factor}" if r.factor is not None else f"nparts {r.nparts}"
    fits = ", ".join(map(str, divisors(n)))
    key = "factors" if r.factor is not None else "nparts"
    tiles = f"{ext[r.outer]} tile{'s' if ext[r.outer] != 1 else ''} of {ext[r.inner]}"
    return (f"the split of {r.parent.name} by {how} in stage {stage.name} does not divide its "
            f"extent {n} ({tiles} cover {ext[r.outer] * ext[r.inner]}); {key} that divide "
            f"{n}: {fits}")


def nondividing_splits(stage: Stage, ext: dict[IterVar, int]) -> list[Split]:
    """The splits of ``stage`` whose tiles do not cover their axis exactly (lowering guards the
    body against the partial last tile)."""
    return [r for r in stage.relations if isinstance(r, Split)
            and ext[r.outer] * ext[r.inner] != ext[r.parent]]


# --------------------------------------------------------------------------- dependences


def _names(stage: Stage) -> dict[E.Var, str]:
    return {iv.var: f"r{k}" for k, iv in enumerate((*stage.axis, *stage.reduce_axis))}


def _domain(stage: Stage) -> str:
    roots = (*stage.axis, *stage.reduce_axis)
    name = _names(stage)
    cons = " and ".join(f"0 <= {name[iv.var]} < {iv.extent}" for iv in roots)
    return f"{{ S[{', '.join(name[iv.var] for iv in roots)}] : {cons} }}"


def _accesses(stage: Stage) -> tuple[str, str]:
    name = _names(stage)
    dom = f"S[{', '.join(name[iv.var] for iv in (*stage.axis, *stage.reduce_axis))}]"
    out_idx = ", ".join(name[iv.var] for iv in stage.axis)
    tag: dict[Tensor, str] = {}
    for t in [stage.tensor, *reads_of(stage.op.body)]:
        tag.setdefault(t, f"T{len(tag)}")
    writes = [f"{dom} -> T0[{out_idx}]"]
    reads = [f"{dom} -> T0[{out_idx}]"] if stage.reduce_axis else []
    for n in E.walk(stage.op.body):
        if isinstance(n, TensorRead):
            idx = ", ".join(poly.to_isl(i, name) for i in n.indices)
            reads.append(f"{dom} -> {tag[n.tensor]}[{idx}]")
    return "{ " + "; ".join(writes) + " }", "{ " + "; ".join(reads) + " }"


def independent(stage: Stage, exempt_reduction: bool) -> bool:
    """Whether ``stage_dependences`` is empty, known without isl: a stage writes element
    ``[axes]`` of its own tensor (``_accesses``), so two of its instances touch one element
    only with equal data-parallel axes, and only through its tensor, which is written by no
    other stage. Without a read of its own tensor in its body, the only such pairs are the
    accumulation's (read and write of ``[axes]`` over the reduction axes): none without a
    reduction, and ``exempt_reduction`` leaves them out. The conv/matmul and epilogue stages
    the accelerator schedules all qualify, so reordering them parses no isl (the verdict,
    legal, is the one isl gives: an empty dependence map breaks no order and is carried by no
    loop)."""
    if stage.reduce_axis and not exempt_reduction:
        return False
    return all(t is not stage.tensor for t in reads_of(stage.op.body))


def stage_dependences(stage: Stage, exempt_reduction: bool) -> poly.isl.Map | None:
    """Dependences among the stage's instances in definition order; with ``exempt_reduction``
    the accumulation into one output element (commutative: any order is fine) is left out.
    None when the body is not affine (then only the structural checks apply)."""
    key = _dependence_key(stage, exempt_reduction)
    return None if key is None else _dependences(*key)


#: what a stage's dependences are a function of: its domain, write and read texts, and for
#: an exempt reduction the numbers of its output axes and of all its axes (else 0, 0)
_DepKey = tuple[str, str, str, int, int]


def _dependence_key(stage: Stage, exempt_reduction: bool) -> _DepKey | None:
    """``stage_dependences``' inputs as text (a memo key), None when the body is not affine."""
    try:
        writes, reads = _accesses(stage)
    except poly.PolyError:
        return None
    n, roots = 0, 0
    if exempt_reduction and stage.reduce_axis:
        n, roots = len(stage.axis), len(stage.axis) + len(stage.reduce_axis)
    return _domain(stage), writes, reads, n, roots


@lru_cache(maxsize=1024)
def _dependences(domain: str, writes: str, reads: str, n: int, roots: int) -> poly.isl.Map:
    """The dependences of ``_dependence_key``'s texts; ``roots`` > 0: with the accumulation
    over the last ``roots - n`` axes into one output element left out."""
    deps = poly.dependences(domain, writes, reads).all()
    if roots:
        a = [f"a{i}" for i in range(roots)]
        b = [f"b{i}" for i in range(roots)]
        same = " and ".join(f"{a[i]} = {b[i]}" for i in range(n)) or "true"
        acc = poly.isl.Map(f"{{ S[{', '.join(a)}] -> S[{', '.join(b)}] : {same} }}")
        deps = deps.subtract(acc)
    return deps


@lru_cache(maxsize=4096)
def _order_violation(deps: _DepKey, leaf_text: str) -> str | None:
    """The dependences the loop order ``leaf_text`` (``leaf_schedule_text``) breaks, as text,
    or None when it is legal (memoised: the candidates of a layer and its repeated checks
    reorder the same stages the same way; isl parsing is most of the cost)."""
    dep = _dependences(*deps)
    if dep.is_empty():  # nothing to keep in order (a stage without dependences, or only the
        return None     # exempt accumulation): every order is legal, no schedule to parse
    bad = poly.violations(dep, poly.isl.Map(leaf_text))
    return None if bad.is_empty() else str(bad)


@lru_cache(maxsize=4096)
def _carried(deps: _DepKey, leaf_text: str, level: int) -> bool:
    """Whether loop ``level`` of the order ``leaf_text`` carries one of the dependences."""
    dep = _dependences(*deps)
    return not dep.is_empty() and poly.carries(dep, poly.isl.Map(leaf_text), level)


def leaf_schedule(stage: Stage, leaves: Sequence[IterVar]) -> poly.isl.Map:
    """The map from a root iteration ``S[roots]`` to its leaf loop values in ``leaves`` order."""
    return poly.isl.Map(leaf_schedule_text(stage, leaves))


def leaf_schedule_text(stage: Stage, leaves: Sequence[IterVar]) -> str:
    """``leaf_schedule`` as isl text."""
    roots = (*stage.axis, *stage.reduce_axis)
    ext = leaf_extents(stage, {iv: iv.extent for iv in roots})
    name = {iv: f"x{k}" for k, iv in enumerate(stage.all_iter_vars)}
    cons = [f"0 <= {name[iv]} < {ext[iv]}" for iv in stage.all_iter_vars]
    for r in stage.relations:
        if isinstance(r, Split):
            cons.append(f"{name[r.parent]} = {ext[r.inner]}*{name[r.outer]} + {name[r.inner]}")
        else:
            cons.append(f"{name[r.fused]} = {ext[r.inner]}*{name[r.outer]} + {name[r.inner]}")
    inner = [name[iv] for iv in stage.all_iter_vars if iv not in roots and iv not in leaves]
    ex = f"exists ({', '.join(inner)} : {' and '.join(cons)})" if inner else " and ".join(cons)
    return (f"{{ S[{', '.join(name[iv] for iv in roots)}] -> "
            f"[{', '.join(name[iv] for iv in leaves)}] : {ex} }}")
