"""The fast GEMM kernel of the cycle-level machine: exact, a few large products per instruction.

When every acc entry an instruction touches receives the same sequence of weight entries (a
convolution's or a matmul's reduction: the usual case), the whole instruction is one im2col
product ``(entries * batch, m * block_in) @ (m * block_in, block_out)`` whose reduction runs
inside BLAS: float32 when every sum is below 2**24 (exact), float64 otherwise.

Otherwise a GEMM instruction's tensor ops are grouped by weight entry: each group is one
``(ops * batch, block_in) @ (block_in, block_out)`` float64 product (exact: every partial sum
stays far below 2**53, checked per program), the per-op results are summed per acc entry with
one sort and ``np.add.reduceat``, and the sums are added to acc with int32 wraparound.
Instructions with too many distinct weights for grouping to pay use one batched ``matmul``.

The index work (loop expansion, bounds checks, sort orders) depends only on the instruction's
fields and the micro-ops in SRAM, so it is cached in a ``_Plan`` keyed by both (and shared by
every run on the config: ``kernels.shared_plans``): the same GEMM issued again (a tiled loop)
costs only the gathers and the products. Where a stacked im2col's indices are affine grids (a
conv's output pixels and kernel taps), its gathers are strided views of the shadows, copied by
one reshape (``_Grid``, ``FastGemm._grid_views``).

A GEMM reset (``reset``) zeroes its entries and, with ``gemm.reset_out: sum`` (vta.cc), writes
to out what each entry's last execution computed: its product plus the old accumulator when
that execution is the entry's first, else plus the 0 an earlier one wrote; only those last
products are computed, as one product when they share a weight entry (a compiled reset's
micro-ops read wgt 0).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Any

import numpy as np

from vta.config import DTYPE_BITS, HwConfig
from vta.isa import Gemm, InstructionDef
from vta.sim.kernels import (  # (the grids' are kernels.py's: its ALU plans read them too)
    _MAX_GRID_DIMS,  # noqa: F401  (here too, where the grids' tests read it)
    Ctx,
    Entries,
    Sram,
    _Grid,
    add_wrapped,
    affine_grid,
    apply_sums,
    as_slice,
    count_raw_hazards,
    microop_indices,
    run_heads,
    shared_plan,
)

__all__ = ["FastGemm", "float_exact", "unique_rows", "affine_grid"]

#: a group must hold this many ops on average for per-weight products to beat one batched matmul
_MIN_GROUP = 16


def float_exact(hw: HwConfig, max_ops: int) -> bool:
    """Whether float64 sums of ``max_ops`` tensor ops are exact integers (below 2**53)."""
    g = hw.gemm
    biggest = 2 ** (DTYPE_BITS[g.inp_dtype] - 1 + DTYPE_BITS[g.wgt_dtype] - 1)
    return max_ops * g.block_in * biggest < 2**53


@dataclass(frozen=True, slots=True)
class _Plan:
    """Index work for one (instruction fields, micro-op contents) pair."""

    x: np.ndarray  # inp index per op, in product order
    w: np.ndarray  # wgt index per op, in product order
    groups: list[tuple[int, int, int]] | None  # (first op, end op, wgt index); None: batched
    equal: np.ndarray | None  # wgt index per group when all groups have the same size
    by_acc: np.ndarray  # product rows sorted by acc entry
    starts: np.ndarray  # first row of each acc entry in that order
    entries: np.ndarray  # the distinct acc entries, sorted
    hazards: int
    #: im2col form: classes of entries sharing a weight sequence (None: not applicable)
    cols: tuple[_ColClass, ...] | None = None
    #: ``entries`` as a slice when they are one run of consecutive entries (``as_slice``)
    at: Entries | None = None
    #: the classes as one product when they all read the same inp sequence (``_stack``)
    stack: _ColStack | None = None


#: at most this many distinct weight sequences for the im2col form to pay
_MAX_CLASSES = 64


@dataclass(frozen=True, slots=True)
class _ColClass:
    """Acc entries that all receive one weight sequence: one im2col product."""

    rows: np.ndarray  # positions of these entries in the plan's sorted entries
    x: np.ndarray  # (len(rows) * m,) inp index per op, entry-major
    w: np.ndarray  # (m,) the weight sequence


@dataclass(frozen=True, slots=True)
class _ColStack:
    """Im2col classes that all read the same inp entries (a conv's output-channel blocks
    over the same pixels): one gather of the im2col matrix ``(entries * batch, m *
    block_in)``, then one product per class against its weight sequence."""

    x: np.ndarray  # (entries * m,) the shared inp index per op, entry-major
    w: np.ndarray  # (classes, m) each class's weight sequence
    #: positions in the plan's sorted entries of the product's rows, class-major (None: they
    #: are 0, 1, 2, ... already)
    rows: np.ndarray | None
    #: ``x`` as grids (``_Grid``): the first tap's inp entry of each entry, and each tap's
    #: offset from it; ``w`` likewise: each tap's wgt entry in the first class, and each
    #: class's offset (None: not grids). Then the im2col matrix and the weight matrix are
    #: strided views of the shadows, copied by one reshape each (``FastGemm._grid_views``)
    #: instead of gathered row by row
    x_grid: tuple[_Grid, _Grid] | None = None
    w_grid: tuple[_Grid, _Grid] | None = None


@dataclass(frozen=True, slots=True)
class _StackLayout:
    """A stacked plan's reads and shapes on one machine (``FastGemm._stack_layout``)."""

    #: its products read the float32 shadows (else the wide ones)
    single: bool
    #: ``FastGemm._grid_views`` of the shadows (None: gathered)
    x_view: np.ndarray | None
    w_view: np.ndarray | None
    #: tensor ops per entry
    m: int
    #: the LOADs not yet mirrored into the inp and wgt shadows it reads (``FastGemm._stale``'s
    #: lists, cleared in place): both empty, the views are current and no ``_sync`` is asked
    stale: tuple[list[tuple[int, int]], list[tuple[int, int]]]
    #: the gathered inp rows as (entries, m, batch, block_in)
    taps: tuple[int, int, int, int]
    #: the im2col matrix, the weight matrix, the product as (rows, classes, block_out), the
    #: result as (classes * entries, batch, block_out)
    cols: tuple[int, int]
    weights: tuple[int, int]
    sums: tuple[int, int, int]
    out: tuple[int, int, int]


