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

import operator
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from functools import lru_cache
from typing import Any

import numpy as np

from vta._dataclass_code import code_of
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
    resolved_layout,
)
from vta.isa.insn import Deps, Instruction, Uop
from vta.words import INSN_BITS, INSN_HALF_BITS

__all__ = ["IsaError", "EncodedUops", "encode", "decode", "encode_uop", "decode_uop", "layout",
           "uop_layout", "encode_program", "decode_program", "encode_uops", "decode_uops",
           "encode_uops_checked", "check_fields", "insn_label"]


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


@dataclass(frozen=True, slots=True)
class _Slot:
    """One field of a definition's word as the encoder reads it: where it sits (``pos``: its
    first bit in the 128-bit word), its range, and where its value comes from: ``const`` (the
    opcode, a family's function), else attribute ``name`` of the instruction or (``on_deps``) of
    its dependency flags."""

    name: str
    pos: int
    width: int
    lo: int
    hi: int
    on_deps: bool = False
    const: int | None = None


@lru_cache(maxsize=512)
def _slots(d: InstructionDef, w: Any) -> tuple[_Slot, ...]:
    """The fields of ``d``'s word on ISA widths ``w`` that carry a value, in layout order (the
    order ``check_fields`` reports them in): the head (opcode, dependency flags), the
    instruction's own fields, the function field of a family (its value fixed by ``d``);
    reserved bits and fields the instruction does not carry are encoded as 0 and not listed.
    Computed once per definition and widths, so checking and encoding an instruction reads its
    attributes directly instead of building a dictionary of its fields each time."""
    own = {f.name for f in fields(d.cls) if f.name != "deps"}
    out = []
    for base, half in zip((0, INSN_HALF_BITS), resolved_layout(d, w), strict=True):
        pos = base
        for f in half:
            lo, hi = f.range
            if d.function is not None and f.name == d.function[0]:
                out.append(_Slot(f.name, pos, f.width, lo, hi, const=d.function[1]))
            elif f.name == "opcode":
                out.append(_Slot(f.name, pos, f.width, lo, hi, const=int(d.opcode)))
            elif f.name in HEAD_FLAGS:
                out.append(_Slot(f.name, pos, f.width, lo, hi, on_deps=True))
            elif f.name in own:
                out.append(_Slot(f.name, pos, f.width, lo, hi))
            pos += f.width
    return tuple(out)


def _value(slot: _Slot, insn: Any) -> int:
    """The integer ``slot`` holds for ``insn`` (bools and enums as their integers)."""
    if slot.const is not None:
        return slot.const
    return int(getattr(insn.deps if slot.on_deps else insn, slot.name))


@lru_cache(maxsize=512)
def _fits_of(d: InstructionDef, hw: HwConfig) -> Callable[[Any], bool]:
    """Whether every field of an instruction of ``d`` lies in its range on ``hw``'s ISA widths,
    compared as read (a value that compares inside its range converts to an int inside it
    too); False also when a value does not compare (``check_fields`` then reports it field
    by field). Made once per definition and config (keyed by the config: its hash is
    cached, the widths' is not) as one function of plain comparisons
    (``_fits_source``): checked per distinct instruction a program runs, where a loop of
    ``operator.le`` calls cost four times as much."""
    slots = _slots(d, hw.isa)
    own = [s for s in slots if s.const is None and not s.on_deps]
    flags = [s for s in slots if s.on_deps]
    consts_fit = all(s.lo <= s.const <= s.hi for s in slots if s.const is not None)
    return _compiled(_fits_source(own, flags, consts_fit))


@lru_cache(maxsize=64)
def _compiled(src: str) -> Callable[[Any], bool]:
    """The function ``fits`` that ``src`` (``_fits_source``) defines, compiled once per text:
    definitions of one class and widths share it (the ALU's functions: one text); its code
    kept across processes with vta's dataclass methods (``vta._dataclass_code.code_of``:
    compiling the texts was about 6M instructions of every fresh process's first check)."""
    scope: dict[str, Any] = {}
    exec(code_of(src), scope)  # field names (identifiers) and ints only
    fits: Callable[[Any], bool] = scope["fits"]
    return fits


