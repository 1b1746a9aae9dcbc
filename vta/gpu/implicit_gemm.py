"""A logical compute as an implicit GEMM: the GPU schedules for the user's own tensors.

``vta.gpu.ops`` defines matmul and conv2d for the GPU by hand; this module derives the same
``GemmDef`` from *any* logical contraction a user writes (the compute they also schedule onto
the accelerator, ``vta.compiler.accel.pack``), so ``simt_schedule`` and ``wmma_schedule`` apply to
it unchanged and the kernel's parameters are the user's placeholders, by their names and in
their shapes:

* the contraction ``C[axes] = sum_red f(X[..]) * g(Y[..])``: output axes used only by ``X``
  are the GEMM's rows (``m``, row-major in definition order), those used only by ``Y`` its
  columns (``n``), the reduction axes its ``k``. ``A[m, k]`` and ``B[n, k]`` are computes that
  read ``X`` and ``Y`` at the decoded indices (for a convolution ``A`` is the im2col gather of
  the padded input; ``B`` the OIHW weights viewed as ``(OC, IC*KH*KW)``, a free view), zero
  past ``M``/``N``/``K`` when ``pad`` rounds them up to the schedule's tiles;
* the element-wise stages that follow ``C`` (shift, bias, clip...) become stages over ``(M,
  N)`` and the output keeps the user's layout, reading the last of them at ``(m(axes),
  n(axes))``; ``gemm_axes`` fuses the output's row and column axes into ``m`` and ``n``.

The schedules inline every stage but the reduction into the shared-memory copies or the output
stage, so the layout transform costs nothing at run time. Axes used by both operands (a batched
GEMM) and outputs of another shape than the contraction are refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vta.compiler.ir import expr as E
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    compute,
    post_order,
    reduce_axis,
    sum_,
    tensor_reads,
)
from vta.errors import ImplicitGemmError
from vta.gpu.ops import GemmDef
from vta.gpu.schedules import SimtKnobs, WmmaKnobs, fit_knobs, simt_schedule, wmma_schedule

__all__ = ["ImplicitGemmError", "Contraction", "analyse", "gemm_of", "simt", "tensorcore"]




def _vars(rd: TensorRead) -> set[E.Var]:
    return set().union(*(E.free_vars(i) for i in rd.indices)) if rd.indices else set()


@dataclass(frozen=True, eq=False)
class Contraction:
    """The GEMM structure of a logical compute: the reduction ``c`` reading ``x`` and ``y``,
    its row, column and reduction axes, the element-wise ``chain`` after it (the last is the
    output) and the parameters ``args`` (inputs, then the output)."""

    c: Tensor
    x: TensorRead
    y: TensorRead
    rows: tuple[IterVar, ...]
    cols: tuple[IterVar, ...]
    red: tuple[IterVar, ...]
    chain: tuple[Tensor, ...]
    args: tuple[Tensor, ...]

    @property
    def m(self) -> int:
        """Rows of the GEMM (the product of the row axes' extents)."""
        return math.prod(a.extent for a in self.rows)

    @property
    def n(self) -> int:
        """Columns of the GEMM."""
        return math.prod(a.extent for a in self.cols)

    @property
    def k(self) -> int:
        """Reduction length of the GEMM."""
        return math.prod(a.extent for a in self.red)

    @property
    def out(self) -> Tensor:
        """The compute's output (the last stage of the chain, or the reduction)."""
        return self.chain[-1] if self.chain else self.c

    @property
    def in_dtype(self) -> str:
        """The operands' element type."""
        return self.x.tensor.dtype


def _is_pointwise(rd: TensorRead, axes: Sequence[IterVar]) -> bool:
    return len(rd.indices) == len(axes) and all(i is a.var for i, a in
                                                zip(rd.indices, axes, strict=True))


def analyse(args: Sequence[Tensor]) -> Contraction:
    """The implicit-GEMM structure of the compute with parameters ``args`` (module docstring)."""
    outs = [t for t in args if isinstance(t.op, ComputeOp)]
    if len(outs) != 1:
        raise ImplicitGemmError(f"an implicit GEMM has one output; the arguments name "
                                f"{len(outs)} computed tensors ({', '.join(t.name for t in outs)})")
    order = [t for t in post_order(outs) if isinstance(t.op, ComputeOp)]
    gemms = [t for t in order if isinstance(t.op, ComputeOp) and isinstance(t.op.body, Reduce)]
    if len(gemms) != 1:
        raise ImplicitGemmError(f"an implicit GEMM has one reduction; the compute has "
                                f"{len(gemms)} ({', '.join(t.name for t in gemms) or 'none'})")
    c = gemms[0]
    op = c.op
    assert isinstance(op, ComputeOp) and isinstance(op.body, Reduce)
    src = op.body.source
    if op.body.combiner != "sum" or not isinstance(src, E.Mul):
        raise ImplicitGemmError(f"stage {c.name}: not a sum of products ({op.body})")
    x, y = E.strip_casts(src.a), E.strip_casts(src.b)
    if not (isinstance(x, TensorRead) and isinstance(y, TensorRead)):
        raise ImplicitGemmError(f"stage {c.name}: the product must be of two tensor reads, "
                                f"got {src}")
    vx, vy = _vars(x), _vars(y)
    both = [a for a in op.axes if a.var in vx and a.var in vy and a.extent > 1]
    if both:
        raise ImplicitGemmError(f"stage {c.name}: axes {', '.join(a.name for a in both)} index "
                                f"both {x.tensor.name} and {y.tensor.name} (a batched GEMM); "
                                f"the GPU GEMM schedules take one matrix product")
    # an axis of extent 1 that both operands use counts as a row (it changes nothing)
    rows = tuple(a for a in op.axes if a.var in vx and (a.var not in vy or a.extent == 1))
    cols = tuple(a for a in op.axes if a.var not in vx)
    if not rows or not cols:
        raise ImplicitGemmError(f"stage {c.name}: the GEMM needs an output axis only "
                                f"{x.tensor.name} uses (rows) and one only {y.tensor.name} uses "
                                f"(columns)")
    chain: list[Tensor] = []
    inside = {c}
    for t in order[order.index(c) + 1:]:
        top = t.op
        assert isinstance(top, ComputeOp)
        if t.shape != c.shape:
            raise ImplicitGemmError(f"stage {t.name} after the GEMM {c.name} has shape "
                                    f"{t.shape}, not the GEMM's {c.shape} (an element-wise "
                                    f"epilogue keeps the shape)")
        for rd in tensor_reads(top.body):
            if rd.tensor in inside and not _is_pointwise(rd, top.axes):
                raise ImplicitGemmError(f"stage {t.name} reads {rd.tensor.name} at "
                                        f"[{', '.join(map(str, rd.indices))}], not point-wise")
        inside.add(t)
        chain.append(t)
    return Contraction(c, x, y, rows, cols, red=op.body.axes, chain=tuple(chain),
                       args=tuple(args))


def _decode(axes: Sequence[IterVar], v: E.Expr) -> dict[E.Var, E.Expr]:
    """Each axis's value when ``v`` is their row-major linear index."""
    out: dict[E.Var, E.Expr] = {}
    stride = 1
    for a in reversed(axes):
        q = v // stride if stride > 1 else v
        out[a.var] = q % a.extent if a is not axes[0] else q
        stride *= a.extent
    return out


def _linear(axes: Sequence[E.Expr], extents: Sequence[int]) -> E.Expr:
    e = axes[0]
    for a, n in zip(axes[1:], extents[1:], strict=True):
        e = e * n + a
    return e


def _zero(dtype: str) -> E.Expr:
    return E.const(0.0 if dtype.startswith("float") else 0, dtype)


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def _operand(rd: TensorRead, outer: Sequence[IterVar], red: Sequence[IterVar], rows: int,
             cols: int, rp: int, cp: int, name: str, units: Sequence[IterVar] = ()) -> Tensor:
    """``[r, k] -> rd`` at the decoded indices, zero past (rows, cols); ``units`` (axes of
    extent 1 the other operand's rows hold) are 0."""
    def body(r: E.Expr, k: E.Expr) -> E.Expr:
        sub = {**_decode(outer, r), **_decode(red, k), **{u.var: E.const(0) for u in units}}
        v = TensorRead(rd.tensor, tuple(E.substitute(i, sub) for i in rd.indices), rd.dtype)
        conds = ([r < rows] if rp != rows else []) + ([k < cols] if cp != cols else [])
        if not conds:
            return v
        cond = conds[0] if len(conds) == 1 else E.And(conds[0], conds[1])
        return E.select(cond, v, _zero(rd.dtype))

    return compute((rp, cp), body, name)


def gemm_of(args: Sequence[Tensor], pad: tuple[int, int, int] = (1, 1, 1)) -> GemmDef:
    """The ``GemmDef`` of the logical compute with parameters ``args``, ``M``, ``N`` and ``K``
    rounded up to multiples of ``pad`` inside the computation (module docstring). Its ``args``
    are the user's placeholders (same objects) and a new output with the user's name and
    shape."""
    g = analyse(args)
    M, N, K = g.m, g.n, g.k
    mp, np_, kp = _up(M, pad[0]), _up(N, pad[1]), _up(K, pad[2])
    A = _operand(g.x, g.rows, g.red, M, K, mp, kp, f"{g.x.tensor.name}_im2col")
    units = [a for a in g.rows if a.var in _vars(g.y)]
    B = _operand(g.y, g.cols, g.red, N, K, np_, kp, f"{g.y.tensor.name}_mat", units)
    cop = g.c.op
    assert isinstance(cop, ComputeOp) and isinstance(cop.body, Reduce)
    src = cop.body.source
    k = reduce_axis(kp, "k")

    def gemm(m: E.Expr, n: E.Expr) -> E.Expr:
        def fn(e: object) -> E.Expr | None:
            if e is g.x:
                return A[m, k.var]
            if e is g.y:
                return B[n, k.var]
            return None

        return sum_(E.substitute(src, fn), k)

    C = compute((mp, np_), gemm, g.c.name if g.chain else f"{g.c.name}_gemm")
    extents = [a.extent for a in cop.axes]
    new: dict[Tensor, Tensor] = {g.c: C}
    inline: list[Tensor] = [A, B]
    if g.x.tensor not in g.args and isinstance(g.x.tensor.op, ComputeOp):
        inline += _upstream(g.x.tensor, g.args)
    if g.y.tensor not in g.args and isinstance(g.y.tensor.op, ComputeOp):
        inline += [t for t in _upstream(g.y.tensor, g.args) if t not in inline]
    for t in g.chain:
        top = t.op
        assert isinstance(top, ComputeOp)
        last = t is g.out

        def rewrite(body: E.Expr, m: E.Expr, n: E.Expr, axes_sub: dict[E.Var, E.Expr],
                    top: ComputeOp = top) -> E.Expr:
            def fn(e: object) -> E.Expr | None:
                if isinstance(e, TensorRead) and e.tensor in new:
                    return TensorRead(new[e.tensor], (m, n), e.dtype)
                if isinstance(e, TensorRead):
                    return TensorRead(e.tensor, tuple(E.substitute(i, axes_sub)
                                                      for i in e.indices), e.dtype)
                return None

            return E.substitute(body, fn)

        if last:
            names = [a.name for a in top.axes]
            fn_out = _out_fn(top, g, rewrite, extents)
            nt = compute(t.shape, fn_out, t.name)
            assert [a.name for a in nt.op.axes] == names  # type: ignore[attr-defined]
        else:
            def ew(m: E.Expr, n: E.Expr, top: ComputeOp = top) -> E.Expr:
                sub = {**_decode(g.rows, m), **_decode(g.cols, n)}
                sub = {a.var: sub[b.var] for a, b in zip(top.axes, cop.axes, strict=True)}
                return rewrite(top.body, m, n, sub)

            nt = compute((mp, np_), ew, t.name)
            inline.append(nt)
        new[t] = nt
    out = new[g.out] if g.chain else None
    if out is None:  # the reduction is the output: copy it out in the user's layout
        out = compute(g.c.shape, _out_fn(cop, g, lambda b, m, n, s: b, extents, copy=C),
                      g.c.name)
    params = tuple(out if t is g.out else t for t in g.args)

    def gemm_axes(s: Schedule) -> tuple[IterVar, IterVar]:
        st = s[out]
        pos = {id(a): k for k, a in enumerate(cop.axes)}
        ax = list(st.axis)
        rows = [ax[pos[id(a)]] for a in g.rows]
        cols = [ax[pos[id(a)]] for a in g.cols]
        if rows + cols != ax:
            st.reorder(*rows, *cols)
        m = rows[0]
        for r in rows[1:]:
            m = st.fuse(m, r)
        n = cols[0]
        for c in cols[1:]:
            n = st.fuse(n, c)
        return m, n

    contiguous = (isinstance(g.x.tensor.op, PlaceholderOp) and len(g.red) == 1
                  and g.x.indices[-1] is g.red[0].var
                  and all(g.red[0].var not in E.free_vars(i) for i in g.x.indices[:-1]))
    return GemmDef(g.out.name, mp, np_, kp, params, A, B, C, out, tuple(inline), gemm_axes,
                   g.in_dtype, a_contiguous=contiguous)


def _out_fn(top: ComputeOp, g: Contraction,
            rewrite: Callable[..., E.Expr], extents: list[int],
            copy: Tensor | None = None) -> Callable[..., E.Expr]:
    """The output stage's body over the user's axes: chain tensors read at (m(axes), n(axes))."""
    cop = g.c.op
    assert isinstance(cop, ComputeOp)
    pos = {id(a): k for k, a in enumerate(cop.axes)}

    def body(*ax: E.Expr) -> E.Expr:
        m = _linear([ax[pos[id(a)]] for a in g.rows], [a.extent for a in g.rows])
        n = _linear([ax[pos[id(a)]] for a in g.cols], [a.extent for a in g.cols])
        if copy is not None:
            return copy[m, n]
        sub = {a.var: v for a, v in zip(top.axes, ax, strict=True)}
        return rewrite(top.body, m, n, sub)

    import inspect
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in top.axes])
    return body


