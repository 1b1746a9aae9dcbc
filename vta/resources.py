"""A first-order FPGA resource estimate of a configuration, component by component.

``breakdown(hw)`` lists ``(resource, component, amount, why)`` rows; ``estimate(hw)`` sums them
per resource (``HwConfig.resource_estimate`` and ``vta info`` print it). Every number is derived
from the configuration's fields by the rule stated beside it; none is measured on a synthesised
design. Resources: ``dsp`` (DSP48 slices), ``bram36`` (36-Kbit block RAMs, 4.5 KiB each),
``lut`` (6-input LUTs of the datapath: adders, comparators, shifters, multiplexers; control
logic is not counted) and ``ff`` (pipeline registers of the datapath).

The datapath:

* GEMM: one DSP per two int8 multipliers (one per wider product); the reduction adder tree of
  each output lane (``block_in / 2**l`` adders of ``product bits + l`` bits at level ``l``, one
  LUT per bit of a carry-chain adder) and the accumulator adder (``acc bits`` LUTs); a pipeline
  register of the accumulator vector (``batch * block_out * acc bits``) per stage of
  ``gemm.pipeline_depth``.
* ALU (``alu.lanes`` lanes of ``acc bits``): per bit one LUT for the adder, two for MIN/MAX
  (comparator and multiplexer), ``log2(acc bits)`` for the SHR barrel shifter, one for the
  result multiplexer; MUL in DSPs (``ceil(bits/25) * ceil(bits/18)`` DSP48 per lane); a
  register of the lane vector per stage of ``alu.pipeline_depth``.
* ``intrinsics: requant_f32`` (``REQUANT_F32``: ``vta.isa.requant``'s ``ALU.REQUANT_F32``,
  ONNX Runtime's float32 requantization in integers), per ALU lane: the conversion of the
  accumulator to 24 significant bits (a leading-zero counter of ``acc bits`` LUTs, a barrel
  shifter of ``acc bits * log2(acc bits)``, a 24-bit rounding incrementer), the 24x24-bit
  multiplier in DSPs (``ceil(24/25) * ceil(24/18)`` = 2 DSP48; none with ALU MUL, whose
  32-bit multipliers hold a 24x24-bit product and are idle while the ALU runs another
  function), the product's rounding to 24
  bits (a 48-bit leading-zero counter, a 48-bit barrel shifter of 6 levels, a 24-bit
  incrementer), the final rounding shift by the scale's shift (a 48-bit barrel shifter of 6
  levels, an ``acc bits`` rounding incrementer and an ``acc bits`` saturation compare), and a
  48-bit register per lane for each of its ``extra_depth`` pipeline stages.
* Buffers: ``ceil(bytes / 4.5 KiB)`` BRAM36 each (a lower bound: port widths can force more);
  acc and out per bank.

The variants the co-design benchmark sweeps, each with what it costs:

* ``alu.separate_pipeline`` with ``alu.acc_banks``: the ALU reads micro-ops while the GEMM
  core does, so the micro-op buffer gets a second copy (its two ports already serve the DMA
  write and the GEMM read); the ALU gets its own command queue (``queues.command_depth`` x 16 B
  of BRAM); each bank rounds to whole BRAMs; a crossbar steers each bank's two ports to the
  GEMM core or the ALU (per extra bank, a 2:1 multiplexer on the read data and the write data
  of each pipeline: ``4 * entry bits`` LUTs).
* ``alu.ii = 1``: a register operand needs a second accumulator read port in the same cycle:
  a second copy of the accumulator, written with the first (its BRAMs again).
* ``memory.outstanding`` (reads in flight): in the HLS design each read master (fetch, load,
  micro-op, compute's data port) buffers the data of its outstanding bursts (UG1399: "a FIFO of
  size num_read_outstanding * max_read_burst_length * word_size"); in the Chisel design the VME
  keeps one tag per request (``shell/VME.scala``: client id, tag and mask bits per entry of
  ``RequestQueueDepth``), in LUT RAM (64 bits per LUT).
* ``gemm.pipeline_depth``: its registers, above.
* ``gemm.uop_base`` (a micro-op base bit in GEMM/ALU words): each loop's outer offset
  registers start at ``factor_out`` instead of 0 when the bit is set: a 2:1 multiplexer per
  bit of the start value, for every operand index (GEMM dst, src, wgt; ALU dst, src).
* ``gemm.flat_loop`` / ``alu.flat_loop`` under the HLS timing (the Chisel design's own loops
  are flat): the flattened loop's index generator (as Chisel's ``TensorGemmIndexGenerator``):
  an end compare per loop level (micro-op index, ``iter_in``, ``iter_out``: one LUT per bit)
  and, per operand, an inner and an outer offset adder (one LUT per index bit each) with their
  registers; the nested loops' own counters exist either way.
* ``memory.uop_beat_bytes`` wider than VTA's 32-bit micro-op port (HLS): the micro-op buffer
  is written that many bytes a cycle (the same BRAMs, configured wider) and read one micro-op
  at a time through a multiplexer: 32 LUTs per extra micro-op of width.

Boards (``BOARDS``): the resources of the FPGA parts the shipped configurations name, from the
vendors' data sheets (Xilinx DS190 for the Zynq-7000 xc7z020 of the PYNQ-Z1, DS891 for the Zynq
UltraScale+ parts of the Ultra96, ZCU104 and ZCU102; Intel's Cyclone V data sheet for the
DE10-Nano, in Xilinx equivalents). A hardware config's ``board`` section names its part and
takes the part's resources from here unless it sets them; ``fits``/``shares`` compare an
estimate with a board, and a design-space sweep (``vta.tune.sweep``) marks the points that fit
each board it names.

``published_comparison(hw)`` sets the estimate of a config beside what VTA's own publications
state about the design on the PYNQ (docs/tuning.md shows it for ``hwconfigs/pynq.yaml``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vta.dtypes import DTYPE_BITS
from vta.errors import BoardError
from vta.words import UOP_BITS

if TYPE_CHECKING:
    from vta.config import HwConfig

__all__ = ["breakdown", "estimate", "REQUANT_F32", "RESOURCES", "Board", "BOARDS", "BoardError",
           "board", "part_resources", "fits", "shares", "published_comparison"]

RESOURCES = ("dsp", "bram36", "lut", "ff")
BRAM36_BYTES = 4608
#: the HLS design's read masters: fetch's ins_port, load's data port, compute's uop_port and data
#: port (vta.cc's m_axi bundles; the store is the one write master)
HLS_READ_MASTERS = 4
#: bits of one VME tag entry besides its mask (shell/VME.scala clientTag: 3 + 21)
VME_TAG_BITS = 24

Row = tuple[str, str, int, str]

#: the optional intrinsic (and tensor-IR call) of ONNX Runtime's float32 requantization
#: (``vta.isa.requant``): named here, the lowest layer that prices it
REQUANT_F32 = "requant_f32"


def _bits(dtype: str) -> int:
    return DTYPE_BITS[dtype]


def _bram(nbytes: int) -> int:
    return math.ceil(nbytes / BRAM36_BYTES)


def _gemm(hw: HwConfig) -> list[Row]:
    g = hw.gemm
    lanes = g.batch * g.block_out
    wide = max(_bits(g.inp_dtype), _bits(g.wgt_dtype))
    per_dsp = 2 if wide <= 8 else 1
    prod = _bits(g.inp_dtype) + _bits(g.wgt_dtype)
    levels = max(1, math.ceil(math.log2(g.block_in))) if g.block_in > 1 else 0
    tree = sum((g.block_in >> lv) * (prod + lv) for lv in range(1, levels + 1))
    acc = _bits(g.acc_dtype)
    return [
        ("dsp", "GEMM multipliers", math.ceil(g.batch * g.block_in * g.block_out / per_dsp),
         f"{per_dsp} multiplier(s) per DSP48"),
        ("lut", "GEMM adder trees", lanes * (tree + acc),
         f"{lanes} lanes x ({tree} tree + {acc} accumulate) adder bits"),
        ("ff", "GEMM pipeline registers", g.pipeline_depth * lanes * acc,
         f"{g.pipeline_depth} stages x {lanes} x {acc} bits"),
    ]


def _alu(hw: HwConfig) -> list[Row]:
    a, bits = hw.alu, _bits(hw.gemm.acc_dtype)
    ops = set(a.ops)
    per_bit = 1 + (2 if ops & {"min", "max"} else 0) + (1 if "add" in ops else 0) \
        + (math.ceil(math.log2(bits)) if "shr" in ops else 0)
    rows: list[Row] = [
        ("lut", "ALU lanes", a.lanes * bits * per_bit,
         f"{a.lanes} lanes x {bits} bits x {per_bit} LUT/bit"),
        ("ff", "ALU pipeline registers", a.pipeline_depth * a.lanes * bits,
         f"{a.pipeline_depth} stages x {a.lanes} x {bits} bits")]
    if "mul" in ops:
        per = math.ceil(bits / 25) * math.ceil(bits / 18)
        rows.append(("dsp", "ALU multipliers", a.lanes * per, f"{per} DSP48 per {bits}-bit lane"))
    return rows


def _requant_f32(hw: HwConfig) -> list[Row]:
    """The ``requant_f32`` intrinsic's datapath (module docstring), when the config lists it."""
    intrinsic = hw.intrinsic(REQUANT_F32)
    if intrinsic is None:
        return []
    lanes, bits, mant, prod = hw.alu.lanes, _bits(hw.gemm.acc_dtype), 24, 48
    lg, plg = math.ceil(math.log2(bits)), math.ceil(math.log2(prod))
    per_dsp = math.ceil(mant / 25) * math.ceil(mant / 18)
    convert = bits + bits * lg + mant
    normalize = prod + prod * plg + mant
    final = prod * plg + 2 * bits
    depth = int(intrinsic.param("extra_depth"))
    shared = "mul" in hw.alu.ops  # one ALU function issues at a time: MUL's DSPs are free
    return [
        ("dsp", "REQUANT_F32 multipliers", 0 if shared else lanes * per_dsp,
         f"the 24x24-bit product on ALU MUL's {bits}-bit multipliers (one ALU function "
         f"issues at a time)" if shared else
         f"{lanes} lanes x {per_dsp} DSP48 per 24x24-bit product"),
        ("lut", "REQUANT_F32 rounding", lanes * (convert + normalize + final),
         f"{lanes} lanes x ({convert} int-to-24-bit + {normalize} product-to-24-bit + "
         f"{final} rounding shift and saturation)"),
        ("ff", "REQUANT_F32 pipeline registers", depth * lanes * prod,
         f"{depth} stages x {lanes} x {prod} bits")]