def _fits_source(own: list[_Slot], flags: list[_Slot], consts_fit: bool) -> str:
    """The text of ``_fits_of``'s function: the instruction's fields (``own``), then its
    flags' (``flags``), read first; then every lower bound compared, then every upper one
    (``lo <= v`` for all, then ``v <= hi``: the order, and so the first exception, of the
    checks it replaces)."""
    names = [f"v{k}" for k in range(len(own) + len(flags))]
    reads = [f"        {v} = x.{s.name}\n" for v, s in zip(names, own, strict=False)]
    if flags:
        reads.append("        deps = x.deps\n")
        reads += [f"        {v} = deps.{s.name}\n"
                  for v, s in zip(names[len(own):], flags, strict=True)]
    else:
        reads.append("        x.deps\n")
    ranges = own + flags
    tests = [f"{int(s.lo)} <= {v}" for v, s in zip(names, ranges, strict=True)] + \
        [f"{v} <= {int(s.hi)}" for v, s in zip(names, ranges, strict=True)]
    cond = " and ".join([str(consts_fit), *tests])
    return (f"def fits(x):\n    try:\n{''.join(reads)}        return bool({cond})\n"
            f"    except TypeError:\n        return False\n")


def check_fields(insn: Instruction, hw: HwConfig, d: InstructionDef | None = None) -> None:
    """Raise IsaError naming the instruction and field if any value does not fit its field, the
    definition's own checks fail, or ``hw`` does not implement the instruction. ``d``:
    ``insn``'s definition where the caller has it (``definition_of(insn)`` otherwise)."""
    if d is None:
        d = definition_of(insn)
    if d.requires is not None:
        try:
            require(d, hw)
        except DefinitionError as e:
            raise IsaError(str(e)) from None
    if not _fits_of(d, hw)(insn):  # find the first field that does not, in layout order
        for slot in _slots(d, hw.isa):
            v = _value(slot, insn)
            if not slot.lo <= v <= slot.hi:
                raise IsaError(f"{insn_label(insn)}: field {slot.name}={v} does not fit in "
                               f"{slot.width} bits (allowed {slot.lo}..{slot.hi})")
    if d.check is not None:
        why = d.check(insn, hw)
        if why:
            raise IsaError(f"{insn_label(insn)}: {why}")


def encode(insn: Instruction, hw: HwConfig) -> int:
    """The 128-bit word of ``insn`` as a Python int (bit 0 = least significant)."""
    check_fields(insn, hw)
    word = 0
    for slot in _slots(definition_of(insn), hw.isa):
        word |= (_value(slot, insn) & ((1 << slot.width) - 1)) << slot.pos
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
    """Micro-ops as a uint32 array of their words (``encode_uop`` of each), their fields read
    in one pass (``_uop_values``) and built with numpy; when a field does not fit (or is not
    a machine integer) the words are built one by one, which raises ``encode_uop``'s error for
    the first such micro-op."""
    return encode_uops_checked(uops, hw, check=False)[0]


def encode_uops_checked(uops: Iterable[Any], hw: HwConfig, *, check: bool = True
                        ) -> tuple[np.ndarray, bool]:
    """``encode_uops(uops, hw)`` and whether those words decode back to ``uops``
    (``tuple(decode_uops(words, hw)) == tuple(uops)``: ``vta.run.codec`` keeps only a program
    that does; False without ``check``). Answered without making a ``Uop`` per word where it
    is plain: a ``Uop`` whose fields numpy reads as machine integers (int64, no float or
    larger value among them) is encoded from exactly those values, so it equals the decoded
    one exactly when the words' fields are those values. Anything else (another class, a
    float or huge field) is compared micro-op by micro-op."""
    uops = list(uops)
    layout = uop_layout(hw)
    read = _uop_values(uops, layout)
    vals = np.array(read) if read else np.zeros((0, len(layout)), dtype=np.int64)
    exact = vals.dtype.kind == "i" and vals.shape == (len(uops), len(layout))
    words = _uop_words(uops, vals.astype(np.int64, copy=False) if exact else read, layout, hw)
    if not check:
        return words, False
    if exact and (not uops or set(map(type, uops)) == {Uop}):
        return words, bool(np.array_equal(vals, _uop_fields(words, hw)))
    return words, tuple(decode_uops(words, hw)) == tuple(uops)