@dataclass(slots=True)
class _Pending:
    """Stacked products of accumulating GEMMs onto one run of acc entries, summed but not yet
    added to acc (``FastGemm.run`` while ``FastGemm.defers``): acc's sum wraps modulo
    ``2**bits``, so adding the products' exact sum once gives the bits adding each did, and
    out, the low bits of acc after the last, is what narrowing it once gives."""

    #: float32, ``(rows, classes * block_out)`` as the products come: their exact sum (below
    #: 2**24: ``m`` tensor ops an entry, ``FastGemm._single``)
    sums: np.ndarray
    #: the first product's layout (each one summed has its shapes)
    lay: _StackLayout
    at: slice
    m: int


@dataclass(frozen=True, slots=True)
class _Waiting:
    """What ``FastGemm.run`` reads on every issue of an accumulating GEMM whose sums wait
    (``_Pending``), found on its first (``FastGemm._waits``, kept beside the instruction's
    plan): a stacked plan onto one run of acc entries whose product reads float32 grid
    views of the shadows. Then an issue is the views' product and one addition
    (``FastGemm._defer``), without asking again of the plan, its layout and the shadows
    what the first issue found. (A stacked plan whose matrices are gathered, not views,
    adds at once: ``run``'s other paths.)"""

    hazards: int
    lay: _StackLayout
    #: the layout's ``x_view`` and ``w_view`` (both grid views here)
    x_view: np.ndarray
    w_view: np.ndarray
    #: the acc run it adds to, and that run as ``FastGemm.pending``'s key
    at: slice
    key: tuple[int, int]
    #: per shadow the views read (inp, wgt): the LOADs not yet mirrored into it (the list
    #: ``FastGemm._stale`` holds), the shadow, and the scratchpad it mirrors
    mirrors: tuple[tuple[list[tuple[int, int]], np.ndarray, np.ndarray], ...]
    #: ``FastGemm._single_limit``: the most tensor ops a pending sum may hold
    limit: int


def _mirror(stale: list[tuple[int, int]], shadow: np.ndarray, src: np.ndarray) -> None:
    """Copy the ``stale`` ranges of the scratchpad ``src`` into its ``shadow`` (converting
    them to its dtype), then clear ``stale``."""
    for lo, hi in stale:
        shadow[lo:hi] = src[lo:hi]
    stale.clear()


def _grids(idx: np.ndarray) -> tuple[_Grid, _Grid] | None:
    """A ``(outer, inner)`` index table as two grids: the first column (``outer``), and the
    first row's offsets from its first entry (``inner``, first 0), when every row is the first
    shifted (``idx[r, k] == idx[r, 0] + idx[0, k] - idx[0, 0]``) and both are grids."""
    shifted = idx[0] - idx[0, 0]
    if not bool((idx - idx[:, :1] == shifted).all()):
        return None
    outer, inner = affine_grid(idx[:, 0]), affine_grid(shifted)
    return None if outer is None or inner is None else (outer, inner)


def _grid_view(a: np.ndarray, outer: _Grid, inner: _Grid) -> np.ndarray:
    """A read-only strided view of ``a`` (entries, mid, last) holding the entries an
    ``(outer, inner)`` index table names as ``(*outer.shape, mid, *inner.shape, last)``: the
    elements ``np.take`` along axis 0 gathers, at the same positions once reshaped."""
    row, mid, last = a.strides
    return np.lib.stride_tricks.as_strided(
        a[outer.first + inner.first:],
        (*outer.shape, a.shape[1], *inner.shape, a.shape[2]),
        (*(s * row for s in outer.steps), mid, *(s * row for s in inner.steps), last),
        writeable=False)


def _stack(classes: tuple[_ColClass, ...]) -> _ColStack | None:
    """``classes`` as one product, when they read the same inp sequence."""
    x, rest = classes[0].x, classes[1:]
    if any(c.x.shape != x.shape for c in rest):
        return None
    # one comparison of every other class's sequence with the first (array methods:
    # np.array_equal's checks cost more than these same-dtype comparisons)
    if rest and not bool((np.concatenate([c.x for c in rest]).reshape(-1, x.size) == x).all()):
        return None
    rows = np.concatenate([c.rows for c in classes])
    same = bool((rows == np.arange(rows.size)).all())
    m = classes[0].w.size
    w = np.concatenate([c.w for c in classes]).reshape(len(classes), m)
    return _ColStack(x, w, None if same else rows, _grids(x.reshape(-1, m)), _grids(w.T))