def _buffers(hw: HwConfig) -> list[Row]:
    sp, banks = hw.scratchpad, hw.alu.acc_banks
    rows: list[Row] = [(("bram36", f"{k} buffer", _bram(getattr(sp, k)), f"{getattr(sp, k)} B"))
                       for k in ("uop", "inp", "wgt")]
    for k in ("acc", "out"):
        size = getattr(sp, k)
        rows.append(("bram36", f"{k} buffer", banks * _bram(size // banks),
                     f"{banks} bank(s) of {size // banks} B" if banks > 1 else f"{size} B"))
    return rows


def _variants(hw: HwConfig) -> list[Row]:
    a, sp, m = hw.alu, hw.scratchpad, hw.memory
    assert sp.uop is not None  # set from the timing model when the config loads
    rows: list[Row] = []
    if a.separate_pipeline:
        g = hw.gemm
        entry = g.batch * g.block_out * _bits(g.acc_dtype)
        rows += [("bram36", "separate ALU: micro-op copy", _bram(sp.uop),
                  "a third micro-op read port"),
                 ("bram36", "separate ALU: command queue", _bram(hw.queues.command_depth * 16),
                  f"{hw.queues.command_depth} x 16 B"),
                 ("lut", "separate ALU: bank crossbar", (a.acc_banks - 1) * 4 * entry,
                  f"{a.acc_banks - 1} extra bank(s) x 4 x {entry}-bit 2:1 multiplexers")]
    if a.ii == 1:
        banks = a.acc_banks
        rows.append(("bram36", "ALU II=1: second acc read port", banks * _bram(sp.acc // banks),
                     "a copy of the accumulator"))
    assert m.outstanding is not None and m.burst_bytes is not None  # set from the model
    if hw.timing_model == "hls":
        fifo = m.outstanding * m.burst_bytes
        rows.append(("bram36", "reads in flight: read data FIFOs",
                     HLS_READ_MASTERS * _bram(fifo),
                     f"{HLS_READ_MASTERS} read masters x {m.outstanding} x {m.burst_bytes} B"))
    else:
        bits = m.outstanding * (VME_TAG_BITS + m.outstanding)
        rows.append(("lut", "reads in flight: VME tags", math.ceil(bits / 64),
                     f"{m.outstanding} tags x {VME_TAG_BITS + m.outstanding} bits in LUT RAM"))
    return rows


#: bits of a micro-op (one read of the micro-op buffer)


def _microop_variants(hw: HwConfig) -> list[Row]:
    """The micro-op loop's co-design variants (module docstring)."""
    g, a, m, w = hw.gemm, hw.alu, hw.memory, hw.isa
    idx = {"GEMM": (w.acc_idx, w.inp_idx, w.wgt_idx), "ALU": (w.acc_idx, w.acc_idx)}
    rows: list[Row] = []
    if g.uop_base:
        bits = sum(sum(v) for v in idx.values())
        rows.append(("lut", "micro-op base: outer offset start", bits,
                     f"a 2:1 multiplexer per bit of the outer offsets' start (GEMM "
                     f"{'+'.join(map(str, idx['GEMM']))}, ALU "
                     f"{'+'.join(map(str, idx['ALU']))} bits)"))
    if hw.timing_model == "hls":
        levels = (w.uop_idx + 1) + 2 * w.loop_iter
        for name, flat in (("GEMM", g.flat_loop), ("ALU", a.flat_loop)):
            if not flat:
                continue
            offsets = 2 * sum(idx[name])
            rows += [("lut", f"{name} flattened loop: index generator", levels + offsets,
                      f"end compares of {levels} counter bits + inner and outer offset adders "
                      f"of {sum(idx[name])} index bits"),
                     ("ff", f"{name} flattened loop: offset registers", offsets,
                      f"inner and outer offsets of {sum(idx[name])} index bits")]
        assert m.uop_beat_bytes is not None
        extra = m.uop_beat_bytes * 8 // UOP_BITS - 1
        if extra > 0:
            rows.append(("lut", "wide micro-op port: read multiplexer", extra * UOP_BITS,
                         f"{extra + 1} micro-ops a buffer word, {UOP_BITS}-bit "
                         f"{extra + 1}:1 multiplexer"))
    return rows


def breakdown(hw: HwConfig) -> list[Row]:
    """Every component's ``(resource, component, amount, rule)`` (see the module docstring)."""
    return [*_gemm(hw), *_alu(hw), *_requant_f32(hw), *_buffers(hw), *_variants(hw),
            *_microop_variants(hw)]


def estimate(hw: HwConfig) -> dict[str, int]:
    """The total of each resource in ``RESOURCES``."""
    out = dict.fromkeys(RESOURCES, 0)
    for res, _, amount, _ in breakdown(hw):
        out[res] += amount
    return out


# ------------------------------------------------------------------------------------- boards

#: the resources a board limits (``ff`` is estimated but every board has several per LUT)
LIMITED = ("dsp", "bram36", "lut")


@dataclass(frozen=True, slots=True)
class Board:
    """An FPGA board: its part and the part's DSP slices, 36-Kbit block RAMs and LUTs."""

    name: str
    part: str
    dsp: int
    bram36: int
    lut: int
    #: where the numbers come from
    source: str

    @property
    def limits(self) -> dict[str, int]:
        return {"dsp": self.dsp, "bram36": self.bram36, "lut": self.lut}


#: Boards by name; each part's resources are defined here once (configs name the part).
BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("pynq-z1", "xc7z020", 220, 140, 53200,
          "Xilinx DS190 (Zynq-7000): Z-7020; VTA_REFERENCE.md"),
    Board("ultra96", "xczu3eg", 360, 216, 70560, "Xilinx DS891 (Zynq UltraScale+): ZU3EG"),
    Board("zcu104", "xczu7ev", 1728, 312, 230400, "Xilinx DS891 (Zynq UltraScale+): ZU7EV"),
    Board("zcu102", "xczu9eg", 2520, 912, 274080, "Xilinx DS891 (Zynq UltraScale+): ZU9EG"),
    Board("de10-nano", "5CSEBA6U23I7", 224, 138, 83820,
          "Intel Cyclone V SE A6: 112 variable-precision DSP blocks (224 18x18 multipliers), "
          "553 M10K blocks (in 36-Kbit equivalents), 41,910 ALMs (two LUTs each)"),
)}


