"""The cycle-level machine's on-chip state and its vectorised LOAD, STORE and ALU steps.

This is the machine's fast implementation, not the definition: ``reference.py`` is the ISA's
executable definition (plain loops, sharing no code with this module or ``gemm.py``), and the
differential tests check the two against each other. GEMM is ``gemm.py``'s grouped kernel,
which uses the index helpers here.

The semantics they implement (defined by reference.py; see docs/simulator.md):

* LOAD copies ``y_size`` rows of ``x_size`` entries (rows ``x_stride`` entries apart in DRAM) into
  a contiguous SRAM image of ``(pad_y0 + y + pad_y1) x (pad_x0 + x + pad_x1)`` entries, zeros in
  the pads. A LOAD with ``y_size`` or ``x_size`` 0 writes nothing (not even pads).
* GEMM: ``acc[a] = 0`` with reset, else ``acc[a] += inp[x] . wgt[w]^T`` wrapping to acc dtype.
* ALU: ``acc[a] = wrap(op(acc[a], imm or acc[s]))``, executed in loop order (a later micro-op
  sees an earlier one's write). Results are computed exactly, then wrapped to the acc dtype.
  SHR by ``s`` is ``floor(x / 2**s)`` for ``s >= 0`` (any ``s >= width`` gives 0 or -1) and
  ``x * 2**-s`` wrapped for ``s < 0`` (any ``-s >= width`` gives 0).
* Narrowing: after GEMM and ALU, ``out[a]`` = the low out-dtype bits of ``acc[a]`` (two's
  complement truncation).
* STORE copies ``y_size x x_size`` contiguous out entries to DRAM rows ``x_stride`` apart;
  overlapping rows are written in row order (the later row wins).

Every SRAM index and DRAM byte is bounds-checked first; a violation raises ``BoundsError``
naming the instruction, the buffer and the offending index, before anything is modified.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vta.config import HwConfig
from vta.isa import Alu, AluOp, Gemm, Instruction, Load, Program, Store, uop_layout
from vta.sim.dram import Dram, entry_spec
from vta.sim.errors import BoundsError, where

__all__ = ["Sram", "Ctx", "exec_load", "exec_store", "exec_alu", "gemm_indices",
           "alu_indices", "apply_gemm_sums", "count_raw_hazards"]


@dataclass(frozen=True, slots=True)
class Ctx:
    """Which instruction is executing (for error messages)."""

    index: int
    insn: Instruction
    program: Program | None

    def bounds(self, buffer: str, index: int, size: int, detail: str = "") -> BoundsError:
        return BoundsError(f"{where(self.index, self.insn, self.program)}: {buffer} index "
                           f"{index} out of range (size {size}){detail}")


class Sram:
    """The five scratchpads. Micro-ops are kept decoded as three int64 index arrays."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.depth = {k: hw.depth(k) for k in ("uop", "inp", "wgt", "acc", "out")}
        self.uop = np.zeros((3, self.depth["uop"]), dtype=np.int64)  # rows: dst, src, wgt
        self.data: dict[str, np.ndarray] = {}
        for kind in ("inp", "wgt", "acc", "out"):
            dtype, shape = entry_spec(hw, kind)
            self.data[kind] = np.zeros((self.depth[kind], *shape), dtype=dtype.newbyteorder("="))
        self.acc_dtype = self.data["acc"].dtype
        self.out_dtype = self.data["out"].dtype
        self._uop_fields = [(pos, (1 << width) - 1) for _, pos, width in uop_layout(hw)]

    def decode_uops(self, words: np.ndarray) -> np.ndarray:
        """uint32 words -> (3, n) int64 (dst, src, wgt)."""
        w = words.astype(np.int64)
        return np.stack([(w >> pos) & mask for pos, mask in self._uop_fields])


# ------------------------------------------------------------------------------ DMA


def dram_rows(dram: Dram, ctx: Ctx, kind: str, base: int, rows: int, cols: int,
              stride: int) -> np.ndarray:
    """A ``(rows, cols * elem_bytes)`` uint8 strided view of DRAM, bounds-checked."""
    eb = dram.hw.elem_bytes(kind)
    end = (base + (rows - 1) * stride + cols) * eb
    if end > dram.buf.size:
        last = base + (rows - 1) * stride + cols - 1
        raise BoundsError(f"{where(ctx.index, ctx.insn, ctx.program)}: DRAM {kind} element "
                          f"{last} (byte {end - 1}) is outside the DRAM image "
                          f"({dram.buf.size} bytes)")
    return np.lib.stride_tricks.as_strided(dram.buf[base * eb:], shape=(rows, cols * eb),
                                           strides=(stride * eb, 1))


def _check_sram(ctx: Ctx, sram: Sram, kind: str, base: int, n: int) -> None:
    if base + n > sram.depth[kind]:
        raise ctx.bounds(kind, base + n - 1, sram.depth[kind],
                         f" (entries {base}..{base + n - 1})")


