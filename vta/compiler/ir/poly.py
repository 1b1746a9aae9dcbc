"""Integer-set analysis with islpy: affine forms, access footprints, capacity, dependences.

What lives here is the compiler's integer arithmetic that must be *exact*: the region of a tensor
a tile of loops touches (a DMA's extents, a scratchpad allocation, a conv halo of ``h*s + r``),
the part of that region that lies inside the real data when the rest is zero padding, whether
the buffers fit the scratchpads, and which loop transformations keep the dependences.

Performance rule: isl is slow compared to evaluating an expression, so nothing here is called
per loop iteration. A footprint is computed once, *parametrically* in the outer loop variables,
and returned as a closed form (an affine ``min`` expression per dimension and a constant extent)
that callers evaluate or emit. Every isl computation is keyed by its text and cached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vta.compiler.ir import expr as E
from vta.compiler.ir.stmt import Buffer
from vta.compiler.ir.visitor import Dispatch
from vta.config import BUFFER_KINDS
from vta.errors import CapacityError, PolyError

if TYPE_CHECKING:
    import islpy as isl

    from vta.config import HwConfig
else:
    class _Isl:
        """``islpy``, imported at its first use: modules that only build or render kernels
        (``vta.gpu.kernels``, the GPU benchmarks) import this one for its affine helpers and
        run without islpy installed."""

        _mod: ModuleType | None = None

        def __getattr__(self, name: str) -> Any:
            if _Isl._mod is None:
                _Isl._mod = import_module("islpy")
            return getattr(_Isl._mod, name)

    isl = _Isl()

__all__ = [
    "PolyError", "CapacityError", "linear_form", "coefficient", "simplify", "to_isl",
    "aff_to_expr", "Box", "BoxLo", "box_closed_form", "isl_set_box",
    "Clamped", "footprint", "footprint_at", "set_box", "DimBox", "buffer_bytes", "check_capacity",
    "region_text",
    "Dependences", "dependences", "violations", "carries",
]


# --------------------------------------------------------------------------- affine forms

LinearTerms = dict[E.Expr, int]


def linear_form(e: E.Expr) -> tuple[LinearTerms, int]:
    """``e`` as ``sum(coef * atom) + const``. Atoms are variables or the sub-expressions that are
    not linear (``x // 4``, ``x % 4``, a load); terms keep the order of first appearance. The
    IR's one affine decomposition: every pass that needs coefficients reads it."""
    return _LINEAR(e)


def _atom(e: E.Expr) -> tuple[LinearTerms, int]:
    return {e: 1}, 0


def _operand(x: E.Expr) -> tuple[LinearTerms, int]:
    """An operand's linear form: a constant or a variable (most operands) read here, as its
    rule reads it, without the dispatch's two calls; anything else through the dispatch."""
    t = type(x)
    if t is E.IntImm:
        return {}, x.value  # type: ignore[attr-defined]
    if t is E.Var:
        return {x: 1}, 0
    return _LINEAR(x)


def _add_sub(e: E.Add | E.Sub) -> tuple[LinearTerms, int]:
    # every rule returns a dict of its own without zero coefficients, so ``a``'s is extended
    # in place (its order, then ``b``'s new atoms) and filtered only where a term cancelled;
    # the operands through ``_operand`` (``_mul`` too)
    a, b = e.a, e.b
    ta, ca = _operand(a)
    tb, cb = _operand(b)
    sign = 1 if isinstance(e, E.Add) else -1
    cancelled = False
    get = ta.get
    for atom, c in tb.items():
        k = ta[atom] = get(atom, 0) + sign * c
        if not k:
            cancelled = True
    if cancelled:
        ta = {k: v for k, v in ta.items() if v}
    return ta, ca + sign * cb


def _mul(e: E.Mul) -> tuple[LinearTerms, int]:
    a, b = e.a, e.b
    ta, ca = _operand(a)
    tb, cb = _operand(b)
    if not tb:
        if cb == 1:  # an index times a unit stride: ``a``'s own dict, every term kept
            return ta, ca * cb
        return {k: v * cb for k, v in ta.items() if v * cb}, ca * cb
    if not ta:
        return {k: v * ca for k, v in tb.items() if v * ca}, ca * cb
    return _atom(e)


def _cast(e: E.Cast) -> tuple[LinearTerms, int]:
    if not e.dtype.startswith("float") and e.dtype != "bool":
        return _LINEAR(e.value)
    return _atom(e)


_LINEAR: Dispatch[tuple[LinearTerms, int]] = Dispatch("affine decomposition", {
    E.IntImm: lambda e: ({}, e.value),
    E.Add: _add_sub,
    E.Sub: _add_sub,
    E.Mul: _mul,
    E.Cast: _cast,
    E.FloorDiv: lambda e: ({type(e)(simplify(e.a), e.b, e.dtype): 1}, 0),
    E.FloorMod: lambda e: ({type(e)(simplify(e.a), e.b, e.dtype): 1}, 0),
}, default=_atom)


def coefficient(e: E.Expr, v: E.Var) -> int | None:
    """``c`` when ``e == rest + c * v`` with ``rest`` free of ``v`` (0 when ``v`` does not
    occur); None when ``v`` occurs non-linearly (``linear_form``'s reading)."""
    terms, _ = linear_form(e)
    c = 0
    for atom, k in terms.items():
        if atom is v:
            c = k
        elif v in E.free_vars(atom):
            return None
    return c


def from_linear(terms: LinearTerms, const: int, dtype: str = "int32") -> E.Expr:
    """Rebuild an expression from a linear form (positive terms first, constant last), in
    ``dtype``: an atom of another integer type (a load of an int8 tensor that an integer cast
    widened, transparent to ``linear_form``) is cast to it, so the sums do not wrap at the
    atom's width."""
    out: E.Expr | None = None
    for atom, c in sorted(terms.items(), key=lambda kv: kv[1] < 0):
        atom = atom if atom.dtype == dtype else E.Cast(dtype, atom)
        if out is None:
            out = atom * c if c != 1 else atom
        elif c > 0:
            out = out + (atom * c if c != 1 else atom)
        else:
            out = out - (atom * -c if c != -1 else atom)
    if out is None:
        return E.IntImm(const, dtype)
    return out + const if const >= 0 else out - (-const)


def simplify(e: E.Expr) -> E.Expr:
    """Canonical affine form of an integer index expression (``(x*4 + y) - x*4`` becomes ``y``);
    non-integer or non-index expressions come back unchanged. A variable or a constant is its
    own canonical form (returned as is: over half the indices ``lower`` simplifies are bare
    loop variables). Nor is an atom of ``linear_form`` (a ``min``, a ``max``, a load: ``{e: 1}``
    and 0, which ``from_linear`` rebuilds as ``e + 0``, that is ``e``): returned as is without
    hashing its tree as a dict key (the clamps of every padded DMA's box)."""
    cls = type(e)
    if cls is E.Var or cls is E.IntImm:
        return e
    if e.dtype.startswith("float") or e.dtype == "bool" or _LINEAR.rule(cls) is _atom:
        return e
    terms, const = linear_form(e)
    return from_linear(terms, const, e.dtype)


def to_isl(e: E.Expr, name: Mapping[E.Var, str]) -> str:
    """isl text of an affine expression over the variables in ``name``."""
    return _ISL(e, name)


def _isl_var(e: E.Var, name: Mapping[E.Var, str]) -> str:
    if e not in name:
        raise PolyError(f"variable {e.name} is not bound in this analysis")
    return name[e]


def _not_affine(e: E.Expr, name: Mapping[E.Var, str]) -> str:
    raise PolyError(f"index expression {e} is not affine (+, -, * by a constant, // and % by a "
                    f"positive constant)")


def _isl_mul(e: E.Mul, name: Mapping[E.Var, str]) -> str:
    if isinstance(e.a, E.IntImm) or isinstance(e.b, E.IntImm):
        return f"({_ISL(e.a, name)} * {_ISL(e.b, name)})"
    return _not_affine(e, name)


def _isl_div(e: E.FloorDiv | E.FloorMod, name: Mapping[E.Var, str]) -> str:
    if not (isinstance(e.b, E.IntImm) and e.b.value > 0):
        return _not_affine(e, name)
    if isinstance(e, E.FloorDiv):
        return f"floor(({_ISL(e.a, name)})/{e.b.value})"
    return f"(({_ISL(e.a, name)}) mod {e.b.value})"


def _isl_cast(e: E.Cast, name: Mapping[E.Var, str]) -> str:
    if e.dtype.startswith("float"):
        return _not_affine(e, name)
    return _ISL(e.value, name)


_ISL: Dispatch[str] = Dispatch("isl text", {
    E.Var: _isl_var,
    E.IntImm: lambda e, name: str(e.value),
    E.Add: lambda e, name: f"({_ISL(e.a, name)} + {_ISL(e.b, name)})",
    E.Sub: lambda e, name: f"({_ISL(e.a, name)} - {_ISL(e.b, name)})",
    E.Mul: _isl_mul,
    E.FloorDiv: _isl_div,
    E.FloorMod: _isl_div,
    E.Min: lambda e, name: f"{e.symbol}({_ISL(e.a, name)}, {_ISL(e.b, name)})",
    E.Max: lambda e, name: f"{e.symbol}({_ISL(e.a, name)}, {_ISL(e.b, name)})",
    E.Cast: _isl_cast,
}, default=_not_affine)


def _val(v: isl.Val) -> tuple[int, int]:
    return v.get_num_si(), v.get_den_val().get_num_si()


def aff_to_expr(aff: isl.Aff | BoxLo, var: Mapping[str, E.Var]) -> E.Expr:
    """The integer value of an isl ``aff`` over parameters named in ``var``, as an expression
    (a ``BoxLo``, ``set_box``'s closed form, gives the same expression isl's aff would).

    isl writes an integer-valued affine function with rational coefficients and integer
    divisions ``floor(aff_j)``; multiplying by the common denominator gives ``num // den``."""
    from math import lcm

    if isinstance(aff, BoxLo):
        return from_linear({var[n]: c for n, c in aff.terms}, aff.const)
    terms: list[tuple[E.Expr, tuple[int, int]]] = []
    for i in range(aff.dim(isl.dim_type.param)):
        n, d = _val(aff.get_coefficient_val(isl.dim_type.param, i))
        if n:
            terms.append((var[str(aff.get_dim_name(isl.dim_type.param, i))], (n, d)))
    for j in range(aff.dim(isl.dim_type.div)):
        n, d = _val(aff.get_coefficient_val(isl.dim_type.div, j))
        if n:
            terms.append((aff_to_expr(aff.get_div(j), var), (n, d)))
    cn, cd = _val(aff.get_constant_val())
    den = lcm(cd, *(d for _, (_, d) in terms))
    num: LinearTerms = {}
    for atom, (n, d) in terms:
        num[atom] = num.get(atom, 0) + n * den // d
    body = from_linear(num, cn * den // cd)
    return body if den == 1 else simplify(body) // den


# --------------------------------------------------------------------------- boxes


@dataclass(frozen=True)
class BoxLo:
    """An integer affine lower bound ``sum(c * param) + const`` (params by name, in the set's
    parameter order, zero coefficients left out): ``set_box``'s closed form of what isl's
    ``dim_min`` gives for a box-shaped set, read by ``aff_to_expr`` like an isl ``Aff``."""

    terms: tuple[tuple[str, int], ...]
    const: int


@dataclass(frozen=True)
class DimBox:
    """One dimension of a parametric box: ``lo`` (an isl Aff or its closed form ``BoxLo`` over
    the parameters, or None when the lower bound is piecewise, then ``lo_min`` is a constant
    lower bound used instead), the constant ``extent``, and the range of ``lo`` over the
    parameters."""

    lo: isl.Aff | BoxLo | None
    lo_min: int | None
    lo_max: int | None
    hi_max: int | None
    extent: int


def _int(v: isl.Val, what: str) -> int:
    if not v.is_int():
        raise PolyError(f"{what} is unbounded")
    return v.get_num_si()


def _opt(v: isl.Val) -> int | None:
    return v.get_num_si() if v.is_int() else None


@lru_cache(maxsize=8192)
def set_box(text: str) -> tuple[DimBox, ...]:
    """Parametric bounding box of an isl set given as text: per dimension an affine lower bound
    in the parameters and the largest extent over all parameter values (cached by text).

    A box-shaped set (``box_closed_form``: every variable in a constant range, the other
    constraints implied by those ranges, outputs affine with the same parameter part in every
    piece) is answered in closed form, as isl answers it, without isl: parsing the text is most
    of an isl call, and the regions of a convolution's stages are nearly all of this shape."""
    fast = box_closed_form(text)
    if fast is not None:
        return fast
    return isl_set_box(text)


def isl_set_box(text: str) -> tuple[DimBox, ...]:
    """``set_box`` computed by isl (every set; the closed form's reference)."""
    s = isl.Set(text)
    if s.is_empty():
        raise PolyError(f"empty region {text}")
    dims = []
    for d in range(s.dim(isl.dim_type.set)):
        lo, hi = s.dim_min(d), s.dim_max(d)
        extent = _int(hi.sub(lo).max_val(), "extent") + 1
        lo_min, lo_max, hi_max = _opt(lo.min_val()), _opt(lo.max_val()), _opt(hi.max_val())
        pieces = lo.get_pieces()
        if len(pieces) == 1:
            dims.append(DimBox(pieces[0][1], lo_min, lo_max, hi_max, extent))
        elif lo_min is None or hi_max is None:
            raise PolyError(f"dimension {d} of {text}: piecewise lower bound over unbounded "
                            f"parameters; give the parameters' ranges")
        else:  # piecewise lower bound: fall back to the constant hull over all parameters
            dims.append(DimBox(None, lo_min, lo_min, hi_max, hi_max - lo_min + 1))
    return tuple(dims)


#: a linear form over set variables by name: (coefficients, constant)
_Lin = tuple[dict[str, int], int]

_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*|<=|[-+*()<=])")
_HEAD = re.compile(r"\[([^\]]*)\] -> \{ (.*) \}", re.S)
_PIECE = re.compile(r"\[([^\]]*)\] : (?:exists \(([^:]*) : (.*)\)|(.*))", re.S)


class _NotBox(Exception):
    """The text is outside what ``box_closed_form`` answers (isl answers it)."""


def _tokens(text: str) -> list[str]:
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip():
                raise _NotBox(text[pos:])
            break
        toks.append(m.group(1))
        pos = m.end()
    return toks


def _parse_lin(toks: list[str], k: int) -> tuple[_Lin, int]:
    """A sum of terms from ``toks[k]`` (integers, names, ``+ - *`` by a constant, parentheses)
    and the position after it."""
    (c, n), k = _parse_term(toks, k)
    terms = dict(c)
    while k < len(toks) and toks[k] in "+-":
        sign = 1 if toks[k] == "+" else -1
        (c2, n2), k = _parse_term(toks, k + 1)
        for v, x in c2.items():
            terms[v] = terms.get(v, 0) + sign * x
        n += sign * n2
    return (terms, n), k


def _parse_term(toks: list[str], k: int) -> tuple[_Lin, int]:
    (c, n), k = _parse_factor(toks, k)
    while k < len(toks) and toks[k] == "*":
        (c2, n2), k = _parse_factor(toks, k + 1)
        if c and c2:
            raise _NotBox("a product of variables")
        scale, (c, n) = (n2, (c, n)) if not c2 else (n, (c2, n2))
        c, n = {v: x * scale for v, x in c.items()}, n * scale
    return (c, n), k


def _parse_factor(toks: list[str], k: int) -> tuple[_Lin, int]:
    if k >= len(toks):
        raise _NotBox("truncated")
    t = toks[k]
    if t == "(":
        lin, k = _parse_lin(toks, k + 1)
        if k >= len(toks) or toks[k] != ")":
            raise _NotBox("unbalanced")
        return lin, k + 1
    if t == "-":
        (c, n), k = _parse_factor(toks, k + 1)
        return ({v: -x for v, x in c.items()}, -n), k
    if t.isdigit():
        return ({}, int(t)), k + 1
    if t[0].isalpha() or t[0] == "_":
        if k + 1 < len(toks) and toks[k + 1] == "(":
            raise _NotBox(f"function {t}")  # floor, min, max: isl's
        if t in ("and", "or", "mod", "exists", "not"):
            raise _NotBox(t)
        return ({t: 1}, 0), k + 1
    raise _NotBox(t)


@lru_cache(maxsize=16384)
def _lin_of(text: str) -> _Lin:
    """The linear form of ``text`` (memoised: a layer's candidates' regions repeat most of
    their constraints and equalities word for word; the form is shared, never modified)."""
    toks = _tokens(text)
    lin, k = _parse_lin(toks, 0)
    if k != len(toks):
        raise _NotBox(text)
    return lin


def _span_of(lin: _Lin, ranges: Mapping[str, int]) -> tuple[int, int]:
    """The smallest and largest value of ``lin`` with each variable in ``[0, ranges[v])``."""
    coef, lo = lin
    hi = lo
    for v, c in coef.items():
        if v not in ranges:
            raise _NotBox(f"{v} has no range")
        top = c * (ranges[v] - 1)
        if top < 0:
            lo += top
        else:
            hi += top
    return lo, hi


def _piece_box(outs: list[str], cons: list[str]) -> tuple[dict[str, int], list[_Lin]]:
    """One piece: the variables' ranges and each output's linear form; raises ``_NotBox`` where
    a constraint is not a range implied by the variables' ranges."""
    ranges: dict[str, int] = {}
    bounded: list[tuple[_Lin, int]] = []  # 0 <= lin < n: checked once every range is known
    value: dict[str, _Lin] = {}
    for c in cons:
        if " <= " in c:
            lo_text, _, rest = c.partition(" <= ")
            mid, sep, hi_text = rest.rpartition(" < ")
            if lo_text != "0" or not sep or not hi_text.isdigit():
                raise _NotBox(c)
            lin = _lin_of(mid)
            n = int(hi_text)
            name = mid.strip()
            if name in ranges or not (name.isidentifier() and lin == ({name: 1}, 0)):
                bounded.append((lin, n))
            elif n <= 0:
                raise _NotBox(c)  # an empty range: isl reports the empty set
            else:
                ranges[name] = n
        elif " = " in c:
            lhs, _, rhs = c.partition(" = ")
            if lhs not in outs or lhs in value:
                raise _NotBox(c)  # an equality defining an existential: isl's to eliminate
            value[lhs] = _lin_of(rhs)
        else:
            raise _NotBox(c)
    for lin, n in bounded:
        lo, hi = _span_of(lin, ranges)
        if lo < 0 or hi >= n:
            raise _NotBox("a constraint cuts the box")  # a real cut: isl's
    if any(o not in value for o in outs):
        raise _NotBox("an output without its equality")
    return ranges, [value[o] for o in outs]


def box_closed_form(text: str) -> tuple[DimBox, ...] | None:
    """``isl_set_box(text)`` without isl when the set is box-shaped, else None.

    Box-shaped: ``[params] -> { [outs] : exists (vars : conds) ; ... }`` where in every piece
    each existential has a range ``0 <= v < n`` and each parameter one or none (unbounded: a
    lower bound over it has no constant bounds, isl's infinities; an outer loop's variable in
    ``footprint`` without ``params``, as DMA insertion asks), every other range constraint
    holds anywhere in those ranges, each output is an affine equality, and every piece gives
    each output the same parameter coefficients and the parameters the same ranges. Then the
    piece's region of an output is its parameter part plus a constant interval (the
    existentials' span), and the union's lower bound is one affine piece: exactly what isl
    computes (a parameter whose range is one value is that value, as isl folds it)."""
    m = _HEAD.fullmatch(text)
    if m is None:
        return None
    params = [p.strip() for p in m.group(1).split(",") if p.strip()]
    try:
        pieces = []
        for body in m.group(2).split("; "):
            pm = _PIECE.fullmatch(body)
            if pm is None:
                return None
            outs = [o.strip() for o in pm.group(1).split(",") if o.strip()]
            conds = pm.group(3) if pm.group(3) is not None else pm.group(4)
            ranges, lins = _piece_box(outs, conds.split(" and "))
            if pm.group(2) is not None:
                exists = {v.strip() for v in pm.group(2).split(",")}
                if any(v not in ranges for v in exists):
                    return None
                if set(ranges) - exists - set(params):
                    return None  # a range on a name neither bound nor a parameter
            elif set(ranges) - set(params):
                return None
            pieces.append((ranges, lins))
    except _NotBox:
        return None
    return box_of_pieces(pieces, params)


#: one piece of a union for ``box_of_pieces``: its variables' ranges, each output's affine form
Piece = tuple[Mapping[Any, int], Sequence[tuple[Mapping[Any, int], int]]]


def box_of_pieces(pieces: Sequence[Piece], params: Sequence[Any]) -> tuple[DimBox, ...] | None:
    """The box of a union of pieces, each ``(ranges, forms)``: the ranges ``0 <= v < n`` of its
    variables (parameters among them or not: one without is unbounded) and each output's
    affine form ``(coefficients, constant)``; None where the union is not one box (the pieces
    give an output different parameter coefficients, or the parameters different ranges).
    ``box_closed_form``'s arithmetic on the forms it parsed from isl text, and region
    inference's on the forms it took from expressions (``regions._closed_box``): an output's
    parameter part (a parameter of one value left out) plus the span of its other variables,
    the union's lower bound one affine piece, as isl computes it."""
    if not pieces or len({len(lins) for _, lins in pieces}) != 1:
        return None
    # the parameters' ranges (a parameter without one is unbounded: every integer)
    pranges = {p: pieces[0][0][p] for p in params if p in pieces[0][0]}
    if any(r.get(p) != pranges.get(p) for r, _ in pieces for p in params):
        return None
    dims = []
    for d in range(len(pieces[0][1])):
        ppart: dict[Any, int] | None = None
        lmin, lmax = None, None
        for ranges, lins in pieces:
            coef, const = lins[d]
            mine = {p: coef[p] for p in params if coef.get(p, 0) and pranges.get(p, 2) > 1}
            if ppart is None:
                ppart = mine
            elif mine != ppart:
                return None  # the pieces' lower bounds differ by parameter: piecewise
            rest = ({v: c for v, c in coef.items() if v not in params}, const)
            lo, hi = _span_of(rest, ranges)
            lmin = lo if lmin is None else min(lmin, lo)
            lmax = hi if lmax is None else max(lmax, hi)
        assert ppart is not None and lmin is not None and lmax is not None
        extent = lmax - lmin + 1
        terms = tuple((p, ppart[p]) for p in params if p in ppart)
        if any(p not in pranges for p in ppart):  # over an unbounded parameter: no bounds
            dims.append(DimBox(BoxLo(terms, lmin), None, None, None, extent))
            continue
        plo, phi = _span_of((ppart, 0), pranges)
        dims.append(DimBox(BoxLo(terms, lmin), plo + lmin, phi + lmin, phi + lmax, extent))
    return tuple(dims)


@dataclass(frozen=True)
class Box:
    """A rectangular region ``[mins[d], mins[d] + extents[d])`` per dimension; ``mins`` are
    expressions in the outer (parameter) variables, ``extents`` constants."""

    mins: tuple[E.Expr, ...]
    extents: tuple[int, ...]

    def at(self, env: Mapping[E.Var, int]) -> tuple[tuple[int, int], ...]:
        """Concrete ``(min, extent)`` per dimension for given parameter values."""
        return tuple((_eval_int(m, env), x) for m, x in zip(self.mins, self.extents, strict=True))

    def clamp(self, lower: Sequence[E.ExprLike], upper: Sequence[E.ExprLike]) -> Clamped:
        """Split the box against the valid region ``[lower, upper)`` of each dimension: the
        in-bounds part (what a DMA reads) and the zero padding before and after it."""
        mins, exts, before, after = [], [], [], []
        for m, x, lo, hi in zip(self.mins, self.extents, lower, upper, strict=True):
            b = E.min_(E.max_(E.as_expr(lo) - m, 0), x)
            a = E.min_(E.max_(m + x - E.as_expr(hi), 0), x - b)
            before.append(simplify(b))
            after.append(simplify(a))
            mins.append(simplify(m + b))
            exts.append(simplify(x - b - a))
        return Clamped(tuple(mins), tuple(exts), tuple(before), tuple(after))


@dataclass(frozen=True)
class Clamped:
    """The in-bounds part of a box (``mins``, ``extents``) and the padding on each side, all
    expressions in the parameters (evaluate with ``at``)."""

    mins: tuple[E.Expr, ...]
    extents: tuple[E.Expr, ...]
    pad_before: tuple[E.Expr, ...]
    pad_after: tuple[E.Expr, ...]

    def at(self, env: Mapping[E.Var, int]) -> dict[str, tuple[int, ...]]:
        ev = lambda xs: tuple(_eval_int(x, env) for x in xs)  # noqa: E731
        return {"mins": ev(self.mins), "extents": ev(self.extents),
                "pad_before": ev(self.pad_before), "pad_after": ev(self.pad_after)}


def _eval_int(e: E.Expr, env: Mapping[E.Var, int]) -> int:
    v = E.substitute(e, {k: E.const(int(x)) for k, x in env.items()})
    if not isinstance(v, E.IntImm):
        free = sorted(x.name for x in E.free_vars(v))
        raise PolyError(f"cannot evaluate {v}: free variables {free}")
    return v.value


def region_text(indices: Sequence[E.Expr], ranged: Mapping[E.Var, int], params: Sequence[E.Var],
                conds: Sequence[str] = (), names: Mapping[E.Var, str] | None = None) -> str:
    """isl text of the image of ``indices`` over the ``ranged`` variables (each in
    ``[0, extent)``), parametric in ``params``; ``conds`` are extra isl constraints."""
    name = dict(names) if names is not None else {}
    for v in [*params, *ranged]:
        name.setdefault(v, f"v{len(name)}")
    outs = [f"o{d}" for d in range(len(indices))]
    cons = [f"0 <= {name[v]} < {x}" for v, x in ranged.items()]
    cons += [f"{o} = {to_isl(i, name)}" for o, i in zip(outs, indices, strict=True)]
    cons += list(conds)
    ex = ", ".join(name[v] for v in ranged)
    body = " and ".join(cons) or "true"
    inner = f"exists ({ex} : {body})" if ex else body
    return f"[{', '.join(name[p] for p in params)}] -> {{ [{', '.join(outs)}] : {inner} }}"


def footprint(indices: Sequence[E.Expr], ranges: Mapping[E.Var, int],
              params: Mapping[E.Var, int] | None = None) -> Box:
    """The box of tensor elements ``indices`` touches while each variable of ``ranges`` runs over
    ``[0, extent)``; other variables are parameters (outer loops, fixed), optionally bounded
    by ``params`` (``[0, extent)``) so that guarded or piecewise regions get exact extents.

    Strided and windowed accesses (``h*2 + r``) give exact halo extents; the result's mins are
    affine expressions in the parameters, computed once, to be evaluated per tile."""
    free = set().union(*(E.free_vars(i) for i in indices)) if indices else set()
    pvars = [v for v in (params or {})] + sorted(
        (v for v in free if v not in ranges and v not in (params or {})), key=lambda v: v.name)
    name = {v: f"p{k}" for k, v in enumerate(pvars)}
    conds = [f"0 <= {name[v]} < {x}" for v, x in (params or {}).items()]
    text = region_text(indices, {v: x for v, x in ranges.items()}, pvars, conds, name)
    by_name = {n: v for v, n in name.items()}
    dims = set_box(text)
    mins = tuple(aff_to_expr(d.lo, by_name) if d.lo is not None else E.const(d.lo_min or 0)
                 for d in dims)
    return Box(mins, tuple(d.extent for d in dims))


def footprint_at(indices: Sequence[E.Expr], ranges: Mapping[E.Var, int]
                 ) -> tuple[tuple[int, int], ...]:
    """``footprint(indices, ranges).at({})``, the concrete ``(min, extent)`` per dimension,
    for indices whose variables are all in ``ranges``. Where each index is affine in them
    (``linear_form``: every atom a ranged variable) and every range holds a value, the answer
    is the closed form ``set_box`` finds in the text ``footprint`` would write
    (``box_closed_form``: one piece, no parameters, each output's span ``_span_of`` over the
    ranges), taken from the linear forms without writing, parsing and evaluating that text
    (region inference asks it of every on-chip access of every candidate); anything else
    goes through ``footprint``."""
    if all(n >= 1 for n in ranges.values()):
        out = []
        for i in indices:
            terms, const = linear_form(i)
            if not all(type(v) is E.Var and v in ranges for v in terms):
                break
            lo, hi = _span_of((terms, const), ranges)  # type: ignore[arg-type]
            out.append((lo, hi - lo + 1))
        else:
            return tuple(out)
    return footprint(indices, ranges).at({})


# --------------------------------------------------------------------------- capacity

#: scratchpads whose sizes a ``HwConfig`` gives
SCRATCHPADS = BUFFER_KINDS


def buffer_bytes(buf: Buffer) -> int:
    """Bytes a buffer occupies (elements x element width)."""
    return buf.size * E.DTYPES[buf.dtype] // 8


def check_capacity(buffers: Iterable[Buffer], hw: HwConfig, copies: int = 1) -> None:
    """Raise ``CapacityError`` when the buffers of one scratchpad scope (live together, each
    ``copies`` times, e.g. per virtual thread) need more bytes than the scratchpad has."""
    need: dict[str, list[Buffer]] = {}
    for b in buffers:
        if b.scope in SCRATCHPADS:
            need.setdefault(b.scope, []).append(b)
    for scope, bufs in need.items():
        total = copies * sum(buffer_bytes(b) for b in bufs)
        avail = getattr(hw.scratchpad, scope)
        if total > avail:
            parts = ", ".join(f"{b.name}{list(b.shape)} {b.dtype} = {buffer_bytes(b)} B"
                              for b in bufs)
            times = f" x {copies} copies" if copies > 1 else ""
            raise CapacityError(f"scratchpad {scope!r} of {hw.name}: needs {total} bytes "
                                f"({parts}{times}), {avail} available")


# --------------------------------------------------------------------------- dependences


@dataclass(frozen=True)
class Dependences:
    """Dependences between instances of one statement in its original (lexicographic) order:
    flow (write then read), anti (read then write), output (write then write)."""

    flow: isl.Map
    anti: isl.Map
    output: isl.Map

    def all(self) -> isl.Map:
        return self.flow.union(self.anti).union(self.output)


@lru_cache(maxsize=1024)
def dependences(domain: str, writes: str, reads: str) -> Dependences:
    """Dependences of a statement with iteration ``domain`` (isl set text), ``writes`` and
    ``reads`` access relations (isl map text, domain -> tensor elements; a union over tensors
    is fine as long as tensor names tag the ranges)."""
    dom = isl.Set(domain)
    w = isl.UnionMap(writes).intersect_domain(isl.UnionSet.from_set(dom))
    r = isl.UnionMap(reads).intersect_domain(isl.UnionSet.from_set(dom))
    before = isl.UnionMap.from_map(dom.lex_lt_set(dom))

    def rel(a: isl.UnionMap, b: isl.UnionMap) -> isl.Map:
        u = a.apply_range(b.reverse()).intersect(before)
        return _as_map(u, dom)

    return Dependences(flow=rel(w, r), anti=rel(r, w), output=rel(w, w))


def _as_map(u: isl.UnionMap, dom: isl.Set) -> isl.Map:
    return u.extract_map(dom.get_space().map_from_set())


def violations(deps: isl.Map, schedule: isl.Map) -> isl.Map:
    """The dependences ``x -> y`` that a new ``schedule`` (domain -> time vector) no longer runs
    in order (``time(y) <= time(x)``); empty when the transformation is legal."""
    times = deps.apply_domain(schedule).apply_range(schedule)
    rng = schedule.range()
    return times.intersect(rng.lex_ge_set(rng))


def carries(deps: isl.Map, schedule: isl.Map, level: int) -> bool:
    """Whether the loop at ``level`` of ``schedule`` carries a dependence (two dependent
    instances share the outer loop values and differ in this one): such a loop must not run
    its iterations in parallel (threads, virtual threads)."""
    times = deps.apply_domain(schedule).apply_range(schedule)
    n = times.dim(isl.dim_type.in_)
    a = [f"a{i}" for i in range(n)]
    b = [f"b{i}" for i in range(n)]
    same = [f"{a[i]} = {b[i]}" for i in range(level)]
    cons = " and ".join([*same, f"({a[level]} < {b[level]} or {a[level]} > {b[level]})"])
    sel = isl.Map(f"{{ [{', '.join(a)}] -> [{', '.join(b)}] : {cons} }}")
    return not times.intersect(sel).is_empty()
