"""How a stage's loops relate to its axes: the split and fuse relations a schedule records, and
the loop extents and axis values they give (``lower``, ``schedule`` and intrinsic matching
read them; a relation list is all they need from a stage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.tensor import IterVar

if TYPE_CHECKING:
    pass


if TYPE_CHECKING:
    from vta.compiler.ir.schedule import Stage

__all__ = ["Split", "Fuse", "ceil_div", "leaf_extents", "root_values", "split_guards"]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class Split:
    """``parent = outer * factor + inner``; exactly one of ``factor``/``nparts`` is set (the
    other follows from the parent's extent, which lowering infers)."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, slots=True)
class Fuse:
    """``fused = outer * extent(inner) + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


def leaf_extents(stage: Stage, root: dict[IterVar, int]) -> dict[IterVar, int]:
    """Extents of every iteration variable from the extents of the root axes, following the
    stage's splits and fuses (lowering passes the inferred extents of attached stages)."""
    ext = dict(root)
    for r in stage.relations:
        if isinstance(r, Split):
            n = ext[r.parent]
            inner = r.factor if r.factor is not None else ceil_div(n, r.nparts or 1)
            ext[r.inner] = inner
            ext[r.outer] = ceil_div(n, inner)
        else:
            ext[r.fused] = ext[r.outer] * ext[r.inner]
    return ext


def root_values(stage: Stage, leaf: dict[IterVar, E.Expr],
                ext: dict[IterVar, int]) -> dict[IterVar, E.Expr]:
    """Each iteration variable's value (relative to its range's start) in terms of the leaf
    loop values, walking the relations backwards."""
    val = dict(leaf)
    for r in reversed(stage.relations):
        if isinstance(r, Split):
            val[r.parent] = poly.simplify(val[r.outer] * ext[r.inner] + val[r.inner])
        else:
            val[r.outer] = val[r.fused] // ext[r.inner]
            val[r.inner] = val[r.fused] % ext[r.inner]
    return val


def split_guards(stage: Stage, val: dict[IterVar, E.Expr],
                 ext: dict[IterVar, int]) -> list[tuple[IterVar, E.Expr]]:
    """``(axis, value < extent)`` for every split that does not divide its axis."""
    out = []
    for r in stage.relations:
        if isinstance(r, Split) and ext[r.outer] * ext[r.inner] != ext[r.parent]:
            out.append((r.parent, val[r.parent] < ext[r.parent]))
    return out
