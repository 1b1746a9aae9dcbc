"""The functional reference interpreter: the executable definition of the ISA's loops, no timing.

Instructions run one after another in program order (the order a correctly synchronised
program's dependency tokens guarantee) until the first instruction that ends the program
(FINISH), or the end of the program. Each instruction is written out as VTA_REFERENCE.md's
pseudo-code reads:

* LOAD / STORE: explicit loops over rows and columns, one entry at a time; the padded image
  and the rows are the definitions' ``load_image`` / ``store_rows``, the rows and pads each
  memory type reads ``vta.isa.insn.Load``'s (vta.cc: WGT ignores the pads, UOP copies
  ``x_size`` micro-ops, INP and ACC write their pads even without data);
* every micro-op instruction (GEMM, the ALU's functions, a user's unit): ``for o in
  range(iter_out): for i in range(iter_in): for u in uops[bgn:end]``, one execution at a time
  and in that order (so a later execution sees an earlier one's write), each computing the
  instruction's semantics (``InstructionDef.semantics``, the numpy function the machine calls
  too) on the entries that execution addresses; a reset does what the definition says on
  the config (``InstructionDef.reset_mode``; vta.cc: a GEMM reset zeroes acc and writes the
  narrowed sum to out, an ALU ignores the flag);
* wraparound is explicit: results are computed exactly (int64 where nothing can overflow) and
  wrapped to the acc width by ``wrap``; ``out`` is ``wrap(acc, out bits)``.

This module deliberately shares no code with the cycle-level machine's vectorised kernels
(``vta.sim.kernels``, ``vta.sim.gemm``): only the DRAM image, the errors, the ISA (and its
definitions' semantics) and the config. The differential tests compare the two, so a bug in
either one's loops, indexing, batching or fast paths shows up as a mismatch. It is meant to be
obviously correct, not fast: ResNet-18 C2 (514k micro-ops) takes seconds.

Bounds: every index an instruction uses is checked before the instruction writes anything; a
``AddressError`` names the instruction, the buffer and the offending index (the same messages
as the machine's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from vta.config import DATA_KINDS, DTYPE_BITS, HwConfig
from vta.errors import AddressError, IsaError, SimError
from vta.isa import (
    Instruction,
    InstructionDef,
    Load,
    Program,
    Store,
    check_fields,
    definition_of,
    uop_layout,
)
from vta.isa.asm import where
from vta.isa.builtins import load_image, store_rows
from vta.sim.dram import Dram, entry_spec

__all__ = ["run_reference", "reference_dram", "wrap"]

#: data buffers (the micro-op buffer is kept apart, decoded)
_DATA = DATA_KINDS


def wrap(value: int, bits: int) -> int:
    """``value`` as a ``bits``-wide two's complement integer (its low ``bits`` bits, signed)."""
    half = 1 << (bits - 1)
    return ((value + half) & ((1 << bits) - 1)) - half


class _Wrap:
    """``wrap`` to ``bits`` of every element of an int64 array (values well inside int64)."""

    def __init__(self, bits: int) -> None:
        self.half = np.int64(1 << (bits - 1))
        self.mask = np.int64((1 << bits) - 1)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return ((values + self.half) & self.mask) - self.half


class _Scratchpads:
    """The five on-chip buffers: micro-ops as (dst, src, wgt) tuples; data entries as int64
    arrays of one entry's shape (acc and out hold already-wrapped values)."""

    def __init__(self, hw: HwConfig) -> None:
        g = hw.gemm
        self.hw = hw
        self.depth = {k: hw.depth(k) for k in ("uop", *_DATA)}
        self.uop: list[tuple[int, int, int]] = [(0, 0, 0)] * self.depth["uop"]
        self.shape = {k: entry_spec(hw, k)[1] for k in _DATA}
        self.data = {k: np.zeros((self.depth[k], *self.shape[k]), dtype=np.int64) for k in _DATA}
        self.acc_bits = DTYPE_BITS[g.acc_dtype]
        self.wrap_acc = _Wrap(self.acc_bits)
        self.wrap_out = _Wrap(DTYPE_BITS[g.out_dtype])
        self.uop_fields = [(pos, (1 << width) - 1) for _, pos, width in uop_layout(hw)]

    def decode_uop(self, word: int) -> tuple[int, int, int]:
        dst, src, wgt = ((word >> pos) & mask for pos, mask in self.uop_fields)
        return dst, src, wgt