def exec_load(sram: Sram, dram: Dram, insn: Load, ctx: Ctx) -> tuple[str, int, int]:
    """Execute a LOAD; returns ``(kind, first, end)``: the SRAM entries it wrote."""
    kind = insn.mem.kind
    n = insn.sram_elems
    if n == 0:
        return kind, insn.sram_base, insn.sram_base
    _check_sram(ctx, sram, kind, insn.sram_base, n)
    raw = dram_rows(dram, ctx, kind, insn.dram_base, insn.y_size, insn.x_size, insn.x_stride)
    dtype, shape = entry_spec(dram.hw, kind)
    data = np.ascontiguousarray(raw).view(dtype).reshape(insn.y_size, insn.x_size, *shape)
    y0, x0 = insn.pad_y0, insn.pad_x0
    lo, hi = insn.sram_base, insn.sram_base + n
    if kind == "uop":
        img = np.zeros((insn.rows, insn.cols), dtype=np.uint32)
        img[y0:y0 + insn.y_size, x0:x0 + insn.x_size] = data
        sram.uop[:, lo:hi] = sram.decode_uops(img.ravel())
    else:
        img = sram.data[kind][lo:hi].reshape(insn.rows, insn.cols, *shape)
        img[...] = 0
        img[y0:y0 + insn.y_size, x0:x0 + insn.x_size] = data
    return kind, lo, hi


def exec_store(sram: Sram, dram: Dram, insn: Store, ctx: Ctx) -> None:
    """Execute a STORE of out entries to DRAM."""
    n = insn.sram_elems
    if n == 0:
        return
    _check_sram(ctx, sram, "out", insn.sram_base, n)
    dst = dram_rows(dram, ctx, "out", insn.dram_base, insn.y_size, insn.x_size, insn.x_stride)
    dtype, _ = entry_spec(dram.hw, "out")
    src = sram.data["out"][insn.sram_base: insn.sram_base + n].astype(dtype)
    src = src.view(np.uint8).reshape(insn.y_size, -1)
    if insn.y_size > 1 and insn.x_stride < insn.x_size:  # overlapping rows: in row order
        for r in range(insn.y_size):
            dst[r] = src[r]
    else:
        dst[...] = src


# ------------------------------------------------------------------------------ loop indices


def _loop(base: np.ndarray, iter_out: int, iter_in: int, f_out: int, f_in: int) -> np.ndarray:
    """``base[u] + o*f_out + i*f_in`` for every (o, i, u) in loop order, flattened."""
    o = np.arange(iter_out, dtype=np.int64)[:, None, None] * f_out
    i = np.arange(iter_in, dtype=np.int64)[None, :, None] * f_in
    return (base[None, None, :] + o + i).ravel()


def _check_index(ctx: Ctx, buffer: str, idx: np.ndarray, size: int,
                 dims: tuple[int, int, int], uop_bgn: int) -> None:
    if idx.size and int(idx.max()) >= size:
        k = int(np.argmax(idx >= size))
        o, i, u = np.unravel_index(k, dims)
        raise ctx.bounds(buffer, int(idx[k]), size,
                         f" at iteration o={o}, i={i}, uop {uop_bgn + u}")


def _uop_range(sram: Sram, insn: Gemm | Alu, ctx: Ctx) -> np.ndarray:
    if insn.uop_end > sram.depth["uop"]:
        raise ctx.bounds("uop", insn.uop_end - 1, sram.depth["uop"],
                         f" (uop range {insn.uop_bgn}:{insn.uop_end})")
    return sram.uop[:, insn.uop_bgn: insn.uop_end]


