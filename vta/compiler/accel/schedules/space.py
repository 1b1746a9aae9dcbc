"""Schedule spaces: the knobs of a schedule, the values each may take, and which points fit.

Separated as the tuner needs them (docs/tuning.md): a *space* (this file) says what may be
chosen and whether a choice fits the hardware; a *cost model* prices a point (the analytic one
is ``schedules.model``; the timing-only simulator is the measured one, ``vta.run``); a
*search* picks points (``vta.tune.search``); and one *build* function turns a point into a
program (``driver.build``). The default schedule (``schedules.default``) is the analytic model
ranking this space; the tuner, the graph level and the Python API's ``schedule_packed`` rank
or search the same space and build through the same function.

A space names its knobs and, for each, a *rule* giving the values it may take. ``bind`` applies
the rules to one problem (a shape): the rules are the same for every shape, a shape only
materialises them, so a space's size is bounded by its rules and not by the shape (Hidet's
hardware-centric space). A point is one value per knob (``Point``). Binding also prunes:
``refusal(point)`` is None for a point that fits, else ``(reason, message)``; ``enumerate_space``
lists the points that fit and counts the refused ones by reason.

The accelerator's conv2d / matmul space (``ConvSpace``), knobs in enumeration order:

* ``fold``: the layout (``ops.fold``): ``none``; ``kw`` and ``khkw`` for a convolution with
  fewer input channels than ``block_in`` and a window of more than one pixel;
* ``vthreads``: 2 or 1 virtual threads (two copies of every per-thread buffer);
* ``vt_axis``: the threads' axis: ``oh`` (threads split the output rows and share the
  weights) or ``oc`` (they split the output channels and double-buffer the weights); one
  thread has ``oh`` only;
* ``order``: the tile loops' order: ``oc`` (output-channel tiles outside the pixel tiles, as
  VTA's schedules: a tile's weights, when one tile holds the whole reduction, are loaded once
  per channel tile and reused by every pixel tile) or ``px`` (pixel tiles outside: a tile's
  input, when one tile holds every input channel, is loaded once per pixel tile and reused by
  every channel tile, and the weights are loaded per tile);
* ``operands``: where the epilogue's per-channel operands (the bias, a fused per-channel
  tensor) are loaded into acc: ``once`` (every channel's, before the first tile) or ``tile``
  (each channel tile's with it, per thread when the threads split the channels: fewer acc
  entries, one more LOAD ACC per channel tile); on banked accumulators with two threads,
  ``tile`` only (each thread's epilogue reads its own bank);
* ``tco``, ``tci``: output and input channel blocks (``block_out`` / ``block_in`` channels
  each) per tile: every divisor of the block count (whole blocks, no padded block);
* ``th``, ``tw``: output rows and columns per tile: for ``k`` tiles ``ceil(extent / k)`` (the
  smallest tile of that count: a larger one only pads), ``k`` up to ``ROW_TILES`` for rows and
  ``COL_TILES`` for columns (the contiguous DMA dimension: fewer, longer rows).

A point is refused (and counted) when a scratchpad cannot hold its per-thread buffers
(``footprint``: the closed form of the tiles' isl footprints, which the compiled program's
scratchpad allocation checks again, ``tests/tune/test_tune_space.py`` holding the two equal), when
its padding needs more than a LOAD's pad fields write, when graph layout planning needs the
packed tensors exact and the point pads them (``exact_layout``), or when the caller's
predicate refuses it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vta.compiler.accel.ops.conv2d_packed import (
    padded_extents,
    padded_rows,
    rows_subsampled,
)
from vta.compiler.accel.ops.fold import FOLDS, ConvFold, fold_candidates
from vta.compiler.accel.ops.matmul_packed import packed_matmul_dims
from vta.compiler.ir.space import Point
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.config import HwConfig
from vta.errors import ScheduleError

if TYPE_CHECKING:
    from vta.compiler.accel.ops.chain_plan import ChainCost

__all__ = ["ConvSchedule", "ConvSpace", "TILE_KNOBS", "check_tile_knobs",
           "ConvProblem", "footprint", "fit_problems", "schedule_fits", "fit_report",
           "TileBatch", "pick",
           "exact_layout",
           "divisors", "tile_choices", "ROW_TILES", "COL_TILES", "Accept"]

def operands_forced(hw: HwConfig, vthreads: int) -> bool:
    """Whether the epilogue's per-channel operands must go with each channel tile: two threads
    on banked accumulators, where each thread's epilogue reads only its own bank."""
    return hw.alu.acc_banks > 1 and vthreads > 1


