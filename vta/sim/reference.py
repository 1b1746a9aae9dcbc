"""The functional reference interpreter: the executable definition of the ISA, no timing.

Instructions run one after another in program order (the order a correctly synchronised
program's dependency tokens guarantee) until the first FINISH, or the end of the program if
there is none. Each instruction is written out as VTA_REFERENCE.md's pseudo-code reads:

* LOAD / STORE: explicit loops over rows and columns, one entry at a time, zeros in the pads;
* GEMM / ALU: ``for o in range(iter_out): for i in range(iter_in): for u in uops[bgn:end]``,
  one micro-op at a time and in that order (so a later micro-op sees an earlier one's write);
  GEMM does one ``(batch, block_in) @ (block_in, block_out)`` product per micro-op, ALU one
  Python-integer operation per lane;
* wraparound is explicit: results are computed exactly (Python ints, or int64 where nothing can
  overflow) and wrapped to the acc width by ``wrap``; ``out`` is ``wrap(acc, out bits)``.

This module deliberately shares no code with the cycle-level machine's vectorised kernels
(``vta.sim.kernels``, ``vta.sim.gemm``): only the DRAM image, the errors, the ISA and the
config. The differential tests compare the two, so a bug in either one shows up as a mismatch.
It is meant to be obviously correct, not fast: ResNet-18 C2 (514k micro-ops) takes seconds.

Bounds: every index an instruction uses is checked before the instruction writes anything; a
``BoundsError`` names the instruction, the buffer and the offending index (the same messages
as the machine's).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from vta.config import DTYPE_BITS, HwConfig
from vta.isa import Alu, AluOp, Finish, Gemm, Instruction, Load, Program, Store, uop_layout
from vta.sim.dram import Dram, entry_spec
from vta.sim.errors import BoundsError, where

__all__ = ["run_reference", "reference_dram", "wrap", "alu_scalar"]

#: data buffers (the micro-op buffer is kept apart, decoded)
_DATA = ("inp", "wgt", "acc", "out")


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


def alu_scalar(op: AluOp, x: int, y: int, bits: int) -> int:
    """One ALU lane: ``wrap(op(x, y))`` on exact integers. ``y`` is the immediate or the src
    element; for SHR it is the shift amount (negative: a left shift)."""
    if op == AluOp.MIN:
        r = min(x, y)
    elif op == AluOp.MAX:
        r = max(x, y)
    elif op == AluOp.ADD:
        r = x + y
    elif op == AluOp.MUL:
        r = x * y
    elif op == AluOp.SHR:
        if y >= 0:
            r = x >> y  # arithmetic: floor(x / 2**y); any y >= bits gives 0 or -1
        else:
            r = x << min(-y, bits)  # a left shift by >= bits leaves no low bits: wraps to 0
    else:  # pragma: no cover
        raise ValueError(f"unknown ALU op {op!r}")
    return wrap(r, bits)


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

    def _out_of_range(self, buffer: str, index: int, size: int, detail: str = "") -> BoundsError:
        return BoundsError(f"{self._where()}: {buffer} index {index} out of range "
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
            raise BoundsError(f"{self._where()}: DRAM {kind} element {last} (byte {end - 1}) is "
                              f"outside the DRAM image ({self.dram.buf.size} bytes)")

    # ------------------------------------------------------------------ DRAM entries

    def _dram_bytes(self, kind: str, elem: int) -> slice:
        eb = self.hw.elem_bytes(kind)
        return slice(elem * eb, (elem + 1) * eb)

    def _read_entry(self, kind: str, elem: int) -> np.ndarray:
        dtype, shape = entry_spec(self.hw, kind)  # little-endian, as DRAM holds it
        raw = self.dram.buf[self._dram_bytes(kind, elem)].tobytes()
        return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(np.int64)

    def _read_uop(self, elem: int) -> tuple[int, int, int]:
        word = int.from_bytes(self.dram.buf[self._dram_bytes("uop", elem)].tobytes(), "little")
        return self.sp.decode_uop(word)

    def _write_entry(self, kind: str, elem: int, value: np.ndarray) -> None:
        dtype, _ = entry_spec(self.hw, kind)
        self.dram.buf[self._dram_bytes(kind, elem)] = np.frombuffer(
            value.astype(dtype).tobytes(), dtype=np.uint8)

    # ------------------------------------------------------------------ instructions

    def load(self, insn: Load) -> None:
        kind = insn.mem.kind
        if insn.y_size == 0 or insn.x_size == 0:
            return  # VTA's token carrier: writes nothing, not even pads
        rows, cols = insn.rows, insn.cols
        self._check_entries(kind, insn.sram_base, rows * cols)
        self._check_dram(kind, insn.dram_base, insn.y_size, insn.x_size, insn.x_stride)
        for r in range(rows):
            for c in range(cols):
                entry = insn.sram_base + r * cols + c
                y, x = r - insn.pad_y0, c - insn.pad_x0
                inside = 0 <= y < insn.y_size and 0 <= x < insn.x_size
                elem = insn.dram_base + y * insn.x_stride + x
                if kind == "uop":
                    self.sp.uop[entry] = self._read_uop(elem) if inside else (0, 0, 0)
                elif inside:
                    self.sp.data[kind][entry] = self._read_entry(kind, elem)
                else:
                    self.sp.data[kind][entry] = 0

    def store(self, insn: Store) -> None:
        if insn.y_size == 0 or insn.x_size == 0:
            return
        self._check_entries("out", insn.sram_base, insn.y_size * insn.x_size)
        self._check_dram("out", insn.dram_base, insn.y_size, insn.x_size, insn.x_stride)
        for r in range(insn.y_size):  # row order: where rows overlap, the later row wins
            for c in range(insn.x_size):
                entry = insn.sram_base + r * insn.x_size + c
                elem = insn.dram_base + r * insn.x_stride + c
                self._write_entry("out", elem, self.sp.data["out"][entry])

    def _micro_ops(self, insn: Gemm | Alu) -> list[tuple[int, int, int, int, int, int]]:
        """``(o, i, uop position, dst, src, wgt)`` of every micro-op execution, in loop order."""
        if insn.uop_end > self.sp.depth["uop"]:
            raise self._out_of_range("uop", insn.uop_end - 1, self.sp.depth["uop"],
                                     f" (uop range {insn.uop_bgn}:{insn.uop_end})")
        wgt_out, wgt_in = (insn.wgt_factor_out, insn.wgt_factor_in) if isinstance(insn, Gemm) \
            else (0, 0)
        ops = []
        for o in range(insn.iter_out):
            for i in range(insn.iter_in):
                for k in range(insn.uop_bgn, insn.uop_end):
                    dst, src, wgt = self.sp.uop[k]
                    ops.append((o, i, k,
                                dst + o * insn.dst_factor_out + i * insn.dst_factor_in,
                                src + o * insn.src_factor_out + i * insn.src_factor_in,
                                wgt + o * wgt_out + i * wgt_in))
        return ops

    def _check_ops(self, ops: list[tuple[int, int, int, int, int, int]], column: int,
                   buffer: str, kind: str) -> None:
        """The index in ``column`` (3 dst, 4 src, 5 wgt) of every micro-op fits ``kind``."""
        size = self.sp.depth[kind]
        for op in ops:
            if op[column] >= size:
                o, i, k = op[:3]
                raise self._out_of_range(buffer, op[column], size,
                                         f" at iteration o={o}, i={i}, uop {k}")

    def _set_acc(self, entry: int, value: np.ndarray) -> None:
        """``acc[entry] = wrap(value)``, and ``out[entry]`` = its low out-dtype bits."""
        acc = self.sp.wrap_acc(value)
        self.sp.data["acc"][entry] = acc
        self.sp.data["out"][entry] = self.sp.wrap_out(acc)

    def gemm(self, insn: Gemm) -> None:
        ops = self._micro_ops(insn)
        self._check_ops(ops, 3, "acc", "acc")
        if not insn.reset:  # a reset reads neither inp nor wgt
            self._check_ops(ops, 4, "inp", "inp")
            self._check_ops(ops, 5, "wgt", "wgt")
        acc, inp, wgt = self.sp.data["acc"], self.sp.data["inp"], self.sp.data["wgt"]
        for _, _, _, a, x, w in ops:
            if insn.reset:
                self._set_acc(a, np.zeros_like(acc[a]))
            else:
                # int64 is exact: |acc| <= 2**31, plus block_in products of at most 2**30 each
                self._set_acc(a, acc[a] + inp[x] @ wgt[w].T)

    def alu(self, insn: Alu) -> None:
        ops = self._micro_ops(insn)
        self._check_ops(ops, 3, "acc", "acc")
        if not (insn.use_imm or insn.reset):
            self._check_ops(ops, 4, "acc (ALU src)", "acc")
        acc, bits = self.sp.data["acc"], self.sp.acc_bits
        for _, _, _, a, s, _ in ops:
            if insn.reset:
                self._set_acc(a, np.zeros_like(acc[a]))
                continue
            xs = acc[a].ravel().tolist()
            ys = [insn.imm] * len(xs) if insn.use_imm else acc[s].ravel().tolist()
            lanes = [alu_scalar(insn.op, x, y, bits) for x, y in zip(xs, ys, strict=True)]
            self._set_acc(a, np.array(lanes, dtype=np.int64).reshape(acc[a].shape))

    def run(self) -> None:
        for index, insn in enumerate(self.program.instructions):
            self.index, self.insn = index, insn
            if isinstance(insn, Load):
                self.load(insn)
            elif isinstance(insn, Store):
                self.store(insn)
            elif isinstance(insn, Gemm):
                self.gemm(insn)
            elif isinstance(insn, Alu):
                self.alu(insn)
            elif isinstance(insn, Finish):
                break


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
