"""Hidet's task mappings: which worker (a thread, a lane, a warp) does which tasks, in what order.

A *task mapping* has a ``task_shape`` (the grid of tasks, one index tuple each), a number of
``workers``, and for every worker ``w`` the ordered list of tasks it performs. Two atoms and one
composition build every mapping (Hidet, "Hidet: Task-Mapping Programming Paradigm for Deep
Learning Tensor Programs", ASPLOS 2023, section 4):

- ``spatial(*shape)``: ``prod(shape)`` workers, one task each: worker ``w`` does the task whose
  row-major rank is ``w``.
- ``repeat(*shape)``: one worker doing every task, in row-major order.

``ranks`` (both atoms) is Hidet's argument with Hidet's meaning (``hidet.ir.mapping``,
``strides_from_ranks``): ``ranks[d]`` is the *significance* of dimension ``d``, 0 the most
significant (slowest-varying) and ``len(shape) - 1`` the fastest; the default
``[0, 1, ..., n-1]`` is row-major and ``[n-1, ..., 0]`` column-major. Worker ``w`` of a spatial
atom does the task ``((w // stride[d]) % shape[d])_d`` and a repeat atom runs its tasks in
increasing ``sum(task[d] * stride[d])``, where dimension ``d``'s stride is the product of the
extents of the dimensions less significant than it. (The dimensions listed slowest to fastest,
``Atom.order``, are the inverse permutation of ``ranks``: they coincide for one or two
dimensions, not for every permutation of three or more.)
- ``outer * inner`` (same rank): ``outer.workers * inner.workers`` workers and the task shape
  multiplied elementwise. Worker ``w`` is ``(w // inner.workers, w % inner.workers)``; it does,
  for each of its outer tasks ``a`` in order and each of its inner tasks ``b`` in order, the task
  ``a * inner.task_shape + b``.

``worker_tasks(w)`` is that definition, evaluated in Python; ``emit(worker, body)`` writes the
same tasks as a loop nest of the loop-nest IR (``vta.compiler.ir.stmt``): repeated dimensions
become (unrolled) loops, spatial ones index arithmetic on the worker expression, so a kernel's
body (copies to shared memory, fragment loads, MMAs, the epilogue) is written at thread
granularity in the same IR that ``render_cuda`` and the SIMT emulator take. A mapping is a
composition flattened into a tuple of atoms; composition is associative, so the flat form is
exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import TaskMappingError

__all__ = ["TaskMappingError", "Atom", "TaskMapping", "spatial", "repeat"]

Task = tuple[int, ...]
Body = Callable[[tuple[E.Expr, ...]], S.Stmt]


@dataclass(frozen=True, slots=True)
class Atom:
    """One ``spatial`` (``spatial=True``) or ``repeat`` factor of a composed mapping; ``ranks``
    gives each dimension's significance, as Hidet's does (module docstring)."""

    shape: tuple[int, ...]
    spatial: bool
    ranks: tuple[int, ...]

    @property
    def order(self) -> tuple[int, ...]:
        """The dimensions from the slowest-varying (significance 0) to the fastest."""
        return tuple(self.ranks.index(i) for i in range(len(self.ranks)))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def workers(self) -> int:
        return self.size if self.spatial else 1

    def unravel(self, r: int) -> Task:
        """The task of rank ``r`` (dimensions varying in ``order``, the last fastest)."""
        out = [0] * len(self.shape)
        for d in reversed(self.order):
            r, out[d] = divmod(r, self.shape[d])
        return tuple(out)

    def tasks(self) -> list[Task]:
        """Every task of the atom in its order."""
        return [self.unravel(r) for r in range(self.size)]

    def __str__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        rk = "" if self.ranks == tuple(range(len(self.shape))) else f", ranks={list(self.ranks)}"
        return f"{'spatial' if self.spatial else 'repeat'}({dims}{rk})"


def _atom(shape: Sequence[int], spatial_: bool, ranks: Sequence[int] | None) -> Atom:
    dims = tuple(int(d) for d in shape)
    kind = "spatial" if spatial_ else "repeat"
    if not dims:
        raise TaskMappingError(f"{kind}() needs at least one dimension")
    if any(d < 1 for d in dims):
        raise TaskMappingError(f"{kind}{dims}: every dimension must be >= 1")
    rk = tuple(range(len(dims))) if ranks is None else tuple(int(r) for r in ranks)
    if sorted(rk) != list(range(len(dims))):
        raise TaskMappingError(f"{kind}{dims}: ranks {list(rk)} is not a permutation of "
                               f"0..{len(dims) - 1}")
    return Atom(dims, spatial_, rk)


@dataclass(frozen=True, slots=True)
class TaskMapping:
    """A composition of atoms, outermost first (see the module docstring)."""

    atoms: tuple[Atom, ...]

    @property
    def rank(self) -> int:
        return len(self.atoms[0].shape)

    @property
    def task_shape(self) -> tuple[int, ...]:
        shape = [1] * self.rank
        for a in self.atoms:
            shape = [s * d for s, d in zip(shape, a.shape, strict=True)]
        return tuple(shape)

    @property
    def workers(self) -> int:
        n = 1
        for a in self.atoms:
            n *= a.workers
        return n

    def __mul__(self, inner: TaskMapping) -> TaskMapping:
        if not isinstance(inner, TaskMapping):
            return NotImplemented
        if inner.rank != self.rank:
            raise TaskMappingError(f"cannot compose {self} (rank {self.rank}) with {inner} "
                                   f"(rank {inner.rank}): ranks must agree")
        return TaskMapping(self.atoms + inner.atoms)

    def __str__(self) -> str:
        return " * ".join(str(a) for a in self.atoms)

    # ------------------------------------------------------------------ semantics
    def _digits(self, w: int) -> list[int]:
        """The worker index of each atom (inner atoms take the low digits)."""
        digits = [0] * len(self.atoms)
        for i in reversed(range(len(self.atoms))):
            w, digits[i] = divmod(w, self.atoms[i].workers)
        return digits

    def _strides(self) -> list[tuple[int, ...]]:
        """Per atom, the factor its coordinates are scaled by in the composed task index."""
        out: list[tuple[int, ...]] = []
        scale = [1] * self.rank
        for a in reversed(self.atoms):
            out.append(tuple(scale))
            scale = [s * d for s, d in zip(scale, a.shape, strict=True)]
        return out[::-1]

    def worker_tasks(self, w: int) -> list[Task]:
        """The tasks of worker ``w`` in order (``[]`` for ``w >= workers``)."""
        if w < 0:
            raise TaskMappingError(f"{self}: worker {w} is negative")
        if w >= self.workers:
            return []
        digits = self._digits(w)
        strides = self._strides()
        per_atom = [[a.unravel(d)] if a.spatial else a.tasks()
                    for a, d in zip(self.atoms, digits, strict=True)]
        tasks = []
        for combo in itertools.product(*per_atom):
            t = [0] * self.rank
            for coords, st in zip(combo, strides, strict=True):
                for k in range(self.rank):
                    t[k] += coords[k] * st[k]
            tasks.append(tuple(t))
        return tasks

    # ------------------------------------------------------------------ IR
    def emit(self, worker: E.ExprLike, body: Body, *, workers: int | None = None,
             unroll: bool = True, name: str = "t") -> S.Stmt:
        """The loop nest performing ``worker``'s tasks in order: ``body(task)`` for each task
        (a tuple of index expressions). Repeated dimensions become loops (``UNROLLED`` when
        ``unroll``, so register indices stay compile-time constants), spatial ones arithmetic
        on ``worker``. ``workers``: how many workers run the nest (``worker`` takes every value
        in ``[0, workers)``; default ``self.workers``). Fewer than the mapping needs is an
        error (tasks would be lost); more wraps the nest in ``if worker < self.workers``."""
        n = self.workers if workers is None else workers
        if n < self.workers:
            raise TaskMappingError(f"{self} needs {self.workers} workers, only {n} run it")
        w = E.as_expr(worker)
        strides = self._strides()
        inner = 1
        digit: list[E.Expr | None] = [None] * len(self.atoms)
        outermost = next(i for i, a in enumerate(self.atoms) if a.spatial) \
            if any(a.spatial for a in self.atoms) else -1
        for i in reversed(range(len(self.atoms))):
            a = self.atoms[i]
            if a.spatial:
                d = w // inner if inner > 1 else w
                # worker < self.workers inside the nest: the outermost digit needs no modulo
                digit[i] = d if i == outermost else d % a.workers
                inner *= a.workers
        loops: list[tuple[E.Var, int]] = []
        index: list[E.Expr] = [E.IntImm(0)] * self.rank
        for i, a in enumerate(self.atoms):
            if a.spatial:
                rank = digit[i]
                assert rank is not None
                coords = self._unravel_expr(a, rank)
            else:
                flat = E.Var(f"{name}{i}")
                loops.append((flat, a.size))
                coords = self._unravel_expr(a, flat)
            for k in range(self.rank):
                index[k] = index[k] + coords[k] * strides[i][k]
        stmt = body(tuple(index))
        kind = S.ForKind.UNROLLED if unroll else S.ForKind.SERIAL
        for v, ext in reversed(loops):
            if ext == 1:
                stmt = E.substitute(stmt, {v: E.IntImm(0)})
            else:
                stmt = S.For(v, E.IntImm(0), E.IntImm(ext), stmt, kind)
        if n > self.workers:
            stmt = S.IfThenElse(w < self.workers, stmt)
        return stmt

    @staticmethod
    def _unravel_expr(a: Atom, r: E.Expr) -> list[E.Expr]:
        out: list[E.Expr] = [E.IntImm(0)] * len(a.shape)
        div = 1
        order = a.order
        for d in reversed(order):
            q = r // div if div > 1 else r
            out[d] = q % a.shape[d] if d != order[0] else q
            div *= a.shape[d]
        return out


def spatial(*shape: int, ranks: Sequence[int] | None = None) -> TaskMapping:
    """``prod(shape)`` workers, one task each; ``ranks[d]``: dimension ``d``'s significance, 0
    the slowest-varying, as in Hidet (see the module docstring)."""
    return TaskMapping((_atom(shape, True, ranks),))


def repeat(*shape: int, ranks: Sequence[int] | None = None) -> TaskMapping:
    """One worker doing all ``prod(shape)`` tasks in order; ``ranks`` as for ``spatial``
    (see the module docstring)."""
    return TaskMapping((_atom(shape, False, ranks),))