def _uop_words(uops: list[Any], read: Any, layout: list[tuple[str, int, int]], hw: HwConfig
               ) -> np.ndarray:
    """``encode_uops``'s words of ``uops`` from their fields as read (``_uop_values``, or an
    int64 array of them)."""
    word = np.zeros(len(uops), dtype=np.int64)
    try:
        vals = np.array(read, dtype=np.int64).reshape(len(uops), len(layout))
        for k, (_, pos, width) in enumerate(layout):
            col = vals[:, k]
            if col.size and (col.min() < 0 or col.max() >= 1 << width):
                raise ValueError(k)
            word |= col << pos
    except (TypeError, ValueError, OverflowError):
        return np.array([encode_uop(u, hw) for u in uops], dtype=np.uint32)
    return word.astype(np.uint32)


def _uop_values(uops: list[Any], layout: list[tuple[str, int, int]]) -> list[Any]:
    """Each micro-op's fields in ``layout``'s order, as a tuple per micro-op (one C-level
    pass: ``attrgetter``)."""
    return list(map(operator.attrgetter(*(name for name, _, _ in layout)), uops))


def _uop_fields(words: np.ndarray, hw: HwConfig) -> np.ndarray:
    """The fields of micro-op words, ``(n, fields)`` int64 in ``uop_layout``'s order: what
    ``decode_uops`` makes its micro-ops of."""
    w = np.asarray(words, dtype=np.uint32).astype(np.int64)
    return np.stack([(w >> pos) & ((1 << width) - 1) for _, pos, width in uop_layout(hw)],
                    axis=-1)


def decode_uops(words: np.ndarray, hw: HwConfig) -> list[Uop]:
    """Inverse of ``encode_uops`` (``decode_uop`` of every word, the fields extracted with
    numpy at once)."""
    cols = _uop_fields(words, hw).T.tolist()
    by_name = dict(zip((name for name, _, _ in uop_layout(hw)), cols, strict=True))
    return [Uop(*r) for r in zip(*(by_name[f.name] for f in fields(Uop)), strict=True)]


class EncodedUops(Mapping[str, tuple[Uop, ...]]):
    """A program's micro-op buffers (``Program.uops``) kept as their 32-bit words, each buffer
    decoded (``decode_uops``) at its first read and kept. A compiled program read back from
    words (``vta.run.codec``: the compile cache, the compile workers) carries its micro-ops
    this way: ResNet-18's 23 kernels hold 46,714 micro-ops, and the process that reads them
    (``vta run``: links the kernels, then hands them to the simulation's forked workers) never
    looks at one, so each is decoded in the worker that simulates its kernel. Equal to the
    dict of the decoded buffers (``Mapping``'s equality)."""

    __slots__ = ("_decoded", "_hw", "_words")

    def __init__(self, words: Mapping[str, np.ndarray], hw: HwConfig,
                 decoded: dict[str, tuple[Uop, ...]] | None = None) -> None:
        self._words = dict(words)
        self._hw = hw
        self._decoded = decoded if decoded is not None else {}

    def __getitem__(self, name: str) -> tuple[Uop, ...]:
        got = self._decoded.get(name)
        if got is None:
            got = self._decoded[name] = tuple(decode_uops(self._words[name], self._hw))
        return got

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._words)

    def __len__(self) -> int:
        return len(self._words)

    def __repr__(self) -> str:
        return repr(dict(self))

    def words(self, name: str) -> np.ndarray:
        """Buffer ``name``'s 32-bit words, as kept (nothing is decoded: the simulator's DRAM
        image takes them as they are)."""
        return self._words[name]

    def count(self) -> int:
        """The micro-ops of every buffer (their words: nothing is decoded)."""
        return sum(len(w) for w in self._words.values())

    def renamed(self, names: Mapping[str, str]) -> EncodedUops:
        """The same buffers under new names (``names``: old -> new, one for each; linking
        renames a kernel's allocations), nothing decoded (what was decoded is kept)."""
        return EncodedUops({names[k]: w for k, w in self._words.items()}, self._hw,
                           {names[k]: u for k, u in self._decoded.items()})


