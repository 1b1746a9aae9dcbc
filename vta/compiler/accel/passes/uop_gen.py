"""Micro-op generation with loop folding into ``iter_out`` / ``iter_in``.

Pre:  tensorize and ALU lowering have run: ``ComputeNest`` statements carry their loops and the
      affine entry index of each operand (dst, src, wgt).
Post: each nest is one ``ComputeInsn`` of its instruction (or a few, inside loops, when its
      micro-ops would not fit the uop buffer). Affine index analysis gives every loop a
      coefficient per operand field; adjacent loops whose coefficients compose (outer = inner x
      extent in every field) merge into one; the two loops with the largest extents whose
      coefficients fit the instruction's factor fields (their widths from its layout on ``hw``)
      fold into ``iter_out`` / ``iter_in`` (so one instruction does thousands of tensor ops);
      the remaining loops are enumerated as micro-ops (spatial loops innermost). Among the
      foldings (which loops fold, which are enumerated, which stay instruction loops when the
      micro-ops would not fit) the one of fewest cycles is chosen: the instruction's duration
      from its definition times the times the nest runs, plus loading its micro-ops (the LOAD
      definition's duration); where the timing model fills the pipeline on each entry of the
      micro-op loop (VTA's HLS design) this enumerates more micro-ops than it folds. The choice
      avoids accumulator read-after-write hazards: an acc entry is not revisited within the
      instruction's hazard window (``InstructionDef.hazard_lag``) when any choice allows it.
      An operand the instruction does not read gets 0 (or, where the definition says so, the
      destination's index: the ALU's immediate form).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

from vta.compiler.accel.cost import instruction_cycles, max_block_uops, prototype
from vta.compiler.accel.passes._common import affine, map_stmt
from vta.compiler.accel.vta_ir import ComputeInsn, ComputeNest, Offsets, UopTable, maker
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import evolve
from vta.config import HwConfig
from vta.isa import InstructionDef, MemType
from vta.isa.builtins import LOAD
from vta.isa.defs import instance, layout_of

__all__ = ["generate_uops", "fold_loops", "Folding"]


class Folding:
    """The result of folding: outer loops (stay loops), iter_out/iter_in loops, uop loops."""

    def __init__(self, outer: list[tuple[E.Var, int, tuple[int, ...]]],
                 fo: tuple[int, tuple[int, ...]], fi: tuple[int, tuple[int, ...]],
                 uop_loops: list[tuple[int, tuple[int, ...]]]) -> None:
        self.outer, self.fo, self.fi, self.uop_loops = outer, fo, fi, uop_loops


#: the cycles of one instruction executing ``(iter_out, iter_in, micro-ops)``, and of loading
#: ``n`` micro-ops; with the times the nest runs (``fold_loops``'s cost model)
Cost = tuple[Callable[[int, int, int], float], Callable[[int], float], int]


#: foldings within this fraction of the fewest cycles count as equally fast (the one of fewest
#: micro-ops is taken)
CYCLE_SLACK = 0.002


Loop = tuple[E.Var, int, tuple[int, ...]]
Score = tuple[bool, float, int, bool]


@functools.lru_cache(maxsize=1024)
def _divisors(n: int) -> tuple[int, ...]:
    """The proper divisors ``1 < b < n`` of ``n`` (memoised: every nest of a layer asks)."""
    return tuple(b for b in range(2, n) if n % b == 0)


def _peel(rem: list[int], ext: list[int], red: list[bool], max_uops: int
          ) -> tuple[list[int], list[int]]:
    """Too many micro-ops for the buffer: peel loops (reductions, then the outermost) into
    instruction loops (``ext``, ``red``: each loop's extent and whether it is a reduction)."""
    rem, outer = list(rem), []
    left = math.prod([ext[k] for k in rem])  # the micro-ops of the loops in ``rem``
    while left > max_uops and rem:
        k = next((k for k in rem if red[k]), rem[0])
        rem.remove(k)
        outer.append(k)
        left //= ext[k]  # exact: a factor of the product
    return rem, outer


#: a scored folding: its score, the loops folded into ``iter_out`` and ``iter_in``, and what
#: it folds (``_choose``: the loops; ``_choice``: the split, None where none)
Option = tuple[Score, int | None, int | None, Any]


def _best(options: list[Option]) -> Option:
    """The safe options (all, if none is safe) within ``CYCLE_SLACK`` of the fewest cycles;
    among them the fewest micro-ops, then both loops folded, then the fewest cycles."""
    safe = [o for o in options if o[0][0]] or options
    fewest = -max([o[0][1] for o in safe])  # the scores hold cycles negated
    bound = fewest * (1 + CYCLE_SLACK)
    near = [o for o in safe if -o[0][1] <= bound]
    return max(near, key=lambda o: (o[0][2], o[0][3], o[0][1]))


def _coef_fit(c: tuple[int, ...], limits: tuple[int, ...]) -> bool:
    """Whether coefficients ``c`` fit the factor fields (``limits``: one past each's largest)."""
    for f, x in enumerate(c):
        if not 0 <= x < limits[f]:
            return False
    return True


def _factor_max(c: tuple[int, ...], limits: tuple[int, ...]) -> int | float:
    """The largest ``b`` such that coefficients ``c`` (that fit: ``_coef_fit``) times ``b``
    fit the factor fields (``limits``); unbounded (infinity) where every one is 0."""
    return min(((limits[f] - 1) // x for f, x in enumerate(c) if x), default=math.inf)


def _choose(merged: list[Loop], field_bits: tuple[int, ...], hazard_lag: int, max_uops: int,
            reduce_ok: bool, max_iter: int, cost: Cost | None,
            pieces: int | None = None) -> list[Option]:
    """Every folding of the loops ``merged``, scored (see ``fold_loops``; ``_score``), each
    tagged with ``merged``.

    ``pieces``: ``merged`` is a nest's loops with one split in two (the outer piece at this
    index, the inner one after it: ``_choice``); then the foldings that fold neither piece and
    leave loops the buffer holds (``_peel`` peels none) are left out. Each scores exactly as
    the same folding of the unsplit loops (the folded loops the same; the loops left the same
    in extents' product, spatial product and reductions, the pieces' product standing for
    the split loop), which ``_choice`` scores earlier, so ``_best`` (the first of the best)
    never takes it."""
    limits = tuple(1 << b for b in field_bits)
    ext = [lp[1] for lp in merged]
    red = [lp[2][0] == 0 for lp in merged]
    ok_k = tuple(k for k, lp in enumerate(merged)
                 if lp[1] <= max_iter and _coef_fit(lp[2], limits))
    return _score(ext, red, ok_k, _totals(ext, red), hazard_lag, max_uops, reduce_ok, cost,
                  pieces, merged)


@functools.lru_cache(maxsize=1024)
def _pairs(ok_k: tuple[int, ...], touch: tuple[int, int] | None
           ) -> tuple[tuple[int | None, int | None], ...]:
    """The foldings ``(iter_out, iter_in)`` of loops ``ok_k`` (those that may fold, in order)
    that ``_score`` scores: none, ``iter_in`` alone, then the ordered pairs; with ``touch``
    (a split loop's pieces), only those folding a piece, in the same order (memoised: a
    nest's splits ask the same few)."""
    every = [(None, None), *[(None, k) for k in ok_k], *itertools.permutations(ok_k, 2)]
    if touch is None:
        return tuple(every)
    return tuple((i, j) for i, j in every if i in touch or j in touch)


def _totals(ext: list[int], red: list[bool]) -> tuple[int, int, int]:
    """The product of loops' extents, of the spatial ones', and the count of reductions
    (the same for a nest and any of its splits: a split loop's pieces multiply to it)."""
    return (math.prod(ext), math.prod(n for n, r in zip(ext, red, strict=True) if not r),
            sum(red))


def _score(ext: list[int], red: list[bool], ok_k: tuple[int, ...], totals: tuple[int, int, int],
           hazard_lag: int, max_uops: int, reduce_ok: bool, cost: Cost | None,
           pieces: int | None, tag: Any, seen: set[tuple[int, bool, int, bool]] | None = None
           ) -> list[Option]:
    """``_choose``'s options, of loops of extents ``ext`` (``red``: reductions; ``ok_k``: the
    loops that may fold, in order; ``totals``: ``_totals``), each tagged ``tag``.

    ``seen`` (``_choice``'s, shared by a nest and its splits): the foldings that peel nothing
    scored before, by their folded loops' extents and reductions, added to; a folding among
    them is left out. Its score is a function of them (and of ``totals``, the same for a nest
    and its splits): the loops left, their spatial product and reductions, the cycles,
    whether both fold (an extent is at least 2; folding none, 1), so it scores exactly as the
    one before, which ``_best`` (the first of the best) takes before it. A split's foldings
    of its outer piece at ``b`` are those of its inner piece at ``n / b`` (of C1-C11's 5,967
    options on pynq, 3,055 repeat one before)."""
    scored: list[Option] = []
    all_n, all_spatial, all_red = totals
    # the foldings (iter_out, iter_in): none, iter_in alone, then the fitting pairs; where a
    # piece is split and none peels, those folding a piece; else those folding none are
    # tested below
    touch = None if pieces is None else (pieces, pieces + 1)
    options = _pairs(ok_k, touch if touch is not None and all_n <= max_uops else None)
    if all_n <= max_uops:
        touch = None
    if cost is not None:
        insn_cycles, load_cycles, times = cost
    #: the folded loops, unordered -> (micro-ops, copies) of the loops left (``_peel``)
    peeled: dict[frozenset[int | None], tuple[int, int]] | None = None
    for fo, fi in options:
        # the loops left: ``fo``'s then ``fi``'s extent divided out of the product of all
        # (exact: the extents are positive integers), of the spatial ones where spatial;
        # reductions by count
        if fo is None:
            n_o, r_o = 1, False
        else:
            n_o, r_o = ext[fo], red[fo]
        if fi is None:
            n_i, r_i = 1, False
        else:
            n_i, r_i = ext[fi], red[fi]
        n_rem = all_n // n_o // n_i
        if n_rem <= max_uops:
            if touch is not None and fo not in touch and fi not in touch:
                continue  # the unsplit loops' same folding, scored before (see ``_choose``)
            if seen is not None:
                key = (n_o, r_o, n_i, r_i)
                if key in seen:
                    continue  # scored before, the same (see the docstring)
                seen.add(key)
        spatial = all_spatial if r_o else all_spatial // n_o
        if not r_i:
            spatial //= n_i
        ok = not reduce_ok or not (
            (all_red - r_o - r_i > 0 and spatial < hazard_lag)
            or (r_i and n_rem < hazard_lag)
            or (r_o and n_rem * n_i < hazard_lag))
        cycles = 0.0
        if cost is not None:
            if n_rem <= max_uops:  # the loops left fit: ``_peel`` peels none
                n_uops, copies = n_rem, 1
            else:
                folded = frozenset((fo, fi))
                if peeled is None:
                    peeled = {}
                hit = peeled.get(folded)
                if hit is None:
                    kept, outer = _peel([k for k in range(len(ext)) if k != fo and k != fi],
                                        ext, red, max_uops)
                    hit = peeled[folded] = (math.prod(ext[k] for k in kept),
                                            math.prod(ext[k] for k in outer))
                n_uops, copies = hit
            cycles = times * copies * insn_cycles(n_o, n_i, n_uops) \
                + load_cycles(n_uops * copies)
        scored.append(((ok, -cycles, -n_rem, fo is not None and fi is not None), fo, fi, tag))
    return scored


def fold_loops(loops: list[tuple[E.Var, int]], coefs: list[tuple[int, ...]],
               field_bits: tuple[int, ...], hazard_lag: int, max_uops: int,
               reduce_ok: bool, max_iter: int = (1 << 14) - 1,
               cost: Cost | None = None) -> Folding:
    """Choose the folding of a loop nest (see the module docstring): among the safe foldings
    within ``CYCLE_SLACK`` of the fewest cycles, the one of fewest micro-ops.

    ``coefs[k][f]``: coefficient of loop k in field f (field 0 is dst). Loops with a zero dst
    coefficient are reductions. Returns which loops stay outer, fold, or become micro-ops.
    ``cost`` (instruction cycles, micro-op load cycles, repetitions) ranks the safe foldings
    by cycles; without it, the fewest micro-ops win.
    """
    merged = _merge(loops, coefs)
    choice = _choice(merged, field_bits, hazard_lag, max_uops, reduce_ok, max_iter, cost)
    return _folding(merged, choice, max_uops)


#: a nest's chosen folding, in terms of its merged loops: the loop split in two (its index
#: and the inner loop's extent; None: none split), then the loops folded into ``iter_out``
#: and ``iter_in`` (indices into the loops after the split; None: that one folds nothing)
Choice = tuple[tuple[int, int] | None, int | None, int | None]


def _merge(loops: list[tuple[E.Var, int]], coefs: list[tuple[int, ...]]) -> list[Loop]:
    """The loops without unit loops, composable neighbours merged (outer -> inner order)."""
    items = [(v, n, c) for (v, n), c in zip(loops, coefs, strict=True) if n > 1]
    merged: list[Loop] = []
    for v, n, c in items:
        if merged:
            _pv, pn, pc = merged[-1]
            if all(pc[f] == c[f] * n for f in range(len(c))):
                merged[-1] = (v, pn * n, c)  # the inner var stands for the merged loop
                continue
        merged.append((v, n, c))
    return merged


def _split(merged: list[Loop], k: int, b: int) -> list[Loop]:
    """``merged`` with loop ``k`` (``n = a * b``) as a loop of ``a`` (a new variable, stride
    ``b * coef``) around one of ``b`` (its variable)."""
    v, n, c = merged[k]
    return [*merged[:k], (E.Var(f"{v.name}.o", v.dtype), n // b, tuple(x * b for x in c)),
            (v, b, c), *merged[k + 1:]]


def _choice(merged: list[Loop], field_bits: tuple[int, ...], hazard_lag: int, max_uops: int,
            reduce_ok: bool, max_iter: int, cost: Cost | None) -> Choice:
    """The folding ``fold_loops`` chooses for ``merged``. It reads the loops' extents and
    coefficients, never their variables.

    A long spatial loop may also fold in part: ``n = a * b`` as a loop of ``a`` (stride
    ``b * coef``) around ``b`` (the instruction folds one, enumerates the other), which trades
    pipeline fills against micro-ops to load. Each split's foldings are scored as ``_choose``
    scores them on ``_split``'s loops (its ``pieces``), its loops' facts spliced from the
    nest's (the other loops' fit once, the totals the same) rather than found again; a
    folding that peels nothing and repeats one scored before is left out (``_score``'s
    ``seen``)."""
    limits = tuple(1 << b for b in field_bits)
    ext = [lp[1] for lp in merged]
    red = [lp[2][0] == 0 for lp in merged]
    fit = [lp[1] <= max_iter and _coef_fit(lp[2], limits) for lp in merged]
    totals = _totals(ext, red)
    seen: set[tuple[int, bool, int, bool]] = set()  # ``_score``'s, for the nest and its splits
    every = _score(ext, red, tuple(k for k, f in enumerate(fit) if f), totals, hazard_lag,
                   max_uops, reduce_ok, cost, None, None, seen)
    if cost is not None:
        for k, (_v, n, c) in enumerate(merged):
            if c[0] == 0:
                continue
            # the split's loops: those before ``k``, the outer piece (it fits where its extent
            # ``a`` is at most ``max_iter`` and ``b`` at most ``b_max``: its coefficients are
            # ``b`` times ``k``'s), the inner one (``k``'s coefficients: it fits as they do,
            # up to its extent), those after ``k`` moved on
            before = [j for j in range(k) if fit[j]]
            after = [j + 1 for j in range(k + 1, len(fit)) if fit[j]]
            ext_b, ext_a = ext[:k], ext[k + 1:]
            red_s = [*red[:k], False, False, *red[k + 1:]]
            c_fit = _coef_fit(c, limits)
            b_max = _factor_max(c, limits) if c_fit else 0
            for b in _divisors(n):
                a = n // b
                ok_k = (*before, *((k,) if b <= b_max and a <= max_iter else ()),
                        *((k + 1,) if c_fit and b <= max_iter else ()), *after)
                every += _score([*ext_b, a, b, *ext_a], red_s, ok_k, totals, hazard_lag,
                                max_uops, reduce_ok, cost, k, (k, b), seen)
    _, fo, fi, split = _best(every)
    return split, fo, fi


def _layout(ext: list[int], red: list[bool], fo: int | None, fi: int | None, max_uops: int
            ) -> tuple[list[int], list[int]]:
    """The loops (of extents ``ext``, ``red`` the reductions) that a folding of ``fo`` and
    ``fi`` keeps as instruction loops (``_peel``; in order) and enumerates as micro-ops
    (reductions outside, spatial inside: an acc entry recurs as late as possible)."""
    rem, outer = _peel([k for k in range(len(ext)) if k != fo and k != fi], ext, red, max_uops)
    rem.sort(key=lambda k: (not red[k], k))
    return sorted(outer), rem


def _folding(merged: list[Loop], choice: Choice, max_uops: int,
             layout: tuple[list[int], list[int]] | None = None) -> Folding:
    """The ``Folding`` of ``merged`` that ``choice`` names (a split makes its new variable);
    ``layout``: its ``_layout``, where known."""
    split, fo, fi = choice
    if split is not None:
        merged = _split(merged, *split)
    if layout is None:
        layout = _layout([lp[1] for lp in merged], [lp[2][0] == 0 for lp in merged], fo, fi,
                         max_uops)
    outer, rem = layout
    nf = len(merged[0][2]) if merged else 3

    def fold(k: int | None) -> tuple[int, tuple[int, ...]]:
        return (1, (0,) * nf) if k is None else (merged[k][1], merged[k][2])

    return Folding([merged[k] for k in outer], fold(fo), fold(fi),
                   [(merged[k][1], merged[k][2]) for k in rem])


#: the variable of the loops ``_nest_choice`` rebuilds from a shape (a choice never reads it)
_ANY = E.Var("any")


@functools.lru_cache(maxsize=4096)
def _nest_choice(shape: tuple[tuple[int, tuple[int, ...]], ...], field_bits: tuple[int, ...],
                 max_uops: int, max_iter: int, times: int, d: InstructionDef, reset: bool,
                 params: tuple[tuple[str, Any], ...], hw: HwConfig
                 ) -> tuple[Choice, tuple[list[int], list[int]]]:
    """``_choice`` for merged loops of these (extent, coefficients) with ``generate_uops``'s
    cost model of instruction ``d`` with ``params`` (``_prototype``: its fields but the loops
    and micro-ops, and its hazard lag) run ``times`` times on ``hw``, and its ``_layout``,
    memoised: the nests of a kernel's candidates and of its epilogue's instructions repeat
    (C1-C11's 198 nests on pynq are 110 keys). Keyed by the parameters, not the prototype
    (whose dataclass hash is a Python call over every field)."""
    proto, lag = _prototype(d, reset, params, hw)
    merged = [(_ANY, n, c) for n, c in shape]
    choice = _choice(merged, field_bits, lag, max_uops, not reset and d.kind == "accumulate",
                     max_iter, (_insn_cycles(d, proto, hw), _uop_load(hw), times))
    split, fo, fi = choice
    if split is not None:
        merged = _split(merged, *split)
    return choice, _layout([lp[1] for lp in merged], [lp[2][0] == 0 for lp in merged], fo, fi,
                           max_uops)


@functools.lru_cache(maxsize=256)
def _insn_cycles(d: InstructionDef, proto: Any, hw: HwConfig) -> Callable[[int, int, int], float]:
    """The cycles of ``proto`` (an instance of ``d``) run as ``(iter_out, iter_in, micro-ops)``
    on ``hw``: its definition's duration, memoised (the foldings scored share their counts),
    and the function itself per instruction: the nests of one instruction (a layer's
    candidates, its epilogue's stages) score many of the same foldings (C1-C11's 110 nests
    chosen on pynq ask 7,999 timings, 1,425 distinct)."""
    @functools.cache
    def insn_cycles(n_o: int, n_i: int, n: int) -> float:
        return d.duration(evolve(proto, iter_out=n_o, iter_in=n_i, uop_bgn=0, uop_end=n), hw)
    return insn_cycles


def _bases(rest: tuple[E.Expr, ...], outer: list[tuple[E.Var, int, tuple[int, ...]]]
           ) -> list[E.Expr]:
    """Each micro-op field's base: ``rest`` + outer vars * coef (a field = its base + the
    micro-op's offset, ``_table_offsets``), folded as the operators build it."""
    base = list(rest)
    for v, _n, c in outer:
        for f in range(len(base)):
            if c[f]:
                base[f] = base[f] + v * c[f]
    return base


def _enumerate(uop_loops: tuple[tuple[int, tuple[int, int, int]], ...]
               ) -> list[tuple[int, int, int]]:
    """Each micro-op's ``(dst, src, wgt)`` offsets: an enumeration of the micro-op loops
    (earlier loops outer; each loop's coefficients in that order)."""
    offs = [(0, 0, 0)]
    for m, (n, c) in enumerate(uop_loops):  # earlier loops are outer in the enumeration
        steps = [(j * c[0], j * c[1], j * c[2]) for j in range(n)]
        offs = steps if m == 0 else [(a + x, b + y, d + z) for a, b, d in offs
                                     for x, y, z in steps]
    return offs


@functools.lru_cache(maxsize=4096)
def _table_offsets(uop_loops: tuple[tuple[int, tuple[int, ...]], ...],
                   order: tuple[int | None, ...]) -> Offsets:
    """A ``UopTable``'s offsets for these micro-op loops (``_enumerate``), in ``(dst, src,
    wgt)`` order (``order``: where each of them is among the fields the instruction uses, the
    loops' coefficients' order; None: unused, 0), memoised: an epilogue's instructions and a
    kernel's candidates enumerate the same loops again (one tuple shared by their tables, as
    a thread's copy shares its original's). The coefficients are put in that order first (an
    offset is a sum of coefficients times indices, so reordering them reorders every offset
    alike): the enumeration builds the triples directly, where reordering them after (an ALU
    instruction's two fields) took a step per micro-op."""
    def field(c: tuple[int, ...], k: int | None) -> int:
        return 0 if k is None else c[k]

    d, s, w = order
    return Offsets(_enumerate(tuple((n, (field(c, d), field(c, s), field(c, w)))
                                    for n, c in uop_loops)))


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


@functools.lru_cache(maxsize=1024)
def _operand_plan(d: InstructionDef, hw: HwConfig, operands: tuple[str, ...], reset: bool
                  ) -> tuple[tuple[int | None, ...], tuple[int, ...], tuple[int | None, ...],
                             tuple[tuple[str, int], ...]]:
    """How a nest of ``d`` over ``operands`` (its indices' names) fills the instruction's
    micro-op fields (``_fields``) on ``hw``, per instruction and operand names rather than per
    nest: for each field, which of the nest's indices it reads (None: none, ``_ZERO``; an
    operand the nest does not give is the destination's index where the definition says so and
    the nest does not reset), the fields' factor widths, each of ``(dst, src, wgt)``'s position
    among the fields (None: unused), and the fields with factors (name, position)."""
    given = {name: k for k, name in enumerate(operands)}  # the last of a name, as a dict
    by_name = {o.name: o for o in d.operands}
    fields = _fields(d, hw)
    read: list[int | None] = []
    for name, _w in fields:
        if name in given:
            read.append(given[name])
        elif not reset and by_name[name].unused == "dst" and by_name[name].factors:
            read.append(given["dst"])
        else:
            read.append(None)
    pos = {name: k for k, (name, _) in enumerate(fields)}
    return (tuple(read), tuple(w for _, w in fields), tuple(pos.get(f) for f in _FIELDS),
            tuple((name, k) for k, (name, _) in enumerate(fields)
                  if by_name[name].factors is not None))


@functools.lru_cache(maxsize=1024)
def _prototype(d: InstructionDef, reset: bool, params: tuple[tuple[str, Any], ...],
               hw: HwConfig) -> tuple[Any, int]:
    """An instance of ``d`` with ``params`` (every other field zero: ``instance``) and the
    smallest safe distance between an acc entry's revisits on ``hw`` (its hazard lag + 1),
    per instruction and parameters rather than per nest (an epilogue's stages and a layer's
    candidates repeat them)."""
    proto = instance(d, reset=reset, **dict(params))
    return proto, d.hazard_lag(proto, hw) + 1


@functools.lru_cache(maxsize=16)
def _uop_load(hw: HwConfig) -> Callable[[int], float]:
    """Cycles of loading ``n`` micro-ops (the LOAD definition's duration), memoised by ``n``
    (an ``int`` key, hashed in C) per config, for every nest chosen on it, in front of
    ``_uop_load_cycles``'s memo (whose key hashes the config in Python: every folding of a
    nest asks)."""
    return functools.cache(functools.partial(_uop_load_cycles, hw))


@functools.lru_cache(maxsize=4096)
def _uop_load_cycles(hw: HwConfig, n: int) -> float:
    """``_uop_load``'s answer, memoised: every folding of every nest asks for a few sizes."""
    return instruction_cycles(prototype(LOAD, mem=MemType.UOP, y_size=1, x_size=n,
                                        x_stride=n), hw) if n else 0.0


def generate_uops(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    max_uops = max_block_uops(hw)
    max_iter = (1 << hw.isa.loop_iter) - 1

    def nest(times: int) -> Callable[[S.Stmt], S.Stmt | None]:
        def rewrite(s: S.Stmt) -> S.Stmt | None:
            if isinstance(s, S.For) and isinstance(s.extent, E.IntImm):
                return evolve(s, body=map_stmt(s.body,
                                                             nest(times * s.extent.value)))
            if isinstance(s, ComputeNest):
                return compute(s, times)
            return None
        return rewrite

    def compute(s: ComputeNest, times: int) -> S.Stmt:
        d = s.instruction
        read, bits, order, factored = _operand_plan(d, hw, s.operands, s.reset)
        idx = s.indices
        exprs = [_ZERO if k is None else idx[k] for k in read]
        vars_ = [v for v, _ in s.loops]
        parts = _affine_parts(exprs, vars_)
        coef_of = [p[0] for p in parts]
        coefs = [tuple([c.get(v, 0) for c in coef_of]) for v in vars_]
        merged = _merge(list(s.loops), coefs)
        choice, layout = _nest_choice(tuple((n, c) for _v, n, c in merged), bits, max_uops,
                                      max_iter, times, d, s.reset, s.params, hw)
        fo = _folding(merged, choice, max_uops, layout)
        base = _bases(tuple(p[1] for p in parts), fo.outer)
        table_base = tuple(E.IntImm(0) if k is None else base[k] for k in order)
        offsets = _table_offsets(tuple(fo.uop_loops), order)
        uops = _UOP_TABLE(table_base, offsets)
        factors = tuple((name, fo.fo[1][k], fo.fi[1][k]) for name, k in factored)
        st: S.Stmt = _COMPUTE_INSN(d, s.reset, uops, fo.fo[0], fo.fi[0], factors, s.params)
        return _wrap(st, fo)

    return func.with_body(map_stmt(func.body, nest(1)))


#: the instruction and micro-op table ``generate_uops`` makes per nest, every field given in
#: order (``maker``: the slots filled directly, as the generated ``__init__`` fills them)
_COMPUTE_INSN, _UOP_TABLE = maker(ComputeInsn), maker(UopTable)


#: the index of an operand the instruction does not read (one object: ``_affine_parts``)
_ZERO = E.IntImm(0)


def _affine_parts(exprs: list[E.Expr], vars_: list[E.Var]
                  ) -> list[tuple[dict[E.Var, int], E.Expr]]:
    """``affine(e, vars_)`` of each of a nest's field indices, once per expression object: an
    ALU immediate's source is its destination's index, and a reset's unread operands are
    ``_ZERO``."""
    by_id: dict[int, tuple[dict[E.Var, int], E.Expr]] = {}
    out = []
    for e in exprs:
        p = by_id.get(id(e))
        if p is None:
            p = by_id[id(e)] = affine(e, vars_)
        out.append(p)
    return out


def _wrap(st: S.Stmt, fo: Folding) -> S.Stmt:
    for v, n, _c in reversed(fo.outer):
        st = S.For(v, E.IntImm(0), E.IntImm(n), st)
    return st
