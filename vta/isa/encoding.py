"""128-bit instruction and 32-bit micro-op encoding, with widths derived from the HwConfig.

The layout follows VTA's hw_spec.h: the word is built from two 64-bit halves and no field
crosses bit 64. Each instruction's fields come from its definition (``vta.isa.defs``, the
built-ins in ``vta.isa.builtins``), packed from bit 0 of each half in the order listed there,
after the common head (opcode, four dependency flags); for the pynq config this reproduces
VTA's bit positions exactly (opcode 0-2, flags 3-6; LOAD memory type 7-9, SRAM base 10-25, DRAM
base 26-57, y_size 64-79, ...; GEMM reset 7, uop_bgn 8-20, uop_end 21-34, iter_out 35-48,
iter_in 49-62, dst factors 64-85, src 86-107, wgt 108-127; ALU opcode 108-110, use_imm 111,
imm 112-127). Decoding reads the opcode, then (for a family sharing it, like the ALU's
functions) the function field, and builds the instance of that definition's class.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import fields
from enum import Enum
from functools import lru_cache
from typing import Any

import numpy as np

from vta.config import HwConfig
from vta.errors import DefinitionError, IsaError
from vta.isa.defs import (
    HEAD_FLAGS,
    Field,
    InstructionDef,
    by_name,
    decode_table,
    definition_of,
    family,
    layout_of,
    require,
)
from vta.isa.insn import Deps, Instruction, Uop
from vta.words import INSN_BITS, INSN_HALF_BITS

__all__ = ["IsaError", "encode", "decode", "encode_uop", "decode_uop", "layout", "uop_layout",
           "encode_program", "decode_program", "encode_uops", "decode_uops", "check_fields",
           "insn_label"]


def insn_label(insn: Any) -> str:
    """How field errors name an instruction: its class in capitals (``GEMM``, ``ALU``)."""
    return type(insn).__name__.upper()


def _definition(ref: InstructionDef | str | int) -> InstructionDef:
    if isinstance(ref, InstructionDef):
        return ref
    if isinstance(ref, str):
        return by_name(ref)
    fam = family(int(ref))
    if not fam:
        raise IsaError(f"no instruction has opcode {int(ref)}")
    return fam[0]  # a family's members share the layout up to their function field


def layout(hw: HwConfig, which: InstructionDef | str | int) -> list[tuple[str, int, int]]:
    """``(field, first bit, width)`` of every field of an instruction format: a definition, its
    name (``"ALU.ADD"``) or an opcode (a family's first member). For docs and tests."""
    out = []
    for base, half in zip((0, INSN_HALF_BITS), layout_of(_definition(which), hw), strict=True):
        pos = base
        for f in half:
            out.append((f.name, pos, f.width))
            pos += f.width
    return out


def uop_layout(hw: HwConfig) -> list[tuple[str, int, int]]:
    """``(field, first bit, width)`` of the 32-bit micro-op."""
    w = hw.isa
    return [("dst", 0, w.acc_idx), ("src", w.acc_idx, w.uop_src),
            ("wgt", w.acc_idx + w.uop_src, w.wgt_idx)]


def _values(d: InstructionDef, insn: Any) -> dict[str, int]:
    vals: dict[str, int] = {"opcode": d.opcode}
    for flag in HEAD_FLAGS:
        vals[flag] = int(getattr(insn.deps, flag))
    for f in fields(insn):
        if f.name != "deps":
            vals[f.name] = int(getattr(insn, f.name))
    if d.function is not None:
        vals[d.function[0]] = d.function[1]
    return vals


def _all_fields(d: InstructionDef, hw: HwConfig) -> tuple[Field, ...]:
    lo, hi = layout_of(d, hw)
    return (*lo, *hi)


def check_fields(insn: Instruction, hw: HwConfig) -> None:
    """Raise IsaError naming the instruction and field if any value does not fit its field, the
    definition's own checks fail, or ``hw`` does not implement the instruction."""
    d = definition_of(insn)
    try:
        require(d, hw)
    except DefinitionError as e:
        raise IsaError(str(e)) from None
    vals = _values(d, insn)
    label = insn_label(insn)
    for f in _all_fields(d, hw):
        if f.name not in vals:
            continue  # reserved bits (or pads a STORE does not carry): encoded as 0
        lo, hi = f.range
        v = vals[f.name]
        if not lo <= v <= hi:
            raise IsaError(f"{label}: field {f.name}={v} does not fit in {f.width} bits "
                           f"(allowed {lo}..{hi})")
    if d.check is not None:
        why = d.check(insn, hw)
        if why:
            raise IsaError(f"{label}: {why}")


def encode(insn: Instruction, hw: HwConfig) -> int:
    """The 128-bit word of ``insn`` as a Python int (bit 0 = least significant)."""
    check_fields(insn, hw)
    d = definition_of(insn)
    vals = _values(d, insn)
    word = 0
    for base, half in zip((0, INSN_HALF_BITS), layout_of(d, hw), strict=True):
        pos = base
        for f in half:
            word |= (vals.get(f.name, 0) & ((1 << f.width) - 1)) << pos
            pos += f.width
    return word


@lru_cache(maxsize=64)
def _converters(cls: type) -> dict[str, Callable[[int], Any]]:
    """How to turn a decoded integer into each dataclass field's value (bool, enum or int)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # pragma: no cover - unresolvable annotations: keep ints
        hints = {}
    out: dict[str, Callable[[int], Any]] = {}
    for f in fields(cls):
        t = hints.get(f.name, int)
        if t is bool:
            out[f.name] = bool
            continue
        members = [a for a in typing.get_args(t) if isinstance(a, type)] or [t]
        enum = next((m for m in members if isinstance(m, type) and issubclass(m, Enum)), None)
        if enum is not None:
            out[f.name] = _enum_or_int(enum, int in members)
        else:
            out[f.name] = int
    return out


def _enum_or_int(enum: type[Enum], int_ok: bool) -> Callable[[int], Any]:
    def conv(v: int) -> Any:
        try:
            return enum(v)
        except ValueError:
            if int_ok:
                return v
            raise
    return conv


def _read(word: int, half: tuple[Field, ...], base: int, vals: dict[str, int]) -> None:
    pos = base
    for f in half:
        v = (word >> pos) & ((1 << f.width) - 1)
        if f.signed and v >> (f.width - 1):
            v -= 1 << f.width
        vals[f.name] = v
        pos += f.width


_UNKNOWN = {"mem": "memory type"}


def decode(word: int, hw: HwConfig) -> Instruction:
    """The instruction a 128-bit word encodes; IsaError for an unknown opcode, function or
    field value (e.g. a memory type)."""
    if not 0 <= word < 1 << INSN_BITS:
        raise IsaError(f"instruction word {word:#x} is not a {INSN_BITS}-bit value")
    op_val = word & ((1 << hw.isa.opcode) - 1)
    entry = decode_table(hw).get(op_val)
    if entry is None:
        raise IsaError(f"instruction word {word:#034x}: unknown opcode {op_val}")
    pos, members = entry
    key = None
    if pos is not None:
        key = (word >> pos[0]) & ((1 << pos[1]) - 1)
    d = members.get(key)
    if d is None:
        first = next(iter(members.values()))
        assert first.function is not None  # only a family is looked up by function
        fam, fname = first.name.split(".")[0], first.function[0]
        label = f"{fam} opcode" if fname == "op" else f"{fam} {fname}"
        raise IsaError(f"instruction word {word:#034x}: unknown {label} {key}")
    vals: dict[str, int] = {}
    for base, half in zip((0, INSN_HALF_BITS), layout_of(d, hw), strict=True):
        _read(word, half, base, vals)
    deps = Deps(*(bool(vals.pop(f)) for f in HEAD_FLAGS))
    conv = _converters(d.cls)
    kwargs: dict[str, Any] = {}
    for name, fn in conv.items():
        if name == "deps":
            continue
        v = d.function[1] if d.function is not None and name == d.function[0] else vals.get(name, 0)
        try:
            kwargs[name] = fn(v)
        except ValueError:
            what = _UNKNOWN.get(name, f"{name} value")
            raise IsaError(f"instruction word {word:#034x}: unknown {what} {v}") from None
    return d.cls(deps=deps, **kwargs)  # type: ignore[no-any-return]


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


def encode_uops(uops: Iterable[Uop], hw: HwConfig) -> np.ndarray:
    """Micro-ops as a uint32 array of their words (``encode_uop`` of each)."""
    return np.array([encode_uop(u, hw) for u in uops], dtype=np.uint32)


def decode_uops(words: np.ndarray, hw: HwConfig) -> list[Uop]:
    """Inverse of ``encode_uops`` (``decode_uop`` of every word, the fields extracted with
    numpy at once)."""
    w = np.asarray(words, dtype=np.uint32).astype(np.int64)
    cols = {name: ((w >> pos) & ((1 << width) - 1)).tolist()
            for name, pos, width in uop_layout(hw)}
    return [Uop(*r) for r in zip(*(cols[f.name] for f in fields(Uop)), strict=True)]


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
    """Inverse of ``encode_program``: ``decode`` of every word, the fields of all words of one
    definition extracted at once with numpy (a compile cache decodes tens of thousands of
    instructions per run: word by word in Python that costs about 30 µs each). A word that
    does not decode is an IsaError naming its index, with ``decode``'s message."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    out: list[Any] = [None] * len(w)
    halves = (w[:, 0], w[:, 1])
    table = decode_table(hw)
    opcodes = _bits(halves[0], 0, hw.isa.opcode)
    for op_val in np.unique(opcodes).tolist():
        rows = np.flatnonzero(opcodes == op_val)
        entry = table.get(op_val)
        if entry is None:
            _decode_one(w, int(rows[0]), hw)  # raises, naming the word
        pos, members = entry  # type: ignore[misc]
        keys = np.full(len(rows), -1, dtype=np.int64) if pos is None else \
            _bits(halves[pos[0] // INSN_HALF_BITS][rows], pos[0] % INSN_HALF_BITS, pos[1])
        for key in np.unique(keys).tolist():
            sel = rows[keys == key]
            d = members.get(None if pos is None else key)
            if d is None:
                _decode_one(w, int(sel[0]), hw)
            assert d is not None
            try:
                insns = _decode_group(d, [h[sel] for h in halves], hw)
            except ValueError:  # a field value its type refuses (a memory type)
                insns = [_decode_one(w, int(i), hw) for i in sel.tolist()]
            for i, insn in zip(sel.tolist(), insns, strict=True):
                out[i] = insn
    return out


def _decode_one(w: np.ndarray, i: int, hw: HwConfig) -> Instruction:
    """``decode`` of row ``i`` of an ``(n, 2)`` word array, an error naming the index."""
    try:
        return decode(int(w[i, 0]) | (int(w[i, 1]) << INSN_HALF_BITS), hw)
    except IsaError as e:
        raise IsaError(f"instruction {i}: {e}") from None


def _bits(half: np.ndarray, pos: int, width: int) -> np.ndarray:
    """Bits ``pos .. pos+width-1`` of each uint64 in ``half``, as int64."""
    mask = np.uint64((1 << width) - 1)
    return ((half >> np.uint64(pos)) & mask).astype(np.int64)


@lru_cache(maxsize=16)
def _deps(flags: tuple[bool, ...]) -> Deps:
    return Deps(*flags)


def _decode_group(d: InstructionDef, halves: list[np.ndarray], hw: HwConfig) -> list[Any]:
    """Words all of definition ``d`` (as ``decode`` reads them), their fields column by column;
    a ValueError for a value a field's type refuses."""
    cols: dict[str, np.ndarray] = {}
    for half, fields_ in zip(halves, layout_of(d, hw), strict=True):
        pos = 0
        for f in fields_:
            v = _bits(half, pos, f.width)
            if f.signed:
                v = np.where(v >> (f.width - 1) != 0, v - (1 << f.width), v)
            cols[f.name] = v
            pos += f.width
    n = len(halves[0])
    flag_rows = zip(*(cols[f].astype(bool).tolist() for f in HEAD_FLAGS), strict=True)
    args: list[list[Any]] = []
    for name, fn in _converters(d.cls).items():
        if name == "deps":
            args.append([_deps(tuple(r)) for r in flag_rows])
        elif d.function is not None and name == d.function[0]:
            args.append([fn(d.function[1])] * n)
        elif name not in cols:
            args.append([fn(0)] * n)
        elif fn is int:
            args.append(cols[name].tolist())
        else:
            vals = cols[name].tolist()
            conv = {v: fn(v) for v in set(vals)}
            args.append([conv[v] for v in vals])
    cls = d.cls
    return [cls(*a) for a in zip(*args, strict=True)]