def _upstream(t: Tensor, params: Sequence[Tensor]) -> list[Tensor]:
    """Compute stages feeding ``t`` (``t`` included), producers first, up to the params."""
    return [u for u in post_order([t]) if isinstance(u.op, ComputeOp) and u not in params]


def simt(args: Sequence[Tensor], knobs: SimtKnobs | None = None
         ) -> tuple[Schedule, list[Tensor]]:
    """The SIMT schedule (``vta.gpu.schedules.simt_schedule``) of the logical compute with
    parameters ``args``: ``(schedule, parameters)`` for ``vta.build``."""
    g = gemm_of(args)
    return simt_schedule(g, knobs or SimtKnobs()), list(g.args)


def tensorcore(args: Sequence[Tensor], knobs: WmmaKnobs | None = None
               ) -> tuple[Schedule, list[Tensor]]:
    """The tensor-core schedule (``vta.gpu.schedules.wmma_schedule``) of the logical compute
    with parameters ``args``, its GEMM padded to the schedule's tiles: ``(schedule,
    parameters)`` for ``vta.build``. M and N must be at least 16 (one tensor-core tile)."""
    g0 = analyse(args)
    if knobs is None:
        vec = 16 if g0.in_dtype == "int8" else 8
        knobs = WmmaKnobs(vec=vec) if len(g0.rows) == 1 and len(g0.red) == 1 else \
            WmmaKnobs(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, vec=vec)
    kb = fit_knobs(knobs, g0.m, g0.n, g0.k)
    g = gemm_of(args, pad=(kb.bm, kb.bn, kb.bk))
    return wmma_schedule(g, kb), list(g.args)
