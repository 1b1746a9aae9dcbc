"""The accelerator's layout of a logical compute: ``pack(args, hw)``.

A user writes one *logical* compute - a dense layer ``acc[i, j] = sum_k x[i, k] * w[j, k]``, an
NCHW convolution, and their element-wise epilogues - and schedules it onto either target. The
GPU reads the logical layouts directly; the accelerator's scratchpads hold *entries* (an
``inp`` entry is ``batch x block_in`` elements, ``wgt`` ``block_out x block_in``, ``acc`` and
``out`` ``batch x block_out``), so every tensor it moves must be stored blocked, entry by entry:
VTA's packed layouts (NCHW -> NCHWnc). ``pack`` is that layout transform, done on the tensor IR
before scheduling (as TVM's graph packing runs before VTA's schedules):

* Each contraction ``C[..] = sum(X[..] * Y[..])`` (the GEMM core's form) gets the *roles* of
  the GEMM intrinsic: ``bi`` a reduction axis indexing a dimension of both operands by itself
  (the block_in lanes), ``bo`` an output axis indexing a dimension of ``Y`` by itself and not
  used by ``X`` (block_out), ``b`` an output axis indexing a dimension of ``X`` by itself and
  not used by ``Y`` (batch; a unit lane when ``gemm.batch`` is 1 and there is none). The first
  such axis in definition order is taken: ``k`` of a matmul, ``ic`` of a convolution (whose
  window indices ``h*s + r`` are not plain axes), ``n``/``i`` for the batch, ``oc``/``j`` for
  the output block.
* Layouts follow the data: ``X`` is blocked ``(b, bi)`` on those dimensions, ``Y`` ``(bo, bi)``,
  ``C`` ``(b, bo)``; a stage reading a blocked tensor point-wise (an epilogue, a padding stage)
  is blocked the same way, and so are the tensors it reads on the same axes. A tensor that
  lacks one role's dimension (a bias ``bias[j]`` beside ``acc[i, j]``) gets a *broadcast* lane
  for it: the host replicates it (VTA's bias layout ``(OC/bo, batch, bo)``).
* Every blocked dimension ``d`` of extent ``n`` becomes an outer dimension ``ceil(n / f)`` and
  an entry lane of ``f``; the lanes go last, in role order. The packed placeholders keep their
  names, the blocked axes become ``<axis>_o`` / ``<axis>_i``, a reduction axis ``k`` becomes
  ``k_o`` (in its place) and ``k_i`` (innermost), so the GEMM region is exactly the intrinsic.
* An output that narrows a computed value (``min_(max_(acc >> 7, -128), 127).astype("int8")``
  in one expression) is packed as two stages, ``<name>_val`` (the value) and the narrowing of
  it: the ALU computes the first, the out STORE is the second.

Exactness: the host pads blocked dimensions with zeros. Padded output rows/columns are computed
and dropped; padded reduction lanes multiply zeros, which needs every stage between an input
and a padded contraction to keep zeros zero (a copy, a cast, ``select(.., .., 0)``): any other
is refused by name. ``Packed`` holds the packed tensors (``P[tensor]`` or ``P["name"]``) and
each parameter's ``Layout``, whose ``pack``/``unpack`` are the runtime's conversions
(``vta.build`` applies them, so a module takes and returns logical arrays).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    placeholder,
    post_order,
    tensor_reads,
)
from vta.errors import LayoutError

if TYPE_CHECKING:
    from vta.config import HwConfig

__all__ = ["Lane", "Layout", "LayoutError", "Packed", "PackedGemm", "pack", "ROLES"]

#: the GEMM intrinsic's lane roles: batch rows, input block, output block
ROLES = ("b", "bi", "bo")


@dataclass(frozen=True, slots=True)
class Lane:
    """One dimension of an entry: its ``role``, the logical dimension blocked into it (None:
    a broadcast lane, the host replicates the tensor along it) and its ``factor``."""

    role: str
    dim: int | None
    factor: int


@dataclass(frozen=True)
class Layout:
    """How the logical tensor ``name`` (``shape``, ``dtype``) is stored: its logical dimensions
    (blocked ones divided by their factor, rounded up) followed by the ``entry`` lanes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    entry: tuple[Lane, ...] = ()

    @property
    def blocked(self) -> dict[int, int]:
        """Blocked logical dimension -> factor."""
        return {ln.dim: ln.factor for ln in self.entry if ln.dim is not None}

    @property
    def packed_shape(self) -> tuple[int, ...]:
        """The stored shape: outer dimensions, then the entry's lanes."""
        bl = self.blocked
        outer = tuple(-(-n // bl[d]) if d in bl else n for d, n in enumerate(self.shape))
        return outer + tuple(ln.factor for ln in self.entry)

    def describe(self) -> str:
        """``x[16, 96] -> [16, 6, 1, 16] (b=1 on dim 0, bi=16 on dim 1)``."""
        if not self.entry:
            return f"{self.name}{list(self.shape)}"
        lanes = ", ".join(f"{ln.role}={ln.factor}" + (f" on dim {ln.dim}" if ln.dim is not None
                                                      else " broadcast") for ln in self.entry)
        return f"{self.name}{list(self.shape)} -> {list(self.packed_shape)} ({lanes})"

    def _check(self, a: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
        if tuple(a.shape) != shape:
            raise LayoutError(f"{self.name}: {what} array has shape {list(a.shape)}, expected "
                              f"{list(shape)}")
        want = np.dtype(self.dtype)
        if a.dtype != want:
            raise LayoutError(f"{self.name}: {what} array has dtype {a.dtype}, expected "
                              f"{np.dtype(want)}")
        return a

    def pack(self, a: np.ndarray) -> np.ndarray:
        """The logical array ``a`` in this layout (zero padding, broadcast lanes replicated)."""
        a = self._check(np.asarray(a), self.shape, "logical")
        if not self.entry:
            return np.ascontiguousarray(a)
        bl = self.blocked
        padded = [(-(-n // bl[d]) * bl[d]) if d in bl else n for d, n in enumerate(self.shape)]
        a = np.pad(a, [(0, p - n) for p, n in zip(padded, self.shape, strict=True)])
        split: list[int] = []
        outer_pos, lane_pos = [], {}
        for d, n in enumerate(padded):
            outer_pos.append(len(split))
            if d in bl:
                split += [n // bl[d]]
                lane_pos[d] = len(split)
                split.append(bl[d])
            else:
                split.append(n)
        a = a.reshape(split)
        order = list(outer_pos)
        for ln in self.entry:
            if ln.dim is None:
                a = a[..., None]
                order.append(a.ndim - 1)
            else:
                order.append(lane_pos[ln.dim])
        return np.ascontiguousarray(np.broadcast_to(a.transpose(order), self.packed_shape))

    def unpack(self, p: np.ndarray) -> np.ndarray:
        """The logical array stored in ``p`` (padding dropped, broadcast lanes read at 0)."""
        p = np.asarray(p)
        if p.size == math.prod(self.packed_shape):  # the simulator's (elems, rows, cols) view
            p = p.reshape(self.packed_shape)
        p = self._check(p, self.packed_shape, "packed")
        if not self.entry:
            return np.ascontiguousarray(p)
        n = len(self.shape)
        idx: list[Any] = [slice(None)] * n
        lane_axis: dict[int, int] = {}
        for k, ln in enumerate(self.entry):
            if ln.dim is None:
                idx.append(0)
            else:
                idx.append(slice(None))
                lane_axis[ln.dim] = k
        kept = p[tuple(idx)]
        # remaining axes: n outer dims, then the non-broadcast lanes in entry order
        lanes = [k for k, ln in enumerate(self.entry) if ln.dim is not None]
        perm: list[int] = []
        for d in range(n):
            perm.append(d)
            if d in lane_axis:
                perm.append(n + lanes.index(lane_axis[d]))
        bl = self.blocked
        padded = [(-(-m // bl[d]) * bl[d]) if d in bl else m for d, m in enumerate(self.shape)]
        out = kept.transpose(perm).reshape(padded)
        return np.ascontiguousarray(out[tuple(slice(0, m) for m in self.shape)])


@dataclass(frozen=True, eq=False)
class PackedGemm:
    """A contraction of the packed compute: its tensor ``c``, the operands read as the GEMM's
    input ``x`` and weight ``y``, and the positions among ``c``'s axes of the blocks of the
    ``b`` role (None: a unit lane without an axis) and the ``bo`` role."""

    c: Tensor
    x: Tensor
    y: Tensor
    b: int | None
    bo: int
    #: position of the ``bi`` blocks among ``c``'s reduction axes (its lanes are the last)
    bi: int = 0


@dataclass(frozen=True, eq=False)
class Packed:
    """The result of ``pack``: ``args`` (the packed parameters, in the logical ``logical``
    order and with their names), each parameter's ``Layout`` by name, every tensor of the
    compute mapped to its packed version (``P[tensor]``, ``P["name"]``) and its contractions
    (``gemms``)."""

    logical: tuple[Tensor, ...]
    args: tuple[Tensor, ...]
    layouts: Mapping[str, Layout]
    tensors: Mapping[Tensor, Tensor]
    gemms: tuple[PackedGemm, ...] = ()

    def __getitem__(self, key: Tensor | str) -> Tensor:
        if isinstance(key, str):
            for t in self.tensors.values():
                if t.name == key:
                    return t
            raise LayoutError(f"no tensor named {key!r} in the packed compute (tensors: "
                              f"{', '.join(t.name for t in self.tensors.values())})")
        try:
            return self.tensors[key]
        except KeyError:
            raise LayoutError(f"tensor {key.name} is not part of the packed compute") from None

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self.args)

    def __len__(self) -> int:
        return len(self.args)


# ---------------------------------------------------------------------------- analysis




def _pure_dim(read: TensorRead, var: E.Var) -> int | None:
    """The dimension of ``read`` indexed by ``var`` alone (None if there is none)."""
    return next((d for d, i in enumerate(read.indices) if i is var), None)


def _uses(read: TensorRead, var: E.Var) -> bool:
    return any(var in E.free_vars(i) for i in read.indices)


@dataclass(frozen=True, eq=False)
class _Gemm:
    """A contraction and its roles: the operands ``x`` (inp) and ``y`` (wgt) and the axes
    playing ``b`` (None: a unit lane), ``bo`` and ``bi``."""

    c: Tensor
    x: TensorRead
    y: TensorRead
    b: IterVar | None
    bo: IterVar
    bi: IterVar


def _operands(t: Tensor) -> tuple[TensorRead, TensorRead] | None:
    op = t.op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, Reduce) \
            or op.body.combiner != "sum":
        return None
    src = op.body.source
    if not isinstance(src, E.Mul):
        return None
    a, b = E.strip_casts(src.a), E.strip_casts(src.b)
    if isinstance(a, TensorRead) and isinstance(b, TensorRead):
        return a, b
    return None


def _roles(t: Tensor, x: TensorRead, y: TensorRead, batch: int) -> _Gemm | str:
    op = t.op
    assert isinstance(op, ComputeOp)
    red = op.reduce_axes
    bi = next((r for r in red if _pure_dim(x, r.var) is not None
               and _pure_dim(y, r.var) is not None), None)
    if bi is None:
        return (f"no reduction axis ({', '.join(r.name for r in red)}) indexes a dimension of "
                f"both {x.tensor.name} and {y.tensor.name} by itself (the GEMM's block_in lanes)")
    bo = next((a for a in op.axes if _pure_dim(y, a.var) is not None and not _uses(x, a.var)),
              None)
    if bo is None:
        return (f"no output axis indexes a dimension of {y.tensor.name} by itself without "
                f"indexing {x.tensor.name} (the GEMM's block_out lanes)")
    b = next((a for a in op.axes if a is not bo and _pure_dim(x, a.var) is not None
              and not _uses(y, a.var)), None)
    if b is None and batch > 1:
        return (f"no output axis indexes a dimension of {x.tensor.name} by itself without "
                f"indexing {y.tensor.name}, for the GEMM's {batch} batch lanes")
    return _Gemm(t, x, y, b, bo, bi)


def _contraction(t: Tensor, hw: HwConfig) -> _Gemm | None:
    """``t``'s roles when it is a contraction; None when it is not one; a ``LayoutError`` when
    it is one the GEMM core cannot take (the message says why)."""
    pair = _operands(t)
    if pair is None:
        return None
    g = hw.gemm
    x, y = pair
    orders = [(x, y), (y, x)]
    if (y.tensor.dtype, x.tensor.dtype) == (g.inp_dtype, g.wgt_dtype) and \
            (x.tensor.dtype, y.tensor.dtype) != (g.inp_dtype, g.wgt_dtype):
        orders.reverse()
    why = ""
    for a, b in orders:
        r = _roles(t, a, b, g.batch)
        if isinstance(r, _Gemm):
            return r
        why = why or r
    raise LayoutError(f"contraction {t.name}: cannot map it onto the GEMM core: {why}")


LaneMap = tuple[Lane, ...]


class _Planner:
    """Assigns each tensor of the compute its entry lanes (module docstring)."""

    def __init__(self, args: Sequence[Tensor], hw: HwConfig) -> None:
        g = hw.gemm
        self.factor = {"b": g.batch, "bi": g.block_in, "bo": g.block_out}
        outs = [t for t in args if isinstance(t.op, ComputeOp)]
        if not outs:
            raise LayoutError("pack: the arguments name no computed output")
        self.order = post_order(outs)
        self.readers: dict[Tensor, list[Tensor]] = {t: [] for t in self.order}
        for t in self.order:
            if isinstance(t.op, ComputeOp):
                for rd in tensor_reads(t.op.body):
                    if t not in self.readers[rd.tensor]:
                        self.readers[rd.tensor].append(t)
        self.gemms = {t: gm for t in self.order if (gm := _contraction(t, hw)) is not None}
        if not self.gemms:
            raise LayoutError("pack: the compute has no contraction (a sum of products of two "
                              "tensors) for the accelerator's GEMM core")
        self.lanes: dict[Tensor, LaneMap] = {}
        self.why: dict[Tensor, str] = {}

    def lane(self, role: str, dim: int | None) -> Lane:
        return Lane(role, dim, self.factor[role])

    def set(self, t: Tensor, lanes: LaneMap, why: str, todo: list[Tensor]) -> None:
        old = self.lanes.get(t)
        if old is None:
            self.lanes[t] = lanes
            self.why[t] = why
            todo.append(t)
        elif old != lanes:
            a = Layout(t.name, t.shape, t.dtype, old).describe()
            b = Layout(t.name, t.shape, t.dtype, lanes).describe()
            raise LayoutError(f"tensor {t.name} needs two accelerator layouts: {a} ({self.why[t]})"
                              f" and {b} ({why})")

    def seed(self, todo: list[Tensor]) -> None:
        for t, gm in self.gemms.items():
            op = t.op
            assert isinstance(op, ComputeOp)
            pos = {a: k for k, a in enumerate(op.axes)}
            why = f"the GEMM {t.name}"
            b_out = pos[gm.b] if gm.b is not None else None
            self.set(t, (self.lane("b", b_out), self.lane("bo", pos[gm.bo])), why, todo)
            xb = _pure_dim(gm.x, gm.b.var) if gm.b is not None else None
            self.set(gm.x.tensor, (self.lane("b", xb), self.lane("bi", _pure_dim(gm.x, gm.bi.var))),
                     f"input operand of {why}", todo)
            self.set(gm.y.tensor, (self.lane("bo", _pure_dim(gm.y, gm.bo.var)),
                                   self.lane("bi", _pure_dim(gm.y, gm.bi.var))),
                     f"weight operand of {why}", todo)

    def upstream(self, t: Tensor, todo: list[Tensor]) -> None:
        """The tensors ``t`` reads, laid out along the same axes."""
        op = t.op
        assert isinstance(op, ComputeOp)
        for rd in tensor_reads(op.body):
            lanes = []
            for ln in self.lanes[t]:
                if ln.dim is None:
                    lanes.append(ln)
                    continue
                var = op.axes[ln.dim].var
                d = _pure_dim(rd, var)
                if d is None and _uses(rd, var):
                    raise LayoutError(
                        f"stage {t.name} reads {rd.tensor.name}[{', '.join(map(str, rd.indices))}]"
                        f": axis {var.name} is blocked into the accelerator's {ln.role} lanes "
                        f"({ln.factor}), so it must index a dimension of {rd.tensor.name} by "
                        f"itself")
                lanes.append(Lane(ln.role, d, ln.factor))
            self.set(rd.tensor, tuple(lanes), f"read by {t.name}", todo)

    def downstream(self, t: Tensor, todo: list[Tensor]) -> None:
        """Element-wise readers of ``t`` laid out like it."""
        for r in self.readers[t]:
            op = r.op
            assert isinstance(op, ComputeOp)
            if r in self.gemms or r in self.lanes:
                continue
            rd = next(x for x in tensor_reads(op.body) if x.tensor is t)
            pos = {a.var: k for k, a in enumerate(op.axes)}
            lanes = []
            for ln in self.lanes[t]:
                if ln.dim is None:
                    lanes.append(ln)
                    continue
                i = rd.indices[ln.dim]
                if not isinstance(i, E.Var) or i not in pos:
                    raise LayoutError(
                        f"stage {r.name} reads {t.name}[{', '.join(map(str, rd.indices))}]: "
                        f"dimension {ln.dim} of {t.name} holds the accelerator's {ln.role} "
                        f"lanes, so {r.name} must index it with one of its own axes")
                lanes.append(Lane(ln.role, pos[i], ln.factor))
            self.set(r, tuple(lanes), f"reads {t.name}", todo)

    def run(self) -> dict[Tensor, LaneMap]:
        todo: list[Tensor] = []
        self.seed(todo)
        while todo:
            t = todo.pop()
            if isinstance(t.op, ComputeOp):
                if t not in self.gemms:
                    self.upstream(t, todo)
                self.downstream(t, todo)
            else:
                self.downstream(t, todo)
        missing = [t.name for t in self.order if t not in self.lanes]
        if missing:
            raise LayoutError(f"pack: no accelerator layout follows for {', '.join(missing)} "
                              f"(not connected to a GEMM through point-wise reads)")
        self.check_padding()
        return self.lanes

    def check_padding(self) -> None:
        """Padded reduction lanes must multiply zeros (module docstring)."""
        for gm in self.gemms.values():
            if gm.bi.extent % self.factor["bi"] == 0:
                continue
            for rd in (gm.x, gm.y):
                bad = _not_zero_preserving(rd.tensor)
                if bad is not None:
                    raise LayoutError(
                        f"contraction {gm.c.name}: its reduction axis {gm.bi.name} "
                        f"({gm.bi.extent}) is padded to {self.factor['bi']}-element blocks, "
                        f"and stage {bad.name} between an input and the GEMM may not keep the "
                        f"padding zero (only copies, casts and select(.., .., 0) do); make "
                        f"{gm.bi.name} a multiple of {self.factor['bi']}")


def _not_zero_preserving(t: Tensor) -> Tensor | None:
    """The first stage upstream of ``t`` whose value at a zero-padded input is not surely 0."""
    if isinstance(t.op, PlaceholderOp):
        return None
    op = t.op
    assert isinstance(op, ComputeOp)
    body = E.strip_casts(op.body)
    while isinstance(body, E.Select) and E.is_const(E.strip_casts(body.f), 0):
        body = E.strip_casts(body.t)
    if isinstance(body, TensorRead):
        return _not_zero_preserving(body.tensor)
    return t


# ---------------------------------------------------------------------------- rewriting


def _split_narrowing(t: Tensor) -> Tensor:
    """An output stage that narrows a computed value (``min_(max_(acc >> 4, -128),
    127).astype("int8")``) as two stages: ``<name>_val`` computing the value in its own dtype,
    and the output narrowing a read of it. On the accelerator the ALU computes the first and
    the out STORE narrows (the copy-out stage is a cast of a read); any other stage is
    returned unchanged."""
    op = t.op
    assert isinstance(op, ComputeOp)
    body = op.body
    if not isinstance(body, E.Cast) or isinstance(E.strip_casts(body), TensorRead):
        return t
    inner = body.value
    axes = tuple(IterVar(E.Var(f"{a.name}_v"), a.extent) for a in op.axes)
    rename = {a.var: b.var for a, b in zip(op.axes, axes, strict=True)}
    value = Tensor(ComputeOp(f"{op.name}_val", axes, E.substitute(
        inner, lambda n: rename.get(n) if isinstance(n, E.Var) else None), inner.dtype,
        op.tag), t.shape, inner.dtype)
    read = TensorRead(value, tuple(a.var for a in op.axes), inner.dtype)
    return Tensor(ComputeOp(op.name, op.axes, E.Cast(body.dtype, read), op.dtype, op.tag),
                  t.shape, t.dtype)


class _Rewriter:
    def __init__(self, lanes: dict[Tensor, LaneMap], gemms: Mapping[Tensor, _Gemm],
                 outputs: frozenset[Tensor] = frozenset()) -> None:
        self.lanes = lanes
        self.gemms = gemms
        self.outputs = outputs  # computed arguments: their narrowing gets a stage of its own
        self.new: dict[Tensor, Tensor] = {}

    def layout(self, t: Tensor) -> Layout:
        return Layout(t.name, t.shape, t.dtype, self.lanes[t])

    def tensor(self, t: Tensor) -> Tensor:
        if isinstance(t.op, PlaceholderOp):
            out = placeholder(self.layout(t).packed_shape, t.dtype, t.name)
        else:
            out = self.compute(t)
            if t in self.outputs:
                out = _split_narrowing(out)
        self.new[t] = out
        return out

    def compute(self, t: Tensor) -> Tensor:
        op = t.op
        assert isinstance(op, ComputeOp)
        lanes = self.lanes[t]
        blocked = {ln.dim: ln for ln in lanes if ln.dim is not None}
        outer: list[IterVar] = []
        #: each original axis variable -> (outer, lane, factor) when blocked, else its new var
        split: dict[E.Var, tuple[E.Var, E.Var, int]] = {}
        plain: dict[E.Var, E.Expr] = {}
        lane_of: dict[str, IterVar] = {}
        for d, a in enumerate(op.axes):
            if d in blocked:
                f = blocked[d].factor
                o = IterVar(E.Var(f"{a.name}_o"), -(-a.extent // f))
                i = IterVar(E.Var(f"{a.name}_i"), f)
                lane_of[blocked[d].role] = i
                split[a.var] = (o.var, i.var, f)
                outer.append(o)
            else:
                n = IterVar(E.Var(a.name), a.extent)
                plain[a.var] = n.var
                outer.append(n)
        for ln in lanes:
            if ln.dim is None:
                lane_of[ln.role] = IterVar(E.Var(f"{ln.role}_lane"), ln.factor)
        axes = (*outer, *(lane_of[ln.role] for ln in lanes))
        body = op.body
        ctx = _Ctx(split, plain, lane_of, t)
        if isinstance(body, Reduce):
            gm = self.gemms.get(t)
            red: list[IterVar] = []
            inner: list[IterVar] = []
            for r in body.axes:
                if gm is not None and r is gm.bi:
                    f = next(ln.factor for ln in self.lanes[gm.x.tensor] if ln.role == "bi")
                    ro = IterVar(E.Var(f"{r.name}_o"), -(-r.extent // f), "reduce")
                    ri = IterVar(E.Var(f"{r.name}_i"), f, "reduce")
                    split[r.var] = (ro.var, ri.var, f)
                    lane_of["bi"] = ri
                    red.append(ro)
                    inner.append(ri)
                else:
                    n = IterVar(E.Var(r.name), r.extent, "reduce")
                    plain[r.var] = n.var
                    red.append(n)
            src = self.expr(body.source, ctx)
            new_body: E.Expr = Reduce(body.combiner, src, (*red, *inner), body.dtype)
        else:
            new_body = self.expr(body, ctx)
        shape = tuple(a.extent for a in axes)
        return Tensor(ComputeOp(op.name, axes, new_body, op.dtype, op.tag), shape, t.dtype)

    def expr(self, body: E.Expr, ctx: _Ctx) -> E.Expr:
        def fn(n: object) -> E.Expr | None:
            if isinstance(n, TensorRead):
                return self.read(n, ctx)
            if isinstance(n, E.Var):
                return ctx.value(n)
            return None

        return E.substitute(body, fn)

    def read(self, rd: TensorRead, ctx: _Ctx) -> TensorRead:
        lanes = self.lanes[rd.tensor]
        blocked = {ln.dim: ln for ln in lanes if ln.dim is not None}
        idx: list[E.Expr] = []
        lane_idx: dict[str, E.Expr] = {}
        for d, i in enumerate(rd.indices):
            if d in blocked:
                ln = blocked[d]
                sp = ctx.split.get(i) if isinstance(i, E.Var) else None
                if sp is None or sp[2] != ln.factor:  # pragma: no cover - the planner ensures
                    raise LayoutError(f"stage {ctx.where.name}: cannot block {rd.tensor.name} "
                                      f"dimension {d} (index {i})")
                idx.append(sp[0])
                lane_idx[ln.role] = sp[1]
            else:
                idx.append(self.expr(i, ctx))
        for ln in lanes:
            if ln.dim is None:
                lane_idx[ln.role] = ctx.lane_of[ln.role].var
        full = (*idx, *(lane_idx[ln.role] for ln in lanes))
        return TensorRead(self.new[rd.tensor], tuple(full), rd.dtype)


@dataclass
class _Ctx:
    """Rewriting one stage: its blocked axes (``outer * factor + lane``), its other axes, its
    lane per role."""

    split: dict[E.Var, tuple[E.Var, E.Var, int]]
    plain: dict[E.Var, E.Expr]
    lane_of: dict[str, IterVar]
    where: Tensor

    def value(self, v: E.Var) -> E.Expr | None:
        if v in self.split:
            o, i, f = self.split[v]
            return o * f + i
        return self.plain.get(v)


def pack(args: Sequence[Tensor], hw: HwConfig) -> Packed:
    """The accelerator's packed version of the logical compute whose parameters are ``args``
    (inputs and outputs, the order ``vta.build`` takes): see the module docstring."""
    planner = _Planner(args, hw)
    lanes = planner.run()
    rw = _Rewriter(lanes, planner.gemms,
                   frozenset(t for t in args if isinstance(t.op, ComputeOp)))
    for t in planner.order:
        rw.tensor(t)
    for t in args:
        if t not in rw.new:
            raise LayoutError(f"pack: argument {t.name} is not read by the outputs' compute")
    layouts = {t.name: rw.layout(t) for t in args}
    gemms = []
    for t, gm in planner.gemms.items():
        op = t.op
        assert isinstance(op, ComputeOp)
        pos = {a: k for k, a in enumerate(op.axes)}
        assert isinstance(op.body, Reduce)
        gemms.append(PackedGemm(rw.new[t], rw.new[gm.x.tensor], rw.new[gm.y.tensor],
                                pos[gm.b] if gm.b is not None else None, pos[gm.bo],
                                list(op.body.axes).index(gm.bi)))
    return Packed(tuple(args), tuple(rw.new[t] for t in args), MappingProxyType(layouts),
                  MappingProxyType(dict(rw.new)), tuple(gemms))