def gemm_indices(sram: Sram, insn: Gemm, ctx: Ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """acc, inp and wgt index of every tensor op, in loop order, bounds-checked."""
    u = _uop_range(sram, insn, ctx)
    dims = (insn.iter_out, insn.iter_in, u.shape[1])
    a = _loop(u[0], insn.iter_out, insn.iter_in, insn.dst_factor_out, insn.dst_factor_in)
    x = _loop(u[1], insn.iter_out, insn.iter_in, insn.src_factor_out, insn.src_factor_in)
    w = _loop(u[2], insn.iter_out, insn.iter_in, insn.wgt_factor_out, insn.wgt_factor_in)
    _check_index(ctx, "acc", a, sram.depth["acc"], dims, insn.uop_bgn)
    if not insn.reset:  # a reset reads neither inp nor wgt
        _check_index(ctx, "inp", x, sram.depth["inp"], dims, insn.uop_bgn)
        _check_index(ctx, "wgt", w, sram.depth["wgt"], dims, insn.uop_bgn)
    return a, x, w


def alu_indices(sram: Sram, insn: Alu, ctx: Ctx) -> tuple[np.ndarray, np.ndarray | None]:
    """dst (and, for a register operand, src) acc index of every op, bounds-checked."""
    u = _uop_range(sram, insn, ctx)
    dims = (insn.iter_out, insn.iter_in, u.shape[1])
    a = _loop(u[0], insn.iter_out, insn.iter_in, insn.dst_factor_out, insn.dst_factor_in)
    _check_index(ctx, "acc", a, sram.depth["acc"], dims, insn.uop_bgn)
    if insn.use_imm or insn.reset:
        return a, None
    s = _loop(u[1], insn.iter_out, insn.iter_in, insn.src_factor_out, insn.src_factor_in)
    _check_index(ctx, "acc (ALU src)", s, sram.depth["acc"], dims, insn.uop_bgn)
    return a, s


# ------------------------------------------------------------------------------ GEMM


def apply_gemm_sums(sram: Sram, entries: np.ndarray, sums: np.ndarray) -> None:
    """``acc[entries] += sums`` (exact int64 sums), wrapped; then narrow into out."""
    acc = sram.data["acc"]
    new = (acc[entries].astype(np.int64) + sums).astype(sram.acc_dtype)
    acc[entries] = new
    sram.data["out"][entries] = new.astype(sram.out_dtype)


def _reset(sram: Sram, a: np.ndarray) -> None:
    sram.data["acc"][a] = 0
    sram.data["out"][a] = 0


# ------------------------------------------------------------------------------ ALU


def alu_apply(op: AluOp, x: np.ndarray, y: np.ndarray | np.int64) -> np.ndarray:
    """The exact (int64) result of ``op(x, y)``; the caller wraps it to the acc dtype."""
    if op == AluOp.MIN:
        return np.minimum(x, y)
    if op == AluOp.MAX:
        return np.maximum(x, y)
    if op == AluOp.ADD:
        return x + y
    if op == AluOp.MUL:
        return x * y
    if op == AluOp.SHR:
        # x is at most 32 bits wide, so clamping the amount to 63 changes nothing: x >> 63 is
        # already 0 or -1, and x << 63 has no bits left below bit 32.
        s = np.broadcast_to(np.asarray(y, dtype=np.int64), np.broadcast(x, y).shape)
        right = x >> np.clip(s, 0, 63)
        left = (x.astype(np.uint64) << np.clip(-s, 0, 63).astype(np.uint64)).astype(np.int64)
        return np.where(s >= 0, right, left)
    raise ValueError(f"unknown ALU op {op!r}")  # pragma: no cover


def _needs_order(a: np.ndarray, s: np.ndarray | None, depth: int) -> bool:
    """Whether loop order matters: a dst repeats, or a src reads an earlier op's dst."""
    if np.unique(a).size != a.size:
        return True
    if s is None:
        return False
    written_at = np.full(depth, a.size, dtype=np.int64)  # op position writing each entry
    written_at[a] = np.arange(a.size)
    return bool(np.any(written_at[s] < np.arange(a.size)))


def exec_alu(sram: Sram, insn: Alu, ctx: Ctx) -> tuple[np.ndarray, np.ndarray | None]:
    """Execute an ALU instruction with loop-order semantics (vectorised when order is moot).

    Returns the dst and src acc indices it used (src None for an immediate or a reset)."""
    a, s = alu_indices(sram, insn, ctx)
    if a.size == 0:
        return a, s
    if insn.reset:
        _reset(sram, a)
        return a, s
    acc, out = sram.data["acc"], sram.data["out"]
    imm = np.int64(insn.imm)
    if not _needs_order(a, s, sram.depth["acc"]):
        y = imm if s is None else acc[s].astype(np.int64)
        new = alu_apply(insn.op, acc[a].astype(np.int64), y).astype(sram.acc_dtype)
        acc[a] = new
        out[a] = new.astype(sram.out_dtype)
        return a, s
    for k in range(a.size):  # a dependence inside the instruction: one op at a time
        y = imm if s is None else acc[s[k]].astype(np.int64)
        new = alu_apply(insn.op, acc[a[k]].astype(np.int64), y).astype(sram.acc_dtype)
        acc[a[k]] = new
        out[a[k]] = new.astype(sram.out_dtype)
    return a, s


# ------------------------------------------------------------------------------ hazards


def count_raw_hazards(writes: np.ndarray, reads: tuple[np.ndarray, ...], max_lag: int) -> int:
    """Reads of an acc entry that one of the previous ``max_lag`` ops (in loop order) writes.

    With initiation interval ``ii`` and pipeline depth ``d``, op ``k`` writes back ``d`` cycles
    after issue while op ``j`` reads at ``(j - k) * ii`` cycles after it, so the lags at risk are
    ``1 .. ceil(d / ii) - 1``.
    """
    total = 0
    for lag in range(1, min(max_lag, writes.size - 1) + 1):
        for r in reads:
            total += int(np.count_nonzero(r[lag:] == writes[:-lag]))
    return total