class _Run:
    """One execution: the DRAM image, the scratchpads, and the instruction being executed."""

    def __init__(self, program: Program, hw: HwConfig, dram: Dram) -> None:
        self.program, self.hw, self.dram = program, hw, dram
        self.sp = _Scratchpads(hw)
        self.index = 0
        self.insn: Instruction | None = None

    # ------------------------------------------------------------------ errors

    def _where(self) -> str:
        assert self.insn is not None
        return where(self.index, self.insn, self.program)

    def _out_of_range(self, buffer: str, index: int, size: int, detail: str = "") -> AddressError:
        return AddressError(f"{self._where()}: {buffer} index {index} out of range "
                           f"(size {size}){detail}")

    def _check_entries(self, kind: str, base: int, n: int) -> None:
        """SRAM entries ``base .. base+n-1`` of ``kind`` exist."""
        size = self.sp.depth[kind]
        last = base + n - 1
        if last >= size:
            raise self._out_of_range(kind, last, size, f" (entries {base}..{last})")

    def _check_dram(self, kind: str, base: int, rows: int, cols: int, stride: int) -> None:
        """Every DRAM element ``base + r*stride + c`` (r < rows, c < cols) lies in the image."""
        eb = self.hw.elem_bytes(kind)
        last = max(base + r * stride + cols - 1 for r in range(rows))  # the highest element
        end = (last + 1) * eb
        if end > self.dram.buf.size:
            raise AddressError(f"{self._where()}: DRAM {kind} element {last} (byte {end - 1}) is "
                              f"outside the DRAM image ({self.dram.buf.size} bytes)")

    # ------------------------------------------------------------------ DRAM entries

    def _dram_bytes(self, kind: str, elem: int) -> slice:
        eb = self.hw.elem_bytes(kind)
        return slice(elem * eb, (elem + 1) * eb)

    def _read_entry(self, kind: str, elem: int) -> np.ndarray:
        dtype, shape = entry_spec(self.hw, kind)  # little-endian, as DRAM holds it
        raw = self.dram.buf[self._dram_bytes(kind, elem)].tobytes()
        return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(np.int64)

    def _read_word(self, elem: int) -> int:
        """One encoded micro-op word from DRAM."""
        return int.from_bytes(self.dram.buf[self._dram_bytes("uop", elem)].tobytes(), "little")

    def _write_entry(self, kind: str, elem: int, value: np.ndarray) -> None:
        dtype, _ = entry_spec(self.hw, kind)
        self.dram.buf[self._dram_bytes(kind, elem)] = np.frombuffer(
            value.astype(dtype).tobytes(), dtype=np.uint8)

    # ------------------------------------------------------------------ instructions

    def load(self, insn: Load, d: InstructionDef) -> None:
        kind = insn.mem.kind
        rows, cols = insn.rows, insn.cols
        if rows * cols == 0:
            return  # VTA's token carrier: no data, no pads
        self._check_entries(kind, insn.sram_base, rows * cols)
        if insn.data_elems:
            self._check_dram(kind, insn.dram_base, insn.data_rows, insn.x_size, insn.x_stride)
        shape = () if kind == "uop" else self.sp.shape[kind]
        data = np.zeros((insn.data_rows, insn.x_size, *shape), dtype=np.int64)
        for y in range(insn.data_rows):
            for x in range(insn.x_size):
                elem = insn.dram_base + y * insn.x_stride + x
                data[y, x] = self._read_word(elem) if kind == "uop" else \
                    self._read_entry(kind, elem)
        image = load_image(insn, data)
        for r in range(rows):
            for c in range(cols):
                entry = insn.sram_base + r * cols + c
                if kind == "uop":
                    self.sp.uop[entry] = self.sp.decode_uop(int(image[r, c]))
                else:
                    self.sp.data[kind][entry] = image[r, c]

    def store(self, insn: Store, d: InstructionDef) -> None:
        if insn.y_size == 0 or insn.x_size == 0:
            return
        n = insn.y_size * insn.x_size
        self._check_entries("out", insn.sram_base, n)
        self._check_dram("out", insn.dram_base, insn.y_size, insn.x_size, insn.x_stride)
        rows = store_rows(insn, self.sp.data["out"][insn.sram_base: insn.sram_base + n])
        for r in range(insn.y_size):  # row order: where rows overlap, the later row wins
            for c in range(insn.x_size):
                self._write_entry("out", insn.dram_base + r * insn.x_stride + c, rows[r, c])

    def _executions(self, insn: Any, d: InstructionDef) -> list[tuple[int, int, int,
                                                                     dict[str, int]]]:
        """``(o, i, uop position, {operand: entry})`` of every execution, in loop order: the
        destination and every operand this instruction reads."""
        if insn.uop_end > self.sp.depth["uop"]:
            raise self._out_of_range("uop", insn.uop_end - 1, self.sp.depth["uop"],
                                     f" (uop range {insn.uop_bgn}:{insn.uop_end})")
        ops = (d.dst, *d.reads(insn, self.hw))
        execs = []
        for o in range(insn.iter_out):
            for i in range(insn.iter_in):
                for k in range(insn.uop_bgn, insn.uop_end):
                    u = dict(zip(("dst", "src", "wgt"), self.sp.uop[k], strict=True))
                    idx = {}
                    for op in ops:
                        fo, fi = (getattr(insn, op.factors[0]), getattr(insn, op.factors[1])) \
                            if op.factors else (0, 0)
                        idx[op.name] = u[op.name] + op.offset(insn) + o * fo + i * fi
                    execs.append((o, i, k, idx))
        for op in ops:  # every index is checked before anything is written
            size = self.sp.depth[op.memory]
            label = op.memory if op.writes or op.memory != d.dst.memory else \
                f"{op.memory} ({d.name.split('.')[0]} {op.name})"
            for o, i, k, idx in execs:
                if idx[op.name] >= size:
                    raise self._out_of_range(label, idx[op.name], size,
                                             f" at iteration o={o}, i={i}, uop {k}")
        return execs

    def _set_acc(self, entry: int, value: np.ndarray) -> None:
        """``acc[entry] = wrap(value)``, and ``out[entry]`` = its low out-dtype bits."""
        acc = self.sp.wrap_acc(value)
        self.sp.data["acc"][entry] = acc
        self.sp.data["out"][entry] = self.sp.wrap_out(acc)

    def compute(self, insn: Any, d: InstructionDef) -> None:
        acc, out = self.sp.data["acc"], self.sp.data["out"]
        mode = d.reset_mode(insn, self.hw)  # None: computes (no reset, or one it ignores)
        for _, _, _, idx in self._executions(insn, d):
            a = idx["dst"]
            if mode in ("zero", "keep"):  # nothing read; out zeroed too, or left alone
                acc[a] = 0
                if mode == "zero":
                    out[a] = 0
                continue
            reads = {op.name: self.sp.data[op.memory][idx[op.name]][None]
                     for op in d.reads(insn, self.hw)}
            if d.kind == "accumulate":
                # int64 is exact: |acc| <= 2**31 plus one execution's bounded contribution
                new = acc[a] + d.delta(insn, reads, self.hw, (1, *acc[a].shape))[0]
            else:
                new = d.update(insn, acc[a][None], reads, self.hw)[0]
            if mode == "sum":  # vta.cc's GEMM reset: acc 0, out the low bits of what it computed
                acc[a] = 0
                out[a] = self.sp.wrap_out(self.sp.wrap_acc(new))
            else:
                self._set_acc(a, new)

    def run(self) -> None:
        steps: dict[str, Callable[[Any, InstructionDef], None]] = {
            "load": self.load, "store": self.store, "compute": self.compute}
        for index, insn in enumerate(self.program.instructions):
            self.index, self.insn = index, insn
            d = definition_of(insn)
            try:  # implemented by hw (an intrinsic it lists, an ALU function alu.ops enables)
                check_fields(insn, self.hw)
            except IsaError as e:
                raise SimError(f"{self._where()}: {e}") from None
            if d.drains:
                break
            step = steps.get(d.role)
            if step is not None:
                step(insn, d)


def reference_dram(program: Program, hw: HwConfig,
                   inputs: Mapping[str, ArrayLike] | None = None) -> Dram:
    """Run ``program`` and return the final DRAM image."""
    dram = Dram(program, hw)
    dram.write_all(inputs or {})
    _Run(program, hw, dram).run()
    return dram


def run_reference(program: Program, hw: HwConfig,
                  inputs: Mapping[str, ArrayLike] | None = None) -> dict[str, np.ndarray]:
    """Run ``program`` on ``inputs`` (arrays by allocation name; missing ones are zero).

    Returns the final contents of *every* allocation by name (inputs included, micro-op
    allocations as uint32 words), shaped ``(elems, *entry shape)`` as ``vta.sim.dram``
    describes.
    """
    return reference_dram(program, hw, inputs).outputs()
