"""How long an instruction occupies its unit: pure functions of its fields and the HwConfig,
under one of two named timing models.

These are the timing facts every layer reads: the simulator charges them, the compiler's cost
model predicts with them. Each instruction's ``duration`` lives on its definition
(``vta.isa.builtins`` for the built-ins); the shared formulas are here, and the memory port's
burst scheduling in ``vta.isa.memport``. Sources are cited as ``vta.cc:N`` for
``apache/tvm-vta@d4a15f6 hardware/xilinx/src/vta.cc`` and ``File.scala:N`` for the files of
``hardware/chisel/src/main/scala`` at the same commit; docs/simulator.md has the full table and
says which numbers are assumptions.

Two timing models (``HwConfig.timing_model``), one per implementation of VTA:

* ``hls``: VTA's HLS design, which the PYNQ bitstream is built from. ``load``, ``compute`` and
  ``store`` are separate HLS top functions (scripts/hls.tcl:110-138), each started in
  auto-restart mode (src/pynq/pynq_driver.cc:126-128) and executing **one instruction per
  call** (vta.cc:189, 453, 532): every instruction pays the call's control states
  (``TimingModel.*.before/after``, an assumption: one state reading the instruction and its
  tokens, one pushing tokens and finishing). A LOAD into inp/wgt also waits for the
  ``y_offset`` multiplies (``Mul_LUT latency = 4``, vta.cc:200-204) before its rows.
  A LOAD copies row by row (``load_pad_2d``, vta.cc:47-73; ``load_2d``, 76-94): per row the
  left pads (``reset_mem``, one entry a cycle), one ``memcpy`` (bursts of the row in flight
  together), the right pads; the top and bottom pad rows before and after. Whether the
  pipelined row loop (vta.cc:63) overlaps one row's ``memcpy`` with the next is not fixed by
  the source (HLS cannot pipeline a loop around a variable-length ``memcpy`` and variable pad
  loops); the literal reading, one row after another, is ``memory.row_overlap: false``, the
  default; ``true`` keeps every row's bursts in flight together, with the pads written after
  the transfer. A STORE (vta.cc:547-557) writes one ``memcpy`` per row likewise, each row
  waiting for its write responses. GEMM and ALU pipeline only the micro-op loop
  (vta.cc:262-263, 350-351; the ``iter_out``/``iter_in`` loops around it are not), so each
  entry of that loop costs ``gemm.fill`` / ``alu.fill`` beyond its issues (the fill is an
  assumption: docs/simulator.md). Micro-ops arrive over their own 32-bit master
  (vta.cc:428, ``memory.uop_beat_bytes``).
* ``chisel``: VTA's Chisel design (what tsim runs). Each module is a small state machine
  (Load.scala:64-82, Compute.scala:99-117, Store.scala:58-76): an idle cycle to start, the
  work, and the cycle that sees ``done``. GEMM and ALU issue from one flattened counter
  (TensorGemm.scala:220-296, TensorAlu.scala:100-182) after a registered start
  (Compute.scala:162,180) and finish the cycle after their last write-back (``inflight``
  reaching 0: TensorGemm.scala:579-581, TensorAlu.scala:214-216). Loads issue every row's
  commands without waiting (``GenVMECmd``) after the VME's one-entry command queue
  (VME.scala:216); read data is registered by the VME (VME.scala:297-302) and, for an entry
  wider than a bus beat, once more (TensorLoadNarrowVME.scala:67-70), and ``done`` follows the
  in-flight counter (87-99, 292); each top pad row delays the first command a cycle
  (649-658); ``ZeroPadding`` writes pads in the cycles no data arrives. Micro-ops arrive a full
  bus beat at a time. ``TensorStoreNarrowVME`` issues one write burst at a time, spends two
  cycles on the command (``sWriteCmd``, then the VME's ``sWriteAddr``), re-reads the
  scratchpad between entries (``sReadMem``, 116-127), and takes each write response in a cycle
  of its own (``sWriteAck``, 128-131). A GEMM or ALU with no micro-op to run, or a LOAD/STORE
  of zero rows but non-zero columns, would run its counters past zero (TensorGemm.scala:268-
  292: ``uop_end - 1``, ``lp_1 - 1``, ``lp_0 - 1`` wrap; GenVMECmd never sets ``done`` for zero
  rows, TensorLoadNarrowVME.scala:606-615; the store writes 2**16 rows,
  TensorStoreNarrowVME.scala:131): refused under this model (``chisel_refusal``).

Numbers that a design may change are config fields whose defaults depend on the model
(``vta.config.MODEL_DEFAULTS``); the control overheads below are the model's.

DMA (LOAD, STORE, instruction fetch; ``dma_timing``). Each row is split into bursts of at most
``memory.burst_bytes`` that never cross a multiple of ``memory.burst_boundary`` (the address
of a row is its DRAM element index times the element's bytes: the PYNQ driver passes 0 for
every base); a burst occupies its channel a cycle per ``bus_bytes`` (per ``uop_beat_bytes``
for micro-ops: the master takes its data at that rate). How bursts share the port is
``vta.isa.memport``. The instruction takes ``max(port, overlap) + after`` cycles, the port's
time including the lead before the first burst and the gaps between rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any

from vta.config import HwConfig
from vta.isa.defs import definition_of
from vta.isa.memport import Channel, Transfer, alone
from vta.words import INSN_BYTES

__all__ = ["Overhead", "TimingModel", "MODELS", "model_of", "DmaTiming",
           "Pads", "read_channel", "write_channel", "dma_timing", "dma_offsets", "dma_cycles",
           "empty_dma_cycles", "fetch_timing", "fetch_cycles", "alu_issues", "loop_cycles",
           "microop_cycles", "finish_cycles", "duration", "chisel_refusal", "MASTER_PRIORITY"]


@dataclass(frozen=True, slots=True)
class Overhead:
    """A module's control cycles per instruction: ``before`` its first burst or micro-op,
    ``after`` its last beat, write-back or response."""

    before: int
    after: int

    @property
    def total(self) -> int:
        return self.before + self.after


@dataclass(frozen=True, slots=True)
class TimingModel:
    """The behaviours that tell VTA's two implementations apart (the module docstring)."""

    name: str
    #: a LOAD into inp/wgt (the load module)
    load: Overhead
    #: a LOAD into uop/acc (the compute module)
    compute_load: Overhead
    #: a STORE
    store: Overhead
    #: a GEMM, an ALU function or a user's micro-op instruction
    microop: Overhead
    #: cycles of a FINISH
    finish: int
    #: cycles of a LOAD/STORE that moves nothing (VTA's token carrier); None: the kind's
    #: ``before + after`` (plus the load module's setup)
    empty: int | None
    #: cycles a LOAD into inp/wgt spends before its rows (HLS: the y_offset multiplies)
    load_setup: int
    #: the first command waits a cycle per top pad row (Chisel's GenVMECmd)
    pad_row_lead: bool
    #: pads are written while the data streams in (else serially, in the row loop)
    pads_overlap: bool
    #: a narrow read master registers its data once more before the scratchpad (Chisel:
    #: an entry wider than a bus beat, TensorLoadNarrowVME)
    narrow_read_stage: int
    #: STORE: one write burst at a time, a scratchpad re-read cycle between entries
    store_serial: bool
    #: cycles from a write burst's issue to its first beat
    write_command: int
    #: cycles taking a write response before the next command or the end
    write_ack: int


