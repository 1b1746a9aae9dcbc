"""A compiled kernel as bytes: what the compile cache keeps and what worker processes hand back.

A ``Compiled`` (``driver.compile_workload``) or ``CompiledWindow`` (``ops.window_packed``) is
mostly its program: tens of thousands of frozen instruction and micro-op dataclasses, whose
pickle takes about 0.8 s to load for ResNet-18's 23 kernels (a ``__setstate__`` each). Here
the program travels as the words the hardware fetches: its instructions as 128-bit words
(``isa.encoding.encode_program``), each micro-op buffer as 32-bit words (``encode_uops``),
beside the small metadata needed to run and report it (the object with its program emptied
to the DRAM map, pickled), decoded with numpy a definition at a time (``decode_program``);
the micro-ops where they are first read (``EncodedUops``).
Left out: the fused chain (its stages hold functions), the hardware and the IR after each
pass; the caller passes the first two again (``driver.compile_workload``'s memo hit does).
A program whose words do not decode back to it is not packed (None): it is never answered
wrongly. ``vta.tune.compile_cache`` keeps these bytes in SQLite, ``vta.run.compile_pool``
receives them from its workers.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import numpy as np

from vta.compiler.accel.driver import Compiled
from vta.compiler.accel.ops.window_packed import CompiledWindow
from vta.config import HwConfig
from vta.errors import IsaError
from vta.isa import Program
from vta.isa.encoding import EncodedUops, decode_program, encode_program, encode_uops

__all__ = ["pack_compiled", "unpack_compiled", "decode_distinct"]


def pack_compiled(compiled: Any, hw: HwConfig) -> bytes | None:
    """The bytes of ``compiled`` (a ``Compiled`` or ``CompiledWindow`` for ``hw``); None when
    its program does not survive the encoding (a field out of range, a word that decodes to
    another instruction): such a program is not kept."""
    prog = compiled.result.program
    try:
        insns = encode_program(prog.instructions, hw)
        uops = {name: encode_uops(u, hw) for name, u in prog.uops.items()}
        if _program(prog.allocations, insns, uops, hw) != prog:
            return None
    except IsaError:
        return None
    empty = Program((), prog.allocations, {})
    meta = replace(compiled, hw=None, chain=None, result=replace(compiled.result, ir={},
                                                                  program=empty))
    words = (insns.tobytes(), {name: u.tobytes() for name, u in uops.items()})
    return pickle.dumps((meta, words), protocol=pickle.HIGHEST_PROTOCOL)


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
    """A program from its DRAM map and its encoded words: the instructions decoded, the
    micro-ops decoded where they are first read (``EncodedUops``: a warm ``vta run`` links
    the kernels here and simulates them in worker processes, which decode their own)."""
    return Program(decode_distinct(insns, hw), tuple(allocations), EncodedUops(uops, hw))


def decode_distinct(words: np.ndarray, hw: HwConfig) -> tuple[Any, ...]:
    """``decode_program(words, hw)`` with each distinct word decoded once and its instruction
    object shared by every place the word occurs (instructions are frozen: equal and
    interchangeable). A tiled program repeats most of its instructions (ResNet-18's 23
    kernels: 5,381 distinct words of 18,639), so this makes a third of the objects; and a
    consumer that keys on instructions (linking's relocation memo, the simulator's per-distinct
    description) finds repeats by identity. An ``IsaError``'s index is among the distinct
    words."""
    w = np.ascontiguousarray(words, dtype=np.uint64).reshape(-1, 2)
    if len(w) == 0:
        return ()
    # each 128-bit word as one 16-byte value: np.unique sorts those (by their bytes) about
    # three times faster than rows of two integers (``axis=0``); the order of the distinct
    # words changes nothing but which of them an IsaError counts from
    rows = w.view(np.dtype((np.void, 16))).reshape(-1)
    distinct, where = np.unique(rows, return_inverse=True)
    objs = decode_program(distinct.view(np.uint64).reshape(-1, 2), hw)
    return tuple(objs[i] for i in where.reshape(-1).tolist())
