"""128-bit instruction and 32-bit micro-op encoding, with widths derived from the HwConfig.

The layout follows VTA's hw_spec.h: the word is built from two 64-bit halves and no field
crosses bit 64. Fields are packed from bit 0 of each half in the order listed in ``_LAYOUTS``;
for the pynq config this reproduces VTA's bit positions exactly (opcode 0-2, flags 3-6; LOAD
memory type 7-9, SRAM base 10-25, DRAM base 26-57, y_size 64-79, ...; GEMM reset 7, uop_bgn
8-20, uop_end 21-34, iter_out 35-48, iter_in 49-62, dst factors 64-85, src 86-107, wgt
108-127; ALU opcode 108-110, use_imm 111, imm 112-127).
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache

import numpy as np

from vta.config import HwConfig, IsaWidths
from vta.errors import VtaError
from vta.isa.insn import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    Load,
    MemType,
    Opcode,
    Store,
    Uop,
)

__all__ = ["IsaError", "encode", "decode", "encode_uop", "decode_uop", "layout", "uop_layout",
           "encode_program", "decode_program", "check_fields"]


class IsaError(VtaError, ValueError):
    """An instruction cannot be encoded (a field is out of range) or a word cannot be decoded."""


Field = tuple[str, int]  # (name, width in bits)


def _head() -> list[Field]:
    return [("opcode", 3), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1), ("push_next", 1)]


@lru_cache(maxsize=64)
def _layouts(w: IsaWidths) -> dict[Opcode, tuple[tuple[Field, ...], tuple[Field, ...]]]:
    mem_lo = [*_head(), ("mem", 3), ("sram_base", w.sram_addr), ("dram_base", w.dram_addr)]
    mem_hi = [("y_size", w.mem_size), ("x_size", w.mem_size), ("x_stride", w.mem_size),
              ("pad_y0", w.pad), ("pad_y1", w.pad), ("pad_x0", w.pad), ("pad_x1", w.pad)]
    loop_lo = [*_head(), ("reset", 1), ("uop_bgn", w.uop_idx), ("uop_end", w.uop_idx + 1),
               ("iter_out", w.loop_iter), ("iter_in", w.loop_iter)]
    gemm_hi = [("dst_factor_out", w.acc_idx), ("dst_factor_in", w.acc_idx),
               ("src_factor_out", w.inp_idx), ("src_factor_in", w.inp_idx),
               ("wgt_factor_out", w.wgt_idx), ("wgt_factor_in", w.wgt_idx)]
    alu_hi = [("dst_factor_out", w.acc_idx), ("dst_factor_in", w.acc_idx),
              ("src_factor_out", w.acc_idx), ("src_factor_in", w.acc_idx),
              ("op", w.alu_opcode), ("use_imm", 1), ("imm", w.imm)]
    return {
        Opcode.LOAD: (tuple(mem_lo), tuple(mem_hi)),
        Opcode.STORE: (tuple(mem_lo), tuple(mem_hi)),
        Opcode.GEMM: (tuple(loop_lo), tuple(gemm_hi)),
        Opcode.ALU: (tuple(loop_lo), tuple(alu_hi)),
        Opcode.FINISH: (tuple(_head()), ()),
    }


def layout(hw: HwConfig, opcode: Opcode) -> list[tuple[str, int, int]]:
    """``(field, first bit, width)`` for every field of ``opcode``'s format (for docs and tests)."""
    out = []
    for base, half in zip((0, 64), _layouts(hw.isa)[opcode], strict=True):
        pos = base
        for name, width in half:
            out.append((name, pos, width))
            pos += width
    return out


def uop_layout(hw: HwConfig) -> list[tuple[str, int, int]]:
    """``(field, first bit, width)`` of the 32-bit micro-op."""
    w = hw.isa
    return [("dst", 0, w.acc_idx), ("src", w.acc_idx, w.uop_src),
            ("wgt", w.acc_idx + w.uop_src, w.wgt_idx)]


_SIGNED = frozenset({"imm"})
_KIND = {Opcode.LOAD: Load, Opcode.STORE: Store, Opcode.GEMM: Gemm, Opcode.ALU: Alu,
         Opcode.FINISH: Finish}


def _values(insn: Instruction) -> dict[str, int]:
    vals: dict[str, int] = {"opcode": int(insn.opcode)}
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
        vals[flag] = int(getattr(insn.deps, flag))
    for f in fields(insn):
        if f.name != "deps":
            vals[f.name] = int(getattr(insn, f.name))
    if isinstance(insn, Store):
        for p in ("pad_y0", "pad_y1", "pad_x0", "pad_x1"):
            vals[p] = 0
    return vals


def _range(name: str, width: int) -> tuple[int, int]:
    if name in _SIGNED:
        return -(1 << (width - 1)), (1 << (width - 1)) - 1
    return 0, (1 << width) - 1