def _im2col(a: np.ndarray, x: np.ndarray, w: np.ndarray
            ) -> tuple[np.ndarray, tuple[_ColClass, ...]] | None:
    """``(sorted entries, classes)`` when every entry gets ``m`` ops and the entries fall into
    few classes by weight sequence (a conv: one class per output-channel block)."""
    by_acc = a.argsort(kind="stable")
    sa = a[by_acc]
    starts = run_heads(sa).nonzero()[0]
    m = a.size // starts.size
    if m * starts.size != a.size or (starts[1:] - starts[:-1] != m).any():
        return None
    seq = w[by_acc].reshape(starts.size, m)
    limit = min(_MAX_CLASSES, starts.size // 4)
    got = unique_rows(seq, limit)
    if got is None:
        return _per_entry(sa[starts], x[by_acc].reshape(starts.size, m), seq)
    uniq, inverse = got
    # each class's rows in ascending order (a stable sort by class), and its entries' inp
    # sequences gathered once for every class: then each class is slices
    order = inverse.argsort(kind="stable")
    ends = np.bincount(inverse, minlength=uniq.shape[0]).cumsum().tolist()
    xs = x[by_acc].reshape(starts.size, m)[order]
    classes = []
    lo = 0
    for c, hi in enumerate(ends):
        classes.append(_ColClass(order[lo:hi], xs[lo:hi].reshape(-1), uniq[c].copy()))
        lo = hi
    return sa[starts], tuple(classes)


def _per_entry(entries: np.ndarray, xs: np.ndarray, seq: np.ndarray
               ) -> tuple[np.ndarray, tuple[_ColClass, ...]] | None:
    """``_im2col``'s answer where the entries' weight sequences are too many to classify
    (``seq``: one row per sorted entry) but every entry reads the same inp sequence (``xs``'s
    rows: a dense layer, each output block its own weights over one input vector): each
    entry its own class, which ``_stack`` makes one product ``(batch, m * block_in) @ (m *
    block_in, entries * block_out)``; None otherwise (or beyond ``_MAX_CLASSES``)."""
    n = entries.size
    if n > _MAX_CLASSES or not bool((xs == xs[0]).all()):
        return None
    rows = np.arange(n)
    return entries, tuple(_ColClass(rows[k: k + 1], xs[k], seq[k].copy()) for k in range(n))


@lru_cache(maxsize=64)
def _row_mix(m: int) -> np.ndarray:
    """``m`` odd 64-bit multipliers (``unique_rows``' row keys: a row's key is its dot product
    with them, wrapping): distinct multipliers so that rows differing in one column differ in
    key, fixed so that a run's keys are reproducible."""
    return (np.arange(1, m + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)


def unique_rows(seq: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``np.unique(seq, axis=0, return_inverse=True)`` of a 2-D integer array with at least one
    column (its distinct rows in ascending lexicographic order, and each row's position among
    them), or None when there are more than ``limit`` distinct rows. Rows are classified by
    one integer key each (``_row_mix``) and one sort of the keys: equal rows have equal keys,
    so more than ``limit`` distinct keys means more than ``limit`` distinct rows; the classes
    are then checked to be exact (every row equal to its class's first), else (two distinct
    rows whose keys collide) ``_peel_rows`` classifies them. Then the few distinct rows are
    sorted (``_ranked``). A GEMM plan has a few distinct weight sequences over a few hundred
    rows, where numpy sorts the rows as structured records."""
    n, m = seq.shape
    assert m > 0, "rows of no columns"
    key = seq.astype(np.uint64) @ _row_mix(m)  # wraps modulo 2**64
    order = key.argsort()  # any order of equal keys: a class's rows are equal
    head = run_heads(key[order])
    if int(np.count_nonzero(head)) > limit:
        return None
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = head.cumsum() - 1
    firsts = order[head]
    if not bool((seq[firsts][inverse] == seq).all()):  # a collision: classified otherwise
        return _peel_rows(seq, limit)
    return _ranked(seq, firsts, inverse)


def _peel_rows(seq: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``unique_rows`` by peeling the distinct rows off one at a time: the first row not yet
    classified and every row equal to it (one vectorised comparison per distinct row)."""
    n = seq.shape[0]
    left = np.arange(n)  # the rows not yet classified, in order
    inverse = np.empty(n, dtype=np.intp)
    firsts: list[int] = []  # the first row of each distinct one
    while left.size:
        if len(firsts) >= limit:
            return None
        first = int(left[0])
        same = (seq[left] == seq[first]).all(axis=1)
        inverse[left[same]] = len(firsts)
        firsts.append(first)
        left = left[~same]
    return _ranked(seq, np.array(firsts, dtype=np.intp), inverse)


def _ranked(seq: np.ndarray, firsts: np.ndarray, inverse: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """``unique_rows``' answer from a classification of ``seq``'s rows: ``firsts`` (a row of
    each class) and ``inverse`` (each row's class): the classes' rows sorted lexicographically,
    and each row's position among them."""
    uniq = seq[firsts]
    order = np.lexsort(uniq.T[::-1])  # by the first column, then the second, ...
    rank = np.empty(firsts.size, dtype=np.intp)
    rank[order] = np.arange(firsts.size)
    return uniq[order], rank[inverse]


def _plan(a: np.ndarray, x: np.ndarray, w: np.ndarray, hazards: int) -> _Plan:
    p = _plan_of(a, x, w, hazards)
    return replace(p, at=as_slice(p.entries),
                   stack=None if p.cols is None else _stack(p.cols))


def _plan_of(a: np.ndarray, x: np.ndarray, w: np.ndarray, hazards: int) -> _Plan:
    n = a.size
    if n == 0:
        return _Plan(x, w, None, None, a, a, a, hazards)
    col = _im2col(a, x, w)
    if col is not None:
        return _Plan(x, w, None, None, a, a, col[0], hazards, col[1])
    order = w.argsort(kind="stable")
    ws = w[order]
    cuts = (ws[1:] != ws[:-1]).nonzero()[0] + 1
    groups, equal = None, None
    if (cuts.size + 1) * _MIN_GROUP <= n:
        bounds = np.concatenate(([0], cuts, [n]))
        if (bounds[1:] - bounds[:-1] == bounds[1]).all():
            equal = ws[bounds[:-1]]
        bounds = bounds.tolist()
        groups = [(s, e, int(ws[s])) for s, e in pairwise(bounds)]
        a, x, w = a[order], x[order], ws
    by_acc = a.argsort(kind="stable")
    sa = a[by_acc]
    starts = run_heads(sa).nonzero()[0]
    return _Plan(x, w, groups, equal, by_acc, starts, sa[starts], hazards)


def _read_or_zeros(idx: dict[str, np.ndarray], name: str) -> np.ndarray:
    """Operand ``name``'s indices in ``idx`` (``microop_indices``), or zeros where the GEMM
    does not read it (a reset that zeroes or keeps out): made only then."""
    got = idx.get(name)
    return np.zeros_like(idx["dst"]) if got is None else got


@dataclass(frozen=True, slots=True)
class _ResetPlan:
    """Index work of one GEMM reset: its distinct entries (sorted), the inp and wgt index of
    each entry's last execution, whether that execution is also its first, and the hazards."""

    entries: np.ndarray
    x: np.ndarray
    w: np.ndarray
    once: np.ndarray
    hazards: int
    #: every entry's last execution reads the same wgt entry (a compiled reset: wgt 0)
    one_w: bool = False
    #: ... and the same inp entry too (most compiled resets): one product for every entry
    one_product: bool = False
    #: ``entries`` as a slice when they are one run (``as_slice``)
    at: Entries | None = None
    #: ``once`` is all True (every entry executes once) / all False (every one repeats)
    all_once: bool = False
    none_once: bool = False


def _reset_plan(a: np.ndarray, x: np.ndarray, w: np.ndarray, hazards: int) -> _ResetPlan:
    """``a``, ``x``, ``w``: the dst, src and wgt index of every execution in loop order (at
    least one)."""
    order = a.argsort(kind="stable")
    sa = a[order]
    head = run_heads(sa)  # each entry's first in loop order
    first, last = order[head], order[np.concatenate((head[1:], [True]))]
    x_last, w_last = x[last], w[last]
    once = first == last
    one_w = bool((w_last == w_last[0]).all())
    return _ResetPlan(sa[head], x_last, w_last, once, hazards, one_w,
                      one_w and bool((x_last == x_last[0]).all()), as_slice(sa[head]),
                      bool(once.all()), not bool(once.any()))


def _one_product(sram: Sram, x: int, w: int) -> np.ndarray:
    """One tensor op's product ``inp[x] . wgt[w]^T`` as ``(batch, block_out)`` in the acc
    dtype, read from the scratchpads themselves (no shadow brought up to date for one
    product): exact in int64 (``block_in`` products of two narrow integers), then wrapped as
    ``_to_acc`` wraps."""
    data = sram.data
    prod = data["inp"][x].astype(np.int64) @ data["wgt"][w].astype(np.int64).T
    return prod.astype(sram.acc_dtype)


def _to_acc(sums: np.ndarray, single: bool, acc: np.dtype[Any]) -> np.ndarray:
    """Exact integer ``sums`` (float32 below 2**24 when ``single``, else float64 or int64)
    wrapped to the ``acc`` dtype: float32 converts exactly to an acc at least 32 bits wide;
    anything else goes through int64 first (exact, then the two's-complement wrap). The
    result is C-contiguous whatever ``sums``' layout (a transposed view is converted and
    made contiguous in one copy)."""
    if single and acc.itemsize >= 4:
        return sums.astype(acc, order="C")
    return sums.astype(np.int64, order="C").astype(acc)


class FastGemm:
    """Float64 (or int64, when float64 would not be exact) shadows of inp and wgt (read as
    wgt^T), and the grouped GEMM over them: a faster evaluation of the GEMM definition's
    semantics (the sum of ``inp[src] . wgt[wgt]^T`` over an instruction's executions), checked
    against the generic path and the reference interpreter by the differential tests."""

    def __init__(self, sram: Sram, exact_float: bool, defn: InstructionDef) -> None:
        """``sram``: a fresh one (all zeros), whose LOADs this object is told of
        (``refresh``)."""
        self.defn = defn
        self.sram = sram
        self.dtype = np.float64 if exact_float else np.int64
        #: block_in: the length of one tensor op's dot products
        self.bi = sram.data["inp"].shape[2]
        # the shadows per (kind, wide), made when a product first reads them (a mirror of
        # the SRAM then) and kept up to date by ``refresh`` after: float32 ones for the
        # im2col products whose sums stay below 2**24 (exact), so the hot gather reads half
        # the bytes and no cast of it follows; the wide ones only where those are not exact
        self._shadow: dict[tuple[str, bool], np.ndarray] = {}
        #: SRAM ranges LOADs wrote since each shadow last mirrored them, per (kind, wide):
        #: a shadow is brought up to date when a product reads it, so a program whose
        #: products all run in float32 never converts its loads to the wide shadows
        self._stale: dict[tuple[str, bool], list[tuple[int, int]]] = {
            (k, w): [] for k in ("inp", "wgt") for w in (False, True)}
        g = sram.hw.gemm
        #: the largest magnitude of one int product
        self.biggest = 2 ** (DTYPE_BITS[g.inp_dtype] - 1 + DTYPE_BITS[g.wgt_dtype] - 1)
        self.plans: dict[tuple, _Plan] = {}
        #: ``plans``' entry of each GEMM by (instruction identity, ``uop_version``), beside
        #: the instruction (held here, its identity is not reused by another object): a tiled
        #: program issues one instruction object many times, and this key skips reading its
        #: eleven fields and hashing them on every issue
        self._by_insn: dict[tuple[int, int], tuple[Gemm, _Plan, _Waiting | None]] = {}
        #: ``_stack_layout`` of each stacked plan's (by its identity: ``plans`` keeps it alive)
        self._layouts: dict[int, _StackLayout] = {}
        self.resets: dict[tuple, _ResetPlan | None] = {}
        #: ``resets``' entry of each reset by (instruction identity, mode, ``uop_version``),
        #: beside the instruction, as ``_by_insn`` for the accumulating GEMMs
        self._resets_by_insn: dict[tuple[int, str, int], tuple[Gemm, _ResetPlan | None]] = {}
        self.uop_version = 0
        #: whether ``run`` may keep a stacked product's sums pending (``_Pending``, by the acc
        #: run it adds to) instead of adding them to acc at once: only for a caller that calls
        #: ``flush`` before anything reads or writes acc or out other than this object's
        #: ``run`` (the machine's executor); ``reset`` and ``run``'s other paths flush first
        self.defers = False
        self.pending: dict[tuple[int, int], _Pending] = {}

    def refresh(self, sram: Sram, kind: str, lo: int, hi: int) -> None:
        """Note that a LOAD wrote SRAM entries ``lo:hi`` of ``kind`` (mirrored into the
        shadows when a product next reads them)."""
        if kind in ("inp", "wgt"):
            if hi > lo:  # only the shadows made so far: one not yet made mirrors it all
                shadow = self._shadow
                if (kind, False) in shadow:
                    self._stale[kind, False].append((lo, hi))
                if (kind, True) in shadow:
                    self._stale[kind, True].append((lo, hi))
        elif kind == "uop" and hi > lo:
            self.uop_version += 1

    def _sync(self, kind: str, wide: bool) -> np.ndarray:
        """The shadow of ``kind`` (``wide`` or float32, laid out as the SRAM) with the LOADs
        since it was last read mirrored in (made now, from the whole SRAM, on its first
        read). Laid out as the SRAM, a LOAD's entries convert in one contiguous pass; the
        products read wgt transposed through a view (``wgt_t``), which their gathers copy
        anyway."""
        key = (kind, wide)
        stale = self._stale[key]
        shadow = self._shadow.get(key)
        if shadow is not None and not stale:  # up to date (a tiled loop's next product)
            return shadow
        src = self.sram.data[kind]
        if shadow is None:  # (nothing is stale before a shadow exists: ``refresh``)
            shadow = self._shadow[key] = src.astype(self.dtype if wide else np.float32)
        else:
            _mirror(stale, shadow, src)
        return shadow

    @property
    def inp(self) -> np.ndarray:
        return self._sync("inp", True)

    @property
    def wgt_t(self) -> np.ndarray:
        """The wide wgt shadow as ``(entries, block_in, block_out)``: a transposed view."""
        return self._sync("wgt", True).transpose(0, 2, 1)

    @property
    def inp32(self) -> np.ndarray:
        return self._sync("inp", False)

    @property
    def wgt_t32(self) -> np.ndarray:
        """The float32 wgt shadow as ``(entries, block_in, block_out)``: a transposed view."""
        return self._sync("wgt", False).transpose(0, 2, 1)

    def run(self, sram: Sram, insn: Gemm, ctx: Ctx) -> int:
        """Execute a GEMM that accumulates (a reset runs in ``reset``); returns its acc
        read-after-write hazard count."""
        memo = self._by_insn.get((id(insn), self.uop_version))
        if memo is not None:
            waits = memo[2]
            if waits is not None:  # (the usual case: a tiled loop's next product)
                self._defer(waits)
                return waits.hazards
            plan = memo[1]
        else:
            plan = self._fields_plan(sram, insn, ctx)
            waits = self._waits(plan)
            self._by_insn[id(insn), self.uop_version] = insn, plan, waits
            if waits is not None:
                self._defer(waits)
                return waits.hazards
        if plan.entries.size == 0:
            return 0
        if self.pending:
            self.flush()
        if plan.stack is not None:
            got = self._stacked_sums(plan.stack, sram.acc_dtype)
            if plan.stack.rows is not None:
                sums = np.empty_like(got)
                sums[plan.stack.rows] = got
                got = sums
            add_wrapped(sram, plan.entries if plan.at is None else plan.at, got)
            return plan.hazards
        if plan.cols is not None:
            acc = sram.data["acc"]
            sums = np.empty((plan.entries.size, *acc.shape[1:]), dtype=acc.dtype)
            for c in plan.cols:
                sums[c.rows] = self._im2col_sums(c.x, c.w, acc.dtype)
            add_wrapped(sram, plan.entries if plan.at is None else plan.at, sums)
            return plan.hazards
        prods = self._products(plan)[plan.by_acc]
        if plan.starts.size != prods.shape[0]:
            prods = np.add.reduceat(prods, plan.starts, axis=0)
        apply_sums(sram, plan.entries if plan.at is None else plan.at, prods.astype(np.int64))
        return plan.hazards

    def _fields_plan(self, sram: Sram, insn: Gemm, ctx: Ctx) -> _Plan:
        """The plan of an accumulating GEMM with ``insn``'s fields over the micro-ops now in
        ``sram``: this run's (``plans``), else every run's (``shared_plan``), else built."""
        key = (insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in,
               insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out,
               insn.src_factor_in, insn.wgt_factor_out, insn.wgt_factor_in, insn.uop_base,
               self.uop_version)
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = shared_plan(
                sram, (self.defn, key[:-1]), insn.uop_bgn, insn.uop_end,
                lambda: self._plan(sram, insn, ctx))
        return plan

    def reset(self, sram: Sram, insn: Gemm, ctx: Ctx, mode: str) -> int:
        """Execute a GEMM reset whose ``reset_mode`` is ``mode`` (module docstring); returns
        its acc read-after-write hazard count (a ``sum`` reset reads the accumulator)."""
        memo = self._resets_by_insn.get((id(insn), mode, self.uop_version))
        if memo is not None:
            plan = memo[1]
        else:
            plan = self._fields_reset_plan(sram, insn, ctx, mode)
            self._resets_by_insn[id(insn), mode, self.uop_version] = insn, plan
        if plan is None:  # no executions
            return 0
        if self.pending:
            self.flush()
        acc, out = sram.data["acc"], sram.data["out"]
        at = plan.entries if plan.at is None else plan.at
        if mode == "sum" and plan.one_product:  # one (batch, block_out) row, broadcast
            got = _one_product(sram, int(plan.x[0]), int(plan.w[0]))
            if plan.none_once:
                out[at] = got
            elif plan.all_once:
                out[at] = acc[at] + got
            else:
                zero = acc.dtype.type(0)
                out[at] = np.where(plan.once[:, None, None], acc[at], zero) + got
        elif mode == "sum":  # in the acc dtype: the same bits modulo 2**bits (add_wrapped)
            inp, wgt_t, single = self._shadows(1)
            xs = np.take(inp, plan.x, axis=0)  # (n, batch, block_in)
            if plan.one_w:  # one 2-D product, not n stacked (batch, block_in) ones
                n, batch, bi = xs.shape
                prods = np.matmul(xs.reshape(n * batch, bi), wgt_t[plan.w[0]]) \
                    .reshape(n, batch, -1)
            else:
                prods = np.matmul(xs, wgt_t[plan.w])
            got = _to_acc(prods, single, acc.dtype)
            if plan.none_once:  # each entry's last execution read the 0 an earlier one wrote
                new = got
            elif plan.all_once:  # each entry's one execution read its old value
                new = acc[at] + got
            else:
                zero = acc.dtype.type(0)
                new = np.where(plan.once[:, None, None], acc[at], zero) + got
            out[at] = new
        elif mode == "zero":
            out[at] = 0
        acc[at] = 0
        return plan.hazards

    def _fields_reset_plan(self, sram: Sram, insn: Gemm, ctx: Ctx, mode: str
                           ) -> _ResetPlan | None:
        """The plan of a reset (``mode``) with ``insn``'s fields over the micro-ops now in
        ``sram``: this run's (``resets``), else every run's (``shared_plan``), else built."""
        key = (insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in, insn.dst_factor_out,
               insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in, insn.wgt_factor_out,
               insn.wgt_factor_in, mode, self.uop_version)
        plan = self.resets.get(key)
        if plan is None:
            plan = self.resets[key] = shared_plan(
                sram, (self.defn, "reset", key[:-1]), insn.uop_bgn, insn.uop_end,
                lambda: self._reset_plan(sram, insn, ctx, mode))
        return plan

    def _plan(self, sram: Sram, insn: Gemm, ctx: Ctx) -> _Plan:
        """The index work of an accumulating GEMM over the micro-ops now in ``sram``."""
        idx = microop_indices(sram, insn, self.defn, ctx)
        a = idx["dst"]
        x, w = _read_or_zeros(idx, "src"), _read_or_zeros(idx, "wgt")
        hazards = count_raw_hazards(a, (a,), self.defn.hazard_lag(insn, sram.hw))
        return _plan(a, x, w, hazards)

    def _reset_plan(self, sram: Sram, insn: Gemm, ctx: Ctx, mode: str) -> _ResetPlan | None:
        """The index work of a GEMM reset (``mode``) over the micro-ops now in ``sram``; None
        when it executes nothing."""
        idx = microop_indices(sram, insn, self.defn, ctx)
        a = idx["dst"]
        if a.size == 0:
            return None
        x, w = _read_or_zeros(idx, "src"), _read_or_zeros(idx, "wgt")
        lag = self.defn.hazard_lag(insn, sram.hw)
        hazards = count_raw_hazards(a, (a,), lag) if mode == "sum" else 0
        return _reset_plan(a, x, w, hazards)

    def _im2col_sums(self, col_x: np.ndarray, col_w: np.ndarray, acc: np.dtype[Any]
                     ) -> np.ndarray:
        """Per-entry sums ``(entries, batch, block_out)`` as one matrix product, wrapped to
        the ``acc`` dtype (``add_wrapped``): float32 sums are below 2**24, so they convert
        exactly to an acc that wide; others go through int64 (exact) first."""
        m = col_w.size
        bi = self.bi
        inp, wgt_t, single = self._shadows(m)
        # ``np.take`` along axis 0: the same rows as ``inp[col_x]``, several times faster for
        # these large gathers of small rows
        xs = np.take(inp, col_x, axis=0)  # (entries * m, batch, block_in)
        e, batch = xs.shape[0] // m, xs.shape[1]
        cols: np.ndarray = xs.reshape(e, m, batch, bi)
        if batch > 1:
            cols = cols.transpose(0, 2, 1, 3)
        cols = cols.reshape(e * batch, m * bi)
        sums = np.matmul(cols, wgt_t[col_w].reshape(m * bi, -1)).reshape(e, batch, -1)
        return _to_acc(sums, single, acc)

    def _stacked_sums(self, st: _ColStack, acc: np.dtype[Any]) -> np.ndarray:
        """Per-entry sums ``(classes * entries, batch, block_out)``, class-major, of a
        stacked im2col (one gather), wrapped to the ``acc`` dtype."""
        lay = self._layout(st)
        return self._class_major(self._stacked_product(st, lay), lay, acc)

    @staticmethod
    def _class_major(sums: np.ndarray, lay: _StackLayout, acc: np.dtype[Any]) -> np.ndarray:
        """A stacked product (or a sum of them: ``_Pending``) as per-entry sums ``(classes *
        entries, batch, block_out)``, class-major, wrapped to the ``acc`` dtype."""
        return _to_acc(sums.reshape(lay.sums).transpose(1, 0, 2), lay.single, acc) \
            .reshape(lay.out)

    def _layout(self, st: _ColStack) -> _StackLayout:
        """``_stack_layout`` of ``st``, found on its first run (``_layouts``)."""
        lay = self._layouts.get(id(st))
        if lay is None:
            lay = self._layouts[id(st)] = self._stack_layout(st)
        return lay

    def _waits(self, plan: _Plan) -> _Waiting | None:
        """How ``run`` issues ``plan`` each time, when its sums may wait (``defers``; a
        stacked plan onto one run of acc entries whose product reads float32 grid views:
        ``_Waiting``), else None (``run``'s other paths)."""
        st, at = plan.stack, plan.at
        if not (self.defers and st is not None and st.rows is None and isinstance(at, slice)
                and plan.entries.size):
            return None
        lay = self._layout(st)
        if not lay.single or lay.x_view is None or lay.w_view is None:
            return None
        mirrors = tuple((stale, self._shadow[kind, False], self.sram.data[kind])
                        for kind, stale in zip(("inp", "wgt"), lay.stale, strict=True))
        return _Waiting(plan.hazards, lay, lay.x_view, lay.w_view, at, (at.start, at.stop),
                        mirrors, self._single_limit())

    def _defer(self, waits: _Waiting) -> None:
        """Add ``waits``' product (float32: its layout's ``single``) to the pending sum of its
        acc run where it stays exact with the same shapes, else apply that sum and start
        one. The shadows its views read are first brought up to date (``_mirror``)."""
        for stale, shadow, src in waits.mirrors:
            if stale:
                _mirror(stale, shadow, src)
        lay = waits.lay
        prod = np.matmul(waits.x_view.reshape(lay.cols), waits.w_view.reshape(lay.weights))
        p = self.pending.get(waits.key)
        if p is not None:
            if p.lay.sums == lay.sums and p.m + lay.m <= waits.limit:
                np.add(p.sums, prod, out=p.sums)
                p.m += lay.m
                return
            self._apply(p)
        self.pending[waits.key] = _Pending(prod, lay, waits.at, lay.m)

    def _apply(self, p: _Pending) -> None:
        """Add a pending sum to acc (and narrow into out), as ``run`` adds one product."""
        add_wrapped(self.sram, p.at, self._class_major(p.sums, p.lay, self.sram.acc_dtype))

    def flush(self) -> None:
        """Add every pending sum to acc (``_Pending``; in any order: sums commute modulo
        ``2**bits``, and each narrows the entries it touches from acc as it then is)."""
        for p in self.pending.values():
            self._apply(p)
        self.pending.clear()

    def _stacked_product(self, st: _ColStack, lay: _StackLayout) -> np.ndarray:
        """The stacked im2col's one product ``(entries * batch, classes * block_out)`` in the
        shadows' dtype (exact integers)."""
        x_view, w_view, single = lay.x_view, lay.w_view, lay.single
        if x_view is None or w_view is None:
            inp, wgt_t, _ = self._shadows(lay.m)
        elif lay.stale[0] or lay.stale[1]:  # the views read the shadows in place: only
            self._sync("inp", not single)  # bring them up to date
            self._sync("wgt", not single)
        cols: np.ndarray
        if x_view is not None:  # the same entries as the gather below, by one strided copy
            cols = x_view.reshape(lay.cols)
        else:
            xs = np.take(inp, st.x, axis=0)  # (entries * m, batch, block_in)
            cols = xs.reshape(lay.taps)
            if lay.taps[2] > 1:
                cols = cols.transpose(0, 2, 1, 3)
            cols = cols.reshape(lay.cols)
        # one product for every class: the classes' weight sequences side by side as the
        # columns of one (m * block_in, classes * block_out) matrix (each sum is the same
        # exact integer whatever the order BLAS adds in), then class-major rows
        w: np.ndarray
        if w_view is not None:
            w = w_view.reshape(lay.weights)
        else:
            w = np.take(wgt_t, st.w, axis=0)  # (classes, m, block_in, block_out)
            w = w.transpose(1, 2, 0, 3).reshape(lay.weights)
        return np.matmul(cols, w)

    def _stack_layout(self, st: _ColStack) -> _StackLayout:
        """What ``_stacked_sums`` of ``st`` reads on every run, found on its first: which
        shadows (``_shadows``: a function of the plan's ``m`` and the shadows' dtype, fixed
        for the run by ``prepare``), their grid views (``_grid_views``: the shadows are
        updated in place, so a view stays current) and the shapes of its matrices."""
        c, m = st.w.shape
        bi = self.bi
        inp, wgt_t, single = self._shadows(m)
        e, batch, bo = st.x.size // m, inp.shape[1], wgt_t.shape[2]
        x_view, w_view = self._grid_views(st, inp, wgt_t)
        stale = (self._stale["inp", not single], self._stale["wgt", not single])
        return _StackLayout(single, x_view, w_view, m, stale, (e, m, batch, bi),
                            (e * batch, m * bi), (m * bi, c * bo), (e * batch, c, bo),
                            (c * e, batch, bo))

    @staticmethod
    def _grid_views(st: _ColStack, inp: np.ndarray, wgt_t: np.ndarray
                    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Read-only strided views of the shadows ``inp`` (entries, batch, block_in) and
        ``wgt_t`` (entries, block_in, block_out) holding ``st``'s im2col matrix as
        ``(*entries, batch, *taps, block_in)`` and its weight matrix as ``(*taps, block_in,
        *classes, block_out)`` where its indices are grids (``_ColStack.x_grid``,
        ``w_grid``), else None: the same elements ``np.take`` gathers, at the same
        positions once reshaped (the shadows are updated in place, so a view stays
        current)."""
        x_view = None if st.x_grid is None else _grid_view(inp, *st.x_grid)
        w_view = None if st.w_grid is None else _grid_view(wgt_t, *st.w_grid)
        return x_view, w_view

    def _shadows(self, m: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """The inp and wgt^T shadows for sums of ``m`` tensor ops (``block_in`` products
        each), and whether they are the float32 ones: exact when every such sum is below
        2**24 (the wide ones otherwise)."""
        if self._single(m):
            return self.inp32, self.wgt_t32, True
        return self.inp, self.wgt_t, False

    def _single(self, m: int) -> bool:
        """Whether sums of ``m`` tensor ops (``block_in`` products each) are exact in float32
        (below 2**24), and run in it (the wide shadows float64: ``prepare``)."""
        return m <= self._single_limit()

    def _single_limit(self) -> int:
        """The most tensor ops whose sums ``_single`` runs in float32: ``m * block_in *
        biggest < 2**24``; none (-1) where the wide shadows are int64 (float64 not exact)."""
        if self.dtype != np.float64:
            return -1
        return (2**24 - 1) // (self.bi * self.biggest)

    def _products(self, plan: _Plan) -> np.ndarray:
        """Per-op products ``(n, batch, block_out)`` in the plan's op order."""
        xs = np.take(self.inp, plan.x, axis=0)  # (n, batch, block_in)
        wgt_t = self.wgt_t
        if plan.groups is None:
            return np.matmul(xs, np.take(wgt_t, plan.w, axis=0))
        n, batch, bi = xs.shape
        if plan.equal is not None:  # one stacked product: (groups, rows, bi) @ (groups, bi, bo)
            g = plan.equal.size
            return np.matmul(xs.reshape(g, n // g * batch, bi), wgt_t[plan.equal]) \
                .reshape(n, batch, -1)
        flat = xs.reshape(n * batch, bi)
        out = np.empty((n * batch, wgt_t.shape[2]), dtype=self.dtype)
        for s, e, wi in plan.groups:
            np.matmul(flat[s * batch: e * batch], wgt_t[wi], out=out[s * batch: e * batch])
        return out.reshape(n, batch, -1)
