"""DMA insertion: copy nests between global memory and a scratchpad become 2-D DMAs.

Pre:  scratchpad allocation has run. A copy is a perfect loop nest (a cache stage, or the
      loops of the output stage left inside its tile loop) whose body is one ``BufferStore``
      between a global buffer and an on-chip buffer: a load ``onchip[i] = g[f(i)]`` or
      ``= select(in_bounds, g[f(i)], 0)`` (a padding stage inlined into the copy; the condition
      must be a conjunction of bounds ``0 <= f_d(i)`` / ``f_d(i) < shape_d`` of ``g``), or a
      store ``g[f(i)] = cast(acc[i])`` (the out write; the narrowing is the STORE from the out
      scratchpad). The two innermost indices of both sides are the entry.
Post: each copy nest is replaced by ``DmaLoad``/``DmaStore`` statements under
      ``AttrStmt(STAGE, name)``: loops of one iteration vanish, the innermost loops
      contiguous in both SRAM and DRAM merge into the row (x), the next loops into the rows (y,
      any DRAM stride), and loops that do not merge stay as loops around several DMAs (a >2-D
      copy is split). Padding comes from the isl footprint of the copy's global box
      (``poly.footprint``, parametric in the tile loops) clamped to the tensor
      (``Box.clamp``): the in-bounds part is what the DMA reads, the rest its zero pads on four
      sides (expressions in the tile loops). Rows past the tensor's end beyond what the pad field
      holds (``hw.isa.pad`` bits) are left unwritten: they only feed output rows past the real
      output (discarded).
      Other statements are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vta.compiler.accel.passes._common import (
    ONCHIP,
    affine,
    entry_shape,
    flat_entry,
    loop_nest,
    map_stmt,
    sram_map,
    strip_cast,
)
from vta.compiler.accel.vta_ir import DmaLoad, DmaStore
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import CompileError

__all__ = ["inject_dma"]


@dataclass
class _Dim:
    var: E.Var
    ext: int
    sram: int  # coefficient in the SRAM entry index
    dram: int  # coefficient in the DRAM entry index
    gdim: int | None  # the global dim this loop walks with coefficient 1 (padding), if any


def inject_dma(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)
    max_pad = (1 << hw.isa.pad) - 1
    seen: dict[int, tuple[S.BufferStore, bool]] = {}  # ``_may_copy``'s answers

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key is S.STAGE:
            new = _copy_nest(func, str(s.value), s.body, bases, max_pad, seen)
            return s if new is _STORE else None if new is None else \
                S.AttrStmt(S.STAGE, s.value, new[0])
        if isinstance(s, S.For):  # the copy-out left inside the output stage's tile loop
            new = _copy_nest(func, "copy", s, bases, max_pad, seen)
            return s if new is _STORE else None if new is None else \
                S.AttrStmt(S.STAGE, new[1], new[0])
        return None

    return func.with_body(map_stmt(func.body, rewrite))


def _in_bounds_dims(where: str, cond: E.Expr, gidx: tuple[E.Expr, ...],
                    glob: S.Buffer) -> set[int]:
    """The dims of ``glob`` whose bounds ``cond`` tests; an error unless every conjunct is a
    bound ``0 <= gidx[d]`` or ``gidx[d] < shape[d]`` (then the select is exactly the padding)."""
    conj: list[E.Expr] = []
    todo = [cond]
    while todo:
        c = todo.pop()
        if isinstance(c, E.And):
            todo += [c.a, c.b]
        else:
            conj.append(c)
    dims: set[int] = set()
    forms = [poly.linear_form(e) for e in gidx]  # each index's, once for every conjunct
    for c in conj:
        if not isinstance(c, E.Cmp) or c.op not in ("<", "<=", ">", ">="):
            raise CompileError(f"{where}: select condition {c} is not a bound of {glob.name}")
        terms, const = poly.linear_form(_as_nonnegative(c))
        if not terms:  # an index the unit loops made constant
            if const >= 0:
                continue
            raise CompileError(f"{where}: select condition {c} is never true")
        for d, (form, n) in enumerate(zip(forms, glob.shape, strict=True)):
            if _bounds_index(terms, const, form, n):
                dims.add(d)
                break
        else:
            raise CompileError(f"{where}: select condition {c} is not a bound of {glob.name}'s "
                               f"index {list(gidx)}")
    return dims


def _as_nonnegative(c: E.Cmp) -> E.Expr:
    """Bound ``c`` (an order comparison) as the expression ``lin`` of ``lin >= 0``: only the
    one its operator needs is built (each ``-`` folds and allocates a node; a padded load's
    condition has a conjunct per bound, every candidate of a layer)."""
    if c.op == ">=":
        return c.a - c.b
    if c.op == ">":
        return c.a - c.b - 1
    if c.op == "<=":
        return c.b - c.a
    return c.b - c.a - 1


def _may_copy(store: S.BufferStore, seen: dict[int, tuple[S.BufferStore, bool]]) -> bool:
    """Whether ``store`` reads the buffer a copy into its buffer would read (a global one into
    a scratchpad, an acc one into a global): else no substitution of its loops' variables can
    make it a copy (substituting indices never changes which buffers the loads read), and
    ``_copy_nest`` refuses it at once, without substituting the unit loops. Every compute
    nest is refused here, at each loop of it that the statement rewriter visits (``seen``: the
    answer per statement, by identity, the statement kept alive: every loop of a nest peels to
    the same one)."""
    hit = seen.get(id(store))
    if hit is None:
        dst = store.buffer.scope
        src = "global" if dst in ONCHIP else "acc" if dst == "global" else None
        hit = seen[id(store)] = (store, src is not None and any(
            isinstance(n, S.BufferLoad) and n.buffer.scope == src for n in E.walk(store.value)))
    return hit[1]


def _bounds_index(terms: poly.LinearTerms, const: int, index: tuple[poly.LinearTerms, int],
                  n: int) -> bool:
    """Whether ``terms + const >= 0`` (a conjunct's linear form) is ``index >= 0`` or
    ``n - 1 - index >= 0`` (``index``: the linear form of an index into a dim of extent
    ``n``): the two forms are equal, or sum to the constant ``n - 1``. ``linear_form`` is
    additive (a difference's form is the forms' difference, zero terms dropped), so this is
    ``linear_form(lin - e)`` (resp. ``lin - (n - 1 - e)``) being zero without building and
    decomposing the difference for every conjunct and dim."""
    iterms, iconst = index
    if const == iconst and terms == iterms:
        return True
    return (const == n - 1 - iconst and len(terms) == len(iterms)
            and all(terms.get(a) == -k for a, k in iterms.items()))


#: ``_copy_nest``'s answer for a perfect nest around a store that is not a copy: whether it is
#: depends on the store alone, so no loop of the nest is one either, and a store holds no
#: statement to rewrite: the nest is kept whole, its loops not peeled again one by one
_STORE: Any = object()


def _copy_nest(func: S.PrimFunc, name: str, nest: S.Stmt, bases: dict[S.Buffer, E.Expr],
               max_pad: int, seen: dict[int, tuple[S.BufferStore, bool]]
               ) -> tuple[S.Stmt, str] | None:
    """The DMA statements of copy nest ``nest``; ``_STORE`` where it is a perfect nest around a
    store that is not a copy; None where it is no perfect nest around a store (its statements
    are rewritten in turn)."""
    if not isinstance(nest, S.For):
        return None
    try:
        loops, body = loop_nest(nest)
    except CompileError:
        return None
    if not isinstance(body, S.BufferStore):
        return None
    if not _may_copy(body, seen):
        return _STORE
    unit = {v: E.IntImm(0) for v, n in loops if n == 1}
    if unit:
        body = E.substitute(body, unit)
        loops = [(v, n) for v, n in loops if n != 1]
    value = strip_cast(body.value)
    cond = None
    if isinstance(value, E.Select):
        if not (isinstance(value.f, E.IntImm) and value.f.value == 0):
            return _STORE
        cond, value = value.cond, strip_cast(value.t)
    if not isinstance(value, S.BufferLoad):
        return _STORE
    dst, src = body.buffer, value.buffer
    if dst.scope in ONCHIP and src.scope == "global":
        onchip, oidx, glob, gidx, is_load = dst, body.indices, src, value.indices, True
    elif dst.scope == "global" and src.scope == "acc":
        onchip, oidx, glob, gidx, is_load = src, value.indices, dst, body.indices, False
    else:
        return _STORE
    if name == "copy":
        name = glob.name
    where = f"{func.name}: stage {name}"
    if oidx[-2:] != gidx[-2:] or not all(isinstance(i, (E.Var, E.IntImm)) for i in oidx[-2:]):
        raise CompileError(f"{where}: the entry dims of {onchip.name} and {glob.name} must be "
                           f"copied whole (same innermost two indices)")
    if glob.shape[-2:] != onchip.shape[-2:]:
        raise CompileError(f"{where}: entry shapes differ: {glob.name} {glob.shape[-2:]} vs "
                           f"{onchip.name} {onchip.shape[-2:]}")
    entry_vars = {i for i in oidx[-2:] if isinstance(i, E.Var)}
    outer = [(v, n) for v, n in loops if v not in entry_vars]
    ovars = [v for v, _ in outer]
    s_coef, s_rest = affine(flat_entry(onchip, oidx), ovars)
    d_coef, d_rest = affine(flat_entry(glob, gidx), ovars)
    if not isinstance(s_rest, E.IntImm) or s_rest.value != 0:
        raise CompileError(f"{where}: {onchip.name} must be indexed from 0 by the copy loops")
    padded: dict[E.Var, tuple[int, E.Expr]] = {}  # var -> (global dim, offset of that dim)
    whole: list[E.Expr] = []
    clamped = None
    at: dict[int, int] = {}  # a tested global dim -> its place in ``clamped``
    if cond is not None:
        tested = sorted(_in_bounds_dims(where, cond, gidx, glob))
        nd = len(entry_shape(glob))
        box = poly.footprint(gidx[:nd], dict(outer))
        # only the tested dims' clamps are read (an untested dim is never padded): the
        # others' expressions are not built
        clamped = poly.Box(tuple(box.mins[d] for d in tested),
                           tuple(box.extents[d] for d in tested)
                           ).clamp([0] * len(tested), [glob.shape[d] for d in tested])
        at = {d: k for k, d in enumerate(tested)}
        for gd in tested:
            c, rest = affine(gidx[gd], ovars)
            if not c:
                # a one-element slice (one input row: a 1-row kernel, so no padding rows before
                # the image): in bounds, or past the end where it feeds only discarded outputs
                # and is skipped (in-bounds extent 0 or 1)
                whole.append(clamped.extents[at[gd]])
                continue
            if len(c) != 1 or next(iter(c.values())) != 1:
                raise CompileError(f"{where}: padded dimension {gd} of {glob.name} is walked "
                                   f"as {gidx[gd]}; a LOAD pads only unit-stride rows")
            padded[next(iter(c))] = (gd, rest)
    dims = [_Dim(v, n, s_coef.get(v, 0), d_coef.get(v, 0), padded.get(v, (None,))[0])
            for v, n in outer]
    base = bases[onchip]
    mem = onchip.scope
    # x: the innermost loops contiguous in SRAM and DRAM
    xs: list[_Dim] = []
    rest_dims = list(dims)
    run = 1
    while rest_dims:
        d = rest_dims[-1]
        if d.sram == run and d.dram == run and (not xs or (d.gdim is None and xs[-1].gdim is None)):
            xs.append(rest_dims.pop())
            run *= d.ext
        else:
            break
    if not xs:  # nothing contiguous: one entry per row, rows from the innermost loop
        cols = 1
    else:
        cols = run
    ys: list[_Dim] = []
    rows = 1
    stride = None
    while rest_dims:
        d = rest_dims[-1]
        if d.sram != cols * rows or d.ext == 0:
            break
        if stride is None:
            stride = d.dram
        elif d.dram != stride * rows or d.gdim is not None or (ys and ys[-1].gdim is not None):
            break
        ys.append(rest_dims.pop())
        rows *= d.ext
    if stride is None:
        stride = cols
    loop_dims = rest_dims  # stay as loops around the DMA
    for d in loop_dims:
        if d.gdim is not None:
            raise CompileError(f"{where}: dimension {d.gdim} of {glob.name} needs padding but is"
                               f" not one of the DMA's two dimensions")
    # padding: only a single-loop x or y can be padded
    zero = E.IntImm(0)
    pad: dict[str, E.Expr] = {"y0": zero, "y1": zero, "x0": zero, "x1": zero}
    env_sub: dict[E.Var, E.Expr] = {}
    x_size: E.Expr = E.IntImm(cols)
    y_size: E.Expr = E.IntImm(rows)
    for axis, group, total in (("x", xs, cols), ("y", ys, rows)):
        pd = [d for d in group if d.gdim is not None]
        if not pd:
            for d in group:
                env_sub[d.var] = zero
            continue
        if len(group) != 1:
            raise CompileError(f"{where}: a padded DMA dimension must be a single loop")
        d = group[0]
        gdim, _off = padded[d.var]
        assert clamped is not None
        p0, p1 = clamped.pad_before[at[gdim]], clamped.pad_after[at[gdim]]
        if axis == "y":
            y_size = E.IntImm(total) - p0 - p1
            p1 = E.min_(p1, max_pad)  # rows past the tensor feed only discarded outputs
        else:
            x_size = E.IntImm(total) - p0 - p1
        pad[axis + "0"], pad[axis + "1"] = p0, p1
        env_sub[d.var] = p0
    for valid in whole:
        y_size = y_size * valid
    dram_base = E.substitute(d_rest + sum((E.IntImm(d.dram) * d.var for d in dims), E.IntImm(0)),
                             env_sub) if dims else d_rest
    sram_base = base + sum((E.IntImm(d.sram) * d.var for d in loop_dims), E.IntImm(0))
    stmt: S.Stmt
    if is_load:
        stmt = DmaLoad(mem, onchip, sram_base, glob, dram_base, y_size, x_size, E.IntImm(stride),
                       pad["y0"], pad["y1"], pad["x0"], pad["x1"])
    else:
        stmt = DmaStore(onchip, sram_base, glob, dram_base, y_size, x_size, E.IntImm(stride))
    for d in reversed(loop_dims):
        stmt = S.For(d.var, E.IntImm(0), E.IntImm(d.ext), stmt)
    return stmt, name
