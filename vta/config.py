"""Hardware description: a frozen, validated ``HwConfig`` loaded from YAML.

Everything the compiler and the simulator know about the accelerator comes from one
``HwConfig`` passed explicitly (there is no "current environment"). The YAML file describes the
GEMM intrinsic, the ALU, the scratchpads, the queues, the memory system and the board; derived
values (buffer depths in elements, ISA field widths, peak GOP/s) are properties.

Validation is done once, at load time, and every problem is reported as one ``HwConfigError``
naming the file, the dotted field and what was expected, e.g.::

    HwConfigError: hwconfigs/x.yaml: gemm.block_in: must be a power of two, got 12

The file must be UTF-8 YAML holding one mapping; a key given twice in one mapping is an error
naming its line (PyYAML would keep the last silently). Fields with a default in the dataclasses
below are optional (the defaults are VTA's PYNQ values); the others (``name``, the GEMM shape,
the scratchpad sizes, ``memory.bus_bytes``) are required. docs/hwconfig.md lists every field
with its default, and a test holds the two in step. Every number must lie in
``0..MAX_FIELD`` (a 32-bit hardware parameter) besides its own constraint.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from vta.dtypes import DTYPE_BITS
from vta.errors import HwConfigError
from vta.resources import breakdown, estimate, fits, part_resources
from vta.words import ALU_OPCODE_BITS, OPCODE_BITS, UOP_BITS

__all__ = [
    "AluConfig",
    "BoardConfig",
    "EnergyConfig",
    "DTYPE_BITS",
    "GemmConfig",
    "HwConfig",
    "HwConfigError",
    "MemoryConfig",
    "QueueConfig",
    "ScratchpadConfig",
    "IsaWidths",
    "IntrinsicConfig",
    "declare_intrinsic",
    "shipped_configs",
    "SHIPPED_DIR",
    "RESET_OUT",
    "ALU_RESET",
    "add_check",
]

#: where the shipped hardware configs live (package data)
SHIPPED_DIR = Path(__file__).resolve().parent / "hwconfigs"

#: ALU operations a config may enable (opcode meaning is fixed by the ISA, see vta.isa).
ALU_OPS: tuple[str, ...] = ("min", "max", "add", "shr", "mul")

#: What a GEMM's reset writes to out (``gemm.reset_out``), and what an ALU instruction's reset
#: flag does (``alu.reset``); the simulators read them through the definitions' ``reset``.
RESET_OUT: tuple[str, ...] = ("sum", "keep", "zero")
ALU_RESET: tuple[str, ...] = ("ignored", "zero")
#: The ALU functions VTA's hardware implements: its HLS design's ``alu()`` has branches for MIN,
#: MAX, ADD and SHR only (apache/tvm-vta@d4a15f6 hardware/xilinx/src/vta.cc:378-396; no MUL
#: branch) and its Chisel design decodes ALU functions 0-3 (hardware/chisel/src/main/scala/core/
#: TensorAlu.scala:42, 520-527: its internal op 4 is SHR by a negative amount). A config that
#: claims to be VTA (``stock: true``) enables no other; MUL is a variant that pays its DSPs.
VTA_ALU_OPS: tuple[str, ...] = ("min", "max", "add", "shr")

#: Every number in a hardware description is a hardware parameter of the generated design, held
#: in a signed 32-bit register; a larger value is a typo, refused naming the field.
MAX_FIELD = (1 << 31) - 1


# --------------------------------------------------------------------------------------------
# Sections. Each is a frozen dataclass; the YAML section of the same name maps onto it.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GemmConfig:
    """The GEMM intrinsic: per cycle, (batch x block_in) . (block_out x block_in)^T."""

    batch: int
    block_in: int
    block_out: int
    inp_dtype: str = "int8"
    wgt_dtype: str = "int8"
    acc_dtype: str = "int32"
    out_dtype: str = "int8"
    #: cycles from issuing a micro-op to its accumulator write-back
    pipeline_depth: int = 4
    #: initiation interval: cycles between successive micro-ops
    ii: int = 1
    #: what a GEMM with its reset flag writes to the out entry while the accumulator entry gets
    #: 0 (``RESET_OUT``): ``sum`` (vta.cc: the low bits of acc + inp . wgt^T, as without reset),
    #: ``keep`` (the Chisel design: out is not written) or ``zero`` (out mirrors acc)
    reset_out: str = "sum"
    #: cycles the micro-op loop costs beyond its issues each time it runs (None in a file: the
    #: timing model's, ``pipeline_depth``; HLS: an assumption, Chisel: the cited drain)
    fill: int | None = None
    #: the micro-op loop and the two loops around it run as one flattened pipelined loop, so
    #: the fill is paid once per instruction (None in a file: the model's; HLS false: vta.cc
    #: pipelines only the innermost loop; Chisel true: one index generator)
    flat_loop: bool | None = None
    #: GEMM and ALU words carry a 1-bit micro-op base (``uop_base``, in the gap at bit 63 of
    #: the low half): every operand index is offset by ``uop_base`` x its factor_out, so two
    #: virtual threads' instructions can share one micro-op block (a co-design variant)
    uop_base: bool = False


@dataclass(frozen=True, slots=True)
class AluConfig:
    """The vector ALU that works on accumulator entries."""

    ops: tuple[str, ...] = VTA_ALU_OPS
    #: elements processed per issue; a vector of batch*block_out takes ceil(vec/lanes) issues
    lanes: int = 16
    #: initiation interval with a register operand (one acc read port: 2 in VTA's HLS design)
    ii: int = 2
    #: initiation interval with an immediate operand (None in a file: the timing model's, see
    #: ``MODEL_DEFAULTS``; HLS 2, Chisel 1)
    ii_imm: int | None = None
    pipeline_depth: int = 4
    #: as ``gemm.fill`` for the ALU's micro-op loop
    fill: int | None = None
    #: as ``gemm.flat_loop`` for the ALU's micro-op loop
    flat_loop: bool | None = None
    #: signed immediate width in bits
    imm_bits: int = 16
    #: SHR shifts by the low ``shift_bits`` bits of its operand (the immediate or the src
    #: element) read as a signed number; a negative amount shifts left (None in a file: log2 of
    #: the accumulator's width, as vta.cc: ``VTA_SHR_ARG_BIT_WIDTH = VTA_LOG_ACC_WIDTH``, 5 bits
    #: for int32, so amounts -16..15)
    shift_bits: int | None = None
    #: what an ALU instruction's reset flag does (``ALU_RESET``): ``ignored`` (vta.cc's
    #: ``alu()`` never reads it, nor does the Chisel ALU) or ``zero`` (the destination entries are
    #: zeroed, acc and out, and nothing is read)
    reset: str = "ignored"
    #: the ALU as a pipeline of its own (its own command queue and tokens) that runs
    #: concurrently with the GEMM core, instead of VTA's one compute pipeline
    separate_pipeline: bool = False
    #: accumulator (and out) banks: a separate ALU and the GEMM core run together only on
    #: different banks (each bank has its own two BRAM ports)
    acc_banks: int = 1


@dataclass(frozen=True, slots=True)
class ScratchpadConfig:
    """On-chip buffer sizes in bytes (powers of two)."""

    inp: int
    wgt: int
    acc: int
    out: int
    #: micro-op buffer (None in a file: the timing model's; HLS 32 KiB, VTA's JSON configs;
    #: Chisel 8 KiB, the 2,048 entries of its CoreConfig)
    uop: int | None = None


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Depths of the command queues (fetch -> load/compute/store) and dependency-token queues."""

    command_depth: int = 512
    token_depth: int = 1024
    #: instructions the fetch unit reads per DRAM request (None in a file: the timing
    #: model's; HLS 8, Chisel 128: Fetch64Bit's queue of one 256-beat burst)
    fetch_batch: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The DRAM port shared by fetch, load and store."""

    #: bytes transferred per cycle once a burst is streaming
    bus_bytes: int
    #: cycles from issuing a request to its first beat
    latency: int = 32
    #: largest single burst in bytes; longer rows are split into several bursts (None in a
    #: file: the timing model's, 16 beats for HLS, 256 for Chisel)
    burst_bytes: int | None = None
    #: read bursts in flight at once on the port: their latencies overlap (None in a file: the
    #: timing model's, 4 for HLS, 16 for Chisel)
    outstanding: int | None = None
    #: fixed cycles of address generation per 2-D row (None in a file: the timing model's;
    #: HLS 1, Chisel 0)
    row_overhead: int | None = None
    #: whether the rows of one LOAD/STORE have their bursts in flight together (else a row's
    #: requests wait for the previous row's data or write response; None in a file: the
    #: timing model's, HLS false: vta.cc's row loop around a memcpy; Chisel true)
    row_overlap: bool | None = None
    #: bytes the micro-op master moves a cycle (None in a file: the timing model's; HLS 4:
    #: vta.cc's 32-bit uop_port; Chisel a full bus beat)
    uop_beat_bytes: int | None = None
    #: how the port picks among masters with a burst ready: ``round_robin`` or ``priority``
    #: (fetch, micro-ops, inp, wgt, acc; None in a file: the timing model's, HLS round robin:
    #: the SmartConnect; Chisel priority: VME.scala)
    arbiter: str | None = None
    #: no burst crosses a multiple of this many bytes (None in a file: the timing model's;
    #: HLS 4096: AXI's 4 KiB rule; Chisel ``burst_bytes``: GenVMECmd splits at it)
    burst_boundary: int | None = None
    #: whether fetch/load/store share one port (contend) or each has its own
    shared_port: bool = True


@dataclass(frozen=True, slots=True)
class BoardConfig:
    """The FPGA board: clock and resources, used to check that a design fits. A resource the
    file leaves out (None) is the part's (``vta.resources.BOARDS``), 0 for an unknown part."""

    part: str = "unknown"
    clock_mhz: float = 100.0
    dsp: int | None = None
    bram36: int | None = None
    lut: int | None = None