#: the tile loops' orders (``ConvSchedule.order``) and the operand placements (``operands``)
ORDERS = ("oc", "px")
PLACEMENTS = ("once", "tile")

#: most tiles the space splits the output rows into (``th``) ...
ROW_TILES = 64
#: ... and the output columns (``tw``: the contiguous dimension of every DMA)
COL_TILES = 8


#: the integer knobs of a schedule, each a count (``check_tile_knobs``)
TILE_KNOBS = ("tco", "tci", "th", "tw", "vthreads")


def check_tile_knobs(values: Iterable[tuple[str, Any]]) -> None:
    """Each given count knob (``TILE_KNOBS``; None: not given) is >= 1, else a
    ``ScheduleError`` naming it: ``ConvSchedule``'s rule, also checked on a caller's fixed
    knobs before a space is built around them (a 0 would first divide the model's arrays
    by zero)."""
    for f, v in values:
        if v is not None and v < 1:
            raise ScheduleError(f"schedule: {f} must be >= 1, got {v}")


@dataclass(frozen=True, slots=True)
class ConvSchedule:
    """The tile knobs of an accelerator conv2d/matmul schedule (a point's schedule part)."""

    tco: int  # output-channel blocks per tile
    tci: int  # input-channel blocks per tile
    th: int  # output rows per tile
    tw: int  # output columns per tile
    vthreads: int = 2
    vt_axis: str = "oh"  # "oh" or "oc"
    order: str = "oc"  # "oc": channel tiles outside the pixel tiles; "px": pixel tiles outside
    operands: str = "once"  # per-channel epilogue operands: "once" before the first tile, "tile"

    def __post_init__(self) -> None:
        check_tile_knobs((f, getattr(self, f)) for f in TILE_KNOBS)
        for f, values in (("vt_axis", ("oh", "oc")), ("order", ORDERS),
                          ("operands", PLACEMENTS)):
            if getattr(self, f) not in values:
                raise ScheduleError(f"schedule: {f} must be one of {', '.join(values)}, got "
                                    f"{getattr(self, f)!r}")

    def operands_per_tile(self, hw: HwConfig) -> bool:
        """Whether the per-channel operands are loaded with each channel tile: asked for, or
        forced by banked accumulators with two threads (each thread's epilogue reads only its
        own bank)."""
        return self.operands == "tile" or operands_forced(hw, self.vthreads)

    def vta_rule(self, hw: HwConfig) -> bool:
        """Whether the schedule follows the default model's fixed choices: VTA's loop order
        and the operands loaded once (per tile where banked accumulators force it)."""
        forced = operands_forced(hw, self.vthreads)
        return self.order == "oc" and self.operands == ("tile" if forced else "once")


#: A predicate on schedules (``ConvSpace.bind(accept=...)``): e.g. "the packed output has
#: exactly the tensor's shape", which graph-level layout planning asks for.
Accept = Callable[[ConvSchedule], bool]


# ------------------------------------------------------------------------------ points


# ------------------------------------------------------------------------- rules


