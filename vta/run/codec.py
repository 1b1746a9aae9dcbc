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
from vta.isa.encoding import (
    EncodedUops,
    decode_program,
    encode_program,
    encode_uops_checked,
)

__all__ = ["pack_compiled", "unpack_compiled", "decode_distinct"]


def pack_compiled(compiled: Any, hw: HwConfig) -> bytes | None:
    """The bytes of ``compiled`` (a ``Compiled`` or ``CompiledWindow`` for ``hw``); None when
    its program does not survive the encoding (a field out of range, a word that decodes to
    another instruction): such a program is not kept. The instructions decoded for that check
    are kept for this process's ``unpack_compiled`` of the same bytes (``_Recent``)."""
    prog = compiled.result.program
    try:
        insns = encode_program(prog.instructions, hw)
        checked = {name: encode_uops_checked(u, hw) for name, u in prog.uops.items()}
        back = decode_distinct(insns, hw)
    except IsaError:
        return None
    # the program read back equals ``prog``: its instructions decoded alike, its micro-ops
    # compared as fields (``encode_uops_checked``) instead of a ``Uop`` made per word (the
    # DRAM map travels as it is, a tuple as ``Program`` holds it)
    if not (back == prog.instructions and isinstance(prog.allocations, tuple)
            and all(same for _, same in checked.values())):
        return None
    uops = {name: words for name, (words, _) in checked.items()}
    empty = Program((), prog.allocations, {})
    meta = replace(compiled, hw=None, chain=None, result=replace(compiled.result, ir={},
                                                                  program=empty))
    words = (insns.tobytes(), {name: u.tobytes() for name, u in uops.items()})
    blob = pickle.dumps((meta, words), protocol=pickle.HIGHEST_PROTOCOL)
    _DECODED.keep(blob, hw, back)
    return blob


def unpack_compiled(blob: bytes, hw: HwConfig) -> Any:
    """The ``Compiled`` or ``CompiledWindow`` of ``pack_compiled``'s bytes, for ``hw`` (no
    chain: the caller sets it); None when the bytes are not such an object (any failure to
    unpickle or decode)."""
    try:
        meta, (insn_bytes, uop_bytes) = pickle.loads(blob)
        uops = {name: np.frombuffer(b, dtype=np.uint32) for name, b in uop_bytes.items()}
        if not isinstance(meta, (Compiled, CompiledWindow)):
            return None
        decoded = _DECODED.take(blob, hw)
        if decoded is None:
            insns = np.frombuffer(insn_bytes, dtype=np.uint64).reshape(-1, 2)
            decoded = decode_distinct(insns, hw)
        prog = Program(decoded, tuple(meta.result.program.allocations), EncodedUops(uops, hw))
        return replace(meta, hw=hw, result=replace(meta.result, program=prog))
    except Exception:  # any failure: the bytes are unusable
        return None


class _Recent:
    """The instructions ``pack_compiled`` decoded from the words of its latest bytes (at
    most ``size``), by the bytes object: ``unpack_compiled`` of those very bytes in this
    process takes them instead of decoding the same words again (``vta run --jobs 1``, or a
    pool that runs its tasks here, packs each program and unpacks it at once; ResNet-18's 23
    kernels: about 40 ms). Decoding is a function of the words and the hardware, and the
    instructions are frozen, so they are the ones decoding would make (equal, shared alike);
    taken once. Bytes another process made, or read from the compile cache, are other
    objects and are decoded."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.held: dict[int, tuple[bytes, HwConfig, tuple[Any, ...]]] = {}

    def keep(self, blob: bytes, hw: HwConfig, insns: tuple[Any, ...]) -> None:
        while len(self.held) >= self.size:
            del self.held[next(iter(self.held))]
        self.held[id(blob)] = (blob, hw, insns)  # holding ``blob``: its id is not reused

    def take(self, blob: bytes, hw: HwConfig) -> tuple[Any, ...] | None:
        got = self.held.pop(id(blob), None)
        if got is None or got[0] is not blob or (got[1] is not hw and got[1] != hw):
            return None
        return got[2]


_DECODED = _Recent(64)


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