@dataclass(frozen=True, slots=True)
class EnergyConfig:
    """The technology the energy model prices (``vta.sim.energy``): its per-event energies are
    Horowitz's 45 nm figures (ISSCC 2014) times ``scale``; ``node_nm`` names the node the
    scaled figures stand for (a label the report prints; the scale is the user's to derive)."""

    node_nm: int = 45
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class IntrinsicConfig:
    """An optional intrinsic the accelerator implements (a user's instruction, see
    ``vta.intrinsics``), with its parameters after defaults were filled in."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str) -> Any:
        """The value of parameter ``key`` (every declared parameter has one)."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"intrinsic {self.name!r} has no parameter {key!r}")


@dataclass(frozen=True, slots=True)
class IsaWidths:
    """Bit widths of the ISA's fields, derived from the buffer depths (as VTA's hw_spec.h)."""

    opcode: int
    uop_idx: int  # log2(uop depth): uop_bgn; uop_end has one bit more
    inp_idx: int
    wgt_idx: int
    acc_idx: int
    out_idx: int
    sram_addr: int  # memop SRAM base (>= 16, as VTA)
    dram_addr: int
    mem_size: int  # y_size, x_size, x_stride
    pad: int
    loop_iter: int  # iter_out, iter_in
    alu_opcode: int
    imm: int
    uop_src: int  # a micro-op's src field indexes inp (GEMM) or acc (ALU)
    uop_base: int = 0  # GEMM/ALU micro-op base field (gemm.uop_base: 1 bit, else none)