MODELS: dict[str, TimingModel] = {
    # vta.cc: one call per instruction; the call's states are an assumption (1 + 1)
    "hls": TimingModel(
        "hls", load=Overhead(1, 1), compute_load=Overhead(1, 1), store=Overhead(1, 1),
        microop=Overhead(1, 1), finish=2, empty=None, load_setup=4, pad_row_lead=False,
        pads_overlap=False, narrow_read_stage=0, store_serial=False, write_command=1,
        write_ack=0),
    # Load.scala/Compute.scala/Store.scala state machines (the module docstring)
    "chisel": TimingModel(
        "chisel", load=Overhead(2, 2), compute_load=Overhead(2, 2), store=Overhead(1, 0),
        microop=Overhead(2, 1), finish=2, empty=2, load_setup=0, pad_row_lead=True,
        pads_overlap=True, narrow_read_stage=1, store_serial=True, write_command=2,
        write_ack=1),
}

#: read masters by fixed priority (lower wins: Chisel's VME, Core.scala:74-78 with
#: VME.scala:242): fetch, micro-ops, inp, wgt, acc
MASTER_PRIORITY: dict[str, int] = {"insn": 0, "uop": 1, "inp": 2, "wgt": 3, "acc": 4,
                                   "out": 0}


def model_of(hw: HwConfig) -> TimingModel:
    """The timing model ``hw`` names."""
    return MODELS[hw.timing_model]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------ memory port