def board(name: str) -> Board:
    """The board called ``name`` (case-insensitive; a part name works too)."""
    key = name.lower()
    for b in BOARDS.values():
        if key in (b.name, b.part.lower()):
            return b
    hint = difflib.get_close_matches(key, list(BOARDS), n=1)
    did = f" (did you mean '{hint[0]}'?)" if hint else ""
    raise BoardError(f"unknown board {name!r}{did}; known: {', '.join(BOARDS)}")


def part_resources(part: str) -> dict[str, int]:
    """The resources of FPGA part ``part`` (empty for a part no board here has)."""
    for b in BOARDS.values():
        if b.part.lower() == part.lower():
            return b.limits
    return {}


def fits(est: Mapping[str, int], limits: Mapping[str, int]) -> bool:
    """Whether an estimate fits the limits (a limit of 0 is unknown and fits anything)."""
    return all(limits.get(k, 0) == 0 or est[k] <= limits[k] for k in LIMITED)


def shares(est: Mapping[str, int], limits: Mapping[str, int]) -> dict[str, float]:
    """Each limited resource's estimate as a fraction of the limit (unknown limits left out)."""
    return {k: est[k] / limits[k] for k in LIMITED if limits.get(k, 0)}


# ------------------------------------------------------------- against VTA's publications

