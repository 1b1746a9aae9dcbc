"""Tensor intrinsics: a small computation a target executes as one instruction.

A ``TensorIntrinsic`` declares *what* it computes with the tensor IR, over its own small
placeholders (e.g. the accelerator's GEMM: ``out[i, j] += sum_k inp[i, k] * wgt[j, k]`` for a
1 x 16 x 16 block), so that ``tensorize`` can check a loop region against it and instruction
selection can cover an expression with it.

The accelerator's intrinsics come from its instruction definitions
(``vta.compiler.accel.insn_intrin``, which builds each declaration with ``BUILDER``); GPU
intrinsics (WMMA) register their tensorize pattern directly; how the GPU renders and emulates
them is the GPU back end's own definition (``vta.gpu.intrinsic.GpuIntrinsic``), not a field
here. Lookups are by name (``get``) or by target (``for_target``); ``match``
checks a loop region against an intrinsic.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.relations import root_values
from vta.compiler.ir.tensor import (
    ComputeOp,
    IterVar,
    Reduce,
    Tensor,
    TensorRead,
    compute,
    placeholder,
    reduce_axis,
    sum_,
)
from vta.errors import IntrinError

if TYPE_CHECKING:
    from vta.compiler.ir.schedule import Stage
    from vta.isa import InstructionDef

__all__ = ["TensorIntrinsic", "IntrinError", "Match", "register", "get", "for_target", "match",
           "gemm_decl", "BUILDER", "TensorizeRegion"]


@dataclass(frozen=True, eq=False)
class TensorIntrinsic:
    """``decl`` is the output tensor of the intrinsic's compute over its placeholders.

    Accelerator intrinsics carry the ``instruction`` they become, ``bind`` (placeholder or
    ``decl`` -> micro-op operand ``dst``/``src``/``wgt``, or an immediate's instruction field)
    and ``fixed`` (fields this variant sets, e.g. ``use_imm``). Identity is the object."""

    name: str
    target: str
    decl: Tensor
    instruction: InstructionDef | None = None
    bind: Mapping[Tensor, str] = field(default_factory=lambda: MappingProxyType({}))
    fixed: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    _ir_opaque: ClassVar[bool] = True

    @property
    def op(self) -> ComputeOp:
        assert isinstance(self.decl.op, ComputeOp)
        return self.decl.op

    @property
    def accumulates(self) -> bool:
        """Whether each execution adds into its destination (GEMM, a MAC unit): the intrinsic
        then also realises the part of a sum-reduction that lies inside the region, and the
        loops of the reduction outside it repeat the instruction."""
        return self.instruction is not None and self.instruction.kind == "accumulate"

    def placeholder_for(self, role: str) -> Tensor | None:
        """The placeholder bound to operand or field ``role`` (None if none is)."""
        return next((t for t, r in self.bind.items() if r == role and t is not self.decl),
                    None)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"TensorIntrinsic({self.name}, target={self.target})"


_REGISTRY: dict[str, TensorIntrinsic] = {}


def register(intrin: TensorIntrinsic, replace_existing: bool = False) -> TensorIntrinsic:
    """Make ``intrin`` known by name; registering a different intrinsic under a taken name is
    an error unless ``replace_existing``."""
    old = _REGISTRY.get(intrin.name)
    if old is not None and old is not intrin and not replace_existing:
        raise IntrinError(f"intrinsic {intrin.name!r} is already registered "
                          f"(target {old.target}); pass replace_existing=True to replace it")
    _REGISTRY[intrin.name] = intrin
    return intrin


def get(name: str) -> TensorIntrinsic:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise IntrinError(f"no intrinsic named {name!r} (registered: {known})") from None


def for_target(target: str) -> list[TensorIntrinsic]:
    return [i for i in _REGISTRY.values() if i.target == target]


# --------------------------------------------------------------------------- declarations

#: the tensor-IR builder instruction patterns are written with (``pattern(t, hw)``)
BUILDER = SimpleNamespace(placeholder=placeholder, compute=compute, reduce_axis=reduce_axis,
                          sum_=sum_, min_=E.min_, max_=E.max_, select=E.select, const=E.const,
                          call=lambda name, *args: E.Call(name, tuple(map(E.as_expr, args))))


def gemm_decl(batch: int, block_in: int, block_out: int, inp_dtype: str, wgt_dtype: str,
              acc_dtype: str, name: str = "gemm") -> Tensor:
    """``out[i, j] = sum_k inp[i, k] * wgt[j, k]`` (accumulating in ``acc_dtype``)."""
    inp = placeholder((batch, block_in), inp_dtype, f"{name}_inp")
    wgt = placeholder((block_out, block_in), wgt_dtype, f"{name}_wgt")
    k = reduce_axis(block_in, "k")
    return compute((batch, block_out),
                   lambda i, j: sum_(inp[i, k].astype(acc_dtype) * wgt[j, k].astype(acc_dtype), k),
                   f"{name}_out")


@dataclass(frozen=True, eq=False)
class TensorizeRegion:
    """What ``lower`` leaves on a tensorized region (``AttrStmt(TENSORIZE, region)``): the
    intrinsic, how it matched (``match``), and the lowered objects its declaration maps to: each
    intrinsic axis's loop variable (``loops``) and each intrinsic tensor's buffer (``buffers``:
    placeholders to the buffers the region reads, ``decl`` to the buffer it writes). Back ends
    read their operands from here: no guessing by scope or name."""

    intrin: TensorIntrinsic
    match: Match
    loops: Mapping[IterVar, E.Var]
    buffers: Mapping[Tensor, Any]

    _ir_opaque: ClassVar[bool] = True

    @property
    def name(self) -> str:
        return self.intrin.name

    def buffer(self, role: str) -> Any:
        """The buffer bound to operand ``role`` (``dst``, ``src``, ``wgt``); None if none."""
        t = self.intrin.decl if role == "dst" else self.intrin.placeholder_for(role)
        return None if t is None else self.buffers.get(t)

    def __str__(self) -> str:
        return self.intrin.name


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Match:
    """How a loop region realises an intrinsic: each intrinsic axis to the region's leaf axis,
    each intrinsic placeholder (and its output) to the stage's tensor."""

    axes: Mapping[IterVar, IterVar]
    tensors: Mapping[Tensor, Tensor]


def _pair_reads(a: E.Expr, b: E.Expr, pairs: list[tuple[TensorRead, TensorRead]]) -> str | None:
    """Walk the stage body ``a`` and the declaration ``b`` together; collect the pairs of reads.
    Returns why they differ, or None."""
    if type(a) is not type(b):
        return f"{type(a).__name__} in the stage where the intrinsic has {type(b).__name__}"
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} in the stage where the intrinsic has {b.dtype} ({b})"
    if isinstance(a, TensorRead):
        pairs.append((a, b))  # type: ignore[arg-type]
        return None
    if isinstance(a, E.IntImm) or isinstance(a, E.FloatImm):
        return None if a == b else f"constant {a} where the intrinsic has {b}"
    if isinstance(a, E.Cmp) and a.op != b.op:  # type: ignore[attr-defined]
        return f"comparison {a.op} where the intrinsic has {b.op}"  # type: ignore[attr-defined]
    if isinstance(a, E.Call) and a.name != b.name:  # type: ignore[attr-defined]
        return f"call {a.name} where the intrinsic has {b.name}"  # type: ignore[attr-defined]
    if isinstance(a, E.Var):
        return "a bare loop variable in the computed value"
    ca, cb = list(E.children(a)), list(E.children(b))
    if len(ca) != len(cb):
        return f"{a} does not have the intrinsic's form {b}"
    for x, y in zip(ca, cb, strict=True):
        why = _pair_reads(x, y, pairs)
        if why:
            return why
    return None