@lru_cache(maxsize=64)
def read_channel(hw: HwConfig) -> Channel:
    """The port's read channel: ``memory.latency`` to the first beat, ``memory.outstanding``
    bursts in flight, masters chosen by ``memory.arbiter``. One object per config: every
    distinct DMA's timing holds its channel (a frozen dataclass costs more to build than the
    cached lookup)."""
    m = hw.memory
    assert m.outstanding is not None
    return Channel(m.latency, m.outstanding, priority=m.arbiter == "priority")


@lru_cache(maxsize=64)
def write_channel(hw: HwConfig) -> Channel:
    """The write channel: bursts in flight as reads (HLS) or one at a time (Chisel), each
    outstanding until its response ``memory.latency`` after its last beat (and, Chisel, the
    cycle taking it). One object per config, as ``read_channel``."""
    m, tm = hw.memory, model_of(hw)
    assert m.outstanding is not None
    return Channel(m.latency, 1 if tm.store_serial else m.outstanding, tm.write_command,
                   write=True, ack=tm.write_ack)


#: pad entries of a LOAD: (top rows, bottom rows, left columns, right columns)
Pads = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class DmaTiming:
    """A DMA's timing: its bursts on a channel, the scratchpad work that overlaps them and the
    cycles after them (the module docstring)."""

    transfer: Transfer
    channel: Channel
    overlap: int = 0
    after: int = 0
    #: ``alone`` once asked (-1 before): read for every instruction described, and finding
    #: it in ``memport.alone``'s cache hashes the whole transfer
    _alone: int = field(default=-1, init=False, repr=False, compare=False)

    def cycles(self, port: int) -> int:
        """The instruction's cycles when its transfer took ``port`` cycles (comparisons, not
        ``max``: the simulator asks once per DMA)."""
        t = (port if port > self.overlap else self.overlap) + self.after
        return t if t > 1 else 1

    @property
    def alone(self) -> int:
        """Its cycles on an idle port: the instruction's duration."""
        if self._alone < 0:
            object.__setattr__(self, "_alone", self.cycles(alone(self.channel, self.transfer)))
        return self._alone


def _burst_cycles(chunk: int, beat_bytes: int, entry_bytes: int | None) -> int:
    """Channel cycles of one burst of ``chunk`` bytes: a cycle per beat of ``beat_bytes``
    and, with ``entry_bytes``, one more between entries (Chisel's store re-reads the
    scratchpad)."""
    cycles = _ceil(chunk, beat_bytes)
    if entry_bytes is not None:
        cycles += max(0, _ceil(chunk, entry_bytes) - 1)
    return cycles


@lru_cache(maxsize=65536)
def _row_bursts(bus_beats: int, boundary: int, addr: int, row_bytes: int, beat_bytes: int,
                entry_bytes: int | None) -> tuple[int, ...]:
    """Channel cycles of each burst of one row of ``row_bytes`` at byte ``addr`` (modulo the
    boundary). A master ``beat_bytes`` wide bursts as many of its beats as a burst holds bus
    beats (``bus_beats``: ``burst_bytes // bus_bytes``, HLS's ``max_read_burst_length``) and
    occupies the channel a cycle per beat (``_burst_cycles``); no burst crosses a multiple of
    ``boundary`` (``burst_boundary``). Each piece of the row between boundaries (the first
    up to the next boundary, then whole boundaries, then the rest) bursts as full bursts then
    one of the remainder: built per piece, not per burst (a row of micro-ops is dozens of
    bursts). Keyed by the memory's numbers, not the config: a lookup then hashes ints only
    (``HwConfig.__hash__`` is a Python call, and a DMA's timing looks up each of its rows'
    offsets)."""
    per_burst = bus_beats * beat_bytes
    full = _burst_cycles(per_burst, beat_bytes, entry_bytes)
    out: tuple[int, ...] = ()
    left, room = row_bytes, boundary - addr % boundary
    while left > 0:
        piece = left if left < room else room
        whole, rest = divmod(piece, per_burst)
        out += (full,) * whole
        if rest:
            out += (_burst_cycles(rest, beat_bytes, entry_bytes),)
        left -= piece
        room = boundary
    return out


