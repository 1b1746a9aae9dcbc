"""The default schedule model: tile sizes and virtual threads from the HwConfig.

A conv2d (and a matmul, which is a 1x1 conv) is tiled as ``tco`` output-channel blocks x
``th`` output rows x ``tw`` output columns per accumulator tile, reducing over ``tci``
input-channel blocks per input tile. The model enumerates tiles that fit the scratchpads (with
every per-thread buffer duplicated when ``vthreads`` = 2), and scores them with a first-order
cycle estimate:

* compute = GEMM cycles (padded shape) + epilogue ALU cycles + per-instruction overheads;
* memory  = DRAM bytes actually moved (input tiles with their halo, once per oc tile; weights
  once per oc tile when the whole reduction fits one tile, else once per spatial tile too;
  outputs once) / bus width, plus a DMA latency per transfer;
* two virtual threads overlap the two (``max``), one thread serialises them (``+``).

Two virtual threads are used when two copies of the per-thread buffers fit (as VTA); the
thread axis is the output rows (threads share the weights) or the output channels (threads
double-buffer the weights, for weight-bound layers); the model picks the cheaper.
``ranked_schedules`` returns the cheapest few (``driver.compile_workload`` times them with the
timing-only simulator and keeps the fastest). Every knob can be overridden; ``fit_report``
checks a given schedule and raises a named error. A one-row strided kernel's input tile holds
only the rows it reads (``ops.conv2d.row_subsampled``); the bias of every output channel is
loaded once, before the first tile.

``schedule_op`` expresses the chosen knobs with the schedule primitives on the op's tensor IR
(``ops.epilogue.PackedOp``) and ``lower_op`` lowers it (vta.compiler.lower):

* ``cache_read`` data_pad -> inp (the padding stage ``compute_inline``d into the copy),
  kernel -> wgt; ``cache_write`` of the reduction into acc (its global stage inlined into the
  epilogue);
* the output tiled over oc / oh / ow (``split`` + ``reorder``), the threads' axis split off
  and marked ``virtual_thread``; the reduction ``compute_at`` the tile loop;
* the reduction's channel axis split into an outer ic loop (the input copy, and the weight
  copy unless it covers every channel, ``compute_at`` it) and the batch x block loops
  ``tensorize``d onto ``vta_gemm_intrinsic(hw)``; whole-reduction weights and the bias are
  copied once per output-channel tile (weight reuse across every spatial tile);
* the epilogue is not scheduled here: post-scheduling fusion (``schedules.fusion``) attaches
  it, and any fused operator, to the accumulator tile (bias -> acc once, before the first
  tile), as it does for a user's own anchor schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from vta.compiler.cost import (
    dma_instruction_cycles,
    microop_instruction_cycles,
    reset_instruction,
)
from vta.compiler.intrin import vta_gemm_intrinsic
from vta.compiler.lower import lower
from vta.compiler.ops.conv2d import packed_dims, row_subsampled
from vta.compiler.ops.epilogue import Epilogue, epilogue_plan
from vta.compiler.schedule import AttachAt, Schedule, ScheduleError, create_schedule
from vta.compiler.schedules.fusion import attach_epilogue
from vta.compiler.tensor import IterVar
from vta.config import HwConfig
from vta.isa import InstructionDef
from vta.isa.builtins import GEMM, LOAD, STORE

if TYPE_CHECKING:
    from vta.compiler import stmt as S
    from vta.compiler.ops.epilogue import PackedOp
    from vta.compiler.ops.fused import ChainCost

__all__ = ["ConvSchedule", "ScheduleError", "default_schedule", "fit_report", "lower_op",
           "ranked_schedules", "schedule_op"]


@dataclass(frozen=True, slots=True)
class ConvSchedule:
    tco: int  # output-channel blocks per tile
    tci: int  # input-channel blocks per tile
    th: int  # output rows per tile
    tw: int  # output columns per tile
    vthreads: int = 2
    vt_axis: str = "oh"  # "oh" or "oc"

    def __post_init__(self) -> None:
        for f in ("tco", "tci", "th", "tw", "vthreads"):
            if getattr(self, f) < 1:
                raise ScheduleError(f"schedule: {f} must be >= 1, got {getattr(self, f)}")
        if self.vt_axis not in ("oh", "oc"):
            raise ScheduleError(f"schedule: vt_axis must be 'oh' or 'oc', got {self.vt_axis!r}")


def _blocks(spec, hw: HwConfig) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    return math.ceil(spec.ic / hw.gemm.block_in), math.ceil(spec.oc / hw.gemm.block_out)


def _in_rows(spec, hw: HwConfig, s: ConvSchedule,  # type: ignore[no-untyped-def]
             row_view: bool = True) -> int:
    """Input rows one tile's input copy holds (only the rows read when ``data_pad`` keeps
    every stride-th row, ``ops.conv2d.row_subsampled``; ``row_view=False``: the padding stage
    is not ``conv2d_compute``'s and keeps every row, as a packed logical compute's does)."""
    if row_view and row_subsampled(packed_dims(spec, hw, s)):
        return s.th
    return (s.th - 1) * spec.stride + spec.kh


def footprint(spec, hw: HwConfig, s: ConvSchedule,  # type: ignore[no-untyped-def]
              fused: ChainCost | None = None, row_view: bool = True) -> dict[str, int]:
    """Scratchpad entries the schedule needs per buffer kind (threads included); each int8
    operand of a ``fused`` chain adds one output tile to ``inp`` and one to ``acc``
    (``row_view``: see ``_in_rows``)."""
    icb, ocb = _blocks(spec, hw)
    v = s.vthreads
    v_oc = v if s.vt_axis == "oc" else 1
    th_in = _in_rows(spec, hw, s, row_view)
    tw_in = (s.tw - 1) * spec.stride + spec.kw
    hoist = s.tci >= icb
    wgt = s.tco * s.tci * spec.kh * spec.kw * (v_oc if hoist else v)
    ocbp = -(-ocb // (s.tco * v_oc)) * s.tco * v_oc
    tile = v * s.tco * s.th * s.tw
    extra = fused.tensors if fused is not None else 0
    channels = 1 + (fused.channels if fused is not None else 0)
    banks = hw.alu.acc_banks
    if banks > 1:
        # banked accumulators: each thread's tile (and its fused operands' tiles) and its own
        # copy of the per-channel operands in a bank of its own (``_bias_per_thread``;
        # scratchpad allocation aligns the threads' copies to banks)
        acc = banks * (s.tco * s.th * s.tw * (1 + extra) + s.tco * channels)
    else:
        acc = tile * (1 + extra) + ocbp * channels
    return {"inp": v * s.tci * th_in * tw_in + extra * tile,
            "wgt": wgt + (1 if extra else 0),  # the identity block of the widening GEMMs
            "acc": acc}


def fit_report(spec, hw: HwConfig, s: ConvSchedule,  # type: ignore[no-untyped-def]
               fused: ChainCost | None = None, row_view: bool = True) -> None:
    """Raise ScheduleError naming the first buffer the schedule overflows."""
    need = footprint(spec, hw, s, fused, row_view)
    for kind, entries in need.items():
        depth = hw.depth(kind)
        if entries > depth:
            eb = hw.elem_bytes(kind)
            raise ScheduleError(
                f"schedule {_knobs(s)} does not fit the {kind} scratchpad of {hw.name}: "
                f"needs {entries * eb} bytes ({entries} entries), available {depth * eb} bytes")
    max_pad = (1 << hw.isa.pad) - 1  # rows past the image are clamped by DMA insertion
    if spec.pad > max_pad:
        raise ScheduleError(f"conv2d pad {spec.pad} needs more zero padding than a LOAD of "
                            f"{hw.name} writes ({max_pad}: {hw.isa.pad}-bit pad fields)")
    last_x = (math.ceil(spec.ow / s.tw) * s.tw - s.tw) * spec.stride - spec.pad
    pad_x1 = last_x + (s.tw - 1) * spec.stride + spec.kw - spec.w
    if pad_x1 > max_pad:
        raise ScheduleError(f"schedule {_knobs(s)}: the last column tile needs {pad_x1} columns of"
                            f" zero padding, more than a LOAD can write ({max_pad}); choose tw "
                            f"dividing the output width {spec.ow}")


def _knobs(s: ConvSchedule) -> str:
    return (f"(tco={s.tco}, tci={s.tci}, th={s.th}, tw={s.tw}, vthreads={s.vthreads}, "
            f"vt_axis={s.vt_axis})")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tile_choices(extent: int, limit: int = 64) -> list[int]:
    """Tile sizes worth trying: sizes giving 1, 2, 3, ... tiles (little padding waste)."""
    out = sorted({-(-extent // k) for k in range(1, min(extent, limit) + 1)})
    return out


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


def estimate(spec, hw: HwConfig, s: ConvSchedule,  # type: ignore[no-untyped-def]
             epi: Epilogue | None = None, fused: ChainCost | None = None,
             row_view: bool = True) -> float:
    """First-order cycles of ``spec`` under ``s`` with epilogue ``epi`` (default: the
    requantizing one) and the ``fused`` chain after it (its instructions per entry, its int8
    operands' tile loads); every instruction's cycles come from its definition (see the module
    docstring; ``row_view``: see ``_in_rows``)."""
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
    th_in = _in_rows(spec, hw, s, row_view)
    tw_in = (s.tw - 1) * spec.stride + spec.kw
    m_inp = s.tci * _dma(hw, "inp", th_in, tw_in)
    hoist = s.tci >= icb
    m_wgt = _dma(hw, "wgt", s.tco, s.tci * k2)
    m_step = m_inp + (0 if hoist else m_wgt)
    m_store = s.tco * _store(hw, s.th, s.tw)
    if fused is not None:  # the operand tiles, loaded once per tile
        m_store += fused.tensors * s.tco * _dma(hw, "inp", s.th, s.tw)
    n_wgt_loads = nb * (ocp // s.tco) if hoist else 0
    if v > 1 and hw.alu.separate_pipeline:
        # the ALU runs the reset and epilogue beside the GEMMs; a thread's epilogue, store and
        # next reset must fit in the other thread's last step (the skewed threads) or wait
        cover = c_step if n_ic == 1 else max(c_step, m_step)
        stall = max(0.0, c_epi + m_store - cover)
        tile = max(n_ic * max(c_step, m_step) + stall, c_epi, n_ic * m_step + m_store)
        exposed_w = m_wgt * n_wgt_loads / (v if s.vt_axis == "oc" else 1)
        total = tiles * tile + exposed_w + m_step + m_store + c_epi
    elif v > 1:
        tile = max(n_ic * max(c_step, m_step) + c_epi, n_ic * m_step + m_store)
        exposed_w = m_wgt * n_wgt_loads / (v if s.vt_axis == "oc" else 1)
        total = tiles * tile + exposed_w + m_step + m_store
    else:
        tile = n_ic * (c_step + m_step) + c_epi + m_store
        total = tiles * tile + m_wgt * n_wgt_loads
    n_insns = tiles * (n_ic * (s.tci + 1 + (0 if hoist else 1)) + 5 + s.tco)
    return total + n_insns * 0.5  # prefer fewer instructions on ties


def default_schedule(spec, hw: HwConfig, *, vthreads: int | None = None,  # type: ignore[no-untyped-def]
                     epi: Epilogue | None = None, **overrides: int | str) -> ConvSchedule:
    """The model's best schedule, with any knob in ``overrides`` fixed (tco, tci, th, tw,
    vt_axis) and ``vthreads`` (None: 2 when two copies fit, else 1)."""
    knobs: dict[str, Any] = dict(overrides)
    return ranked_schedules(spec, hw, 1, vthreads=vthreads, epi=epi, **knobs)[0]


#: A predicate on schedules (``ranked_schedules(accept=...)``): e.g. "the packed output has
#: exactly the tensor's shape", which graph-level layout planning asks for.
Accept = Callable[[ConvSchedule], bool]


def ranked_schedules(spec, hw: HwConfig, k: int, *, vthreads: int | None = None,  # type: ignore[no-untyped-def]
                     epi: Epilogue | None = None, fused: ChainCost | None = None,
                     accept: Accept | None = None, row_view: bool = True,
                     **overrides: int | str) -> list[ConvSchedule]:
    """The model's ``k`` best schedules, cheapest estimate first (``default_schedule`` is the
    first; ``driver.compile_workload`` can let the timing-only simulator pick among them).
    ``fused``: a chain fused after the epilogue (its scratchpad tiles and instructions);
    ``accept``: only schedules it accepts (none accepted is a ``ScheduleError``);
    ``row_view=False``: the input's padding stage keeps every row (``_in_rows``)."""
    icb, ocb = _blocks(spec, hw)
    vs = [vthreads] if vthreads is not None else [2, 1]
    axes = [str(overrides["vt_axis"])] if "vt_axis" in overrides else ["oh", "oc"]
    tcos = [int(overrides["tco"])] if "tco" in overrides else _divisors(ocb)
    tcis = [int(overrides["tci"])] if "tci" in overrides else _divisors(icb)
    ths = [int(overrides["th"])] if "th" in overrides else _tile_choices(spec.oh)
    tws = [int(overrides["tw"])] if "tw" in overrides else _tile_choices(spec.ow, 8)
    scored: list[tuple[float, int, ConvSchedule]] = []
    for v in vs:
        for axis in (axes if v > 1 else ["oh"]):
            for tco in tcos:
                for tci in tcis:
                    for th in ths:
                        for tw in tws:
                            s = ConvSchedule(tco, tci, th, tw, v, axis)
                            try:
                                fit_report(spec, hw, s, fused, row_view)
                            except ScheduleError:
                                continue
                            if accept is not None and not accept(s):
                                continue
                            scored.append((estimate(spec, hw, s, epi, fused, row_view),
                                           len(scored), s))
        if scored and vthreads is None:
            break  # two threads fit: keep them (the model's rule)
    if not scored:
        s = ConvSchedule(int(overrides.get("tco", 1)), int(overrides.get("tci", 1)),
                         int(overrides.get("th", 1)), int(overrides.get("tw", 1)),
                         vthreads or 1, str(overrides.get("vt_axis", "oh")))
        fit_report(spec, hw, s, fused, row_view)  # raises the named error
        why = " and writes the packed layout asked for" if accept is not None else ""
        raise ScheduleError(f"no schedule of {spec.describe()} fits {hw.name}{why}")
    scored.sort(key=lambda e: (round(e[0], 6), e[1]))
    return [s for _, _, s in scored[:max(1, k)]]