def _coefs(indices: Sequence[E.Expr], vars_: Sequence[E.Var]) -> list[tuple[int, ...]] | str:
    """Per index dimension, the coefficient of each variable (must be affine in them)."""
    out = []
    for e in indices:
        terms, _ = poly.linear_form(e)
        for atom in terms:
            if not isinstance(atom, E.Var) and (E.free_vars(atom) & set(vars_)):
                return f"index {e} is not affine in the tensorized loops"
        out.append(tuple(terms.get(v, 0) for v in vars_))
    return out


def _rows(c: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    return [r for r in c if any(r)]


def match(region: Sequence[IterVar], stage: Stage, intrin: TensorIntrinsic,
          extents: Mapping[IterVar, int]) -> Match | str:
    """Check that the loops ``region`` (the stage's innermost leaf axes, with ``extents``)
    compute ``intrin``'s declaration. Returns the bindings, or the reason it does not match."""
    decl, op = intrin.op, stage.op
    if decl.dtype != op.dtype:
        return f"output dtype {op.dtype}, the intrinsic produces {decl.dtype}"
    sbody, dbody = op.body, decl.body
    if isinstance(dbody, Reduce):
        if not isinstance(sbody, Reduce):
            return "the intrinsic is a reduction, the stage is not"
        if sbody.combiner != dbody.combiner:
            return f"combiner {sbody.combiner}, the intrinsic uses {dbody.combiner}"
        sbody, dbody = sbody.source, dbody.source
    elif isinstance(sbody, Reduce):
        if not intrin.accumulates or sbody.combiner != "sum":
            return ("the stage is a reduction, the intrinsic is element-wise and does not "
                    "accumulate into its output")
        sbody = sbody.source  # each execution adds one term: the reduction stays outside
    pairs: list[tuple[TensorRead, TensorRead]] = []
    why = _pair_reads(sbody, dbody, pairs)
    if why:
        return why
    # loop values of the region as fresh variables; everything outside is a constant offset
    rvars = {iv: E.Var(iv.name) for iv in region}
    zero = {iv: E.const(0) for iv in stage.leaf_iter_vars if iv not in rvars}
    val = root_values(stage, {**zero, **rvars}, dict(extents))
    roots = {iv.var: val[iv] for iv in (*op.axes, *op.reduce_axes)}
    dax = [*decl.axes, *decl.reduce_axes]
    spatial = [iv for iv in region if iv.kind == "spatial"]
    reduce = [iv for iv in region if iv.kind == "reduce"]
    if len(spatial) != len(decl.axes) or len(reduce) != len(decl.reduce_axes):
        return (f"the region has {len(spatial)} spatial and {len(reduce)} reduction loops, "
                f"the intrinsic {len(decl.axes)} and {len(decl.reduce_axes)}")
    svars = [rvars[iv] for iv in region]
    accesses: list[tuple[tuple[E.Expr, ...], tuple[E.Expr, ...]]] = [
        (tuple(a.var for a in op.axes), tuple(a.var for a in decl.axes))]
    accesses += [(a.indices, b.indices) for a, b in pairs]
    saccess = []
    for sidx, _ in accesses:
        c = _coefs([E.substitute(i, roots) for i in sidx], svars)
        if isinstance(c, str):
            return c
        saccess.append(_rows(c))
    daccess = []
    for _, didx in accesses:
        c = _coefs(didx, [a.var for a in dax])
        assert not isinstance(c, str)
        daccess.append(_rows(c))
    for perm in itertools.permutations(range(len(dax))):
        # region leaf k plays the intrinsic axis dax[perm[k]]
        if any(extents[region[k]] != dax[perm[k]].extent or region[k].kind != dax[perm[k]].kind
               for k in range(len(region))):
            continue
        inv = {perm[k]: k for k in range(len(region))}
        permuted = [[tuple(row[inv[j]] for j in range(len(dax))) for row in s] for s in saccess]
        if permuted == daccess:
            axes = {dax[perm[k]]: region[k] for k in range(len(region))}
            tensors = {b.tensor: a.tensor for a, b in pairs}
            tensors[intrin.decl] = stage.tensor
            return Match(axes, tensors)
    shape = ", ".join(f"{iv.name}:{extents[iv]}" for iv in region)
    want = ", ".join(f"{a.name}:{a.extent}" for a in dax)
    return (f"region loops ({shape}) do not access the tensors as the intrinsic's loops "
            f"({want}) do (extents, kinds or index pattern differ)")
