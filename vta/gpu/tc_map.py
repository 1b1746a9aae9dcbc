"""Automatic GPU mapping of a TC definition (TC's polyhedral JIT, on our schedule primitives).

``map_gpu(func, options)`` turns the tensor IR of a definition (``to_ir``) into a sequence of
scheduled kernels without a user schedule. Every decision is a schedule primitive
(``vta.compiler.ir.schedule``), so the result goes through ``lower`` and the GPU pipeline
(``vta.gpu.lower_gpu``) like a hand-written schedule.

1. **Fusion** (``fusion="max"``; ``"min"``: one kernel per statement value). Element-wise
   values that are not outputs are substituted into their readers (``compute_inline``'s
   effect, done when the kernel's graph is cut). A reduction that is not an output and whose
   only reader is an element-wise stage reading it point-wise (isl: the access relation is
   the identity) is fused into that reader's kernel: computed into a per-thread register tile
   (``set_scope("local")`` + ``compute_at`` the innermost thread loop) - the epilogue pattern.
   Everything else is materialised in global memory by its own kernel, launched in order
   (a kernel cannot wait for other blocks, so a value read across blocks needs a new launch).
2. **Tiling and mapping**: the output's dimensions are split into block tiles (``tile``); the
   innermost one to three dimensions are mapped to ``threadIdx.x``/``y``/``z`` (``threads``),
   each thread computing ``tile / threads`` elements (register tile); the block loops are
   bound to ``blockIdx.x``/``y`` (more than three are fused into ``blockIdx.z``).
3. **Reduction**: computed into registers (``cache_write(C, "local")``, or the fused
   reduction's ``local`` scope) at the innermost thread loop; its first reduction axis is split
   by ``reduction_tile`` and the reduction loops placed outside the register tile.
4. **Promotion**: an input that the block's iterations of one reduction slice read more than
   once (isl: the access relation from the tile's iteration points is not injective) is staged
   in shared memory (``cache_read(P, "shared")`` at the reduction slice loop, or at the block
   loop without a reduction), copied cooperatively by all threads of the block. The footprint
   (``poly.footprint``) must fit ``max_shared_bytes``: the reduction tile is halved until it
   does, and a tensor that still does not fit is read from global memory.
5. **Unrolling**: register-tile loops whose product of extents is at most ``unroll``, and the
   inner reduction-slice loop up to ``unroll`` iterations.

``MappingOptions`` holds the knobs (an autotuner searches them); ``None`` fields are derived
from the problem (``resolve``). ``tile`` and ``threads`` are right-aligned: the last entry is
the innermost dimension, so one options object applies to kernels of any rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import islpy as isl

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import Schedule, Stage, create_schedule, reads_of
from vta.compiler.ir.stmt import TARGET, PrimFunc
from vta.compiler.ir.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    post_order,
)
from vta.compiler.tc.to_ir import TcFunc
from vta.errors import MappingError
from vta.gpu.dialect import KNOBS
from vta.gpu.target import DEFAULT_TARGET, WARP_LANES

__all__ = ["MappingError", "MappingOptions", "Resolved", "KernelPlan", "GpuKernelDef",
           "GpuProgram", "plan_kernels", "map_gpu", "resolve", "isolate"]

_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


@dataclass(frozen=True)
class MappingOptions:
    """The GPU mapping knobs of a TC definition (cf. TC's ``MappingOptions``).

    ``tile``: block tile size per output dimension, ``threads``: threads per block along the
    innermost dimensions (at most three; x is the last entry), both right-aligned (missing outer
    entries: tile 1, no threads); ``reduction_tile``: elements of the first reduction axis
    staged per step; ``unroll``: largest unrolled loop (iterations; 0 = none);
    ``use_shared``: promote reused inputs to shared memory; ``fusion``: ``"max"`` or ``"min"``;
    ``max_shared_bytes``: the shared memory a block may use (default: the default target's
    static limit, since the mapper's schedules declare static shared memory)."""

    tile: tuple[int, ...] | None = None
    threads: tuple[int, ...] | None = None
    reduction_tile: int | None = None
    unroll: int = 8
    use_shared: bool = True
    fusion: str = "max"
    max_shared_bytes: int = DEFAULT_TARGET.static_shared

    def check(self) -> None:
        if self.fusion not in ("max", "min"):
            raise MappingError(f"mapping option fusion must be 'max' or 'min', got "
                               f"{self.fusion!r}")
        for name in ("tile", "threads"):
            v = getattr(self, name)
            if v is not None and (not v or any(not isinstance(x, int) or x < 1 for x in v)):
                raise MappingError(f"mapping option {name} must be positive integers, got {v}")
        if self.threads is not None:
            if len(self.threads) > 3:
                raise MappingError(f"mapping option threads has {len(self.threads)} entries; "
                                   f"a block has at most three thread dimensions")
            if math.prod(self.threads) > 1024:
                raise MappingError(f"mapping option threads {self.threads} gives "
                                   f"{math.prod(self.threads)} threads per block (limit 1024)")
        if self.reduction_tile is not None and self.reduction_tile < 1:
            raise MappingError(f"mapping option reduction_tile must be >= 1, got "
                               f"{self.reduction_tile}")
        if self.unroll < 0 or self.max_shared_bytes < 0:
            raise MappingError("mapping options unroll and max_shared_bytes must be >= 0")


@dataclass(frozen=True)
class Resolved:
    """The options of one kernel, per output dimension: block ``tile`` and ``threads``
    (1 = not mapped to threads), and the reduction tile ``kt`` (None without a reduction)."""

    tile: tuple[int, ...]
    threads: tuple[int, ...]
    kt: int | None
    unroll: int
    use_shared: bool
    max_shared_bytes: int


def _right(values: tuple[int, ...] | None, n: int, fill: int) -> tuple[int, ...] | None:
    if values is None:
        return None
    v = tuple(values[-n:]) if len(values) >= n else (fill,) * (n - len(values)) + tuple(values)
    return v


def resolve(opts: MappingOptions, shape: tuple[int, ...], reduce_extent: int | None) -> Resolved:
    """Per-dimension knobs for an output of ``shape`` (a reduction's first axis of
    ``reduce_extent``): the options given, the rest derived from the problem."""
    opts.check()
    n = len(shape)
    threads = _right(opts.threads, n, 1)
    if threads is not None:  # threads past the extent would compute nothing: dropped, as TC does
        threads = tuple(min(t, e) for t, e in zip(threads, shape, strict=True))
    else:  # up to a warp of threads on the innermost dimension, up to 256 per block
        t = [1] * n
        nz = [d for d in range(n) if shape[d] > 1]
        if nz:
            t[nz[-1]] = min(shape[nz[-1]], WARP_LANES)
        if len(nz) > 1:
            t[nz[-2]] = min(shape[nz[-2]], max(1, 256 // t[nz[-1]]), 16)
        threads = tuple(t)
    mapped = [d for d in range(n) if threads[d] > 1]
    if len(mapped) > 3:
        raise MappingError(f"mapping option threads maps {len(mapped)} dimensions; at most "
                           f"three")
    tile = _right(opts.tile, n, 1)
    if tile is None:  # a register tile of two rows for a reduction with rows to spare
        reg = [1] * n
        if reduce_extent is not None and len(mapped) > 1 \
                and shape[mapped[-2]] >= 4 * threads[mapped[-2]]:
            reg[mapped[-2]] = 2
        tile = tuple(min(shape[d], threads[d] * reg[d]) if threads[d] > 1 else 1
                     for d in range(n))
    tile = tuple(min(t, e) for t, e in zip(tile, shape, strict=True))
    for d in range(n):
        if threads[d] > tile[d]:
            raise MappingError(f"mapping options: dimension {d} has {threads[d]} threads but a "
                               f"tile of {tile[d]}; threads must not exceed the tile")
    kt = None
    if reduce_extent is not None:
        kt = min(reduce_extent, opts.reduction_tile or 16)
    return Resolved(tile, threads, kt, opts.unroll, opts.use_shared, opts.max_shared_bytes)


# ---------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class KernelPlan:
    """One kernel of the program: ``root`` is the tensor it materialises, ``fused`` a
    reduction computed inside it (point-wise epilogue fusion), ``inlined`` the element-wise
    values substituted into it."""

    root: Tensor
    fused: Tensor | None
    inlined: tuple[Tensor, ...]


def _is_reduce(t: Tensor) -> bool:
    return isinstance(t.op, ComputeOp) and isinstance(t.op.body, Reduce)


def plan_kernels(outputs: Sequence[Tensor], fusion: str = "max") -> list[KernelPlan]:
    """Partition the computes reachable from ``outputs`` into kernels (module docstring)."""
    comps = [t for t in post_order(outputs) if isinstance(t.op, ComputeOp)]
    outs = set(outputs)
    inline = {t for t in comps if fusion == "max" and t not in outs and not _is_reduce(t)}
    roots = [t for t in comps if t not in inline]
    expanded = {t: _expand(t, inline) for t in roots}
    fused: dict[Tensor, Tensor] = {}
    if fusion == "max":
        for r in roots:
            if r in outs or not _is_reduce(r):
                continue
            readers = [c for c in roots if any(n.tensor is r for n in E.walk(expanded[c])
                                               if isinstance(n, TensorRead))]
            # one fused reduction per kernel (a kernel computes one register tile): a second
            # reduction read by the same value (O(i) max=! ...; O(i) min= ...) has its own
            if len(readers) == 1 and not _is_reduce(readers[0]) \
                    and readers[0] not in fused.values() \
                    and readers[0].shape == r.shape and _pointwise(readers[0], r, expanded):
                fused[r] = readers[0]
    plans = []
    for t in roots:
        if t in fused:
            continue
        inner = next((r for r, c in fused.items() if c is t), None)
        mine = tuple(i for i in comps if i in inline and any(
            _reaches(x, i, inline) for x in (t, inner) if x is not None))
        plans.append(KernelPlan(t, inner, mine))
    return plans


def _reaches(root: Tensor, t: Tensor, inline: set[Tensor]) -> bool:
    todo = [root]
    seen: set[Tensor] = set()
    while todo:
        x = todo.pop()
        for n in E.walk(x.op.body) if isinstance(x.op, ComputeOp) else []:
            if isinstance(n, TensorRead) and n.tensor not in seen:
                if n.tensor is t:
                    return True
                if n.tensor in inline:
                    seen.add(n.tensor)
                    todo.append(n.tensor)
    return False


def _expand(t: Tensor, inline: set[Tensor]) -> E.Expr:
    """``t``'s body with the inlined values substituted (recursively)."""
    assert isinstance(t.op, ComputeOp)

    def fn(n: object) -> E.Expr | None:
        if isinstance(n, TensorRead):
            idx = tuple(E.substitute(i, fn) for i in n.indices)
            if n.tensor in inline:
                op = n.tensor.op
                assert isinstance(op, ComputeOp)
                sub = dict(zip((a.var for a in op.axes), idx, strict=True))
                return E.substitute(_expand(n.tensor, inline), sub)  # type: ignore[no-any-return]
            return TensorRead(n.tensor, idx, n.dtype)
        return None

    return E.substitute(t.op.body, fn)  # type: ignore[no-any-return]


def _pointwise(c: Tensor, r: Tensor, expanded: dict[Tensor, E.Expr]) -> bool:
    """Whether every read of ``r`` in ``c`` is at ``c``'s own point (isl: the access relation
    from ``c``'s domain equals the identity)."""
    op = c.op
    assert isinstance(op, ComputeOp)
    names = {a.var: f"x{d}" for d, a in enumerate(op.axes)}
    xs = ", ".join(names.values())
    dom = " and ".join(f"0 <= x{d} < {a.extent}" for d, a in enumerate(op.axes))
    ident = isl.Map(f"{{ C[{xs}] -> R[{xs}] : {dom} }}")
    for n in E.walk(expanded[c]):
        if isinstance(n, TensorRead) and n.tensor is r:
            try:
                idx = ", ".join(poly.to_isl(i, names) for i in n.indices)
            except poly.PolyError:
                return False
            if not isl.Map(f"{{ C[{xs}] -> R[{idx}] : {dom} }}").is_equal(ident):
                return False
    return True


class _Cut:
    """Rebuild a kernel's computes over fresh axes, reading other kernels' values through
    placeholders and substituting the inlined ones."""

    def __init__(self, plan: KernelPlan, inline: set[Tensor]) -> None:
        self.plan, self.inline = plan, inline
        self.inputs: list[Tensor] = []
        self.stand_in: dict[Tensor, Tensor] = {}
        self.rebuilt: dict[Tensor, Tensor] = {}

    def external(self, t: Tensor) -> Tensor:
        if isinstance(t.op, PlaceholderOp):
            ph = t
        else:
            if t not in self.stand_in:
                self.stand_in[t] = Tensor(PlaceholderOp(t.name, t.shape, t.dtype), t.shape,
                                          t.dtype)
            ph = self.stand_in[t]
        if all(ph is not x for x in self.inputs):
            self.inputs.append(ph)
        return ph

    def body(self, t: Tensor) -> E.Expr:
        def fn(n: object) -> E.Expr | None:
            if isinstance(n, TensorRead):
                idx = tuple(E.substitute(i, fn) for i in n.indices)
                if n.tensor in self.inline:
                    op = n.tensor.op
                    assert isinstance(op, ComputeOp)
                    sub = dict(zip((a.var for a in op.axes), idx, strict=True))
                    return E.substitute(self.body(n.tensor), sub)  # type: ignore[no-any-return]
                if n.tensor is self.plan.fused:
                    return TensorRead(self.tensor(n.tensor), idx, n.dtype)
                return TensorRead(self.external(n.tensor), idx, n.dtype)
            return None

        assert isinstance(t.op, ComputeOp)
        return E.substitute(t.op.body, fn)  # type: ignore[no-any-return]

    def tensor(self, t: Tensor) -> Tensor:
        if t in self.rebuilt:
            return self.rebuilt[t]
        op = t.op
        assert isinstance(op, ComputeOp)
        body = self.body(t)
        axes = tuple(IterVar(E.Var(a.name), a.extent) for a in op.axes)
        sub: dict[E.Var, E.Expr] = {a.var: b.var for a, b in zip(op.axes, axes, strict=True)}
        if isinstance(body, Reduce):
            raxes = tuple(IterVar(E.Var(a.name), a.extent, "reduce") for a in body.axes)
            sub.update({a.var: b.var for a, b in zip(body.axes, raxes, strict=True)})
            body = Reduce(body.combiner, E.substitute(body.source, sub), raxes, body.dtype)
        else:
            body = E.substitute(body, sub)
        new = Tensor(ComputeOp(op.name, axes, body, op.dtype, op.tag), t.shape, t.dtype)
        self.rebuilt[t] = new
        return new


def isolate(t: Tensor) -> tuple[Tensor, list[Tensor], dict[Tensor, Tensor]]:
    """``t`` rebuilt to read every other value through a placeholder: the new tensor, its
    inputs (first-read order) and the original tensor behind each input."""
    cut = _Cut(KernelPlan(t, None, ()), set())
    out = cut.tensor(t)
    back = {ph: orig for orig, ph in cut.stand_in.items()}
    return out, cut.inputs, {ph: back.get(ph, ph) for ph in cut.inputs}


# ---------------------------------------------------------------------------- scheduling


@dataclass(frozen=True)
class GpuKernelDef:
    """A scheduled kernel: ``func`` (lowered, not yet GPU-lowered) with parameters ``inputs``
    then ``output`` (names of the program's buffers), ``statements`` it computes (1-based),
    the knobs used and the inputs promoted to shared memory."""

    name: str
    func: PrimFunc
    inputs: tuple[str, ...]
    output: str
    statements: tuple[int, ...]
    knobs: Resolved
    shared: tuple[str, ...]


@dataclass(frozen=True)
class GpuProgram:
    """The kernels of a definition in launch order; ``buffers`` are the global tensors the host
    allocates between kernels (name -> (shape, dtype))."""

    kernels: tuple[GpuKernelDef, ...]
    buffers: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)


def _fuse_all(st: Stage, axes: list[IterVar]) -> IterVar:
    f = axes[0]
    for a in axes[1:]:
        f = st.fuse(f, a)
    return f


def _cooperative(st: Stage, threads: list[tuple[str, int]], unroll: int) -> None:
    """Spread a copy stage over the block's threads (innermost index first)."""
    f = _fuse_all(st, list(st.axis))
    bound = []
    for tag, n in threads:
        f, t = st.split(f, n)
        bound.append(t)
        st.bind(t, tag)
    st.reorder(f, *reversed(bound))
    if 1 < f.extent <= unroll:
        st.unroll(f)


class _KernelScheduler:
    def __init__(self, out: Tensor, red: Tensor | None, knobs: Resolved) -> None:
        self.out, self.red, self.k = out, red, knobs
        self.sch = create_schedule(out)
        self.shared: list[str] = []

    def run(self) -> Schedule:
        s, k = self.sch, self.k
        red_t = self.red
        if red_t is None and _is_reduce(self.out):
            red_t = s.cache_write(self.out, "local")
        elif red_t is not None:
            s[red_t].set_scope("local")
        out = s[self.out]
        blocks, thr, regs = [], [], []
        for d, a in enumerate(out.axis):
            bo, bi = out.split(a, k.tile[d])
            blocks.append(bo)
            if k.threads[d] > 1:
                t, r = out.split(bi, -(-k.tile[d] // k.threads[d]))
                thr.append((d, t))
                regs.append(r)
            else:
                regs.append(bi)
        if not out.axis:  # a 0-rank value: one thread computes it (the reduction in place)
            self.threads = []
            return s
        out.reorder(*blocks, *(t for _, t in thr), *regs)
        while len(blocks) > 3:  # CUDA grids have three dimensions: fuse the outer ones
            blocks[0:2] = [out.fuse(blocks[0], blocks[1])]
        for b, tag in zip(reversed(blocks), _BLOCK_TAGS, strict=False):
            out.bind(b, tag)
        self.threads = [(tag, k.threads[d]) for (d, _), tag in zip(reversed(thr), _THREAD_TAGS,
                                                                    strict=False)]
        for (_, t), (tag, _) in zip(reversed(thr), self.threads, strict=True):
            out.bind(t, tag)
        if math.prod(r.extent for r in regs) <= k.unroll:
            for r in regs:
                if r.extent > 1:
                    out.unroll(r)
        attach = thr[-1][1] if thr else blocks[-1]
        if red_t is not None:
            self.reduction(s[red_t], out, attach)
        elif k.use_shared:
            self.promote(out, out, blocks[-1], None)
        return s

    def reduction(self, rs: Stage, out: Stage, attach: IterVar) -> None:
        k = self.k
        rs.compute_at(out, attach)
        red = list(rs.reduce_axis)
        assert k.kt is not None
        ko, ki = rs.split(red[0], k.kt)
        rs.reorder(ko, ki, *red[1:], *rs.axis)
        if 1 < k.kt <= k.unroll:
            rs.unroll(ki)
        if math.prod(a.extent for a in rs.axis) <= k.unroll:
            for a in rs.axis:
                if a.extent > 1:
                    rs.unroll(a)
        if k.use_shared:
            self.promote(rs, rs, ko, red[0])

    def promote(self, reader: Stage, at_stage: Stage, at: IterVar,
                r0: IterVar | None) -> None:
        """Stage the inputs the block reads more than once into shared memory."""
        k = self.k
        op = reader.op
        tile = {a.var: k.tile[d] for d, a in enumerate(op.axes)}
        ranges = dict(tile)
        for a in op.reduce_axes:
            ranges[a.var] = k.kt if (r0 is not None and a is r0 and k.kt) else a.extent
        cands = []
        guarded = _guarded(op.body)
        for t in reads_of(op.body):
            if not isinstance(t.op, PlaceholderOp) or t in guarded or not t.shape:
                continue  # (a 0-rank input is one register read: nothing to stage)
            reads = [n for n in E.walk(op.body) if isinstance(n, TensorRead) and n.tensor is t]
            if not any(_reused(n.indices, ranges) for n in reads):
                continue
            nbytes = sum(math.prod(poly.footprint(n.indices, ranges).extents) for n in reads) \
                * E.DTYPES[t.dtype] // 8
            cands.append((nbytes, t))
        budget = k.max_shared_bytes
        for nbytes, t in sorted(cands, key=lambda c: c[0]):
            if nbytes > budget:
                continue
            budget -= nbytes
            cache = self.sch.cache_read(t, "shared", [reader])
            self.sch[cache].compute_at(at_stage, at)
            _cooperative(self.sch[cache], self.threads, k.unroll)
            self.shared.append(t.name)


def _guarded(body: E.Expr) -> set[Tensor]:
    """Tensors read inside a branch of a ``select``: such a read may lie outside the tensor
    where the branch is not taken, so its tile cannot be copied as a whole."""
    out: set[Tensor] = set()
    for n in E.walk(body):
        if isinstance(n, E.Select):
            for br in (n.t, n.f):
                out.update(x.tensor for x in E.walk(br) if isinstance(x, TensorRead))
    return out


def _reused(indices: Sequence[E.Expr], ranges: dict[E.Var, int]) -> bool:
    """Whether the iteration points in ``ranges`` read some element twice (isl: the access
    relation is not injective)."""
    names = {v: f"v{i}" for i, v in enumerate(ranges)}
    try:
        idx = ", ".join(poly.to_isl(i, names) for i in indices)
    except poly.PolyError:
        return False
    dom = " and ".join(f"0 <= {names[v]} < {x}" for v, x in ranges.items())
    m = isl.Map(f"{{ [{', '.join(names.values())}] -> [{idx}] : {dom} }}")
    return not m.is_injective()


def _fit_kt(out: Tensor, red: Tensor | None, knobs: Resolved) -> Resolved:
    """Halve the reduction tile until the promoted tiles fit the shared-memory budget."""
    r = red if red is not None else out
    op = r.op
    if knobs.kt is None or not isinstance(op, ComputeOp) or not op.reduce_axes \
            or not knobs.use_shared:
        return knobs
    kt = knobs.kt
    while kt > 1:
        ranges = {a.var: knobs.tile[d] for d, a in enumerate(op.axes)}
        for i, a in enumerate(op.reduce_axes):
            ranges[a.var] = kt if i == 0 else a.extent
        need = 0
        guarded = _guarded(op.body)
        for t in reads_of(op.body):
            if isinstance(t.op, PlaceholderOp) and t not in guarded:
                for n in E.walk(op.body):
                    if isinstance(n, TensorRead) and n.tensor is t and _reused(n.indices, ranges):
                        need += math.prod(poly.footprint(n.indices, ranges).extents) \
                            * E.DTYPES[t.dtype] // 8
        if need <= knobs.max_shared_bytes:
            break
        kt //= 2
    return Resolved(knobs.tile, knobs.threads, kt, knobs.unroll, knobs.use_shared,
                    knobs.max_shared_bytes)


def map_gpu(f: TcFunc, options: MappingOptions | None = None) -> GpuProgram:
    """The scheduled kernels of ``f`` (module docstring)."""
    opts = options or MappingOptions()
    opts.check()
    plans = plan_kernels(f.outputs, opts.fusion)
    comps = [t for t in post_order(f.outputs) if isinstance(t.op, ComputeOp)]
    roots = {p.root for p in plans}
    fused = {p.fused for p in plans if p.fused is not None}
    inline = {t for t in comps if t not in roots and t not in fused}
    stmt_of = {}
    for s in f.stmts:
        stmt_of[s.core] = s.stmt.index + 1
        stmt_of[s.final] = s.stmt.index + 1
    kernels = []
    buffers: dict[str, tuple[tuple[int, ...], str]] = {}
    outs = set(f.outputs)
    for k, p in enumerate(plans):
        cut = _Cut(p, inline)
        out = cut.tensor(p.root)
        red = cut.rebuilt.get(p.fused) if p.fused is not None else None
        rop = (red or out).op
        assert isinstance(rop, ComputeOp)
        r_ext = rop.reduce_axes[0].extent if rop.reduce_axes else None
        knobs = _fit_kt(out, red, resolve(opts, out.shape, r_ext))
        ks = _KernelScheduler(out, red, knobs)
        sch = ks.run()
        name = f"{f.cdef.name}_k{k}_{p.root.name}"
        func = lower(sch, [*cut.inputs, out], name)
        func = PrimFunc(func.name, func.params, func.body, ((TARGET, "cuda"), (KNOBS, knobs)))
        if p.root not in outs:
            buffers[p.root.name] = (p.root.shape, p.root.dtype)
        covered = sorted({stmt_of[t] for t in (p.root, p.fused, *p.inlined)
                          if t is not None and t in stmt_of})
        kernels.append(GpuKernelDef(name, func, tuple(t.name for t in cut.inputs), p.root.name,
                                    tuple(covered), knobs, tuple(ks.shared)))
    return GpuProgram(tuple(kernels), buffers)