def check_fields(insn: Instruction, hw: HwConfig) -> None:
    """Raise IsaError naming the instruction and field if any value does not fit its field."""
    vals = _values(insn)
    lo_f, hi_f = _layouts(hw.isa)[insn.opcode]
    for name, width in lo_f + hi_f:
        lo, hi = _range(name, width)
        v = vals[name]
        if not lo <= v <= hi:
            raise IsaError(f"{type(insn).__name__.upper()}: field {name}={v} does not fit in "
                           f"{width} bits (allowed {lo}..{hi})")
    if isinstance(insn, (Load, Store)) and insn.mem not in _MEM_OK[type(insn)]:
        raise IsaError(f"{type(insn).__name__.upper()}: field mem={insn.mem.name} is not a valid "
                       f"target (allowed {', '.join(m.name for m in _MEM_OK[type(insn)])})")
    if isinstance(insn, (Gemm, Alu)) and insn.uop_end < insn.uop_bgn:
        raise IsaError(f"{type(insn).__name__.upper()}: uop_end={insn.uop_end} is before "
                       f"uop_bgn={insn.uop_bgn}")


_MEM_OK = {Load: (MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC), Store: (MemType.OUT,)}


def encode(insn: Instruction, hw: HwConfig) -> int:
    """The 128-bit word of ``insn`` as a Python int (bit 0 = least significant)."""
    check_fields(insn, hw)
    vals = _values(insn)
    word = 0
    for base, half in zip((0, 64), _layouts(hw.isa)[insn.opcode], strict=True):
        pos = base
        for name, width in half:
            word |= (vals[name] & ((1 << width) - 1)) << pos
            pos += width
    return word


def decode(word: int, hw: HwConfig) -> Instruction:
    """The instruction a 128-bit word encodes; IsaError for an unknown opcode or memory type."""
    if not 0 <= word < 1 << 128:
        raise IsaError(f"instruction word {word:#x} is not a 128-bit value")
    op_val = word & 0b111
    try:
        opcode = Opcode(op_val)
    except ValueError:
        raise IsaError(f"instruction word {word:#034x}: unknown opcode {op_val}") from None
    vals: dict[str, int] = {}
    for base, half in zip((0, 64), _layouts(hw.isa)[opcode], strict=True):
        pos = base
        for name, width in half:
            v = (word >> pos) & ((1 << width) - 1)
            if name in _SIGNED and v >> (width - 1):
                v -= 1 << width
            vals[name] = v
            pos += width
    deps = Deps(*(bool(vals.pop(f)) for f in ("pop_prev", "pop_next", "push_prev", "push_next")))
    vals.pop("opcode")
    cls = _KIND[opcode]
    if opcode in (Opcode.LOAD, Opcode.STORE):
        try:
            vals["mem"] = MemType(vals["mem"])
        except ValueError:
            raise IsaError(f"instruction word {word:#034x}: unknown memory type {vals['mem']}") \
                from None
        if opcode == Opcode.STORE:
            for p in ("pad_y0", "pad_y1", "pad_x0", "pad_x1"):
                vals.pop(p)
    if opcode in (Opcode.GEMM, Opcode.ALU):
        vals["reset"] = bool(vals["reset"])
    if opcode == Opcode.ALU:
        try:
            vals["op"] = AluOp(vals["op"])
        except ValueError:
            raise IsaError(f"instruction word {word:#034x}: unknown ALU opcode {vals['op']}") \
                from None
        vals["use_imm"] = bool(vals["use_imm"])
    return cls(deps=deps, **vals)


def encode_uop(uop: Uop, hw: HwConfig) -> int:
    """The 32-bit word of a micro-op."""
    word = 0
    for name, pos, width in uop_layout(hw):
        v = getattr(uop, name)
        if not 0 <= v < 1 << width:
            raise IsaError(f"UOP: field {name}={v} does not fit in {width} bits "
                           f"(allowed 0..{(1 << width) - 1})")
        word |= v << pos
    return word


def decode_uop(word: int, hw: HwConfig) -> Uop:
    vals = {name: (word >> pos) & ((1 << width) - 1) for name, pos, width in uop_layout(hw)}
    return Uop(**vals)


def encode_program(insns: list[Instruction] | tuple[Instruction, ...], hw: HwConfig) -> np.ndarray:
    """Instructions as a ``(n, 2)`` uint64 array (low half, high half), as DRAM holds them.

    An out-of-range field raises IsaError naming the instruction's index.
    """
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    for i, insn in enumerate(insns):
        try:
            w = encode(insn, hw)
        except IsaError as e:
            raise IsaError(f"instruction {i}: {e}") from None
        out[i, 0] = w & 0xFFFF_FFFF_FFFF_FFFF
        out[i, 1] = w >> 64
    return out


def decode_program(words: np.ndarray, hw: HwConfig) -> list[Instruction]:
    """Inverse of ``encode_program``."""
    res = []
    for i, (lo, hi) in enumerate(np.asarray(words, dtype=np.uint64).reshape(-1, 2)):
        try:
            res.append(decode(int(lo) | (int(hi) << 64), hw))
        except IsaError as e:
            raise IsaError(f"instruction {i}: {e}") from None
    return res