def _overhead(tm: TimingModel, kind: str, write: bool) -> Overhead:
    if write:
        return tm.store
    if kind in ("inp", "wgt"):
        return tm.load
    if kind == "insn":
        return Overhead(0, 0)
    return tm.compute_load


def dma_timing(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pads: Pads = (0, 0, 0, 0),
               *, kind: str = "inp", write: bool = False, addr: int = 0,
               stride: int = 0) -> DmaTiming | None:
    """The timing of a 2-D DMA of ``rows`` x ``cols`` entries of ``elem_bytes`` bytes of buffer
    ``kind`` (``insn``: the fetch), the first row at byte ``addr`` and each next ``stride``
    bytes on, writing ``pads`` (top and bottom pad rows, left and right pad columns) of zero
    entries around them (None: an empty DMA, ``empty_dma_cycles``).

    The addresses matter only through each row's offset within a ``memory.burst_boundary``
    (where its bursts split), and not at all when no row crosses one (``_crosses``), so the
    result is computed once per (addr, stride) modulo the boundary, or once for all
    addresses, and shared: the DMAs of a tiled program differ mostly in their DRAM address,
    and every tile of a layer then shares one timing (and the machine one plan of its
    bursts)."""
    if rows <= 0 or cols <= 0:
        return None
    addr, stride = dma_offsets(hw, rows, cols * elem_bytes, addr, stride)
    return _dma_timing(hw, rows, cols, elem_bytes, pads, kind, write, addr, stride)


def dma_offsets(hw: HwConfig, rows: int, row_bytes: int, addr: int, stride: int
                ) -> tuple[int, int]:
    """What ``dma_timing`` reads of a DMA's first-row byte address ``addr`` and row
    ``stride``: both modulo ``memory.burst_boundary``, and (0, 0) when no row crosses a
    boundary (``_crosses``) or the DMA moves nothing. Equal offsets, equal timing: the key a
    simulator describes its DMAs by (``vta.isa.builtins``' ``timing_key``)."""
    boundary = hw.memory.burst_boundary
    assert boundary is not None
    addr, stride = addr % boundary, stride % boundary
    if rows <= 0 or row_bytes <= 0 or not _crosses(rows, row_bytes, boundary, addr, stride):
        return 0, 0
    return addr, stride


