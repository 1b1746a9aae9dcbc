"""The analytic cost model of the accelerator's conv2d/matmul schedules: cycles from the knobs.

``estimate(spec, hw, s, epi, fused)`` is a first-order cycle count of one schedule, every
instruction priced by its definition's duration (``vta.compiler.accel.cost``, the function the
simulator charges):

* compute = GEMM cycles (padded shape) + epilogue ALU cycles + per-instruction overheads;
* memory  = DRAM bytes actually moved (input tiles with their halo, once per oc tile; weights
  once per oc tile when the whole reduction fits one tile, else once per spatial tile too;
  outputs once) / bus width, plus a DMA latency per transfer;
* two virtual threads overlap the two (``max``), one thread serialises them (``+``); with a
  separate ALU pipeline the epilogue runs beside the GEMMs, stalling when one step of the other
  thread cannot cover a thread's epilogue, store and next reset.

``rank(problem, epi, ...)`` orders the points of a bound space (``schedules.space``) by the
estimate; it is the cheap pre-filter of the tuner and, with the rule "two virtual threads
whenever two copies fit", the default schedule (``schedules.default``). The timing-only
simulator (``vta.run.targets.AccelTarget.cycles``) is the measured cost model both refine it with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.accel.cost import (
    dma_instruction_cycles,
    microop_instruction_cycles,
    reset_instruction,
)
from vta.compiler.accel.ops.epilogue_plan import epilogue_plan
from vta.compiler.accel.schedules.space import (
    ConvProblem,
    ConvSchedule,
    TileBatch,
    exact_layout,
    in_rows,
    pick,
    schedule_fits,
)
from vta.compiler.ir.space import Point
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.config import HwConfig
from vta.isa import InstructionDef
from vta.isa.builtins import GEMM, LOAD, STORE

if TYPE_CHECKING:
    from vta.compiler.accel.ops.chain_plan import ChainCost

__all__ = ["estimate", "rank", "ISSUE_GAP"]


def _blocks(spec: Conv2dSpec, hw: HwConfig) -> tuple[int, int]:
    return math.ceil(spec.ic / hw.gemm.block_in), math.ceil(spec.oc / hw.gemm.block_out)


@lru_cache(maxsize=16384)
def _dma(hw: HwConfig, kind: str, rows: int, cols: int) -> float:
    """Cycles of one 2-D LOAD of ``rows`` x ``cols`` ``kind`` entries: the LOAD definition's own
    duration (the one the simulator charges)."""
    return dma_instruction_cycles(LOAD, kind, rows, cols, hw)


@lru_cache(maxsize=16384)
def _store(hw: HwConfig, rows: int, cols: int) -> float:
    """Cycles of one STORE of ``rows`` x ``cols`` out entries (the STORE definition's)."""
    return dma_instruction_cycles(STORE, "out", rows, cols, hw)


#: cycles the model adds per compute instruction for its issue between instructions (a property
#: of the model's granularity, not of the hardware: the simulator resolves it exactly)
ISSUE_GAP = 4


def _microop(hw: HwConfig, defn: InstructionDef, n_ops: Any, **fields: Any) -> Any:
    """Cycles of one micro-op instruction of ``n_ops`` executions (its definition's timing)
    plus the model's issue gap (``n_ops`` may be an array: then an array)."""
    key = tuple(sorted(fields.items()))
    return _each(lambda n: _microop_cached(hw, defn, n, key), n_ops) + ISSUE_GAP


@lru_cache(maxsize=16384)
def _microop_cached(hw: HwConfig, defn: InstructionDef, n_ops: int,
                    fields: tuple[tuple[str, Any], ...]) -> float:
    return microop_instruction_cycles(defn, n_ops, hw, **dict(fields))


def _each(fn: Callable[..., float], *args: Any) -> Any:
    """``fn(*args)`` for Python numbers; for arrays (broadcast together), ``fn`` of each
    distinct combination once, spread back over the arrays (the instruction timings are
    Python functions of a few integers; a batch of schedules repeats them a lot)."""
    if not any(isinstance(a, np.ndarray) for a in args):
        return fn(*args)
    cols = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in args))
    key = _mixed_radix([c.ravel() for c in cols])
    if key is not None:  # one flat unique instead of sorting the rows of a table
        flat, inv = np.unique(key[0], return_inverse=True)
        rows = zip(*(((flat // r) % n).tolist() for r, n in key[1]), strict=True)
        vals = np.array([fn(*row) for row in rows], dtype=np.float64)
        return vals[inv.ravel()].reshape(cols[0].shape)
    table = np.stack([c.ravel() for c in cols], axis=1)
    uniq, inverse = np.unique(table, axis=0, return_inverse=True)
    vals = np.array([fn(*row) for row in uniq.tolist()], dtype=np.float64)
    return vals[inverse.ravel()].reshape(cols[0].shape)


def _mixed_radix(cols: list[np.ndarray]) -> tuple[np.ndarray, list[tuple[int, int]]] | None:
    """Non-negative integer columns as one int64 key per row (the first column most
    significant) and each column's (radix, size) to read it back; None when a value is
    negative or the key would not fit."""
    if any(c.size == 0 or int(c.min()) < 0 for c in cols):
        return None
    sizes = [int(c.max()) + 1 for c in cols]
    if math.prod(sizes) >= 1 << 62:
        return None
    radix, r = [], 1
    for n in reversed(sizes):
        radix.append(r)
        r *= n
    radix.reverse()
    key = cols[0] * radix[0]
    for c, rd in zip(cols[1:], radix[1:], strict=True):
        key = key + c * rd
    return key, list(zip(radix, sizes, strict=True))


def estimate(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule | TileBatch,
             epi: Epilogue | None = None, fused: ChainCost | None = None,
             row_view: bool = True) -> Any:
    """First-order cycles of ``spec`` under ``s`` with epilogue ``epi`` (default: the
    requantizing one) and the ``fused`` chain after it (its instructions per entry, its int8
    operands' tile loads); every instruction's cycles come from its definition (see the module
    docstring; ``row_view``: see ``space.in_rows``). Of a ``TileBatch``: an array, each entry
    the float the schedule alone gives (the same operations in the same order, in float64)."""
    epi = epi or Epilogue()
    g = hw.gemm
    icb, ocb = _blocks(spec, hw)
    v = s.vthreads
    v_oc = v if s.vt_axis == "oc" else 1
    v_oh = v if s.vt_axis == "oh" else 1
    nb = math.ceil(spec.n / g.batch)
    icp = -(-icb // s.tci) * s.tci
    ocp = -(-ocb // (s.tco * v_oc)) * s.tco * v_oc
    ohp = -(-spec.oh // (s.th * v_oh)) * s.th * v_oh
    owp = -(-spec.ow // s.tw) * s.tw
    k2 = spec.kh * spec.kw
    n_ic = icp // s.tci
    tiles = nb * (ocp // s.tco) * (ohp // s.th) * (owp // s.tw)
    entries = s.tco * s.th * s.tw
    c_step = _microop(hw, GEMM, entries * s.tci * k2)
    reset, reset_fields = reset_instruction(hw, GEMM)
    c_epi = _microop(hw, reset, entries, reset=True, **dict(reset_fields))
    for sel in epilogue_plan(epi, hw):
        assert sel.intrin.instruction is not None
        c_epi += _microop(hw, sel.intrin.instruction, entries, **sel.fields)
    for defn, fields in (fused.instructions if fused is not None else ()):
        c_epi += _microop(hw, defn, entries, **fields)
    if fused is not None and fused.positions:
        # per-position int32 operands: a LOAD ACC of the tile each (the compute module's)
        c_epi += fused.positions * s.tco * _each(lambda r, c: _dma(hw, "acc", r, c), s.th,
                                                 s.tw)
    th_in = in_rows(spec, hw, s, row_view)
    tw_in = (s.tw - 1) * spec.stride + spec.kw
    m_inp = s.tci * _each(lambda r, c: _dma(hw, "inp", r, c), th_in, tw_in)
    hoist = s.tci >= icb
    m_wgt = _each(lambda r, c: _dma(hw, "wgt", r, c), s.tco, s.tci * k2)
    if s.order == "oc":
        # a whole reduction's weights once per channel tile, shared by the threads on rows
        m_step = m_inp + pick(hoist, 0, m_wgt)
        n_once, m_once = pick(hoist, nb * (ocp // s.tco), 0), m_wgt
        shared = v if s.vt_axis == "oc" else 1
    else:
        # every input channel once per pixel tile, shared by the threads on channels; the
        # weights with every tile
        m_step = pick(hoist, 0, m_inp) + m_wgt
        n_once, m_once = pick(hoist, nb * (ohp // s.th) * (owp // s.tw), 0), m_inp
        shared = v if s.vt_axis == "oh" else 1
    m_store = s.tco * _each(lambda r, c: _store(hw, r, c), s.th, s.tw)
    if fused is not None:  # the operand tiles, loaded once per tile
        m_store += fused.tensors * s.tco * _each(lambda r, c: _dma(hw, "inp", r, c), s.th,
                                                 s.tw)
    m_operands: Any = 0.0
    if s.operands == "tile" and hw.alu.acc_banks == 1:
        # one LOAD ACC of the channel tile's operands (on the compute module) per channel
        # tile: per tile in pixel-outer order
        channels = 1 + (fused.channels if fused is not None else 0)
        loads = nb * (ocp // s.tco) if s.order == "oc" else tiles
        m_operands = loads * channels * _each(lambda c: _dma(hw, "acc", 1, c), s.tco)
    if v > 1 and hw.alu.separate_pipeline:
        # the ALU runs the reset and epilogue beside the GEMMs; a thread's epilogue, store and
        # next reset must fit in the other thread's last step (the skewed threads) or wait
        cover = pick(n_ic == 1, c_step, _max(c_step, m_step))
        stall = _max(0.0, c_epi + m_store - cover)
        tile = _max(_max(n_ic * _max(c_step, m_step) + stall, c_epi), n_ic * m_step + m_store)
        total = tiles * tile + m_once * n_once / shared + m_step + m_store + c_epi
    elif v > 1:
        tile = _max(n_ic * _max(c_step, m_step) + c_epi, n_ic * m_step + m_store)
        total = tiles * tile + m_once * n_once / shared + m_step + m_store
    else:
        tile = n_ic * (c_step + m_step) + c_epi + m_store
        total = tiles * tile + m_once * n_once
    n_insns = tiles * (n_ic * (s.tci + 1 + pick(hoist, 0, 1)) + 5 + s.tco)
    return total + m_operands + n_insns * 0.5  # prefer fewer instructions on ties


def _max(a: Any, b: Any) -> Any:
    """``max(a, b)``, elementwise on arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


def _forced(problem: ConvProblem) -> bool:
    return "order" in problem.forced or "operands" in problem.forced


def rank(problem: ConvProblem, epi: Epilogue | None = None, *, limit: int | None = None,
         prefer_two_threads: bool = False, every_order: bool = False,
         fits: Collection[Point] | None = None) -> list[tuple[float, Point]]:
    """The points of ``problem`` that fit, cheapest estimate first, as ``(estimate, point)``
    (ties in enumeration order; at most ``limit``). ``prefer_two_threads``: the default
    model's rule, within each layout only two-thread points when any fits. Only points with
    VTA's loop order and operand placement (``ConvSchedule.vta_rule``) unless the problem
    forces those knobs or ``every_order`` (the tuner, which searches them with the simulator).
    ``fits``: the points already known to fit (an enumeration's), so none is checked again.

    The ``limit`` best are memoised per problem (hardware, shape, layouts, fused chain, forced
    knobs), epilogue and options (bounded: ``_RANKED_MAX``): a network's repeated layers, and
    the graph's, rank their space once a process.
    Points are walked as schedules (``ConvProblem.fold_schedules``: the other loop orders are
    skipped before their tiles are enumerated) and only the ``limit`` best become ``Point``s."""
    key = None if fits is not None or limit is None else _memo_key(
        problem, epi, limit, prefer_two_threads, every_order)  # a whole ranking: not kept
    if key is not None and key in _RANKED:
        return list(_RANKED[key])
    out = _rank(problem, epi, limit, prefer_two_threads, every_order, fits)
    if key is not None:
        if len(_RANKED) >= _RANKED_MAX:
            _RANKED.pop(next(iter(_RANKED)))
        _RANKED[key] = tuple(out)
    return out


#: ``rank``'s memo (insertion order: the oldest is dropped first), bounded
_RANKED: dict[Hashable, tuple[tuple[float, Point], ...]] = {}
_RANKED_MAX = 1024


def _frozen(x: Any) -> Hashable:
    """``x`` with its dicts and lists as sorted tuples, so it can key the memo."""
    if isinstance(x, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_frozen(v) for v in x)
    return x  # type: ignore[no-any-return]


def _memo_key(problem: ConvProblem, epi: Epilogue | None, limit: int | None,
              prefer_two_threads: bool, every_order: bool) -> Hashable | None:
    """What ``rank``'s answer depends on, or None when some part cannot key a memo (a
    caller's ``accept`` predicate other than ``None``: a closure may see state)."""
    if problem.accept is not None:
        return None
    fused = problem.fused
    key = (problem.hw, problem.spec, problem.folds,
           None if fused is None else (_frozen(fused.instructions), fused.tensors,
                                       fused.channels, fused.positions),
           problem.exact, problem.vthreads, _frozen(problem.forced), problem.row_view,
           epi, limit, prefer_two_threads, every_order, problem.rules)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _rank(problem: ConvProblem, epi: Epilogue | None, limit: int | None,
          prefer_two_threads: bool, every_order: bool,
          fits: Collection[Point] | None) -> list[tuple[float, Point]]:
    if fits is not None:
        return _rank_listed(problem, epi, limit, prefer_two_threads, every_order, fits)
    hw = problem.hw
    vta_only = not every_order and not _forced(problem)
    heads: list[tuple[Any, ...]] = []  # per kept group: its non-tile knobs ...
    batches: list[TileBatch] = []  # ... and its fitting schedules
    costs: list[np.ndarray] = []
    for f in problem.folds:
        dev = f.device
        exact = exact_layout(problem.spec, hw, f) if problem.exact else None
        two = False
        for head, b in problem.fold_batches(f.kind, vta_rule=vta_only):
            if prefer_two_threads and two and b.vthreads == 1:
                break  # two threads fit this layout: keep them (points come two-thread first)
            ok = schedule_fits(dev, hw, b, problem.fused, problem.row_view)
            if exact is not None:  # the graph's layout rule, over the whole batch at once
                ok = ok & exact(b)
            keep = np.flatnonzero(ok)
            if problem.accept is not None:  # a caller's predicate on schedules
                keep = np.array([k for k in keep.tolist()
                                 if _accepted(problem, None, b.schedule(k))],
                                dtype=np.int64)
            if not len(keep):
                continue
            two = two or b.vthreads > 1
            kept = TileBatch(b.tco[keep], b.tci[keep], b.th[keep], b.tw[keep], b.vthreads,
                             b.vt_axis, b.order, b.operands)
            heads.append(head)
            batches.append(kept)
            costs.append(np.asarray(
                estimate(dev, hw, kept, epi, problem.fused, problem.row_view),
                dtype=np.float64))
    if not costs:
        return []
    cost = np.concatenate(costs)
    group = np.concatenate([np.full(len(c), k) for k, c in enumerate(costs)])
    offset = np.concatenate([np.arange(len(c)) for c in costs])
    # the ``limit`` cheapest by (estimate rounded to 6 places, enumeration order), as the
    # scalar ranking sorts; only estimates within 1e-6 of the limit-th can be among them
    order = np.arange(len(cost))
    if limit is not None and max(1, limit) < len(cost):
        kth = np.partition(cost, max(1, limit) - 1)[max(1, limit) - 1]
        order = np.flatnonzero(cost <= kth + 1e-6)
    ranked = sorted(order.tolist(), key=lambda i: (round(float(cost[i]), 6), i))
    top = ranked if limit is None else ranked[:max(1, limit)]
    out = []
    for i in top:
        b, k = batches[int(group[i])], int(offset[i])
        values = (*heads[int(group[i])], int(b.tco[k]), int(b.tci[k]), int(b.th[k]),
                  int(b.tw[k]))
        out.append((float(cost[i]), problem.point_of(values)))
    return out


def _accepted(problem: ConvProblem, exact: Callable[[ConvSchedule], bool] | None,
              s: ConvSchedule) -> bool:
    """The problem's schedule predicates (``ConvProblem.fits`` past the scratchpad rule)."""
    if exact is not None and not exact(s):
        return False
    return problem.accept is None or bool(problem.accept(s))


def _rank_listed(problem: ConvProblem, epi: Epilogue | None, limit: int | None,
                 prefer_two_threads: bool, every_order: bool,
                 fits: Collection[Point]) -> list[tuple[float, Point]]:
    """``rank`` over the points an enumeration found fitting (the tuner's), one at a time."""
    hw = problem.hw
    vta_only = not every_order and not _forced(problem)
    scored: list[tuple[float, int, tuple[Any, ...]]] = []
    for f in problem.folds:
        kept: list[tuple[float, int, tuple[Any, ...]]] = []
        two = False
        for values, s in problem.fold_schedules(f.kind, vta_rule=vta_only):
            if prefer_two_threads and two and s.vthreads == 1:
                break  # two threads fit this layout: keep them (points come two-thread first)
            if problem.point_of(values) not in fits:
                continue
            two = two or s.vthreads > 1
            cost = estimate(f.device, hw, s, epi, problem.fused, problem.row_view)
            kept.append((cost, len(scored) + len(kept), values))
        scored += kept
    scored.sort(key=lambda e: (round(e[0], 6), e[1]))
    top = scored if limit is None else scored[:max(1, limit)]
    return [(est, problem.point_of(v)) for est, _, v in top]