def encode_program(insns: list[Instruction] | tuple[Instruction, ...], hw: HwConfig) -> np.ndarray:
    """Instructions as a ``(n, 2)`` uint64 array (low half, high half), as DRAM holds them.

    An out-of-range field raises IsaError naming the instruction's index.

    The words of all instructions of one definition are built at once, field by field with
    numpy (a compiled program ships tens of thousands of instructions between processes:
    word by word in Python that costs about 20 µs each); when anything in that pass is not as
    it should be (a field out of range, a failed check, a value numpy cannot hold), the
    program is encoded again word by word, which raises the first instruction's error exactly
    as ``encode`` words it.
    """
    out = _encode_columns(insns, hw)
    if out is not None:
        return out
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    for i, insn in enumerate(insns):
        try:
            w = encode(insn, hw)
        except IsaError as e:
            raise IsaError(f"instruction {i}: {e}") from None
        out[i, 0] = w & 0xFFFF_FFFF_FFFF_FFFF
        out[i, 1] = w >> 64
    return out


def _encode_columns(insns: list[Instruction] | tuple[Instruction, ...], hw: HwConfig
                    ) -> np.ndarray | None:
    """``encode_program``'s words built per definition, all of its instructions at once
    (``_Columns``), or None when some instruction would not encode (unregistered, not
    implemented by ``hw``, a field out of range, a definition's check failing) or a value is
    not a machine integer: the caller then encodes word by word, which names the first such
    instruction. Each distinct instruction object is encoded once (a tiled program holds the
    same object at many places: ResNet-18's compiled kernels 9,379 of 18,639), its word
    copied to each of its places."""
    index: dict[int, int] = {}
    where = [index.setdefault(id(x), len(index)) for x in insns]
    distinct = list({id(x): x for x in insns}.values())  # in ``index``'s order
    out = np.zeros((len(distinct), 2), dtype=np.uint64)
    groups: dict[InstructionDef, list[int]] = {}
    try:
        for i, insn in enumerate(distinct):
            groups.setdefault(definition_of(insn), []).append(i)
    except DefinitionError:
        return None
    for d, rows in groups.items():
        members = [distinct[i] for i in rows]
        if d.requires is not None:
            try:
                require(d, hw)
            except DefinitionError:
                return None
        if d.check is not None and any(d.check(x, hw) for x in members):
            return None
        cols = _columns(d, hw.isa)
        if cols is None:
            return None
        words = cols.words(members)
        if words is None:
            return None
        out[np.asarray(rows)] = words
    return out[np.asarray(where, dtype=np.intp)] if len(insns) else out