def _crosses(rows: int, row_bytes: int, boundary: int, addr: int, stride: int) -> bool:
    """Whether a row of ``row_bytes`` starting at ``addr + r * stride`` (``r < rows``; both
    within ``[0, boundary)``) crosses a multiple of ``boundary``. A row that does not bursts
    as one at offset 0 does (``_row_bursts``: the boundary never binds), so a DMA none of
    whose rows crosses one times as at address 0 with stride 0."""
    limit = boundary - row_bytes
    if addr > limit:  # the first row does
        return True
    last = addr + (rows - 1) * stride
    if last < boundary:  # the rows start in order within the first boundary: the last is the
        return last > limit  # furthest
    # the rows wrap (``stride`` > 0): lap by lap, the rows that start in one boundary do so
    # in order, so only each lap's furthest is compared (a few laps, not every row)
    r, at = 0, addr
    while r < rows:
        k = min((boundary - 1 - at) // stride, rows - 1 - r)  # rows after ``at`` in this lap
        if at + k * stride > limit:
            return True
        r += k + 1
        at = (at + (k + 1) * stride) % boundary
    return False


@lru_cache(maxsize=65536)
def _dma_timing(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pads: Pads, kind: str,
                write: bool, addr: int, stride: int) -> DmaTiming:
    """``dma_timing`` of a non-empty DMA, ``addr`` and ``stride`` taken modulo the burst
    boundary (row ``r`` starts ``(addr + r * stride) % boundary`` into its boundary either
    way)."""
    tm, m = model_of(hw), hw.memory
    assert m.uop_beat_bytes is not None and m.row_overhead is not None
    assert m.burst_boundary is not None and m.burst_bytes is not None
    beat = m.uop_beat_bytes if kind == "uop" else m.bus_bytes
    entry = elem_bytes if write and tm.store_serial else None
    boundary = m.burst_boundary
    row_bytes = cols * elem_bytes
    bus_beats = m.burst_bytes // m.bus_bytes
    # a row within one boundary bursts as at offset 0 (``_crosses``): only those that cross
    # one are split where they cross it
    plain = _row_bursts(bus_beats, boundary, 0, row_bytes, beat, entry)
    if not _crosses(rows, row_bytes, boundary, addr % boundary, stride % boundary):
        by_row = [plain] * rows
        bursts = plain * rows
    else:
        limit = boundary - row_bytes
        by_row = [plain if a <= limit else
                  _row_bursts(bus_beats, boundary, a, row_bytes, beat, entry)
                  for a in [(addr + r * stride) % boundary for r in range(rows)]]
        bursts = tuple(chain.from_iterable(by_row))
    ov = _overhead(tm, kind, write)
    py0, py1, px0, px1 = pads
    width = px0 + cols + px1
    pad_entries = (py0 + py1) * width + rows * (px0 + px1)
    setup = tm.load_setup if kind in ("inp", "wgt") and not write else 0
    narrow = kind in ("inp", "wgt", "acc") and elem_bytes > m.bus_bytes
    stage = tm.narrow_read_stage if not write and narrow else 0
    prio = MASTER_PRIORITY.get(kind, 0)
    channel = write_channel(hw) if write else read_channel(hw)
    if tm.pads_overlap:  # Chisel: every row's bursts in flight; pads between the data beats
        lead = ov.before + (py0 if tm.pad_row_lead else 0)
        transfer = Transfer(bursts, write, lead=lead, priority=prio)
        data = sum(bursts)
        return DmaTiming(transfer, channel, overlap=lead + data + pad_entries,
                         after=ov.after + stage + rows * m.row_overhead)
    if m.row_overlap:
        # every row's bursts in flight together; pads and row overheads after the transfer
        transfer = Transfer(bursts, write, lead=ov.before + setup, priority=prio)
        return DmaTiming(transfer, channel,
                         after=rows * m.row_overhead + pad_entries + stage + ov.after)
    # the literal reading of vta.cc's row loop: top pads, then per row its overhead, left pads,
    # one memcpy (its bursts in flight together), right pads; then the bottom pads
    lead = ov.before + setup + py0 * width + m.row_overhead + px0
    transfer = Transfer(bursts, write, groups=tuple(map(len, by_row)),
                        gap=px1 + m.row_overhead + px0, lead=lead, priority=prio)
    return DmaTiming(transfer, channel, after=px1 + py1 * width + stage + ov.after)


def dma_cycles(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pads: Pads = (0, 0, 0, 0),
               *, kind: str = "inp", write: bool = False, addr: int = 0,
               stride: int = 0) -> int:
    """Duration of a 2-D DMA alone on the port (``empty_dma_cycles`` for an empty one)."""
    t = dma_timing(hw, rows, cols, elem_bytes, pads, kind=kind, write=write, addr=addr,
                   stride=stride)
    return empty_dma_cycles(hw, kind, write) if t is None else t.alone


def empty_dma_cycles(hw: HwConfig, kind: str, write: bool = False) -> int:
    """A LOAD or STORE that moves nothing (VTA's token carrier: ``x_size`` or ``y_size`` 0):
    its module's control cycles (HLS: the call, and a load module's setup; Chisel: the
    ``sSync`` state). It does not use the port."""
    tm = model_of(hw)
    if tm.empty is not None:
        return tm.empty
    setup = tm.load_setup if kind in ("inp", "wgt") and not write else 0
    return _overhead(tm, kind, write).total + setup


def fetch_timing(hw: HwConfig, n_insns: int, first: int = 0) -> DmaTiming:
    """Reading ``n_insns`` consecutive instruction words from word ``first``: one row of
    ``16 * n`` bytes (the fetch module runs once for the whole program: no per-request
    control overhead is counted)."""
    t = dma_timing(hw, 1, n_insns, INSN_BYTES, kind="insn", addr=first * INSN_BYTES)
    assert t is not None
    return t


def fetch_cycles(hw: HwConfig, n_insns: int, first: int = 0) -> int:
    """Cycles of fetching ``n_insns`` words alone on the port."""
    return fetch_timing(hw, n_insns, first).alone


# ------------------------------------------------------------------------------ micro-op loops


def alu_issues(hw: HwConfig) -> int:
    """Issues one ALU micro-op needs: a ``batch x block_out`` accumulator vector over
    ``alu.lanes`` lanes."""
    g = hw.gemm
    return _ceil(g.batch * g.block_out, hw.alu.lanes)


def loop_cycles(insn: Any, hw: HwConfig, issue: int, pipeline_depth: int,
                per_issue: int = 1, flat: bool | None = None) -> int:
    """A micro-op loop instruction: ``per_issue`` micro-ops issue together every ``issue``
    cycles (a unit ``per_issue`` vectors wide, e.g. a user's depthwise MAC), the loop costing
    ``pipeline_depth`` more (its fill: ``gemm.fill`` / ``alu.fill`` for the built-ins) on each
    entry of the micro-op loop, or once when the loops are flattened (``flat``; None: the
    GEMM's, ``gemm.flat_loop``), plus the module's control cycles (``TimingModel.microop``).
    An instruction that executes no micro-op costs the control cycles alone (refused under
    the Chisel model, whose counters would wrap: ``chisel_refusal``)."""
    nuops = max(0, insn.uop_end - insn.uop_bgn)
    loops = insn.iter_out * insn.iter_in
    control = model_of(hw).microop.total
    if loops * nuops == 0:
        return control
    if flat is None:
        flat = bool(hw.gemm.flat_loop)
    if not flat:
        return control + loops * (_ceil(nuops, per_issue) * issue + pipeline_depth)
    return control + _ceil(loops * nuops, per_issue) * issue + pipeline_depth


def microop_cycles(n_ops: int, issue: int, pipeline_depth: int) -> int:
    """``n_ops`` executions ``issue`` cycles apart, then one drain of the pipeline (a flat loop
    without control cycles, whatever the config's timing model; ``loop_cycles`` follows the
    model)."""
    return n_ops * issue + pipeline_depth


def finish_cycles(hw: HwConfig) -> int:
    """FINISH: HLS, a call of ``compute`` that sets ``done`` (vta.cc:470-472); Chisel, the
    idle cycle and the ``sExe`` cycle whose ``done`` is constant (Compute.scala:94,99-116)."""
    return model_of(hw).finish


def chisel_refusal(insn: Any, hw: HwConfig) -> str | None:
    """Why VTA's Chisel design cannot run ``insn`` (None: it can, or the model is not
    Chisel): a micro-op loop with nothing to run wraps its counters, a LOAD/STORE of no rows
    but some columns never finishes (the module docstring)."""
    if hw.timing_model != "chisel":
        return None
    d = definition_of(insn)
    if d.is_microop and (insn.uop_end <= insn.uop_bgn or insn.iter_out == 0
                         or insn.iter_in == 0):
        return (f"executes no micro-op (uop {insn.uop_bgn}:{insn.uop_end}, iter "
                f"{insn.iter_out} x {insn.iter_in}); VTA's Chisel design would run its "
                f"counters past zero (TensorGemm.scala:268-292, TensorAlu.scala:158-179) "
                f"instead of doing nothing")
    if d.direction is not None and insn.y_size == 0 and insn.x_size != 0:
        return (f"has y_size 0 but x_size {insn.x_size}; VTA's Chisel design treats only "
                f"x_size 0 as a token carrier (Decode.scala:178,206,228) and would never "
                f"finish this one (TensorLoadNarrowVME.scala:606-615, "
                f"TensorStoreNarrowVME.scala:131)")
    return None


def duration(hw: HwConfig, insn: Any) -> int:
    """Cycles ``insn`` occupies its unit once it has its tokens, alone on the memory port: its
    definition's ``duration``."""
    return definition_of(insn).duration(insn, hw)
