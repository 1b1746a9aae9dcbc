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
from collections.abc import Collection, Hashable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from vta.compiler.accel.cost import (
    dma_instruction_cycles,
    microop_instruction_cycles,
    reset_instruction,
)
from vta.compiler.accel.ops.epilogue_plan import epilogue_plan
from vta.compiler.accel.schedules.space import ConvProblem, ConvSchedule, in_rows
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


def _microop(hw: HwConfig, defn: InstructionDef, n_ops: int, **fields: Any) -> float:
    """Cycles of one micro-op instruction of ``n_ops`` executions (its definition's timing)
    plus the model's issue gap."""
    return _microop_cached(hw, defn, n_ops, tuple(sorted(fields.items()))) + ISSUE_GAP


@lru_cache(maxsize=16384)
def _microop_cached(hw: HwConfig, defn: InstructionDef, n_ops: int,
                    fields: tuple[tuple[str, Any], ...]) -> float:
    return microop_instruction_cycles(defn, n_ops, hw, **dict(fields))


def estimate(spec: Conv2dSpec, hw: HwConfig, s: ConvSchedule,
             epi: Epilogue | None = None, fused: ChainCost | None = None,
             row_view: bool = True) -> float:
    """First-order cycles of ``spec`` under ``s`` with epilogue ``epi`` (default: the
    requantizing one) and the ``fused`` chain after it (its instructions per entry, its int8
    operands' tile loads); every instruction's cycles come from its definition (see the module
    docstring; ``row_view``: see ``space.in_rows``)."""
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
    th_in = in_rows(spec, hw, s, row_view)
    tw_in = (s.tw - 1) * spec.stride + spec.kw
    m_inp = s.tci * _dma(hw, "inp", th_in, tw_in)
    hoist = s.tci >= icb
    m_wgt = _dma(hw, "wgt", s.tco, s.tci * k2)
    if s.order == "oc":
        # a whole reduction's weights once per channel tile, shared by the threads on rows
        m_step = m_inp + (0 if hoist else m_wgt)
        n_once, m_once = (nb * (ocp // s.tco) if hoist else 0), m_wgt
        shared = v if s.vt_axis == "oc" else 1
    else:
        # every input channel once per pixel tile, shared by the threads on channels; the
        # weights with every tile
        m_step = (0 if hoist else m_inp) + m_wgt
        n_once, m_once = (nb * (ohp // s.th) * (owp // s.tw) if hoist else 0), m_inp
        shared = v if s.vt_axis == "oh" else 1
    m_store = s.tco * _store(hw, s.th, s.tw)
    if fused is not None:  # the operand tiles, loaded once per tile
        m_store += fused.tensors * s.tco * _dma(hw, "inp", s.th, s.tw)
    m_operands = 0.0
    if s.operands == "tile" and hw.alu.acc_banks == 1:
        # one LOAD ACC of the channel tile's operands (on the compute module) per channel
        # tile: per tile in pixel-outer order
        channels = 1 + (fused.channels if fused is not None else 0)
        loads = nb * (ocp // s.tco) if s.order == "oc" else tiles
        m_operands = loads * channels * _dma(hw, "acc", 1, s.tco)
    if v > 1 and hw.alu.separate_pipeline:
        # the ALU runs the reset and epilogue beside the GEMMs; a thread's epilogue, store and
        # next reset must fit in the other thread's last step (the skewed threads) or wait
        cover = c_step if n_ic == 1 else max(c_step, m_step)
        stall = max(0.0, c_epi + m_store - cover)
        tile = max(n_ic * max(c_step, m_step) + stall, c_epi, n_ic * m_step + m_store)
        total = tiles * tile + m_once * n_once / shared + m_step + m_store + c_epi
    elif v > 1:
        tile = max(n_ic * max(c_step, m_step) + c_epi, n_ic * m_step + m_store)
        total = tiles * tile + m_once * n_once / shared + m_step + m_store
    else:
        tile = n_ic * (c_step + m_step) + c_epi + m_store
        total = tiles * tile + m_once * n_once
    n_insns = tiles * (n_ic * (s.tci + 1 + (0 if hoist else 1)) + 5 + s.tco)
    return total + m_operands + n_insns * 0.5  # prefer fewer instructions on ties


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
                                       fused.channels),
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
    hw = problem.hw
    vta_only = not every_order and not _forced(problem)
    scored: list[tuple[float, int, tuple[Any, ...]]] = []
    for f in problem.folds:
        kept: list[tuple[float, int, tuple[Any, ...]]] = []
        two = False
        for values, s in problem.fold_schedules(f.kind, vta_rule=vta_only):
            if prefer_two_threads and two and s.vthreads == 1:
                break  # two threads fit this layout: keep them (points come two-thread first)
            if fits is not None:
                if problem.point_of(values) not in fits:
                    continue
            elif not problem.fits(f, s):
                continue
            two = two or s.vthreads > 1
            cost = estimate(f.device, hw, s, epi, problem.fused, problem.row_view)
            kept.append((cost, len(scored) + len(kept), values))
        scored += kept
    scored.sort(key=lambda e: (round(e[0], 6), e[1]))
    top = scored if limit is None else scored[:max(1, limit)]
    return [(est, problem.point_of(v)) for est, _, v in top]