#: the int64 range: a field bound beyond it is no bound on an int64 column
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class _Columns:
    """How ``_encode_columns`` builds the words of one definition on given ISA widths: the
    fields that carry a value (``_slots``, constants excluded) read from every instruction in
    one call each (``read``: an ``attrgetter`` of their names, ``deps.<flag>`` for a flag),
    checked against their ranges (``lo``, ``hi``), masked to their widths and shifted to
    their bits within their half of the word (``half``: 0 or 1 per field); ``const``: the
    constants' bits (opcode, a family's function) of each half. The same words as
    ``encode``'s, field by field (one numpy operation per step for all fields)."""

    read: Callable[[Any], Any]
    width: int
    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray
    shift: np.ndarray
    half: np.ndarray
    const: tuple[int, int]

    def words(self, members: list[Any]) -> np.ndarray | None:
        """The ``(n, 2)`` words of ``members`` (all of this definition); None when a value
        is not a machine integer or lies outside its field's range."""
        out = np.empty((len(members), 2), dtype=np.uint64)
        out[:, 0], out[:, 1] = self.const
        if self.width == 0:
            return out
        try:
            vals = np.array(list(map(self.read, members)), dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            return None
        vals = vals.reshape(len(members), self.width)
        if (vals < self.lo).any() or (vals > self.hi).any():
            return None
        bits = (vals.astype(np.uint64) & self.mask) << self.shift
        for h in (0, 1):
            at = self.half == h
            if at.any():
                out[:, h] |= np.bitwise_or.reduce(bits[:, at], axis=1)
        return out


@lru_cache(maxsize=512)
def _columns(d: InstructionDef, w: Any) -> _Columns | None:
    """``_Columns`` of ``d`` on ISA widths ``w`` (None when a constant does not fit its
    field: no instruction of ``d`` encodes)."""
    slots = _slots(d, w)
    const = [0, 0]
    for s in slots:
        if s.const is not None:
            if not s.lo <= s.const <= s.hi:
                return None
            const[s.pos // INSN_HALF_BITS] |= (s.const & ((1 << s.width) - 1)) << (
                s.pos % INSN_HALF_BITS)
    own = [s for s in slots if s.const is None]
    names = [f"deps.{s.name}" if s.on_deps else s.name for s in own]
    return _Columns(
        read=operator.attrgetter(*names) if names else (lambda x: ()),
        width=len(own),
        lo=np.array([max(s.lo, _INT64[0]) for s in own], dtype=np.int64),
        hi=np.array([min(s.hi, _INT64[1]) for s in own], dtype=np.int64),
        mask=np.array([(1 << s.width) - 1 for s in own], dtype=np.uint64),
        shift=np.array([s.pos % INSN_HALF_BITS for s in own], dtype=np.uint64),
        half=np.array([s.pos // INSN_HALF_BITS for s in own], dtype=np.int64),
        const=(const[0], const[1]))


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
    for op_val in _distinct(opcodes):
        rows = np.flatnonzero(opcodes == op_val)
        entry = table.get(op_val)
        if entry is None:
            _decode_one(w, int(rows[0]), hw)  # raises, naming the word
        pos, members = entry  # type: ignore[misc]
        keys = np.full(len(rows), -1, dtype=np.int64) if pos is None else \
            _bits(halves[pos[0] // INSN_HALF_BITS][rows], pos[0] % INSN_HALF_BITS, pos[1])
        for key in _distinct(keys):
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


def _distinct(a: np.ndarray) -> list[int]:
    """The distinct values of an integer array, ascending (``np.unique(a).tolist()``, whose
    numpy 2 imports ``numpy.ma`` at its first call: about 20 ms of a warm ``vta run``)."""
    return sorted(set(a.tolist()))


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


#: one half of a definition's word as ``_decode_group`` reads it: its fields' names in layout
#: order, their first bits and masks (uint64), and (column, width) of each signed field
_Half = tuple[tuple[str, ...], np.ndarray, np.ndarray, tuple[tuple[int, int], ...]]


@lru_cache(maxsize=512)
def _half_fields(d: InstructionDef, hw: HwConfig) -> tuple[_Half, ...]:
    """``_Half`` of each half of ``d``'s word on ``hw`` (``layout_of``'s fields, packed from
    bit 0 of each half)."""
    out = []
    for fields_ in layout_of(d, hw):
        pos, shifts, masks = 0, [], []
        for f in fields_:
            shifts.append(pos)
            masks.append((1 << f.width) - 1)
            pos += f.width
        out.append((tuple(f.name for f in fields_), np.array(shifts, dtype=np.uint64),
                    np.array(masks, dtype=np.uint64),
                    tuple((j, f.width) for j, f in enumerate(fields_) if f.signed)))
    return tuple(out)


def _decode_group(d: InstructionDef, halves: list[np.ndarray], hw: HwConfig) -> list[Any]:
    """Words all of definition ``d`` (as ``decode`` reads them), their fields column by column
    (all of a half's at once: ``_half_fields``); a ValueError for a value a field's type
    refuses."""
    cols: dict[str, np.ndarray] = {}
    for half, (names, shift, mask, signed) in zip(halves, _half_fields(d, hw), strict=True):
        if not names:
            continue
        v = ((half[:, None] >> shift) & mask).astype(np.int64)  # ``_bits`` of each field
        for j, width in signed:
            v[:, j] = np.where(v[:, j] >> (width - 1) != 0, v[:, j] - (1 << width), v[:, j])
        for j, name in enumerate(names):
            cols[name] = v[:, j]
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
