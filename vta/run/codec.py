"""A compiled kernel as bytes: what the compile cache keeps and what worker processes hand back.

A ``Compiled`` (``driver.compile_workload``) or ``CompiledWindow`` (``ops.window_packed``) is
mostly its program: tens of thousands of frozen instruction and micro-op dataclasses, whose
pickle takes about 0.8 s to load for ResNet-18's 23 kernels (a ``__setstate__`` each). Here
the program travels as the words the hardware fetches: its instructions as 128-bit words
(``isa.encoding.encode_program``'s), each micro-op buffer as 32-bit words (``encode_uops``'s),
beside the small metadata needed to run and report it (the object with its program emptied
to the DRAM map, pickled), decoded with numpy a definition at a time (``decode_program``).
Left out: the fused chain (its stages hold functions), the hardware and the IR after each
pass; the caller passes the first two again (``driver.compile_workload``'s memo hit does).
A program whose words do not decode back to it is not packed (None): it is never answered
wrongly. The words are made here a definition at a time with numpy (``encode_words``: the
fields of ``isa.encoding``'s layout, masked to their widths, without ``encode``'s checks of
each value, which cost most of its time): a value that does not fit its field comes back
different from the decoding, and the program is not packed, as when ``encode`` refuses it;
whether the hardware implements each instruction is checked where it runs (the simulator
checks every instruction's fields). ``vta.tune.compile_cache`` keeps these bytes in SQLite,
``vta.run.compile_pool`` receives them from its workers.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import numpy as np

from vta.compiler.accel.driver import Compiled
from vta.compiler.accel.ops.window_packed import CompiledWindow
from vta.config import HwConfig
from vta.errors import DefinitionError, IsaError
from vta.isa import Program
from vta.isa.defs import HEAD_FLAGS, InstructionDef, definition_of, layout_of
from vta.isa.encoding import decode_program, decode_uops, uop_layout
from vta.isa.insn import Instruction, Uop

__all__ = ["pack_compiled", "unpack_compiled", "encode_words", "encode_uop_words"]


def pack_compiled(compiled: Any, hw: HwConfig) -> bytes | None:
    """The bytes of ``compiled`` (a ``Compiled`` or ``CompiledWindow`` for ``hw``); None when
    its program does not survive the encoding (a field out of range, a word that decodes to
    another instruction): such a program is not kept."""
    prog = compiled.result.program
    try:
        insns = encode_words(prog.instructions, hw)
        uops = {name: encode_uop_words(u, hw) for name, u in prog.uops.items()}
        if insns is None or tuple(decode_program(insns, hw)) != prog.instructions:
            return None
    except (IsaError, DefinitionError):
        return None
    kept = {name: u for name, u in uops.items() if u is not None}
    if len(kept) != len(uops):
        return None
    empty = Program((), prog.allocations, {})
    meta = replace(compiled, hw=None, chain=None, result=replace(compiled.result, ir={},
                                                                  program=empty))
    words = (insns.tobytes(), {name: u.tobytes() for name, u in kept.items()})
    return pickle.dumps((meta, words), protocol=pickle.HIGHEST_PROTOCOL)


def encode_words(insns: Sequence[Instruction], hw: HwConfig) -> np.ndarray | None:
    """The ``(n, 2)`` uint64 words of ``insns`` on ``hw`` in ``isa.encoding``'s layout
    (``layout_of``: each half's fields from bit 0, each value masked to its width, reserved
    bits 0), the instructions of one definition at a time; None when a value is not an
    integer of at most 64 bits. Unlike ``encode_program`` it checks no value against its
    field's range: ``pack_compiled`` decodes the words and compares (module docstring)."""
    out = np.zeros((len(insns), 2), dtype=np.uint64)
    groups: dict[InstructionDef, list[int]] = {}
    for i, insn in enumerate(insns):
        groups.setdefault(definition_of(insn), []).append(i)
    for d, rows in groups.items():
        members = [insns[i] for i in rows]
        names = {f.name for f in fields(members[0])} - {"deps"}  # type: ignore[arg-type]
        for h, half in enumerate(layout_of(d, hw)):
            word = np.zeros(len(rows), dtype=np.uint64)
            pos = 0
            for f in half:
                col = _column(d, f.name, names, members)
                if col is not None:
                    try:
                        vals = np.array(col, dtype=np.int64).astype(np.uint64)
                    except (OverflowError, TypeError, ValueError):
                        return None
                    word |= (vals & np.uint64((1 << f.width) - 1)) << np.uint64(pos)
                pos += f.width
            out[rows, h] = word
    return out


def _column(d: InstructionDef, name: str, names: set[str], members: list[Any]) -> Any:
    """The values of field ``name`` of ``d``'s instructions ``members`` (``encoding``'s: the
    opcode, the dependency flags, the definition's function code, else the attribute), or
    None for reserved bits (encoded as 0)."""
    if name == "opcode":
        return [d.opcode] * len(members)
    if name in HEAD_FLAGS:
        return [getattr(m.deps, name) for m in members]
    if d.function is not None and name == d.function[0]:
        return [d.function[1]] * len(members)
    if name in names:
        return [getattr(m, name) for m in members]
    return None


def encode_uop_words(uops: Sequence[Uop], hw: HwConfig) -> np.ndarray | None:
    """``encode_uops``'s uint32 words of ``uops`` at once with numpy; None when a field's value
    is not an integer that fits its width (``encode_uop`` refuses it). A micro-op is its three
    fields, all in the layout: words made of values in range decode back to the same
    micro-ops, so ``pack_compiled`` needs no decoding to know it."""
    layout = uop_layout(hw)
    cols = np.array([[getattr(u, name) for name, _, _ in layout] for u in uops]
                    ).reshape(len(uops), len(layout))
    if cols.size and cols.dtype.kind not in "iub":
        return None
    cols = cols.astype(np.int64)
    word = np.zeros(len(uops), dtype=np.uint64)
    for j, (_, pos, width) in enumerate(layout):
        if cols.size and (cols[:, j].min() < 0 or cols[:, j].max() >= 1 << width):
            return None
        word |= cols[:, j].astype(np.uint64) << np.uint64(pos)
    return word.astype(np.uint32)


def unpack_compiled(blob: bytes, hw: HwConfig) -> Any:
    """The ``Compiled`` or ``CompiledWindow`` of ``pack_compiled``'s bytes, for ``hw`` (no
    chain: the caller sets it); None when the bytes are not such an object (any failure to
    unpickle or decode)."""
    try:
        meta, (insn_bytes, uop_bytes) = pickle.loads(blob)
        insns = np.frombuffer(insn_bytes, dtype=np.uint64).reshape(-1, 2)
        uops = {name: np.frombuffer(b, dtype=np.uint32) for name, b in uop_bytes.items()}
        if not isinstance(meta, (Compiled, CompiledWindow)):
            return None
        prog = _program(meta.result.program.allocations, insns, uops, hw)
        return replace(meta, hw=hw, result=replace(meta.result, program=prog))
    except Exception:  # any failure: the bytes are unusable
        return None


def _program(allocations: Any, insns: np.ndarray, uops: dict[str, np.ndarray],
             hw: HwConfig) -> Program:
    """A program from its DRAM map and its encoded words."""
    return Program(tuple(decode_program(insns, hw)), tuple(allocations),
                   {name: tuple(decode_uops(u, hw)) for name, u in uops.items()})
