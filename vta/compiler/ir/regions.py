"""Bound inference: the region of each stage that its readers need, per attach point.

A stage computed at a loop of another (``compute_at``) only produces what the readers' iterations
under that loop read. For each such stage this module builds one isl set: the image of every
reader's accesses over the reader's iterations, parametric in the loops that enclose the stage
(the attach path), and takes its bounding box (``poly.set_box``): an affine start in those loop
variables and a constant extent. One isl call per (stage, attach point), never per iteration.

Memory that is shared by the threads of a block is not per-thread: for a ``shared`` stage the
enclosing ``threadIdx`` loops are *relaxed* (they range instead of being fixed), so the box is
the whole block's need and its start does not depend on the thread (TVM's rule); a ``global``
stage relaxes block loops too.

Readers are cut at the tensor's end, so for the last (partial) tile isl may give the box's start
piecewise; ``_single_piece`` picks the piece that is a lower bound everywhere, keeping the box
as small as a whole tile's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.relations import Split, leaf_extents
from vta.compiler.ir.schedule import AttachAt, Schedule, Stage
from vta.compiler.ir.stmt import ForKind
from vta.compiler.ir.tensor import IterVar, TensorRead
from vta.errors import RegionError

__all__ = ["RegionError", "StageRegion", "Loop", "infer_regions", "tensor_reads"]


#: a loop of the attach path: the stage that owns it and its leaf axis
Loop = tuple[Stage, IterVar]


@dataclass(frozen=True)
class StageRegion:
    """Where a stage's root axes run: ``base[d] + [0, extent[d])`` for each spatial root axis
    (``base`` in the enclosing loops' variables), reduction axes over their whole extent;
    ``overhang[d]`` when the box can pass the tensor's end (the last tile): lowering guards it;
    ``extents`` of every iteration variable of the stage (roots, splits, fuses)."""

    base: tuple[E.Expr, ...]
    extent: tuple[int, ...]
    overhang: tuple[bool, ...]
    extents: Mapping[IterVar, int]


def _relaxed(stage: Stage, loop: Loop) -> bool:
    attr = loop[0].iter_attrs.get(loop[1])
    if attr is None or attr.kind is not ForKind.THREAD_BINDING or attr.thread is None:
        return False
    if stage.scope == "shared":
        return attr.thread.startswith("threadIdx")
    if stage.scope == "warp":  # shared by the 32 lanes (threadIdx.x) of one warp
        return attr.thread == "threadIdx.x"
    return stage.scope == "global"


class _Namer:
    def __init__(self) -> None:
        self.names: dict[object, str] = {}

    def __call__(self, key: object, prefix: str) -> str:
        if key not in self.names:
            self.names[key] = f"{prefix}{len(self.names)}"
        return self.names[key]


def infer_regions(sch: Schedule, stages: Sequence[Stage],
                  reads: Mapping[Stage, Sequence[TensorRead]], env: Mapping[Stage, list[Loop]],
                  loopvar: Mapping[IterVar, E.Var]) -> dict[Stage, StageRegion]:
    """Bounds of every stage in ``stages`` (producers first). ``reads`` are the tensor reads
    of the stages' definitions with inlined stages substituted, in pre-order (``tensor_reads``:
    each definition walked once, by the caller, for every question asked of it here); ``env``
    the loops enclosing each stage; ``loopvar`` the variable of each leaf loop (bases are
    expressed in them)."""
    out: dict[Stage, StageRegion] = {}
    tensors = {c: [n.tensor for n in reads[c]] for c in stages}
    for st in reversed(stages):
        readers = [c for c in stages if c is not st and st.tensor in tensors[c]]
        if isinstance(st.attach, AttachAt):
            base, ext, over = _attached(st, readers, reads, env, loopvar, out)
        else:
            base = tuple(E.const(0) for _ in st.axis)
            ext = tuple(iv.extent for iv in st.axis)
            over = tuple(False for _ in st.axis)
        root = {iv: x for iv, x in zip(st.axis, ext, strict=True)}
        root.update({iv: iv.extent for iv in st.reduce_axis})
        out[st] = StageRegion(base, ext, over, leaf_extents(st, root))
    return out


def tensor_reads(body: E.Expr) -> list[TensorRead]:
    """The tensor reads under ``body``, in pre-order (``infer_regions``' ``reads``)."""
    return [n for n in E.walk(body) if isinstance(n, TensorRead)]


def _attached(st: Stage, readers: list[Stage], reads: Mapping[Stage, Sequence[TensorRead]],
              env: Mapping[Stage, list[Loop]], loopvar: Mapping[IterVar, E.Var],
              done: Mapping[Stage, StageRegion]) -> tuple[tuple[E.Expr, ...], tuple[int, ...],
                                                          tuple[bool, ...]]:
    assert isinstance(st.attach, AttachAt)
    mine = env[st]
    params = [lp for lp in mine if not _relaxed(st, lp)]
    nm = _Namer()
    pnames = [nm(loopvar[lp[1]], "p") for lp in params]
    inside = all(_inside(st, c, env) for c in readers)
    pkey = dict(zip((loopvar[lp[1]] for lp in params), pnames, strict=True))
    dims = _closed_box(st, readers, reads, env, loopvar, done, pkey) if inside else None
    text = ""
    if dims is None:  # the readers' pieces as isl text (set_box: closed form or isl)
        pieces = []
        for c in readers:
            if not _inside(st, c, env):
                where = f"{st.attach.stage.name}.{st.attach.axis.name}"
                raise RegionError(f"stage {st.name} is computed at {where} but stage "
                                  f"{c.name} reads it outside that loop")
            pieces += _reader_pieces(st, c, reads[c], env[c], done, loopvar, nm, params)
        text = f"[{', '.join(pnames)}] -> {{ {'; '.join(pieces)} }}"
        dims = poly.set_box(text)
    by_name = {n: k for k, n in nm.names.items() if isinstance(k, E.Var)}
    ranges = {loopvar[lp[1]]: done[lp[0]].extents[lp[1]] for lp in params}
    base, ext, over = [], [], []
    for d, (box, n) in enumerate(zip(dims, st.tensor.shape, strict=True)):
        if (box.lo_min is not None and box.lo_min < 0) or (box.hi_max is not None
                                                            and box.hi_max >= n):
            raise RegionError(f"stage {st.name}: its readers access dimension {d} from "
                              f"{box.lo_min} to {box.hi_max}, outside [0, {n})")
        if box.lo is None:
            box = _single_piece(text, d) or box
        base.append(poly.aff_to_expr(box.lo, by_name) if box.lo is not None
                    else E.const(box.lo_min or 0))
        ext.append(box.extent)
        # the base's largest value over the whole loop ranges: a loop iteration whose readers
        # need nothing (a thread past the tensor's end) still runs the copy
        lo = box.lo
        top = _top(((by_name[p], c) for p, c in lo.terms), lo.const, ranges) \
            if isinstance(lo, poly.BoxLo) else _max_over(base[-1], ranges)
        over.append(box.lo_max is None or box.lo_max + box.extent > n
                    or top is None or top + box.extent > n)
    return tuple(base), tuple(ext), tuple(over)


def _inside(st: Stage, c: Stage, env: Mapping[Stage, list[Loop]]) -> bool:
    """Whether reader ``c`` runs inside every loop that encloses ``st`` (it reads ``st`` only
    there)."""
    path = [*env[c], *((c, iv) for iv in c.leaf_iter_vars)]
    return all(any(lp[0] is q[0] and lp[1] is q[1] for q in path) for lp in env[st])


#: an affine form over the variables of one reader's piece: (coefficient by key, constant);
#: a key is a parameter's name (``_Namer``'s, as in the isl text) or a loop variable
_Form = tuple[dict[object, int], int]


def _form(e: E.Expr, val: Mapping[E.Var, _Form]) -> _Form | None:
    """The affine form of ``e`` over the forms ``val`` of its variables: exactly the linear form
    ``set_box``'s closed form parses from ``poly.to_isl(e, ...)`` (sums, differences, products
    with a constant operand, integer casts; a variable's text is its form's). None for
    anything else (a division, a min, an unbound variable): the text route decides those."""
    if isinstance(e, E.Var):
        return val.get(e)
    if isinstance(e, E.IntImm):
        return ({}, e.value) if type(e.value) is int else None
    t = type(e)
    if t is E.Add or t is E.Sub:
        a, b = _form(e.a, val), _form(e.b, val)  # type: ignore[attr-defined]
        if a is None or b is None:
            return None
        sign = 1 if t is E.Add else -1
        coef = dict(a[0])
        for k, x in b[0].items():
            coef[k] = coef.get(k, 0) + sign * x
        return coef, a[1] + sign * b[1]
    if t is E.Mul:
        a, b = e.a, e.b  # type: ignore[attr-defined]
        if type(b) is not E.IntImm:
            a, b = b, a
        if type(b) is not E.IntImm:
            return None
        f = _form(a, val)
        return None if f is None else _scaled(f, b.value)
    if t is E.Cast and not e.dtype.startswith("float"):
        return _form(e.value, val)  # type: ignore[attr-defined]
    return None


def _scaled(f: _Form, k: int) -> _Form:
    return {v: c * k for v, c in f[0].items()}, f[1] * k


def _summed(a: _Form, b: _Form) -> _Form:
    coef = dict(a[0])
    for k, x in b[0].items():
        coef[k] = coef.get(k, 0) + x
    return coef, a[1] + b[1]


def _piece(st: Stage, c: Stage, reads: Sequence[TensorRead], cenv: list[Loop],
           done: Mapping[Stage, StageRegion], loopvar: Mapping[IterVar, E.Var],
           pkey: Mapping[E.Var, str]) -> list[tuple[dict[object, int], list[_Form]]] | None:
    """``_reader_pieces``' pieces as ``box_closed_form`` reads them (each piece's variable
    ranges and its outputs' forms), built from the expressions without writing the text, or
    None where the text is not box-shaped (``_closed_box``)."""
    cb = done[c]
    val: dict[E.Var, _Form] = {}
    ranges: dict[object, int] = {}
    checks: list[tuple[_Form, int]] = []  # ``0 <= form < n``, each implied by the ranges
    for owner, iv in [*cenv, *((c, iv) for iv in c.leaf_iter_vars)]:
        ext = done[owner].extents[iv]
        v = loopvar[iv]
        key = pkey.get(v)
        if key is None and ext == 1:  # a one-iteration loop: its variable is 0
            val[v] = ({}, 0)
            continue
        k: object = v if key is None else key
        val[v] = ({k: 1}, 0)
        if k in ranges:
            checks.append((val[v], ext))
        elif ext <= 0:
            return None  # an empty range: isl's
        else:
            ranges[k] = ext
    rel: dict[IterVar, _Form] = {iv: val[loopvar[iv]] for iv in c.leaf_iter_vars}
    defined = 0
    for r in reversed(c.relations):
        if isinstance(r, Split) and r.parent not in rel and r.outer in rel and r.inner in rel:
            rel[r.parent] = _summed(_scaled(rel[r.outer], cb.extents[r.inner]), rel[r.inner])
            defined += 1
    if defined != len(c.relations):
        return None  # a fuse's parts: existentials with equalities, isl's to eliminate
    axes = (*c.axis, *c.reduce_axis)
    if any(iv not in rel for iv in axes):
        return None
    checks += [(rel[iv], cb.extents[iv]) for iv in axes]
    checks += [(rel[iv], cb.extents[iv]) for iv in rel
               if iv not in c.leaf_iter_vars and iv not in c.axis and iv not in c.reduce_axis]
    bases = dict(zip(c.axis, cb.base, strict=True))
    for iv in axes:
        base = _form(bases[iv], val) if iv in bases else ({}, 0)
        if base is None:
            return None
        a = val[iv.var] = _summed(base, rel[iv])
        checks.append((a, iv.extent))
    for f, n in checks:
        if any(k not in ranges for k in f[0]):
            return None
        lo, hi = poly._span_of(f, ranges)  # type: ignore[arg-type]
        if lo < 0 or hi >= n:
            return None  # a constraint that cuts the box: isl's
    out = []
    for rd in reads:
        if rd.tensor is st.tensor:
            forms = [_form(i, val) for i in rd.indices]
            if any(f is None for f in forms):
                return None
            out.append((ranges, forms))
    return out  # type: ignore[return-value]


def _closed_box(st: Stage, readers: list[Stage], reads: Mapping[Stage, Sequence[TensorRead]],
                env: Mapping[Stage, list[Loop]], loopvar: Mapping[IterVar, E.Var],
                done: Mapping[Stage, StageRegion], pkey: Mapping[E.Var, str]
                ) -> tuple[poly.DimBox, ...] | None:
    """``poly.set_box`` of the text ``_reader_pieces`` writes for ``st``'s readers, where that
    text is box-shaped (``poly.box_closed_form``), computed from the expressions' affine forms
    without writing and parsing the text (most of an attached stage's bound inference); None
    where it is not (a fuse, a division, a constraint that cuts, parameters whose part differs
    between pieces, a parameter without a range), and the text goes to ``set_box`` as before.
    The box is the closed form's own (``poly.box_of_pieces``) on the same forms."""
    pieces = []
    for c in readers:
        got = _piece(st, c, reads[c], env[c], done, loopvar, pkey)
        if got is None:
            return None
        pieces += got
    box = poly.box_of_pieces(pieces, list(pkey.values()))
    if box is None or any(d.lo_min is None for d in box):
        return None  # not one box, or over an unbounded parameter: the text route's
    return box


@lru_cache(maxsize=4096)
def _single_piece(text: str, d: int) -> poly.DimBox | None:
    """A tighter box for dimension ``d`` whose lower bound isl gave piecewise, or None.

    The pieces come from the readers' own range checks (the last tile of a fused or split
    index is cut at the tensor's end; isl splits the minimum by case instead of keeping the
    floor division). One piece's affine expression is usually a lower bound everywhere: the
    cut tiles only start later. Among the pieces that are (and never start before the tensor),
    the one with the smallest extent is taken, when it beats the constant hull ``set_box`` falls
    back to; the end past the tensor is the overhang that lowering guards."""
    s = poly.isl.Set(text)
    lo, hi = s.dim_min(d), s.dim_max(d)
    params = s.params()
    best: poly.DimBox | None = None
    for _, aff in lo.get_pieces():
        cand = poly.isl.PwAff.from_aff(aff).intersect_params(params)
        try:
            below, top = lo.sub(cand).min_val(), hi.sub(cand).max_val()
            cmin, cmax = cand.min_val(), cand.max_val()
        except poly.isl.Error:  # a piece with a rational coefficient: isl cannot bound it
            continue
        if not all(v.is_int() for v in (below, top, cmin, cmax)) or below.get_num_si() < 0 \
                or cmin.get_num_si() < 0:  # a box starting before the tensor is never guarded
            continue
        extent = top.get_num_si() + 1
        if best is None or extent < best.extent:
            best = poly.DimBox(aff, cmin.get_num_si(), cmax.get_num_si(),
                               cmax.get_num_si() + extent - 1, extent)
    hull = poly.set_box(text)[d]
    return best if best is not None and best.extent < hull.extent else None


def _max_over(e: E.Expr, ranges: Mapping[E.Var, int]) -> int | None:
    """The largest value of the affine ``e`` with each variable in ``[0, ranges[v])``."""
    terms, const = poly.linear_form(e)
    return _top(terms.items(), const, ranges)


def _top(terms: Iterable[tuple[E.Expr, int]], const: int, ranges: Mapping[E.Var, int]
         ) -> int | None:
    """``_max_over`` of the affine form ``sum(c * atom) + const`` (None where an atom is not a
    variable of ``ranges``): read directly from a closed-form box's lower bound (``BoxLo``,
    the form ``aff_to_expr`` builds the base from) instead of decomposing that base again."""
    for atom, c in terms:
        if not isinstance(atom, E.Var) or atom not in ranges:
            return None
        const += c * (ranges[atom] - 1) if c > 0 else 0
    return const


def _reader_pieces(st: Stage, c: Stage, reads: Sequence[TensorRead], cenv: list[Loop],
                   done: Mapping[Stage, StageRegion], loopvar: Mapping[IterVar, E.Var],
                   nm: _Namer, params: list[Loop]) -> list[str]:
    """isl pieces ``[o...] : exists (...)`` of the elements of ``st`` that ``c`` reads (the
    reader and the stages owning its enclosing loops come later, so their bounds are known).

    Variables an equality defines are written as their defining expression instead of as
    existentials (a split's parent as ``factor*outer + inner``, an axis value as its base plus
    its relative value, a one-iteration loop as 0): the set is the same, and isl parses a set
    with a handful of existentials several times faster than one with dozens (parsing is most
    of a ``set_box`` call; ``_attached`` makes one per attached stage and candidate)."""
    cb = done[c]
    name: dict[E.Var, str] = {}
    cons: dict[str, None] = {}  # insertion-ordered, without repeats
    ex: list[str] = []

    def var(key: E.Var, prefix: str) -> str:
        n = nm(key, prefix)
        name[key] = n
        return n

    pset = {id(lp[1]) for lp in params}
    for owner, iv in [*cenv, *((c, iv) for iv in c.leaf_iter_vars)]:
        ext = done[owner].extents[iv]
        if id(iv) not in pset and ext == 1:  # a one-iteration loop: its variable is 0
            name[loopvar[iv]] = "0"
            continue
        n = var(loopvar[iv], "p" if id(iv) in pset else "l")
        cons[f"0 <= {n} < {ext}"] = None
        if id(iv) not in pset and n not in ex:
            ex.append(n)
    # relative values of every iteration variable of the reader: a split's parent from its
    # (already known) parts, anything else (a fuse's parts) an existential with its equality
    rel: dict[IterVar, str] = {iv: name[loopvar[iv]] for iv in c.leaf_iter_vars}
    defined: set[int] = set()
    for r in reversed(c.relations):
        if isinstance(r, Split) and r.parent not in rel and r.outer in rel and r.inner in rel:
            rel[r.parent] = f"({cb.extents[r.inner]}*{rel[r.outer]} + {rel[r.inner]})"
            defined.add(id(r))
    for r in c.relations:
        if id(r) in defined:
            continue
        for iv in ((r.parent,) if isinstance(r, Split) else (r.outer, r.inner)):
            if iv not in rel:
                rel[iv] = nm(iv, "x")
                ex.append(rel[iv])
    for r in c.relations:
        if id(r) in defined:
            continue
        if isinstance(r, Split):
            cons[f"{rel[r.parent]} = {cb.extents[r.inner]}*{rel[r.outer]} + {rel[r.inner]}"] = None
        else:
            cons[f"{rel[r.fused]} = {cb.extents[r.inner]}*{rel[r.outer]} + {rel[r.inner]}"] = None
    for iv in (*c.axis, *c.reduce_axis):
        cons[f"0 <= {rel[iv]} < {cb.extents[iv]}"] = None
    for iv in rel:  # split results that were fused again range over their own extents
        if iv not in c.leaf_iter_vars and iv not in c.axis and iv not in c.reduce_axis:
            cons[f"0 <= {rel[iv]} < {cb.extents[iv]}"] = None
    bases = dict(zip(c.axis, cb.base, strict=True))
    for iv in (*c.axis, *c.reduce_axis):
        base = poly.to_isl(bases[iv], name) if iv in bases else "0"
        a = f"({base} + {rel[iv]})"
        name[iv.var] = a
        cons[f"0 <= {a} < {iv.extent}"] = None
    out = []
    for rd in reads:
        if rd.tensor is st.tensor:
            eqs = [f"o{d} = {poly.to_isl(i, name)}" for d, i in enumerate(rd.indices)]
            outs = ", ".join(f"o{d}" for d in range(len(rd.indices)))
            conds = " and ".join([*cons, *eqs])
            out.append(f"[{outs}] : exists ({', '.join(ex)} : {conds})" if ex
                       else f"[{outs}] : {conds}")
    return out
