"""Micro-op generation with loop folding into ``iter_out`` / ``iter_in``.

Pre:  tensorize and ALU lowering have run: ``ComputeNest`` statements carry their loops and the
      affine entry index of each operand (dst, src, wgt).
Post: each nest is one ``ComputeInsn`` of its instruction (or a few, inside loops, when its
      micro-ops would not fit the uop buffer). Affine index analysis gives every loop a
      coefficient per operand field; adjacent loops whose coefficients compose (outer = inner x
      extent in every field) merge into one; the two loops with the largest extents whose
      coefficients fit the instruction's factor fields (their widths from its layout on ``hw``)
      fold into ``iter_out`` / ``iter_in`` (so one instruction does thousands of tensor ops);
      the remaining loops are enumerated as micro-ops (spatial loops innermost). The choice
      avoids accumulator read-after-write hazards: an acc entry is not revisited within the
      instruction's hazard window (``InstructionDef.hazard_lag``) when any choice allows it.
      An operand the instruction does not read gets 0 (or, where the definition says so, the
      destination's index: the ALU's immediate form).
"""

from __future__ import annotations

import itertools
import math

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes._common import affine, map_stmt
from vta.compiler.vta_ir import ComputeInsn, ComputeNest, UopExpr
from vta.config import HwConfig
from vta.isa import InstructionDef
from vta.isa.defs import instance, layout_of

__all__ = ["generate_uops", "fold_loops", "Folding"]


class Folding:
    """The result of folding: outer loops (stay loops), iter_out/iter_in loops, uop loops."""

    def __init__(self, outer: list[tuple[E.Var, int, tuple[int, ...]]],
                 fo: tuple[int, tuple[int, ...]], fi: tuple[int, tuple[int, ...]],
                 uop_loops: list[tuple[int, tuple[int, ...]]]) -> None:
        self.outer, self.fo, self.fi, self.uop_loops = outer, fo, fi, uop_loops


def fold_loops(loops: list[tuple[E.Var, int]], coefs: list[tuple[int, ...]],
               field_bits: tuple[int, ...], hazard_lag: int, max_uops: int,
               reduce_ok: bool, max_iter: int = (1 << 14) - 1) -> Folding:
    """Choose the folding of a loop nest (see the module docstring).

    ``coefs[k][f]``: coefficient of loop k in field f (field 0 is dst). Loops with a zero dst
    coefficient are reductions. Returns which loops stay outer, fold, or become micro-ops.
    """
    # drop unit loops and merge composable neighbours (outer -> inner order)
    items = [(v, n, c) for (v, n), c in zip(loops, coefs, strict=True) if n > 1]
    merged: list[tuple[E.Var, int, tuple[int, ...]]] = []
    for v, n, c in items:
        if merged:
            _pv, pn, pc = merged[-1]
            if all(pc[f] == c[f] * n for f in range(len(c))):
                merged[-1] = (v, pn * n, c)  # the inner var stands for the merged loop
                continue
        merged.append((v, n, c))
    # a merged loop is enumerated by its own index; keep (extent, coefs)
    cands = list(range(len(merged)))
    limits = tuple(1 << b for b in field_bits)

    def fits(k: int) -> bool:
        n, c = merged[k][1], merged[k][2]
        return n <= max_iter and all(0 <= c[f] < limits[f] for f in range(len(c)))

    best = None
    options: list[tuple[int | None, int | None]] = [(None, None)]
    options += [(None, k) for k in cands if fits(k)]
    options += [(a, b) for a, b in itertools.permutations(cands, 2) if fits(a) and fits(b)]
    for fo, fi in options:
        rem = [k for k in cands if k not in (fo, fi)]
        spatial = math.prod(merged[k][1] for k in rem if merged[k][2][0] != 0)
        n_rem = math.prod(merged[k][1] for k in rem)
        ok = True
        if reduce_ok:
            if any(merged[k][2][0] == 0 for k in rem) and spatial < hazard_lag:
                ok = False
            if fi is not None and merged[fi][2][0] == 0 and n_rem < hazard_lag:
                ok = False
            if (fo is not None and merged[fo][2][0] == 0
                    and n_rem * (merged[fi][1] if fi is not None else 1) < hazard_lag):
                ok = False
        score = (ok, -n_rem, fo is not None and fi is not None)
        if best is None or score > best[0]:
            best = (score, fo, fi)
    assert best is not None
    _, fo, fi = best
    rem = [k for k in cands if k not in (fo, fi)]
    # too many micro-ops for the buffer: peel loops (outermost first) into instruction loops
    outer: list[int] = []
    while math.prod(merged[k][1] for k in rem) > max_uops and rem:
        red = [k for k in rem if merged[k][2][0] == 0]
        k = (red or rem)[0]
        rem.remove(k)
        outer.append(k)
    # uop order: reductions outside, spatial inside (so an acc entry recurs as late as possible)
    rem.sort(key=lambda k: (merged[k][2][0] != 0, k))
    nf = len(merged[0][2]) if merged else 3

    def fold(k: int | None) -> tuple[int, tuple[int, ...]]:
        return (1, (0,) * nf) if k is None else (merged[k][1], merged[k][2])

    return Folding([merged[k] for k in sorted(outer)], fold(fo), fold(fi),
                   [(merged[k][1], merged[k][2]) for k in rem])