#: What VTA's publications state about its PYNQ design (VTA_REFERENCE.md): the buffers of
#: vta_config.json, 256 int8 MACs a cycle, and that the design fits the PYNQ's xc7z020 (TVM
#: OSDI'18, section 6.4: a 16x16 unit on the PYNQ's Artix-7 fabric). VTA_REFERENCE.md quotes no
#: synthesised utilisation (DSP, LUT or BRAM counts of the bitstream).
PUBLISHED_BUFFER_BYTES = 32768 + 32768 + 262144 + 131072 + 32768
PUBLISHED_MACS = 256
PUBLISHED_BOARD = "pynq-z1"

Comparison = tuple[str, str, str, str]


def published_comparison(hw: HwConfig) -> list[Comparison]:
    """``(what, published, this estimate, verdict)`` rows: ``hw``'s estimate against the facts
    VTA published for its PYNQ design on the ``PUBLISHED_BOARD`` (VTA_REFERENCE.md)."""
    est = estimate(hw)
    b = BOARDS[PUBLISHED_BOARD]
    sp = hw.scratchpad
    assert sp.uop is not None  # set from the timing model when the config loads
    buf = sp.uop + sp.inp + sp.wgt + sp.acc + sp.out
    pub_buf = PUBLISHED_BUFFER_BYTES
    buf_bram = sum(a for r, c, a, _ in breakdown(hw) if r == "bram36" and c.endswith("buffer"))
    macs = hw.gemm.batch * hw.gemm.block_in * hw.gemm.block_out
    share = shares(est, b.limits)
    return [
        ("on-chip buffers", f"{pub_buf // 1024} KiB (vta_config.json)",
         f"{buf // 1024} KiB in {buf_bram} BRAM36 (at least {math.ceil(buf / BRAM36_BYTES)})",
         "same sizes" if buf == pub_buf else "different sizes"),
        ("GEMM MACs per cycle", str(PUBLISHED_MACS), f"{macs} in {est['dsp']} DSP48 "
         f"({est['dsp'] / b.dsp:.0%} of {b.part})", "same core" if macs == PUBLISHED_MACS
         else "different core"),
        (f"fits the {b.part}", "yes (OSDI'18 section 6.4)",
         ", ".join(f"{k} {v:.0%}" for k, v in share.items()),
         "agrees" if fits(est, b.limits) else "DISAGREES: the estimate does not fit"),
        ("synthesised utilisation", "not in VTA_REFERENCE.md", "-",
         "no measured DSP/LUT/BRAM count to compare the estimate with"),
    ]