def divisors(n: int) -> tuple[int, ...]:
    """Every divisor of ``n``, ascending (whole-block channel tiles)."""
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def tile_choices(extent: int, limit: int) -> tuple[int, ...]:
    """Tiles of ``extent`` giving 1, 2, ... ``limit`` tiles: ``ceil(extent / k)``, ascending
    (each the smallest tile of its count)."""
    return tuple(sorted({-(-extent // k) for k in range(1, min(extent, limit) + 1)}))


# ------------------------------------------------------------------ fit: the footprint


def _blocks(spec: Conv2dSpec, hw: HwConfig) -> tuple[int, int]:
    return math.ceil(spec.ic / hw.gemm.block_in), math.ceil(spec.oc / hw.gemm.block_out)


def pick(cond: Any, a: Any, b: Any) -> Any:
    """``a if cond else b``, elementwise when ``cond`` is an array: the fit rule and the cost
    model are written once and price one schedule (Python numbers) or a batch of tile sizes
    (numpy arrays, ``TileBatch``) alike."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


@dataclass(frozen=True)
class TileBatch:
    """Many schedules that differ only in their tile knobs: ``tco``, ``tci``, ``th``, ``tw``
    are equal-length integer arrays, the other knobs one value each. ``footprint``,
    ``schedule_fits`` and ``model.estimate`` take it where they take a ``ConvSchedule`` and
    answer with arrays (``model.rank`` prices a whole space this way)."""

    tco: np.ndarray
    tci: np.ndarray
    th: np.ndarray
    tw: np.ndarray
    vthreads: int
    vt_axis: str
    order: str
    operands: str

    def operands_per_tile(self, hw: HwConfig) -> bool:
        """``ConvSchedule.operands_per_tile`` (it does not depend on the tiles)."""
        return self.operands == "tile" or operands_forced(hw, self.vthreads)

    def schedule(self, k: int) -> ConvSchedule:
        """The ``k``-th schedule of the batch."""
        return ConvSchedule(int(self.tco[k]), int(self.tci[k]), int(self.th[k]),
                            int(self.tw[k]), self.vthreads, self.vt_axis, self.order,
                            self.operands)


def in_rows(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule | TileBatch,
            row_view: bool = True) -> Any:
    """Input rows one tile's input copy holds (only the rows read when ``data_pad`` keeps
    every stride-th row, ``ops.conv2d.row_subsampled``; ``row_view=False``: the padding stage
    is not ``conv2d_compute``'s and keeps every row, as a packed logical compute's does)."""
    full = (s.th - 1) * spec.stride + spec.kh
    if not row_view:
        return full
    ohp = padded_rows(spec.oh, s.th, s.vthreads, s.vt_axis)
    return pick(rows_subsampled(spec.kh, spec.stride, spec.pad, ohp, spec.h), s.th, full)


def footprint(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule | TileBatch,
              fused: ChainCost | None = None, row_view: bool = True) -> dict[str, Any]:
    """Scratchpad entries the schedule needs per buffer kind (threads included); each int8
    operand of a ``fused`` chain adds one output tile to ``inp`` and one to ``acc``
    (``row_view``: see ``in_rows``)."""
    icb, ocb = _blocks(spec, hw)
    v = s.vthreads
    v_oc = v if s.vt_axis == "oc" else 1
    v_oh = v if s.vt_axis == "oh" else 1
    th_in = in_rows(spec, hw, s, row_view)
    tw_in = (s.tw - 1) * spec.stride + spec.kw
    hoist = s.tci >= icb
    if s.order == "oc":
        # weights of a whole reduction at the channel tile, outside threads on rows
        wgt = s.tco * s.tci * spec.kh * spec.kw * pick(hoist, v_oc, v)
        inp = v * s.tci * th_in * tw_in
    else:
        # the input of every channel at the pixel tile, outside threads on channels; the
        # weights at the channel tile, inside every thread
        wgt = s.tco * s.tci * spec.kh * spec.kw * v
        inp = pick(hoist, v_oh, v) * s.tci * th_in * tw_in
    ocbp = -(-ocb // (s.tco * v_oc)) * s.tco * v_oc
    tile = v * s.tco * s.th * s.tw
    extra = fused.tensors if fused is not None else 0
    # acc tiles only: per-position operands and copies of the running value
    positions = fused.positions + fused.copies if fused is not None else 0
    channels = 1 + (fused.channels if fused is not None else 0)
    banks = hw.alu.acc_banks
    if banks > 1 and v > 1:
        # banked accumulators: each thread's tile (and its fused operands' tiles) and its own
        # copy of the per-channel operands in a bank of its own (``build.schedule_op``;
        # scratchpad allocation aligns the threads' copies to banks)
        acc = banks * (s.tco * s.th * s.tw * (1 + extra + positions) + s.tco * channels)
    elif s.operands_per_tile(hw):
        # one channel tile's, per thread where the channel tile loop is inside the threads
        copies = v if s.order == "px" else v_oc
        acc = tile * (1 + extra + positions) + copies * s.tco * channels
    else:
        acc = tile * (1 + extra + positions) + ocbp * channels
    return {"inp": inp + extra * tile,
            "wgt": wgt + (1 if extra else 0),  # the identity block of the widening GEMMs
            "acc": acc}


def knobs_text(s: ConvSchedule) -> str:
    """The knobs as text (order and operand placement where they are not the defaults)."""
    more = "".join(f", {f}={getattr(s, f)}" for f, d in (("order", "oc"), ("operands", "once"))
                   if getattr(s, f) != d)
    return (f"(tco={s.tco}, tci={s.tci}, th={s.th}, tw={s.tw}, vthreads={s.vthreads}, "
            f"vt_axis={s.vt_axis}{more})")


def _max_pad(hw: HwConfig) -> int:
    """The most zero padding one LOAD writes on a side (rows past the image are clamped by
    DMA insertion)."""
    return (1 << hw.isa.pad) - 1


def _last_pad_x(spec: Conv2dSpec, s: ConvSchedule | TileBatch) -> Any:
    """Columns of zero padding the last column tile's input needs past the image."""
    last_x = (-(-spec.ow // s.tw) * s.tw - s.tw) * spec.stride - spec.pad
    return last_x + (s.tw - 1) * spec.stride + spec.kw - spec.w


def schedule_fits(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule | TileBatch,
                  fused: ChainCost | None = None, row_view: bool = True) -> Any:
    """Whether ``fit_problems`` finds nothing, without composing its messages (ranking a
    space asks this of every point; of a ``TileBatch``, an array of answers)."""
    need = footprint(spec, hw, s, fused, row_view)
    ok = True
    for kind, entries in need.items():
        ok = ok & (entries <= hw.depth(kind))
    banks = hw.alu.acc_banks
    if banks > 1 and s.vthreads == 1:
        ok = ok & (need["acc"] <= hw.depth("acc") // banks)
    max_pad = _max_pad(hw)
    if spec.pad > max_pad:
        return np.zeros_like(ok) if isinstance(ok, np.ndarray) else False
    ok = ok & (_last_pad_x(spec, s) <= max_pad)
    return ok if isinstance(ok, np.ndarray) else bool(ok)


def fit_problems(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule,
                 fused: ChainCost | None = None,
                 row_view: bool = True) -> list[tuple[str, str]]:
    """Why the schedule does not fit, as ``(reason, message)`` pairs (empty when it fits):
    a scratchpad it overflows (``"<kind> scratchpad"``), padding a LOAD cannot write
    (``"pad field"``)."""
    out: list[tuple[str, str]] = []
    need = footprint(spec, hw, s, fused, row_view)
    for kind, entries in need.items():
        depth = hw.depth(kind)
        if entries > depth:
            eb = hw.elem_bytes(kind)
            out.append((f"{kind} scratchpad",
                        f"schedule {knobs_text(s)} does not fit the {kind} scratchpad of "
                        f"{hw.name}: needs {entries * eb} bytes ({entries} entries), available "
                        f"{depth * eb} bytes"))
    banks = hw.alu.acc_banks
    if banks > 1 and s.vthreads == 1 and not any(r == "acc scratchpad" for r, _ in out):
        # one thread on banked accumulators: its buffers share one bank (two threads have a
        # bank each, which the per-thread footprint already counts)
        bank, eb = hw.depth("acc") // banks, hw.elem_bytes("acc")
        if need["acc"] > bank:
            out.append(("acc scratchpad",
                        f"schedule {knobs_text(s)} does not fit one acc bank of {hw.name}: "
                        f"needs {need['acc'] * eb} bytes ({need['acc']} entries), a bank holds "
                        f"{bank * eb} bytes ({banks} banks)"))
    max_pad = _max_pad(hw)
    if spec.pad > max_pad:
        out.append(("pad field", f"conv2d pad {spec.pad} needs more zero padding than a LOAD "
                    f"of {hw.name} writes ({max_pad}: {hw.isa.pad}-bit pad fields)"))
    pad_x1 = _last_pad_x(spec, s)
    if pad_x1 > max_pad:
        out.append(("pad field", f"schedule {knobs_text(s)}: the last column tile needs "
                    f"{pad_x1} columns of zero padding, more than a LOAD can write ({max_pad});"
                    f" choose tw dividing the output width {spec.ow}"))
    return out


def fit_report(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule,
               fused: ChainCost | None = None, row_view: bool = True) -> None:
    """Raise ScheduleError naming the first buffer (or pad field) the schedule overflows."""
    problems = fit_problems(spec, hw, s, fused, row_view)
    if problems:
        raise ScheduleError(problems[0][1])


def exact_layout(spec: Conv2dSpec | MatmulSpec, hw: HwConfig,
                 fold: ConvFold) -> Callable[[Any], Any]:
    """Whether a schedule's packed tensors are exactly the tensors' (graph layout planning):
    output channels, rows and columns unpadded, and the input's channels too unless the input
    is folded (the host repacks a folded input anyway). The predicate takes a
    ``ConvSchedule`` (a bool) or a ``TileBatch`` (an array of answers: ``model.rank`` filters
    a whole space with one call instead of a schedule at a time)."""
    g = hw.gemm
    if isinstance(spec, MatmulSpec):
        m = spec

        def ok_mm(s: ConvSchedule) -> bool:
            P = packed_matmul_dims(m, hw, s)
            return (P.mb, P.kb, P.nb) == (math.ceil(m.m / g.batch), math.ceil(m.k / g.block_in),
                                          math.ceil(m.n / g.block_out))

        def ok_mm_any(s: ConvSchedule | TileBatch) -> Any:
            if isinstance(s, TileBatch):
                return np.array([ok_mm(s.schedule(k)) for k in range(len(s.tco))], dtype=bool)
            return ok_mm(s)

        return ok_mm_any
    dev, folded = fold.device, fold.kind != "none"

    def ok(s: ConvSchedule | TileBatch) -> Any:
        icb, ocb, ohp, owp = padded_extents(dev, hw, s)
        out = (ocb == math.ceil(dev.oc / g.block_out)) & (ohp == dev.oh) & (owp == dev.ow)
        if not folded:
            out = out & (icb == math.ceil(dev.ic / g.block_in))
        return out if isinstance(out, np.ndarray) else bool(out)

    return ok


# -------------------------------------------------------------------- the conv space


@dataclass(frozen=True)
class ConvSpace:
    """The accelerator's conv2d / matmul schedule space on ``hw``: its knobs and their rules
    (module docstring). ``bind`` applies them to one problem."""

    hw: HwConfig
    row_tiles: int = ROW_TILES
    col_tiles: int = COL_TILES

    name: ClassVar[str] = "vta.conv2d"
    KNOBS: ClassVar[tuple[str, ...]] = ("fold", "vthreads", "vt_axis", "order", "operands",
                                        "tco", "tci", "th", "tw")

    def bind(self, spec: Conv2dSpec | MatmulSpec, *, fused: ChainCost | None = None,
             exact: bool = False, accept: Accept | None = None, fold: str | None = None,
             vthreads: int | None = None, row_view: bool = True,
             **forced: Any) -> ConvProblem:
        """The space of ``spec`` (the user's convolution or matmul). ``fold``, ``vthreads``
        and ``forced`` knobs (tco, tci, th, tw, vt_axis) fix those knobs to one value;
        ``fused``: a chain fused after the epilogue (its tiles count in the footprint);
        ``exact``: only packed tensors of the tensors' exact shapes; ``accept``: only the
        schedules it accepts; ``row_view=False``: the input's padding stage keeps every row
        (``in_rows``)."""
        unknown = sorted(set(forced) - {"tco", "tci", "th", "tw", "vt_axis", "order",
                                        "operands"})
        if unknown:
            raise ScheduleError(f"unknown schedule knob {unknown[0]!r}; expected tco, tci, th, "
                                f"tw, vthreads, vt_axis, order, operands")
        conv = spec if isinstance(spec, Conv2dSpec) else spec.as_conv(self.hw.gemm.batch)
        return ConvProblem(self, spec, _folds(spec, conv, self.hw, fold), fused, exact, accept,
                           vthreads, dict(forced), row_view)


def _folds(spec: Conv2dSpec | MatmulSpec, conv: Conv2dSpec, hw: HwConfig,
           fold: str | None) -> tuple[ConvFold, ...]:
    """The layouts: ``fold`` if given, else the plain one and, for a convolution with fewer
    channels than ``block_in``, its folds (``ops.fold.fold_candidates``)."""
    if fold is not None:
        if fold not in FOLDS:
            return (ConvFold(conv, fold),)  # raises the named error
        if fold != "none" and not isinstance(spec, Conv2dSpec):
            return (ConvFold(conv),)  # a matmul has no window to fold
        return (ConvFold(conv, fold),)
    return tuple(fold_candidates(conv, hw)) if isinstance(spec, Conv2dSpec) else (ConvFold(conv),)


@dataclass(frozen=True)
class ConvProblem:
    """``ConvSpace`` bound to one problem: the knobs' values for its shape, and pruning."""

    rules: ConvSpace
    spec: Conv2dSpec | MatmulSpec
    folds: tuple[ConvFold, ...]
    fused: ChainCost | None = None
    exact: bool = False
    accept: Accept | None = None
    vthreads: int | None = None
    forced: dict[str, int | str] = field(default_factory=dict)
    row_view: bool = True

    name: ClassVar[str] = ConvSpace.name
    knobs: ClassVar[tuple[str, ...]] = ConvSpace.KNOBS

    @property
    def hw(self) -> HwConfig:
        return self.rules.hw

    def fold(self, kind: str) -> ConvFold:
        for f in self.folds:
            if f.kind == kind:
                return f
        raise KeyError(kind)

    def domain(self, knob: str, point: Mapping[str, Any]) -> tuple[Any, ...]:
        """The values ``knob`` takes given the knobs before it (``fold`` first)."""
        if knob == "fold":
            return tuple(f.kind for f in self.folds)
        if knob == "vthreads":
            return (self.vthreads,) if self.vthreads is not None else (2, 1)
        if knob == "vt_axis" and point["vthreads"] == 1:
            return ("oh",)
        if knob in self.forced:
            return (self.forced[knob],)
        if knob == "vt_axis":
            return ("oh", "oc")
        if knob == "order":
            return ORDERS
        if knob == "operands":
            return ("tile",) if operands_forced(self.hw, point["vthreads"]) else PLACEMENTS
        dev = self.fold(point["fold"]).device
        icb, ocb = _blocks(dev, self.hw)
        if knob == "tco":
            return divisors(ocb)
        if knob == "tci":
            return divisors(icb)
        if knob == "th":
            return tile_choices(dev.oh, self.rules.row_tiles)
        if knob == "tw":
            return tile_choices(dev.ow, self.rules.col_tiles)
        raise KeyError(knob)

    def points(self) -> Iterator[Point]:
        """Every point: fold, then threads and their axis, tco, tci, th, tw."""
        yield from self._points_of({}, 0)

    def _points_of(self, partial: dict[str, Any], depth: int) -> Iterator[Point]:
        if depth == len(self.knobs):
            yield Point.of(self.knobs, partial)
            return
        knob = self.knobs[depth]
        for v in self.domain(knob, partial):
            yield from self._points_of({**partial, knob: v}, depth + 1)

    def fold_points(self, kind: str) -> Iterator[Point]:
        """The points of one layout."""
        yield from self._points_of({"fold": kind}, 1)

    def _groups(self, kind: str, vta_rule: bool
                ) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
        """The layout's schedules by their non-tile knobs, in enumeration order: ``(kind,
        vthreads, vt_axis, order, operands)`` and the values of ``tco``, ``tci``, ``th``,
        ``tw`` (``fold_schedules`` and ``fold_batches`` walk them)."""
        dom = self.domain
        for vt in dom("vthreads", {"fold": kind}):
            for axis in dom("vt_axis", {"fold": kind, "vthreads": vt}):
                p2 = {"fold": kind, "vthreads": vt, "vt_axis": axis}
                for order in dom("order", p2):
                    if vta_rule and order != "oc":
                        continue
                    p3 = {**p2, "order": order}
                    rule_operands = "tile" if operands_forced(self.hw, vt) else "once"
                    for operands in dom("operands", p3):
                        if vta_rule and operands != rule_operands:
                            continue
                        p4 = {**p3, "operands": operands}
                        yield ((kind, vt, axis, order, operands),
                               [dom(k, p4) for k in ("tco", "tci", "th", "tw")])

    def fold_schedules(self, kind: str, vta_rule: bool = False
                       ) -> Iterator[tuple[tuple[Any, ...], ConvSchedule]]:
        """The points of one layout as ``(values, schedule)``, ``values`` in knob order (the
        order of ``fold_points``; ``Point(tuple(zip(knobs, values)))`` is the point), without
        building a ``Point`` each: what ranking a space walks. ``vta_rule``: only schedules
        with VTA's loop order and operand placement (``ConvSchedule.vta_rule``), the others
        skipped before their tiles are enumerated."""
        for head, tiles in self._groups(kind, vta_rule):
            _, vt, axis, order, operands = head
            for tco, tci, th, tw in itertools.product(*tiles):
                yield ((*head, tco, tci, th, tw),
                       ConvSchedule(int(tco), int(tci), int(th), int(tw), int(vt),
                                    str(axis), str(order), str(operands)))

    def fold_batches(self, kind: str, vta_rule: bool = False
                     ) -> Iterator[tuple[tuple[Any, ...], TileBatch]]:
        """``fold_schedules`` a group at a time: for each combination of the non-tile knobs
        (their values, as ``values[:5]``), every tile combination as a ``TileBatch``, in
        ``fold_schedules``' order (``tco`` slowest, ``tw`` fastest)."""
        for head, tiles in self._groups(kind, vta_rule):
            _, vt, axis, order, operands = head
            grids = np.meshgrid(*(np.asarray(t, dtype=np.int64) for t in tiles),
                                indexing="ij")
            tco, tci, th, tw = (g.ravel() for g in grids)
            yield head, TileBatch(tco, tci, th, tw, int(vt), str(axis), str(order),
                                  str(operands))

    def point_of(self, values: tuple[Any, ...]) -> Point:
        """The point of ``values`` (knob order, as ``fold_schedules`` yields them)."""
        return Point(tuple(zip(self.knobs, values, strict=True)))

    def fits(self, fold: ConvFold, s: ConvSchedule) -> bool:
        """Whether the schedule ``s`` of layout ``fold`` (a point of this space) fits: what
        ``refusal`` answers for it, without its messages (``schedule_fits``)."""
        if not schedule_fits(fold.device, self.hw, s, self.fused, self.row_view):
            return False
        if self.exact and not exact_layout(self.spec, self.hw, fold)(s):
            return False
        return self.accept is None or bool(self.accept(s))

    def schedule(self, point: Point) -> tuple[ConvFold, ConvSchedule]:
        """The layout and the tile knobs of ``point``."""
        return self.fold(point["fold"]), ConvSchedule(
            int(point["tco"]), int(point["tci"]), int(point["th"]), int(point["tw"]),
            int(point["vthreads"]), str(point["vt_axis"]), str(point["order"]),
            str(point["operands"]))

    def refusal(self, point: Point) -> tuple[str, str] | None:
        """None when ``point`` fits (module docstring), else ``(reason, message)``."""
        try:
            fold = self.fold(point["fold"])
        except KeyError:
            kinds = ", ".join(f.kind for f in self.folds)
            return ("outside the space", f"fold {point['fold']!r} is not a layout of "
                    f"{self.spec.describe()} here (layouts: {kinds})")
        partial: dict[str, Any] = {}
        for knob in self.knobs:
            if point[knob] not in self.domain(knob, partial):
                return ("outside the space", f"{knob}={point[knob]} is not a value of the "
                        f"space for {self.spec.describe()} ({knob} takes "
                        f"{', '.join(map(str, self.domain(knob, partial)))})")
            partial[knob] = point[knob]
        _, s = self.schedule(point)
        problems = fit_problems(fold.device, self.hw, s, self.fused, self.row_view)
        if problems:
            return problems[0]
        if self.exact and not exact_layout(self.spec, self.hw, fold)(s):
            return ("inexact layout", f"schedule {knobs_text(s)} pads the packed tensors; the "
                    f"graph's layout needs them exact")
        if self.accept is not None and not self.accept(s):
            return ("refused by the caller", f"schedule {knobs_text(s)} is not accepted")
        return None

    def no_fit_error(self, fold: ConvFold) -> ScheduleError:
        """The error when no point of layout ``fold`` fits: the first problem of the forced
        knobs (or the smallest tiles), else a sentence naming the problem and the hardware."""
        f = self.forced
        s = ConvSchedule(int(f.get("tco", 1)), int(f.get("tci", 1)), int(f.get("th", 1)),
                         int(f.get("tw", 1)), self.vthreads or 1, str(f.get("vt_axis", "oh")),
                         str(f.get("order", "oc")), str(f.get("operands", "once")))
        problems = fit_problems(fold.device, self.hw, s, self.fused, self.row_view)
        if problems:
            return ScheduleError(problems[0][1])
        why = " and writes the packed layout asked for" if (self.exact or self.accept) else ""
        return ScheduleError(f"no schedule of {fold.device.describe()} fits {self.hw.name}{why}")
