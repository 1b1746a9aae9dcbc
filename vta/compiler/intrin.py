"""Tensor intrinsics: a small computation a target executes as one instruction.

A ``TensorIntrinsic`` declares *what* it computes with the tensor IR, over its own small
placeholders (e.g. the accelerator's GEMM: ``out[i, j] += sum_k inp[i, k] * wgt[j, k]`` for a
1 x 16 x 16 block), so that ``tensorize`` can check a loop region against it; ``hooks`` carry
*how* each layer implements it (ISA encoding, simulator semantics, CUDA text), attached by
those layers. One registration teaches every layer.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from vta.compiler import expr as E
from vta.compiler import poly
from vta.compiler.tensor import (
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
from vta.errors import VtaError

if TYPE_CHECKING:
    from vta.compiler.schedule import Stage
    from vta.config import GemmConfig, HwConfig

__all__ = ["TensorIntrinsic", "IntrinError", "Match", "register", "get", "for_target", "match",
           "vta_gemm_intrinsic", "gemm_decl"]


class IntrinError(VtaError):
    """An intrinsic registration or lookup failed; the message names the intrinsic."""


@dataclass(frozen=True, eq=False)
class TensorIntrinsic:
    """``decl`` is the output tensor of the intrinsic's compute over its placeholders;
    ``hooks`` map a layer's key (e.g. ``"isa"``, ``"sim"``, ``"cuda"``) to its implementation.
    Identity is the object (hooks are arbitrary callables)."""

    name: str
    target: str
    decl: Tensor
    hooks: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    _ir_opaque: ClassVar[bool] = True

    @property
    def op(self) -> ComputeOp:
        assert isinstance(self.decl.op, ComputeOp)
        return self.decl.op

    def with_hooks(self, **hooks: Any) -> TensorIntrinsic:
        """A copy with ``hooks`` added (a layer attaching its implementation)."""
        return replace(self, hooks=MappingProxyType({**self.hooks, **hooks}))

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


def gemm_decl(batch: int, block_in: int, block_out: int, inp_dtype: str, wgt_dtype: str,
              acc_dtype: str, name: str = "gemm") -> Tensor:
    """``out[i, j] = sum_k inp[i, k] * wgt[j, k]`` (accumulating in ``acc_dtype``)."""
    inp = placeholder((batch, block_in), inp_dtype, f"{name}_inp")
    wgt = placeholder((block_out, block_in), wgt_dtype, f"{name}_wgt")
    k = reduce_axis(block_in, "k")
    return compute((batch, block_out),
                   lambda i, j: sum_(inp[i, k].astype(acc_dtype) * wgt[j, k].astype(acc_dtype), k),
                   f"{name}_out")


@lru_cache(maxsize=64)
def _vta_gemm(g: GemmConfig) -> TensorIntrinsic:
    name = (f"vta.gemm.{g.batch}x{g.block_in}x{g.block_out}."
            f"{g.inp_dtype}.{g.wgt_dtype}.{g.acc_dtype}")
    decl = gemm_decl(g.batch, g.block_in, g.block_out, g.inp_dtype, g.wgt_dtype, g.acc_dtype,
                     "vta_gemm")
    return TensorIntrinsic(name, "vta", decl)


def vta_gemm_intrinsic(hw: HwConfig) -> TensorIntrinsic:
    """The accelerator's GEMM core as an intrinsic: ``batch x block_in`` inputs times
    ``block_out x block_in`` weights into ``batch x block_out`` accumulators, dtypes from
    ``hw.gemm``. The same GEMM shape gives the same object (no hooks: the backend adds them)."""
    return _vta_gemm(hw.gemm)


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
    from vta.compiler.schedule import root_values

    decl, op = intrin.op, stage.op
    if isinstance(decl.body, Reduce) != isinstance(op.body, Reduce):
        return "one of the intrinsic and the stage is a reduction, the other is not"
    if decl.dtype != op.dtype:
        return f"output dtype {op.dtype}, the intrinsic produces {decl.dtype}"
    sbody, dbody = op.body, decl.body
    if isinstance(sbody, Reduce) and isinstance(dbody, Reduce):
        if sbody.combiner != dbody.combiner:
            return f"combiner {sbody.combiner}, the intrinsic uses {dbody.combiner}"
        sbody, dbody = sbody.source, dbody.source
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