def _uops(rest: tuple[E.Expr, ...], outer: list[tuple[E.Var, int, tuple[int, ...]]],
          uop_loops: list[tuple[int, tuple[int, ...]]]) -> tuple[tuple[E.Expr, ...], ...]:
    """Micro-op expressions: field = rest + outer vars * coef + enumerated uop offsets."""
    base = list(rest)
    for v, _n, c in outer:
        for f in range(len(base)):
            if c[f]:
                base[f] = base[f] + v * c[f]
    offs = [(0,) * len(base)]
    for n, c in uop_loops:  # earlier loops are outer in the enumeration
        offs = [tuple(o[f] + j * c[f] for f in range(len(base))) for o in offs for j in range(n)]
    return tuple(tuple(E.simplify_int(base[f] + o[f]) for f in range(len(base))) for o in offs)


_FIELDS = ("dst", "src", "wgt")


def _fields(d: InstructionDef, hw: HwConfig) -> list[tuple[str, int]]:
    """The micro-op fields an instruction uses, in micro-op order, with the width of the
    factor fields that step each along ``iter_out`` / ``iter_in`` on ``hw`` (0 for an operand
    without factors: a loop that moves it cannot fold)."""
    widths = {f.name: f.width for half in layout_of(d, hw) for f in half}
    by_name = {o.name: o for o in d.operands}
    out = []
    for name in _FIELDS:
        o = by_name.get(name)
        if o is not None:
            w = min(widths[o.factors[0]], widths[o.factors[1]]) if o.factors else 0
            out.append((name, w))
    return out


def generate_uops(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    max_uops = max(1, hw.uop_depth // 4)
    max_iter = (1 << hw.isa.loop_iter) - 1

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if not isinstance(s, ComputeNest):
            return None
        d = s.instruction
        given = dict(zip(s.operands, s.indices, strict=True))
        by_name = {o.name: o for o in d.operands}
        fields = _fields(d, hw)
        exprs = []
        for name, _w in fields:
            if name in given:
                exprs.append(given[name])
            elif not s.reset and by_name[name].unused == "dst" and by_name[name].factors:
                exprs.append(given["dst"])
            else:
                exprs.append(E.IntImm(0))
        vars_ = [v for v, _ in s.loops]
        parts = [affine(e, vars_) for e in exprs]
        coefs = [tuple(p[0].get(v, 0) for p in parts) for v in vars_]
        proto = instance(d, reset=s.reset, **dict(s.params))
        lag = d.hazard_lag(proto, hw) + 1  # the smallest safe revisit distance
        fo = fold_loops(list(s.loops), coefs, tuple(w for _, w in fields), lag, max_uops,
                        not s.reset and d.kind == "accumulate", max_iter)
        rows = _uops(tuple(p[1] for p in parts), fo.outer, fo.uop_loops)
        pos = {name: k for k, (name, _) in enumerate(fields)}
        uops = tuple(UopExpr(*(r[pos[f]] if f in pos else E.IntImm(0) for f in _FIELDS))
                     for r in rows)
        factors = tuple((name, fo.fo[1][k], fo.fi[1][k]) for k, (name, _) in enumerate(fields)
                        if by_name[name].factors is not None)
        st: S.Stmt = ComputeInsn(d, s.reset, uops, fo.fo[0], fo.fi[0], factors, s.params)
        return _wrap(st, fo)

    return func.with_body(map_stmt(func.body, rewrite))


def _wrap(st: S.Stmt, fo: Folding) -> S.Stmt:
    for v, n, _c in reversed(fo.outer):
        st = S.For(v, E.IntImm(0), E.IntImm(n), st)
    return st