@dataclass(frozen=True, slots=True)
class HwConfig:
    """A complete, validated hardware description. Build with ``from_yaml``/``from_dict``."""

    name: str
    gemm: GemmConfig
    alu: AluConfig
    scratchpad: ScratchpadConfig
    queues: QueueConfig
    memory: MemoryConfig
    board: BoardConfig
    #: optional intrinsics, in the order the file lists them (``intrinsics:`` in YAML)
    intrinsics: tuple[IntrinsicConfig, ...] = ()
    #: the energy model's technology (``energy:`` in YAML; Horowitz's 45 nm by default)
    energy: EnergyConfig = EnergyConfig()
    #: which of VTA's implementations the timing follows: ``hls`` (hardware/xilinx, the PYNQ
    #: bitstream) or ``chisel`` (hardware/chisel, what tsim runs); see vta.isa.timing
    timing_model: str = "hls"
    #: the config claims to be VTA's own hardware: its instructions are VTA's alone (LOAD,
    #: STORE, GEMM, the ALU functions of ``VTA_ALU_OPS``, FINISH), so no ALU MUL and no
    #: intrinsic (validated); false for a co-design variant
    stock: bool = False
    source: str = field(default="<dict>", compare=False)
    #: fields the file left out whose value came from the timing model, the board's part or the
    #: accumulator's width (``with_changes`` of those derives them again)
    from_model: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: the hash, computed on first use (timing caches key on the config)
    _hash_value: int | None = field(default=None, init=False, compare=False, repr=False)
    #: what the config derives from its fields (entries, their bytes, depths, ISA widths), by
    #: (what, kind), made on first use: read per DMA and instruction described, and a
    #: per-object dictionary answers without hashing the config (an ``lru_cache`` keyed by
    #: it calls ``__hash__`` in Python on every lookup). Fresh in a copy (``replace``,
    #: pickling): not part of the config's identity
    _derived: dict[tuple[str, str], Any] = field(default_factory=dict, init=False,
                                                compare=False, repr=False)

    # ---------------------------------------------------------------- construction

    @classmethod
    def load(cls, spec: str | Path) -> HwConfig:
        """A hardware config by shipped name (``"pynq"``: ``shipped_configs``) or by YAML
        path. A name that is neither a file nor a shipped config is an error listing the
        shipped ones."""
        p = Path(spec)
        if p.exists() or p.suffix.lower() in (".yaml", ".yml") or len(p.parts) > 1:
            return cls.from_yaml(p)
        shipped = shipped_configs()
        if str(spec) in shipped:
            return cls.from_yaml(shipped[str(spec)])
        raise HwConfigError(f"{spec}: no such file, and no shipped hardware config is called "
                            f"that (shipped: {', '.join(shipped)})")

    @classmethod
    def from_yaml(cls, path: str | Path) -> HwConfig:
        """Load and validate a YAML hardware description (UTF-8, one mapping, no key twice)."""
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as e:
            raise HwConfigError(f"{p}: cannot read file: {e.strerror or e}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HwConfigError(f"{p}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                                f"{e.start}); a hardware description is a YAML text file") \
                from None
        try:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary tags
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(e, "problem", None) or str(e)
            raise HwConfigError(f"{p}: not valid YAML{where}: {problem}") from None
        if data is None:
            raise HwConfigError(f"{p}: empty (no YAML document); expected a mapping with keys "
                                f"{', '.join(_TOP_KEYS)}")
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> HwConfig:
        """Validate a mapping (as read from YAML) and build the config."""
        return _build(data, source)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (round-trips through ``from_dict``)."""
        d = asdict(self)
        d.pop("source")
        d.pop("from_model")
        d.pop("_hash_value")
        d.pop("_derived")
        d["alu"]["ops"] = list(d["alu"]["ops"])
        d["intrinsics"] = {i.name: dict(i.params) for i in self.intrinsics}
        return d

    def intrinsic(self, name: str) -> IntrinsicConfig | None:
        """The listed intrinsic ``name`` (None when this hardware does not implement it)."""
        return next((i for i in self.intrinsics if i.name == name), None)

    def with_changes(self, **changes: Any) -> HwConfig:
        """A re-validated copy with dotted fields changed.

        Example: ``with_changes(**{"gemm.block_in": 32})``.
        """
        d = self.to_dict()
        for key in self.from_model:  # what the model chose is chosen again (by a new model)
            if key not in changes:
                sec, leaf = key.split(".")
                d[sec].pop(leaf)
        for key, value in changes.items():
            node = d
            *parents, leaf = key.split(".")
            for part in parents:
                node = node[part]
            node[leaf] = value
        return _build(d, self.source)

    def with_mul(self) -> HwConfig:
        """This config with vta's ALU MUL added, named ``<name>_mul`` and no longer stock VTA:
        ``pynq``'s is ``pynq_mul.yaml``. For a program or test that needs the multiplier."""
        if "mul" in self.alu.ops:
            return self
        return self.with_changes(**{"name": f"{self.name}_mul", "stock": False,
                                    "alu.ops": [*self.alu.ops, "mul"]})

    def __getstate__(self) -> list[Any]:
        # the cached hash is per process (str hashes are salted): a pickled copy recomputes it;
        # what it derives it derives again
        return [None if f.name == "_hash_value" else {} if f.name == "_derived"
                else getattr(self, f.name) for f in fields(self)]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    def __hash__(self) -> int:
        # hashed often (timing caches key on the config): computed once per object
        cached = self._hash_value
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash_value", cached)
        return cached

    @property
    def hash(self) -> str:
        """A stable digest of the hardware (not the file name), for caches."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    # ---------------------------------------------------------------- element sizes (bytes)

    def entry(self, kind: str) -> Entry:
        """One entry of buffer ``kind`` (uop, inp, wgt, acc, out): its shape and element type
        (``ENTRY_DIMS``); KeyError for another kind."""
        key = ("entry", kind)
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = _entry(self, kind)
        return got  # type: ignore[no-any-return]

    def elem_bytes(self, kind: str) -> int:
        """Bytes of one entry of buffer ``kind`` (uop, inp, wgt, acc, out)."""
        key = ("bytes", kind)
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = self.entry(kind).nbytes
        return got  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- depths (entries)

    def depth(self, kind: str) -> int:
        """Entries of buffer ``kind``."""
        key = ("depth", kind)
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = getattr(self.scratchpad, kind) // self.elem_bytes(kind)
        return got  # type: ignore[no-any-return]

    @property
    def uop_depth(self) -> int:
        return self.depth("uop")

    @property
    def inp_depth(self) -> int:
        return self.depth("inp")

    @property
    def wgt_depth(self) -> int:
        return self.depth("wgt")

    @property
    def acc_depth(self) -> int:
        return self.depth("acc")

    @property
    def out_depth(self) -> int:
        return self.depth("out")

    # ---------------------------------------------------------------- ISA and performance

    @property
    def isa(self) -> IsaWidths:
        """ISA field widths derived from the buffer depths."""
        got = self._derived.get(("isa", ""))
        if got is None:
            got = self._derived["isa", ""] = _isa_widths(self)
        return got  # type: ignore[no-any-return]

    @property
    def macs_per_cycle(self) -> int:
        g = self.gemm
        return g.batch * g.block_in * g.block_out // g.ii

    @property
    def peak_gops(self) -> float:
        """Peak throughput in GOP/s (2 ops per MAC) at the board clock."""
        return 2 * self.macs_per_cycle * self.board.clock_mhz * 1e6 / 1e9

    @property
    def dram_gbps(self) -> float:
        """Peak DRAM bandwidth in GB/s at the board clock."""
        return self.memory.bus_bytes * self.board.clock_mhz * 1e6 / 1e9

    def resource_estimate(self) -> dict[str, int]:
        """A first-order estimate of DSP slices, BRAM36 blocks, datapath LUTs and pipeline
        registers (``vta.resources``: every component and its rule)."""
        return estimate(self)

    def fits_board(self) -> bool:
        """Whether the resource estimate fits the board (unknown resources count as fitting)."""
        b = self.board
        return fits(self.resource_estimate(),
                    {k: int(getattr(b, k) or 0) for k in BOARD_RESOURCES})

    def summary(self) -> dict[str, Any]:
        """Derived values for ``vta info``."""
        w = self.isa
        return {
            "name": self.name,
            "source": self.source,
            "hash": self.hash,
            "gemm": f"{self.gemm.batch}x{self.gemm.block_in}x{self.gemm.block_out} "
            f"{self.gemm.inp_dtype} x {self.gemm.wgt_dtype} -> {self.gemm.acc_dtype} "
            f"(out {self.gemm.out_dtype})",
            "clock_mhz": self.board.clock_mhz,
            "peak_gops": round(self.peak_gops, 3),
            "dram_gbps": round(self.dram_gbps, 3),
            "depths": {k: self.depth(k) for k in ("uop", *DATA_KINDS)},
            "elem_bytes": {k: self.elem_bytes(k) for k in ("uop", *DATA_KINDS)},
            "isa_widths": asdict(w),
            "timing_model": self.timing_model,
            "stock": self.stock,
            "alu_ops": ", ".join(self.alu.ops),
            "resources": self.resource_estimate(),
            "resource_breakdown": {f"{comp} ({res})": f"{amount} = {rule}"
                                   for res, comp, amount, rule in _breakdown(self)},
            "fits_board": self.fits_board(),
        }


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

_SECTIONS: dict[str, type] = {
    "gemm": GemmConfig,
    "alu": AluConfig,
    "scratchpad": ScratchpadConfig,
    "queues": QueueConfig,
    "memory": MemoryConfig,
    "board": BoardConfig,
    "energy": EnergyConfig,
}
_TOP_KEYS = ("name", "timing_model", "stock", *_SECTIONS, "intrinsics")

#: The timing models (``timing_model``): VTA's two implementations, whose behaviour
#: ``vta.isa.timing`` follows.
TIMING_MODELS: tuple[str, ...] = ("hls", "chisel")

#: Defaults that depend on the timing model, for fields a file leaves out: ``section.field`` ->
#: {model: value, or a function of the section's other values (already filled in order)}. Each
#: is the implementation's own number or a labelled assumption; docs/simulator.md cites the
#: source (``apache/tvm-vta@d4a15f6``):
#: * ``gemm.fill``, ``alu.fill``: the section's ``pipeline_depth`` in both. HLS: an
#:   assumption (vta.cc fixes no pipeline depth for READ_GEMM_UOP / READ_ALU_UOP; no synthesis
#:   report is published); Chisel: 4, the stages from the index generator to the accumulator
#:   write (TensorGemm.scala:561,637,641; TensorAlu.scala:226-229);
#: * ``gemm.flat_loop``, ``alu.flat_loop``: HLS false (vta.cc:253-262, 343-351: only the
#:   micro-op loop is pipelined), Chisel true (TensorGemm.scala:220-296: one index generator);
#: * ``alu.ii_imm``: HLS 2 (vta.cc:351 ``PIPELINE II = 2`` for every op), Chisel 1
#:   (TensorAlu.scala:122 ``advance = alu_use_imm || stutter``);
#: * ``scratchpad.uop``: HLS 32 KiB (VTA's JSON configs: LOG_UOP_BUFF_SIZE 15), Chisel 8 KiB
#:   (core/Configs.scala:42 ``uopMemDepth = 2048`` micro-ops of 32 bits);
#: * ``queues.fetch_batch``: HLS 8 (a choice), Chisel 128 (FetchVME64.scala:57: a queue of
#:   ``1 << (lenBits - 1)`` instructions filled by one burst, drained before the next);
#: * ``memory.outstanding``: HLS 4 (a choice: the masters reach the Zynq's ACP port through a
#:   SmartConnect; 4 outstanding reads is the ACP figure UG1085 documents), Chisel 16
#:   (shell/VME.scala:36 ``RequestQueueDepth``);
#: * ``memory.burst_bytes``: HLS 16 beats (Vivado HLS's m_axi ``max_read_burst_length``
#:   default; vta.cc's memcpy bursts), Chisel 256 beats (AXI4, ``lenBits = 8``);
#: * ``memory.burst_boundary``: HLS 4096 (AXI's 4 KiB rule, kept by the m_axi adapter),
#:   Chisel ``burst_bytes`` (TensorLoadNarrowVME.scala:574-577, TensorStoreNarrowVME.scala:
#:   68,84-89: a burst ends at the next multiple of the largest burst);
#: * ``memory.row_overhead``: HLS 1 (an assumption: the row loop's index updates, vta.cc:68-69),
#:   Chisel 0 (TensorLoadNarrowVME.scala:597-625: the next row's command the cycle after);
#: * ``memory.row_overlap``: HLS false (vta.cc:62-71, 547-557: one memcpy per iteration of the
#:   row loop, which the variable-length memcpy keeps from pipelining: docs/simulator.md),
#:   Chisel true (GenVMECmd issues every row's commands without waiting for data);
#: * ``memory.uop_beat_bytes``: HLS 4 (vta.cc:428: ``uop_port`` carries 32-bit ``uop_T``; a
#:   narrower bus's width if less),
#:   Chisel ``bus_bytes`` (LoadUop through TensorLoadWideVME: whole bus beats);
#: * ``memory.arbiter``: HLS round robin (an assumption: the SmartConnect ``axi_smc0`` in front
#:   of the ACP port, scripts/vivado.tcl:157-162, does not say), Chisel priority (VME.scala:242
#:   ``PriorityEncoder``: fetch, then micro-ops, inp, wgt, acc; Core.scala:74-78).
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemm.fill": {"hls": lambda sec: sec["pipeline_depth"],
                  "chisel": lambda sec: sec["pipeline_depth"]},
    "gemm.flat_loop": {"hls": False, "chisel": True},
    "alu.ii_imm": {"hls": 2, "chisel": 1},
    "alu.fill": {"hls": lambda sec: sec["pipeline_depth"],
                 "chisel": lambda sec: sec["pipeline_depth"]},
    "alu.flat_loop": {"hls": False, "chisel": True},
    "scratchpad.uop": {"hls": 32768, "chisel": 8192},
    "queues.fetch_batch": {"hls": 8, "chisel": 128},
    "memory.outstanding": {"hls": 4, "chisel": 16},
    "memory.burst_bytes": {"hls": lambda sec: 16 * sec["bus_bytes"],
                           "chisel": lambda sec: 256 * sec["bus_bytes"]},
    "memory.burst_boundary": {"hls": 4096, "chisel": lambda sec: sec["burst_bytes"]},
    "memory.row_overhead": {"hls": 1, "chisel": 0},
    "memory.row_overlap": {"hls": False, "chisel": True},
    "memory.uop_beat_bytes": {"hls": lambda sec: min(4, sec["bus_bytes"]),
                              "chisel": lambda sec: sec["bus_bytes"]},
    "memory.arbiter": {"hls": "round_robin", "chisel": "priority"},
}

#: ``memory.arbiter``'s values
ARBITERS: tuple[str, ...] = ("round_robin", "priority")


# --------------------------------------------------------------------------------------------
def shipped_configs() -> dict[str, Path]:
    """The hardware configs shipped with vta, by name (the file's stem): the package data
    ``vta/hwconfigs/*.yaml``, found wherever vta is installed (a checkout's ``hwconfigs/``
    is the same folder)."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.yaml"))}


# Hooks filled by the layers above (dependency inversion: the config stays the bottom layer)
# --------------------------------------------------------------------------------------------

#: name -> {parameter: default} of every intrinsic a config may list; filled by
#: ``declare_intrinsic`` when an intrinsic is registered (``vta.intrinsics``)
_INTRINSICS: dict[str, dict[str, Any]] = {}
#: cross-layer checks run on every config: each returns ``[(field, message), ...]``
_CHECKS: list[Any] = []


def declare_intrinsic(name: str, params: Mapping[str, Any]) -> None:
    """Let configs list intrinsic ``name`` with ``params`` (their defaults fix their types)."""
    _INTRINSICS[name] = dict(params)


def forget_intrinsic(name: str) -> None:
    _INTRINSICS.pop(name, None)


def add_check(check: Any) -> None:
    """Run ``check(cfg) -> [(field, message), ...]`` on every config built (the ISA layer adds
    its layout check: the instruction formats must fit the word for the buffer depths)."""
    if check not in _CHECKS:
        _CHECKS.append(check)


def _run_checks(cfg: HwConfig) -> None:
    for check in _CHECKS:
        for where, msg in check(cfg):
            raise _fail(cfg.source, where, msg)


def _intrinsics(source: str, data: Any) -> tuple[IntrinsicConfig, ...]:
    """Validate the ``intrinsics:`` mapping (name -> parameters or null) against the declared
    intrinsics, filling in defaults."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise _fail(source, "intrinsics", f"expected a mapping of intrinsic names to their "
                    f"parameters, got {data!r}")
    out = []
    for name, params in data.items():
        where = f"intrinsics.{name}"
        if not isinstance(name, str):
            raise _fail(source, "intrinsics", f"expected intrinsic names, got {name!r}")
        if name not in _INTRINSICS:
            known = sorted(_INTRINSICS)
            hint = difflib.get_close_matches(name, known, n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else ""
            have = ", ".join(known) or "none"
            raise _fail(source, where, f"unknown intrinsic{did}; registered: {have} (register "
                        f"yours from Python with vta.intrinsics before loading the config)")
        schema = _INTRINSICS[name]
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise _fail(source, where, f"expected a mapping of parameters, got {params!r}")
        _check_keys(source, f"{where}.", params, tuple(schema))
        values = dict(schema)
        for key, value in params.items():
            default = schema[key]
            annot = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(default), "")
            values[key] = _coerce(source, f"{where}.{key}", value, annot) if annot else value
        out.append(IntrinsicConfig(name, tuple(sorted(values.items()))))
    return tuple(out)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a key given twice in one mapping is an error naming
    the key and both lines (the SafeLoader keeps the last value silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode,
                    deep: bool = False) -> dict[Any, Any]:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        line = key_node.start_mark.line + 1
        try:
            seen = first.setdefault(key, line)
        except TypeError:  # a list or mapping as a key
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a name, got {key!r}", key_node.start_mark) from None
        if seen != line:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given at line {seen})",
                key_node.start_mark)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _unique_mapping)


def _fail(source: str, where: str, msg: str) -> HwConfigError:
    return HwConfigError(f"{source}: {where}: {msg}")


def _check_keys(source: str, prefix: str, given: Mapping[str, Any],
                allowed: tuple[str, ...]) -> None:
    for key in given:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else ""
            expected = ", ".join(allowed)
            raise _fail(source, f"{prefix}{key}", f"unknown key{did}; expected one of: {expected}")


def _coerce(source: str, where: str, value: Any, annot: str) -> Any:
    """Check a YAML value against a dataclass field annotation (as a string)."""
    if annot.endswith(" | None"):  # a field whose default comes from the timing model
        annot = annot[:-len(" | None")]
    if annot == "bool":
        if not isinstance(value, bool):
            raise _fail(source, where, f"expected true or false, got {value!r}")
        return value
    if annot == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(source, where, f"expected an integer, got {value!r}")
        return _bounded(source, where, value)
    if annot == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(source, where, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            raise _fail(source, where, f"expected a finite number, got {value!r}")
        return float(_bounded(source, where, value))
    if annot == "str":
        if not isinstance(value, str):
            raise _fail(source, where, f"expected a string, got {value!r}")
        if not value.strip():
            raise _fail(source, where, "expected a non-empty string")
        return value
    if annot == "tuple[str, ...]":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise _fail(source, where, f"expected a list of strings, got {value!r}")
        return tuple(v.lower() for v in value)
    raise AssertionError(f"unhandled annotation {annot}")  # pragma: no cover


def _bounded(source: str, where: str, value: int | float) -> int | float:
    """``value`` when it is at most ``MAX_FIELD`` (negative values are each field's check)."""
    if value > MAX_FIELD:
        raise _fail(source, where, f"{value} is not a plausible value: must be at most "
                    f"{MAX_FIELD} (2**31 - 1)")
    return value


def _section(source: str, name: str, data: Any) -> Any:
    cls = _SECTIONS[name]
    if not isinstance(data, Mapping):
        raise _fail(source, name, f"expected a mapping of fields, got {data!r}")
    names = tuple(f.name for f in fields(cls))
    _check_keys(source, f"{name}.", data, names)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        where = f"{name}.{f.name}"
        if f.name in data:
            kwargs[f.name] = _coerce(source, where, data[f.name], str(f.type))
        elif f.default is MISSING and f.default_factory is MISSING:
            raise _fail(source, where, "missing required field")
    return cls(**kwargs)


def _build(data: Any, source: str) -> HwConfig:
    if not isinstance(data, Mapping):
        raise HwConfigError(f"{source}: expected a mapping with keys {', '.join(_TOP_KEYS)}")
    _check_keys(source, "", data, _TOP_KEYS)
    if "name" not in data:
        raise _fail(source, "name", "missing required field")
    name = _coerce(source, "name", data["name"], "str")
    parts: dict[str, Any] = {}
    for sec, cls in _SECTIONS.items():
        if sec in data:
            parts[sec] = _section(source, sec, data[sec])
        elif any(f.default is MISSING and f.default_factory is MISSING for f in fields(cls)):
            raise _fail(source, sec, "missing required section")
        else:
            parts[sec] = cls()
    model = _coerce(source, "timing_model", data.get("timing_model", "hls"), "str")
    if model not in TIMING_MODELS:
        hint = difflib.get_close_matches(model, TIMING_MODELS, n=1)
        did = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise _fail(source, "timing_model", f"unknown timing model {model!r}{did}; expected one "
                    f"of {', '.join(TIMING_MODELS)} (VTA's HLS design or its Chisel design)")
    parts, chosen = _model_defaults(source, model, parts)
    parts, by_part = _board_defaults(parts)
    chosen += by_part
    parts, by_acc = _acc_defaults(parts)
    chosen += by_acc
    stock = _coerce(source, "stock", data.get("stock", False), "bool")
    cfg = HwConfig(name=name, source=source, intrinsics=_intrinsics(source, data.get("intrinsics")),
                   timing_model=model, stock=stock, from_model=chosen, **parts)
    _validate(cfg)
    return cfg


def _model_defaults(source: str, model: str, parts: dict[str, Any]
                    ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``parts`` with every field the file left out (None) set from ``MODEL_DEFAULTS``, and the
    names of those fields."""
    chosen = []
    for key, by_model in MODEL_DEFAULTS.items():
        sec, leaf = key.split(".")
        if getattr(parts[sec], leaf) is not None:
            continue
        rule = by_model[model]
        value = rule(asdict(parts[sec])) if callable(rule) else rule
        parts = {**parts, sec: replace(parts[sec], **{leaf: value})}
        chosen.append(key)
    return parts, tuple(chosen)


#: The board resources a file may leave out: then the part's (``vta.resources.BOARDS``).
BOARD_RESOURCES: tuple[str, ...] = ("dsp", "bram36", "lut")


def _board_defaults(parts: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``parts`` with every board resource the file left out set from its part's entry in
    ``vta.resources.BOARDS`` (0, unknown, for a part not listed there), and their names."""
    b = parts["board"]
    known = part_resources(b.part)
    missing = [k for k in BOARD_RESOURCES if getattr(b, k) is None]
    if not missing:
        return parts, ()
    filled = replace(b, **{k: known.get(k, 0) for k in missing})
    return {**parts, "board": filled}, tuple(f"board.{k}" for k in missing)


def _acc_defaults(parts: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``parts`` with ``alu.shift_bits`` set, when the file left it out, to log2 of the
    accumulator's width (vta.cc's ``VTA_SHR_ARG_BIT_WIDTH``), and its name. An unknown
    accumulator type leaves it unset (its own check names ``gemm.acc_dtype``)."""
    a = parts["alu"]
    bits = DTYPE_BITS.get(parts["gemm"].acc_dtype)
    if a.shift_bits is not None or bits is None:
        return parts, ()
    return {**parts, "alu": replace(a, shift_bits=bits.bit_length() - 1)}, ("alu.shift_bits",)


def _breakdown(cfg: HwConfig) -> list[tuple[str, str, int, str]]:
    return breakdown(cfg)


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _validate(cfg: HwConfig) -> None:
    """Cross-field checks. Raises HwConfigError naming the first bad field."""
    src = cfg.source
    g, a, sp, q, m, b = cfg.gemm, cfg.alu, cfg.scratchpad, cfg.queues, cfg.memory, cfg.board

    for f in ("batch", "block_in", "block_out"):
        v = getattr(g, f)
        if not _is_pow2(v):
            raise _fail(src, f"gemm.{f}", f"must be a power of two, got {v}")
    for f in ("inp_dtype", "wgt_dtype", "acc_dtype", "out_dtype"):
        v = getattr(g, f)
        if v not in DTYPE_BITS:
            raise _fail(src, f"gemm.{f}", f"must be one of {', '.join(DTYPE_BITS)}, got {v!r}")
    if DTYPE_BITS[g.acc_dtype] < DTYPE_BITS[g.inp_dtype] + DTYPE_BITS[g.wgt_dtype]:
        raise _fail(src, "gemm.acc_dtype", f"must be at least as wide as a product "
                    f"({g.inp_dtype} x {g.wgt_dtype}), got {g.acc_dtype}")
    if DTYPE_BITS[g.out_dtype] > DTYPE_BITS[g.acc_dtype]:
        raise _fail(src, "gemm.out_dtype", f"must not be wider than acc_dtype {g.acc_dtype}, "
                    f"got {g.out_dtype}")
    for f in ("pipeline_depth", "ii"):
        if getattr(g, f) < 1:
            raise _fail(src, f"gemm.{f}", f"must be >= 1, got {getattr(g, f)}")
    if cfg.energy.node_nm < 1:
        raise _fail(src, "energy.node_nm", f"must be >= 1 (nanometres), got {cfg.energy.node_nm}")
    if not cfg.energy.scale > 0 or math.isinf(cfg.energy.scale):
        raise _fail(src, "energy.scale", f"must be a positive factor on the 45 nm energies, got "
                    f"{cfg.energy.scale}")
    _one_of(src, "gemm.reset_out", g.reset_out, RESET_OUT,
            "what a GEMM reset writes to out: the low bits of acc + inp.wgt as vta.cc, nothing "
            "as the Chisel design, or zero")
    for sec, conf in (("gemm", g), ("alu", a)):
        assert conf.fill is not None  # set from the model
        if conf.fill < 0:
            raise _fail(src, f"{sec}.fill", f"must be >= 0, got {conf.fill}")

    for op in a.ops:
        if op not in ALU_OPS:
            hint = difflib.get_close_matches(op, ALU_OPS, n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise _fail(src, "alu.ops",
                        f"unknown op {op!r}{did}; expected some of {', '.join(ALU_OPS)}")
    for f in ("lanes", "ii", "ii_imm", "pipeline_depth", "acc_banks"):
        if getattr(a, f) < 1:
            raise _fail(src, f"alu.{f}", f"must be >= 1, got {getattr(a, f)}")
    if not _is_pow2(a.acc_banks):
        raise _fail(src, "alu.acc_banks", f"must be a power of two, got {a.acc_banks}")
    if a.separate_pipeline and a.acc_banks < 2:
        raise _fail(src, "alu.acc_banks", "a separate ALU pipeline needs at least 2 accumulator "
                    "banks (the GEMM core uses both ports of its bank every cycle), got 1")
    if a.acc_banks > 1 and not a.separate_pipeline:
        raise _fail(src, "alu.acc_banks", f"banks only matter to a separate ALU pipeline "
                    f"(alu.separate_pipeline: true), got {a.acc_banks} banks without one")
    if not _is_pow2(a.lanes):
        raise _fail(src, "alu.lanes", f"must be a power of two, got {a.lanes}")
    if not 2 <= a.imm_bits <= 32:
        raise _fail(src, "alu.imm_bits", f"must be between 2 and 32, got {a.imm_bits}")
    acc_bits = DTYPE_BITS[g.acc_dtype]
    assert a.shift_bits is not None  # set from the accumulator's width
    if not 2 <= a.shift_bits <= acc_bits:
        raise _fail(src, "alu.shift_bits", f"must be between 2 and the accumulator's width "
                    f"({acc_bits} bits, {g.acc_dtype}), got {a.shift_bits}")
    _one_of(src, "alu.reset", a.reset, ALU_RESET,
            "ignored as vta.cc's ALU does, or zero the destination")
    _check_stock(cfg)

    for kind in ("uop", *DATA_KINDS):
        size = getattr(sp, kind)
        if not _is_pow2(size):
            raise _fail(src, f"scratchpad.{kind}", f"must be a power of two (bytes), got {size}")
        _check_entry_fits(cfg, kind)
    if cfg.out_depth != cfg.acc_depth:
        need = cfg.acc_depth * cfg.elem_bytes("out")
        raise _fail(src, "scratchpad.out", f"must hold as many entries as acc ({cfg.acc_depth} x "
                    f"{cfg.elem_bytes('out')} B = {need} bytes), got {sp.out}")
    if a.acc_banks > cfg.acc_depth:
        raise _fail(src, "alu.acc_banks", f"more banks ({a.acc_banks}) than accumulator entries "
                    f"({cfg.acc_depth})")

    for f in ("command_depth", "token_depth", "fetch_batch"):
        if getattr(q, f) < 1:
            raise _fail(src, f"queues.{f}", f"must be >= 1, got {getattr(q, f)}")

    if not _is_pow2(m.bus_bytes):
        raise _fail(src, "memory.bus_bytes", f"must be a power of two, got {m.bus_bytes}")
    if m.latency < 0:
        raise _fail(src, "memory.latency", f"must be >= 0, got {m.latency}")
    # set from the model
    assert m.burst_bytes is not None and m.outstanding is not None and m.row_overhead is not None
    assert m.uop_beat_bytes is not None and m.burst_boundary is not None
    if m.burst_bytes < m.bus_bytes or m.burst_bytes % m.bus_bytes:
        raise _fail(src, "memory.burst_bytes", f"must be a multiple of bus_bytes ({m.bus_bytes}), "
                    f"got {m.burst_bytes}")
    if m.outstanding < 1:
        raise _fail(src, "memory.outstanding", f"must be >= 1, got {m.outstanding}")
    if m.row_overhead < 0:
        raise _fail(src, "memory.row_overhead", f"must be >= 0, got {m.row_overhead}")
    if not _is_pow2(m.uop_beat_bytes) or m.uop_beat_bytes > m.bus_bytes:
        raise _fail(src, "memory.uop_beat_bytes", f"must be a power of two no wider than "
                    f"bus_bytes ({m.bus_bytes}), got {m.uop_beat_bytes}")
    if m.burst_boundary < m.bus_bytes or m.burst_boundary % m.bus_bytes:
        raise _fail(src, "memory.burst_boundary", f"must be a multiple of bus_bytes "
                    f"({m.bus_bytes}), got {m.burst_boundary}")
    if m.arbiter not in ARBITERS:
        hint = difflib.get_close_matches(str(m.arbiter), ARBITERS, n=1)
        did = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise _fail(src, "memory.arbiter", f"unknown arbiter {m.arbiter!r}{did}; expected one "
                    f"of {', '.join(ARBITERS)}")

    if b.clock_mhz <= 0:
        raise _fail(src, "board.clock_mhz", f"must be > 0, got {b.clock_mhz}")
    for f in BOARD_RESOURCES:
        if getattr(b, f) < 0:
            raise _fail(src, f"board.{f}", f"must be >= 0, got {getattr(b, f)}")

    _run_checks(cfg)


def _one_of(src: str, where: str, value: str, allowed: tuple[str, ...], meaning: str) -> None:
    if value not in allowed:
        hint = difflib.get_close_matches(value, allowed, n=1)
        did = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise _fail(src, where, f"unknown value {value!r}{did}; expected one of "
                    f"{', '.join(allowed)} ({meaning})")
def _check_stock(cfg: HwConfig) -> None:
    """A config that claims to be VTA (``stock: true``) uses VTA's instructions alone: its
    ``alu.ops`` within ``VTA_ALU_OPS`` and no intrinsic."""
    if not cfg.stock:
        return
    extra = [op for op in cfg.alu.ops if op not in VTA_ALU_OPS]
    if extra:
        raise _fail(cfg.source, "alu.ops", f"{', '.join(extra)} is not an ALU function of VTA "
                    f"(its ALU has {', '.join(VTA_ALU_OPS)}), but this config claims to be "
                    f"stock VTA (stock: true): remove {', '.join(extra)} from alu.ops, or set "
                    f"stock: false for a variant that pays for it")
    if cfg.intrinsics:
        name = cfg.intrinsics[0].name
        raise _fail(cfg.source, f"intrinsics.{name}", "an intrinsic is not VTA's instruction, "
                    "but this config claims to be stock VTA (stock: true): remove it, or set "
                    "stock: false for a variant that implements it")


#: The on-chip buffers (scratchpads) by kind: the GEMM's data buffers, then the micro-ops. Every
#: layer names a buffer by one of these (``vta.isa.MemType.kind`` gives the same names to the
#: LOAD/STORE memory types); the entry each holds is ``ENTRY_DIMS``.
DATA_KINDS: tuple[str, ...] = ("inp", "wgt", "acc", "out")
BUFFER_KINDS: tuple[str, ...] = (*DATA_KINDS, "uop")

#: One entry of each buffer: the GEMM fields that are its shape and the GEMM field naming its
#: element type (a micro-op is one ``UOP_BITS`` word: no dims, no dtype field). The one
#: definition every layer reads through ``HwConfig.entry`` (entry sizes, buffer depths, the
#: simulators' DRAM views, the error for an entry that does not fit).
ENTRY_DIMS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "uop": ((), None),
    "inp": (("batch", "block_in"), "inp_dtype"),
    "wgt": (("block_out", "block_in"), "wgt_dtype"),
    "acc": (("batch", "block_out"), "acc_dtype"),
    "out": (("batch", "block_out"), "out_dtype"),
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a buffer on a config: ``shape`` (the values of the GEMM fields ``dims``),
    its element type (``dtype``: a datapath type, or ``uint32`` for a micro-op word) and width."""

    kind: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    bits: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.bits // 8


def _entry(cfg: HwConfig, kind: str) -> Entry:
    """``HwConfig.entry`` (made once per config and kind: ``HwConfig._derived``)."""
    dims, dtype_field = ENTRY_DIMS[kind]
    if dtype_field is None:
        return Entry(kind, (), (), f"uint{UOP_BITS}", UOP_BITS)
    g = cfg.gemm
    dtype = getattr(g, dtype_field)
    return Entry(kind, dims, tuple(getattr(g, d) for d in dims), dtype, DTYPE_BITS[dtype])


def _check_entry_fits(cfg: HwConfig, kind: str) -> None:
    """One entry of ``kind`` fits its scratchpad; when it does not, blame a GEMM dimension that
    alone outgrows the buffer (an unreasonable GEMM), else the buffer (too small)."""
    size, elem = getattr(cfg.scratchpad, kind), cfg.elem_bytes(kind)
    if size >= elem:
        return
    if kind == "uop":
        raise _fail(cfg.source, "scratchpad.uop", f"too small for one tile: one uop entry is "
                    f"{elem} bytes, got {size}")
    e, g = cfg.entry(kind), cfg.gemm
    dims, item = e.dims, e.bits // 8
    big = max(dims, key=lambda d: getattr(g, d))
    formula = " x ".join(f"{d} {getattr(g, d)}" for d in dims) + f" x {item} B"
    if getattr(g, big) * item > size:
        raise _fail(cfg.source, f"gemm.{big}", f"{getattr(g, big)} is too large: one {kind} "
                    f"entry ({formula}) is {elem} bytes, more than scratchpad.{kind} holds "
                    f"({size} bytes)")
    raise _fail(cfg.source, f"scratchpad.{kind}", f"too small for one tile: one {kind} entry is "
                f"{elem} bytes ({formula}), got {size}")


def _log2(n: int) -> int:
    return max(1, (n - 1).bit_length()) if n > 1 else 1


def _isa_widths(cfg: HwConfig) -> IsaWidths:
    """``HwConfig.isa`` (made once per config: ``HwConfig._derived``)."""
    uop = _log2(cfg.uop_depth)
    inp, wgt, acc, out = (_log2(cfg.depth(k)) for k in DATA_KINDS)
    return IsaWidths(
        opcode=OPCODE_BITS,
        uop_idx=uop,
        inp_idx=inp,
        wgt_idx=wgt,
        acc_idx=acc,
        out_idx=out,
        sram_addr=max(16, uop, inp, wgt, acc, out),
        dram_addr=32,
        mem_size=16,
        pad=4,
        loop_iter=14,
        alu_opcode=ALU_OPCODE_BITS,
        imm=cfg.alu.imm_bits,
        uop_src=max(inp, acc),
        uop_base=1 if cfg.gemm.uop_base else 0,
    )


