"""Which schedule decisions size an on-chip tile, for errors that name them.

When a buffer does not fit its scratchpad (``passes.scratchpad_alloc.ScratchpadOverflow``) the
pass knows the buffer and the bytes; the user wrote splits. ``explain_overflow`` joins the two:
for each dimension of the buffer it reads, in the lowered function, which loops index it (the
buffer's readers' loop variables are named after the schedule's axes), finds the split that
made each loop, and says how large that factor may be for the buffer to fit, listing the
factors that divide the split axis (whole tiles) up to that bound. A buffer's size is the
product of its dimensions, so a dimension indexed by one loop with unit stride scales exactly
with that loop's extent: the bound is exact for such dimensions, and only they are reported.
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.relations import Split, leaf_extents
from vta.compiler.ir.schedule import Schedule, Stage, divisors

__all__ = ["explain_overflow"]


def _loads(func: S.PrimFunc, name: str) -> list[S.BufferLoad]:
    return [n for n in E.walk(func.body) if isinstance(n, S.BufferLoad) and n.buffer.name == name]


def _split_of(stages: list[Stage], var_name: str, ext: int) -> tuple[Stage, Split] | None:
    """The split that gives the loop named ``var_name`` its extent ``ext``: the one whose inner
    axis it is, or else (an attached stage's own axis, sized by the tile of the stage it is
    computed in; cache stages keep their axes' names) the split of an axis of that name whose
    inner extent is ``ext``. None unless exactly one matches."""
    def inner_ext(st: Stage, r: Split) -> int:
        return leaf_extents(st, {iv: iv.extent for iv in (*st.axis, *st.reduce_axis)})[r.inner]

    splits = [(st, r) for st in stages for r in st.relations if isinstance(r, Split)]
    found = [(st, r) for st, r in splits if r.inner.name == var_name]
    if not found:
        found = [(st, r) for st, r in splits
                 if r.parent.name == var_name and inner_ext(st, r) == ext]
    return found[0] if len(found) == 1 else None


def explain_overflow(sch: Schedule, func: S.PrimFunc, buffer: str, entries: int, copies: int,
                     available: int) -> str:
    """Sentences naming the splits that size ``buffer`` (``entries`` per copy, ``copies``
    virtual-thread copies, ``available`` entries left) and the factors that would fit; empty
    when no dimension is sized by a single split."""
    loads = _loads(func, buffer)
    alloc = next((n for n in E.walk(func.body) if isinstance(n, S.Allocate)
                  and n.buffer.name == buffer), None)
    if not loads or entries <= 0 or alloc is None:
        return ""
    # loops inside the allocation: the ones a tile of the buffer spans
    inside = {n.var for n in E.walk(alloc.body) if isinstance(n, S.For)}
    shape = next(n.buffer.shape for n in loads)
    outer = shape[:-2] if len(shape) > 2 else shape
    notes = []
    for d, ext in enumerate(outer):
        if ext <= 1:
            continue
        tile_vars = {v for n in loads for v in E.free_vars(n.indices[d]) if v in inside}
        names = {v.name for v in tile_vars}
        if len(names) != 1 or not all(_unit_in(n.indices[d], tile_vars) for n in loads):
            continue
        hit = _split_of(sch.stages, next(iter(names)), ext)
        if hit is None:
            continue
        st, r = hit
        ext_all = leaf_extents(st, {iv: iv.extent for iv in (*st.axis, *st.reduce_axis)})
        if ext_all.get(r.inner) != ext or r.factor is None:
            continue
        rest = entries // ext
        fit = available // (rest * copies)
        n = ext_all[r.parent]
        ok = [f for f in divisors(n) if f <= fit]
        if not ok:
            notes.append(f"dimension {d} of {buffer} ({ext}) comes from the split of "
                         f"{r.parent.name} by {r.factor} in stage {st.name}; even a factor of 1 "
                         f"does not fit beside its other dimensions")
            continue
        notes.append(f"dimension {d} of {buffer} ({ext}) comes from the split of "
                     f"{r.parent.name} by factor {r.factor} in stage {st.name}: a factor up to "
                     f"{fit} fits, dividing {r.parent.name}'s extent {n}: "
                     f"{', '.join(map(str, ok))}")
    return "; ".join(notes)


def _unit_in(e: E.Expr, tile_vars: set[E.Var]) -> bool:
    """``e`` has stride 1 in the tile loop it uses (other terms are outer loops: the base)."""
    terms, _ = poly.linear_form(e)
    inner = {v: c for v, c in terms.items() if v in tile_vars}
    return len(inner) == 1 and next(iter(inner.values())) == 1