def _bias_per_thread(hw: HwConfig, s: ConvSchedule) -> bool:
    """Whether each virtual thread loads its tiles' bias into its own accumulator bank: on
    banked accumulators (a separate ALU pipeline), so a thread's epilogue reads only its own
    bank while the other thread's GEMMs hold theirs. Otherwise the bias of every output channel
    is loaded once, before the first tile (no LOAD ACC waits for the memory port between
    tiles); ``footprint`` counts it either way."""
    return hw.alu.acc_banks > 1 and s.vthreads > 1


def schedule_op(op: PackedOp, hw: HwConfig, s: ConvSchedule) -> Schedule:
    """The schedule primitives for knobs ``s`` on ``op`` (see the module docstring)."""
    sch = create_schedule(op.out)
    acc = sch.cache_write(op.acc, "acc")
    sch[op.acc].compute_inline()
    inp = sch.cache_read(op.pad if op.pad is not None else op.data, "inp", [acc])
    wgt = sch.cache_read(op.kernel, "wgt", [acc])
    if op.pad is not None:
        sch[op.pad].compute_inline()
    out = sch[op.out]
    axes = out.axis
    role = {r: axes[k] for r, k in op.roles.items()}
    vt_role = s.vt_axis if s.vt_axis in role else "ow"
    outer: list[IterVar] = [role["n"]] if "n" in role else []
    inner: list[IterVar] = []
    level: dict[str, IterVar] = {}
    for r, f in (("oc", s.tco), ("oh", s.th), ("ow", s.tw)):
        if r not in role:
            continue
        t, i = out.split(role[r], f)
        inner.append(i)
        if s.vthreads > 1 and r == vt_role:
            o, vt = out.split(t, s.vthreads)
            outer += [o, vt]
            level[r] = vt
        else:
            outer.append(t)
            level[r] = t
    out.reorder(*outer, *inner, *axes[-2:])
    if s.vthreads > 1:
        out.virtual_thread(level[vt_role])
    tile = outer[-1]
    sch[acc].compute_at(out, tile)
    a = sch[acc]
    red = a.reduce_axis
    ic_o, ic_i = a.split(red[0], s.tci)
    sp = a.axis
    a.reorder(ic_o, *sp[:-2], ic_i, *red[1:-1], *sp[-2:], red[-1])
    sch[inp].compute_at(a, ic_o)
    hoist = s.tci >= op.kernel.shape[1]
    if hoist:
        sch[wgt].compute_at(out, level["oc"])
    else:
        sch[wgt].compute_at(a, ic_o)
    a.tensorize(sp[-2], vta_gemm_intrinsic(hw))
    # the epilogue (requantization, fused operators) on the accumulator tile; the bias (and
    # any per-channel operand) one LOAD ACC before the first tile, or per thread into its own
    # accumulator bank (``_bias_per_thread``)
    per_thread = AttachAt(out, level[vt_role]) if _bias_per_thread(hw, s) else None
    return attach_epilogue(sch, op, hw, operands_at=per_thread)


def lower_op(op: PackedOp, hw: HwConfig, s: ConvSchedule) -> S.PrimFunc:
    """``schedule_op`` lowered to the loop-nest IR the VTA pipeline compiles."""
    return lower(schedule_op(op, hw, s), op.args, op.name)
