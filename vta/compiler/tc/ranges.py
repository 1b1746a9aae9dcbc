"""Range inference with isl, following Tensor Comprehensions' rule.

Each index variable gets the largest rectangular range for which no access reads out of
bounds, found in rounds (TC's algorithm, docs/tc.md): ``where i in lo:hi`` fixes a range up
front; in each round every index expression (one dimension of one access) that contains
exactly one unresolved variable yields the set of values of that variable for which the
expression stays inside its dimension *for every value* of the variables resolved in earlier
rounds; the sets a variable gets in one round are intersected, and the variables are resolved
together at the end of the round. An output index of a new tensor is also non-negative (the
tensor starts at 0). A variable no round can resolve (every expression that uses it has
another unresolved variable, or it appears only on the left) is ambiguous or unbounded: an
error that asks for a ``where`` clause.

Everything is parametric in the size variables (isl parameters, each >= 1), so ``vta tc show``
prints the domains symbolically; ``instantiate`` fixes the sizes and checks what only concrete
sizes decide: empty ranges, and the preconditions (accesses that range inference did not use,
e.g. ``C(i + j)`` when ``i`` and ``j`` come from ``B(i)`` and ``D(j)``, must stay in bounds).

The shape of a tensor a statement defines is the upper end of its left-hand ranges (+1).
One isl computation per index expression per round; nothing is evaluated per element.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

import islpy as isl

from vta.compiler.tc import ast as A
from vta.compiler.tc.sema import CheckedDef, CheckedStmt, affine_problem
from vta.errors import TcRangeError, TcSizeError

__all__ = ["StmtRanges", "DefRanges", "Concrete", "infer", "instantiate", "reads_of",
           "index_vars", "isl_expr"]

_RESERVED = {"and", "or", "not", "exists", "mod", "floor", "ceil", "min", "max", "implies",
             "true", "false", "infty", "NaN", "rat", "div", "xor"}


def _iname(name: str) -> str:
    """An isl-safe spelling of a TC identifier."""
    return f"{name}_" if name in _RESERVED else name


def isl_expr(e: A.TExpr) -> str:
    """isl text of an affine typed index expression (sema checked it is affine)."""
    if isinstance(e, A.TNum):
        return str(int(e.value))
    if isinstance(e, (A.TSize, A.TIndex)):
        return _iname(e.name)
    if isinstance(e, A.TCast):
        return isl_expr(e.a)
    if isinstance(e, A.TUnary):
        return f"(-{isl_expr(e.a)})"
    assert isinstance(e, A.TBinary), e
    a, b = isl_expr(e.a), isl_expr(e.b)
    if e.op == "/":
        return f"floor(({a})/{b})"
    if e.op == "%":
        return f"(({a}) mod {b})"
    return f"({a} {e.op} {b})"


def index_vars(e: A.TExpr) -> list[str]:
    """Index variables in ``e``, first-use order."""
    out: list[str] = []

    def go(x: A.TExpr) -> None:
        if isinstance(x, A.TIndex):
            if x.name not in out:
                out.append(x.name)
        elif isinstance(x, A.TRead):
            for i in x.indices:
                go(i)
        elif isinstance(x, (A.TUnary, A.TCast)):
            go(x.a)
        elif isinstance(x, A.TBinary):
            go(x.a)
            go(x.b)
        elif isinstance(x, A.TSelect):
            go(x.cond)
            go(x.t)
            go(x.f)
        elif isinstance(x, A.TCall):
            for y in x.args:
                go(y)

    go(e)
    return out


def reads_of(e: A.TExpr) -> list[A.TRead]:
    """Every tensor read in ``e`` (in evaluation order; a read inside another's index after
    it)."""
    out: list[A.TRead] = []

    def go(x: A.TExpr) -> None:
        if isinstance(x, A.TRead):
            out.append(x)
            for i in x.indices:  # a data-dependent index reads too (A(B(i)) reads B(i))
                go(i)
        elif isinstance(x, (A.TUnary, A.TCast)):
            go(x.a)
        elif isinstance(x, A.TBinary):
            go(x.a)
            go(x.b)
        elif isinstance(x, A.TSelect):
            go(x.cond)
            go(x.t)
            go(x.f)
        elif isinstance(x, A.TCall):
            for y in x.args:
                go(y)

    go(e)
    return out


def render(e: A.TExpr) -> str:
    """TC-like text of a typed expression (for messages)."""
    if isinstance(e, A.TNum):
        return repr(e.value)
    if isinstance(e, (A.TSize, A.TIndex)):
        return e.name
    if isinstance(e, A.TRead):
        return f"{e.tensor}({', '.join(render(i) for i in e.indices)})"
    if isinstance(e, A.TCast):
        return render(e.a)
    if isinstance(e, A.TUnary):
        return f"{e.op}{render(e.a)}"
    if isinstance(e, A.TBinary):
        return f"{render(e.a)} {e.op} {render(e.b)}"
    if isinstance(e, A.TSelect):
        return f"{render(e.cond)} ? {render(e.t)} : {render(e.f)}"
    assert isinstance(e, A.TCall)
    return f"{e.fn}({', '.join(render(a) for a in e.args)})"


@dataclass(frozen=True)
class Access:
    """A read that range inference considers: ``lhs`` for the written tensor's own bounds
    (a tensor written again), ``exists`` for a ``where exists`` clause."""

    read: A.TRead
    lhs: bool = False

    @property
    def text(self) -> str:
        return render(self.read)


@dataclass(frozen=True)
class StmtRanges:
    """The ranges of one statement: ``ranges[v]`` a parametric 1-D isl set ``[lo, hi]`` per
    index variable; ``domain`` their product (named ``S<k>``, variables in order);
    ``preconditions`` the accesses that are not in bounds for every size, each with the set
    of sizes where it is (isl params set) and its out-of-bounds points."""

    stmt: CheckedStmt
    ranges: dict[str, isl.Set]
    domain: isl.Set
    preconditions: tuple[tuple[Access, isl.Set, isl.Set], ...]
    #: TC's ranges where they differ from ``ranges``: a new tensor's index whose range TC
    #: infers with a negative minimum (``O(i) = I(i + 5)``: ``-5:N - 5``); vta's tensors start
    #: at 0, so ``ranges`` (what is computed and stored) start there
    tc_ranges: dict[str, isl.Set] = field(default_factory=dict)


@dataclass(frozen=True)
class DefRanges:
    """Range inference of a whole definition: per statement, and each tensor's dimensions as
    1-D sets ``[0, size)`` (inputs: their declared sizes; defined tensors: the first defining
    statement's left-hand ranges)."""

    cdef: CheckedDef
    params: tuple[str, ...]
    context: isl.Set
    stmts: tuple[StmtRanges, ...]
    extents: dict[str, tuple[isl.Set, ...]]

    def shape_text(self, tensor: str) -> tuple[str, ...]:
        """Each dimension's size as a C-like expression in the size variables."""
        build = isl.AstBuild.from_context(self.context)
        out = []
        for e in self.extents[tensor]:
            size = e.dim_max(0).add(_one(self.context))
            out.append(build.expr_from_pw_aff(size.gist_params(self.context)).to_C_str())
        return tuple(out)

    def range_text(self, k: int, var: str, tc: bool = False) -> str:
        """``lo:hi`` of ``var`` in statement ``k`` (C-like, ``hi`` exclusive); ``tc``: TC's
        range (``StmtRanges.tc_ranges``) where it differs."""
        sr = self.stmts[k]
        s = sr.tc_ranges.get(var, sr.ranges[var]) if tc else sr.ranges[var]
        build = isl.AstBuild.from_context(self.context)
        lo = build.expr_from_pw_aff(s.dim_min(0).gist_params(self.context)).to_C_str()
        hi = build.expr_from_pw_aff(s.dim_max(0).add(_one(self.context))
                                    .gist_params(self.context)).to_C_str()
        return f"{lo}:{hi}"


def _one(ctx: isl.Set) -> isl.PwAff:
    return isl.PwAff.from_aff(isl.Aff.zero_on_domain(isl.LocalSpace.from_space(
        ctx.get_space()))).add_constant_val(isl.Val.int_from_si(ctx.get_ctx(), 1))


class _Inference:
    def __init__(self, cdef: CheckedDef) -> None:
        self.cdef = cdef
        self.params = tuple(cdef.sizes)
        self.p = f"[{', '.join(_iname(s) for s in self.params)}] -> " if self.params else ""
        cons = " and ".join(f"{_iname(s)} >= 1" for s in self.params) or "true"
        self.context = isl.Set(f"{self.p}{{ : {cons} }}")
        self.extents: dict[str, tuple[isl.Set, ...]] = {}
        for t in cdef.inputs:
            if t.shape_of is None:  # starting values take their tensor's shape, once inferred
                self.extents[t.name] = tuple(
                    self.set1(f"0 <= y < {_iname(d) if isinstance(d, str) else d}")
                    for d in t.dims)

    def set1(self, cons: str, var: str = "y") -> isl.Set:
        """A 1-D set over ``[var]`` with the size parameters and the context."""
        return isl.Set(f"{self.p}{{ [{var}] : {cons} }}").intersect_params(self.context)

    def err(self, st: CheckedStmt, msg: str, var: str | None = None) -> TcRangeError:
        pos = st.var_pos.get(var, st.pos) if var is not None else st.pos
        return TcRangeError(f"{st.label}: {msg}", self.cdef.source, pos)

    # ------------------------------------------------------------------ one statement

    def accesses(self, st: CheckedStmt) -> list[Access]:
        acc = [Access(r) for r in reads_of(st.rhs)]
        acc += [Access(r) for r in st.exists]
        if st.prev >= 0:
            acc.append(Access(A.TRead(st.tensor, tuple(A.TIndex(v) for v in st.lhs),
                                      st.dtype), lhs=True))
        return acc

    def valid(self, e: A.TExpr, x: str, resolved: dict[str, isl.Set],
              extent: isl.Set) -> isl.Set:
        """Values of ``x`` keeping ``e`` inside ``extent`` for all values of the resolved
        variables in ``e``."""
        others = [v for v in index_vars(e) if v != x]
        names = [_iname(x), *(_iname(v) for v in others)]
        m = isl.Map(f"{self.p}{{ [{', '.join(names)}] -> [{isl_expr(e)}] }}")
        bad = m.intersect_range(extent.complement()).domain()
        box = reduce(lambda a, b: a.flat_product(b), (resolved[v] for v in others),
                     isl.Set(f"{self.p}{{ [x] }}"))
        bad_x = bad.intersect(box).project_out(isl.dim_type.set, 1, len(others))
        # only sizes where the resolved ranges are non-empty count: elsewhere the statement
        # has no points (without this, WeirdConv's h is "unbounded" where w's range is empty)
        live = box.params()
        return isl.Set(f"{self.p}{{ [x] }}").intersect_params(self.context) \
            .intersect_params(live).subtract(bad_x)

    def interval(self, st: CheckedStmt, var: str, good: isl.Set) -> isl.Set:
        """``good`` checked to be a non-empty bounded interval (for some sizes)."""
        if good.is_empty():
            raise self.err(st, f"no value of index {var} keeps every access in bounds", var)
        if not good.is_bounded():
            raise self.err(st, f"the range of index {var} is unbounded; add a where clause "
                           f"(e.g. 'where {var} in 0:N')", var)
        lo = isl.Map("{ [a] -> [x] : x >= a }").intersect_domain(good.lexmin()).range()
        hi = isl.Map("{ [b] -> [x] : x <= b }").intersect_domain(good.lexmax()).range()
        span = lo.intersect(hi)
        if not span.is_subset(good):
            raise self.err(st, f"the values of index {var} that keep the accesses in bounds "
                           f"are not one interval ({good.coalesce()}); add a where clause", var)
        return span.coalesce()

    def statement(self, st: CheckedStmt) -> StmtRanges:
        """TC's ranges of ``st``; where a new tensor's index would start below 0 (TC keeps
        such a minimum), inferred again with that index held non-negative (vta's tensors
        start at 0), TC's ranges kept for the report."""
        tc = self.resolve(st, clip=False)
        new_lhs = set(st.lhs) if st.prev < 0 else set()
        nonneg = self.set1("x >= 0", "x")
        if all(tc[v].is_subset(nonneg) for v in new_lhs):
            resolved, tc_ranges = tc, {}
        else:
            resolved = self.resolve(st, clip=True)
            tc_ranges = {v: r for v, r in tc.items() if not r.is_equal(resolved[v])}
        accesses = self.accesses(st)
        domain = self.domain(st, resolved)
        pre = tuple(p for acc in accesses if (p := self.precondition(acc, st, domain)))
        return StmtRanges(st, resolved, domain, pre, tc_ranges)

    def resolve(self, st: CheckedStmt, clip: bool) -> dict[str, isl.Set]:
        """The rounds of TC's algorithm (module docstring); with ``clip``, a new tensor's
        left-hand indices are also held non-negative."""
        resolved: dict[str, isl.Set] = {}
        new_lhs = set(st.lhs) if st.prev < 0 and clip else set()
        for v, lo, hi in st.ranges:
            s = self.set1(f"{isl_expr(lo)} <= x < {isl_expr(hi)}", "x")
            if v in new_lhs:
                s = s.intersect(self.set1("x >= 0", "x"))
            resolved[v] = self.interval(st, v, s)
        accesses = self.accesses(st)
        unresolved = [v for v in st.vars if v not in resolved]
        while unresolved:
            found: dict[str, isl.Set] = {}
            for acc in accesses:
                extents = self.bounds(acc)
                for e, ext in zip(acc.read.indices, extents, strict=True):
                    free = [v for v in index_vars(e) if v in unresolved]
                    if len(free) != 1 or affine_problem(e):  # a gather: checked at run time
                        continue
                    x = free[0]
                    good = self.valid(e, x, resolved, ext)
                    found[x] = found[x].intersect(good) if x in found else good
            if not found:
                raise self.ambiguous(st, unresolved, accesses)
            for x, good in found.items():
                if x in new_lhs:
                    good = good.intersect(self.set1("x >= 0", "x"))
                resolved[x] = self.interval(st, x, good)
                unresolved.remove(x)
        return resolved

    def bounds(self, acc: Access) -> tuple[isl.Set, ...]:
        """What range inference keeps ``acc`` inside: an input's declared sizes, the tensor
        itself for a statement's own left-hand side, and for a read of a defined tensor the
        region the statements before have written (TC: the producer's written region, not the
        whole tensor from 0)."""
        if acc.lhs or acc.read.version < 0:
            return self.extents[acc.read.tensor]
        return self.written[(acc.read.tensor, acc.read.version)]

    def ambiguous(self, st: CheckedStmt, left: list[str], accesses: list[Access]) -> TcRangeError:
        uses = [a.text for a in accesses
                if any(v in left for e in a.read.indices for v in index_vars(e))]
        names = ", ".join(left)
        if uses and all(affine_problem(e) for a in accesses for e in a.read.indices
                        if any(v in left for v in index_vars(e))):
            return self.err(st, f"index {names} appears only in non-affine or data-dependent "
                            f"indices ({', '.join(uses)}), which range inference does not use; "
                            f"add a where clause (e.g. 'where {left[0]} in 0:N')", left[0])
        if not uses:
            return self.err(st, f"index {names} is used by no tensor read, so its range "
                            f"cannot be inferred; add a where clause (e.g. 'where {left[0]} in "
                            f"0:N')", left[0])
        return self.err(st, f"the range of index {names} is ambiguous: every access that uses "
                        f"{'it' if len(left) == 1 else 'them'} ({', '.join(uses)}) also uses "
                        f"another unresolved index; add a where clause (e.g. 'where "
                        f"{left[-1]} in 0:N')", left[0])

    def domain(self, st: CheckedStmt, ranges: dict[str, isl.Set]) -> isl.Set:
        point = isl.Set(f"{self.p}{{ [] }}").intersect_params(self.context)  # a 0-rank value
        d = reduce(lambda a, b: a.flat_product(b), (ranges[v] for v in st.vars), point)
        for i, v in enumerate(st.vars):
            d = d.set_dim_name(isl.dim_type.set, i, _iname(v))
        return d.set_tuple_name(f"S{st.index + 1}").gist_params(self.context)

    def precondition(self, acc: Access, st: CheckedStmt,
                     domain: isl.Set) -> tuple[Access, isl.Set, isl.Set] | None:
        """``(access, sizes where it stays in bounds, its out-of-bounds points)`` when the
        access can leave its tensor for some sizes, else None."""
        names = ", ".join(_iname(v) for v in st.vars)
        domain = domain.intersect_params(self.context)
        bad = domain.subtract(domain)  # empty, same space
        for e, ext in zip(acc.read.indices, self.extents[acc.read.tensor], strict=True):
            if affine_problem(e):  # a data-dependent index: checked when the program runs
                continue
            m = isl.Map(f"{self.p}{{ S{st.index + 1}[{names}] -> [{isl_expr(e)}] }}")
            bad = bad.union(m.intersect_range(ext.complement()).domain().intersect(domain))
        if bad.is_empty():
            return None
        ok = self.context.subtract(bad.params())
        return acc, ok, bad

    # ------------------------------------------------------------------ whole definition

    def run(self) -> DefRanges:
        out = []
        self.written: dict[tuple[str, int], tuple[isl.Set, ...]] = {}
        for st in self.cdef.stmts:
            sr = self.statement(st)
            out.append(sr)
            here = tuple(sr.ranges[v] for v in st.lhs)
            if st.prev >= 0:  # a tensor written again: both regions are written
                here = tuple(_hull(a.union(b)) for a, b in
                             zip(self.written[(st.tensor, st.prev)], here, strict=True))
            self.written[(st.tensor, st.index)] = here
            if st.prev < 0:  # the first definition gives the tensor its shape
                self.extents[st.tensor] = tuple(self._extent(sr.ranges[v]) for v in st.lhs)
                if st.init is not None:
                    self.extents[st.init] = self.extents[st.tensor]
        return DefRanges(self.cdef, self.params, self.context, tuple(out), dict(self.extents))

    def _extent(self, r: isl.Set) -> isl.Set:
        """``[0, max(r)]``: the dimension a left-hand range gives its tensor."""
        upto = isl.Map(f"{self.p}{{ [z] -> [y] : 0 <= y <= z }}")
        return upto.intersect_domain(r.lexmax()).range().coalesce()


def _hull(s: isl.Set) -> isl.Set:
    """The smallest interval holding the 1-D set ``s`` (parametric: piecewise bounds)."""
    lo = isl.Map("{ [a] -> [x] : x >= a }").intersect_domain(s.lexmin()).range()
    hi = isl.Map("{ [b] -> [x] : x <= b }").intersect_domain(s.lexmax()).range()
    return lo.intersect(hi).coalesce()


def infer(cdef: CheckedDef) -> DefRanges:
    """Range inference of every statement of ``cdef`` (symbolic in the size variables)."""
    return _Inference(cdef).run()


# ---------------------------------------------------------------------------- concrete sizes


@dataclass(frozen=True)
class Concrete:
    """Ranges at given sizes: per statement ``ranges[v] = (lo, hi)`` (``hi`` exclusive) in
    ``stmt.vars`` order, and every tensor's shape."""

    sizes: dict[str, int]
    ranges: tuple[dict[str, tuple[int, int]], ...]
    shapes: dict[str, tuple[int, ...]]

    def points(self, k: int) -> int:
        """Iteration points of statement ``k`` (its work: one MAC or element operation each)."""
        n = 1
        for lo, hi in self.ranges[k].values():
            n *= hi - lo
        return n


def _fix(dr: DefRanges, sizes: dict[str, int]) -> isl.Set:
    if not dr.params:
        return dr.context
    cons = " and ".join(f"{_iname(s)} = {sizes[s]}" for s in dr.params)
    p = ", ".join(_iname(s) for s in dr.params)
    return isl.Set(f"[{p}] -> {{ : {cons} }}")


def _val(s: isl.Set) -> int:
    pt = s.sample_point()
    return int(pt.get_coordinate_val(isl.dim_type.set, 0).to_python())


def check_sizes(cdef: CheckedDef, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` checked against the definition: every size variable given, no unknown name,
    positive integers."""
    for k, v in sizes.items():
        if k not in cdef.sizes:
            known = ", ".join(cdef.sizes) or "none"
            raise TcSizeError(f"{cdef.name} has no size variable {k!r} (its sizes: {known})",
                              cdef.source)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TcSizeError(f"size {k} must be a positive integer, got {v!r}", cdef.source)
    missing = [s for s in cdef.sizes if s not in sizes]
    if missing:
        raise TcSizeError(f"{cdef.name} needs a value for size {', '.join(missing)} "
                          f"(e.g. --size {','.join(f'{s}=8' for s in cdef.sizes)})",
                          cdef.source)
    return {s: sizes[s] for s in cdef.sizes}


def instantiate(dr: DefRanges, sizes: dict[str, int]) -> Concrete:
    """The ranges and shapes at ``sizes``; raises when a range is empty or an access leaves
    its tensor (naming the statement, the access, a point and the sizes)."""
    sizes = check_sizes(dr.cdef, sizes)
    fix = _fix(dr, sizes)
    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
    inf = _Inference.__new__(_Inference)
    inf.cdef = dr.cdef
    all_ranges: list[dict[str, tuple[int, int]]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    for t in dr.cdef.inputs:
        if t.shape_of is None:
            shapes[t.name] = tuple(sizes[d] if isinstance(d, str) else d for d in t.dims)
    for sr in dr.stmts:
        st = sr.stmt
        rng: dict[str, tuple[int, int]] = {}
        for v in st.vars:
            s = sr.ranges[v].intersect_params(fix)
            if s.is_empty():
                raise inf.err(st, f"index {v} has an empty range at sizes {given} "
                              f"(its range is {dr.range_text(st.index, v)})", v)
            rng[v] = (_val(s.lexmin()), _val(s.lexmax()) + 1)
        for acc, _ok, bad in sr.preconditions:
            b = bad.intersect_params(fix)
            if not b.is_empty():
                raise inf.err(st, _oob(acc, b, st, shapes, sizes))
        all_ranges.append(rng)
        if st.prev < 0:
            shapes[st.tensor] = tuple(rng[v][1] for v in st.lhs)
            if st.init is not None:
                shapes[st.init] = shapes[st.tensor]
            decl = dr.cdef.tensors[st.tensor].declared
            if decl is not None:
                want = tuple(sizes[d] if isinstance(d, str) else d for d in decl)
                if want != shapes[st.tensor]:
                    raise inf.err(st, f"output {st.tensor} is declared {list(want)} but its "
                                  f"inferred shape is {list(shapes[st.tensor])} (sizes {given})")
    return Concrete(sizes, tuple(all_ranges), shapes)


def _oob(acc: Access, bad: isl.Set, st: CheckedStmt, shapes: dict[str, tuple[int, ...]],
         sizes: dict[str, int]) -> str:
    pt = bad.sample_point()
    env = {v: int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
           for i, v in enumerate(st.vars)}
    at = ", ".join(f"{v} = {x}" for v, x in env.items())
    shape = shapes[acc.read.tensor]
    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return (f"{acc.text} reads outside {acc.read.tensor} (shape {list(shape)}) at {at} "
            f"(sizes {given}); restrict the indices with a where clause")
