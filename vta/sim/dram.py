"""The DRAM image: one byte-addressed buffer holding every allocation of a program.

Micro-op allocations are written in at construction (encoded exactly as
``vta.isa.encode_uop``, or the words a program read back from the compile cache keeps:
``uop_words``); data allocations are filled from numpy arrays given per allocation
name. Each data allocation is seen as an array of *entries*:

=====  ==========================  ===============
kind   entry shape                 dtype
=====  ==========================  ===============
inp    (batch, block_in)           gemm.inp_dtype
wgt    (block_out, block_in)       gemm.wgt_dtype
acc    (batch, block_out)          gemm.acc_dtype
out    (batch, block_out)          gemm.out_dtype
uop    ()                          uint32 (encoded)
=====  ==========================  ===============

Multi-byte values are little-endian.

The simulator holds the whole image in host memory (and a run holds about three copies: the
inputs, the image, the outputs), so an image larger than ``MAX_DRAM_BYTES`` is refused with an
``InputError`` naming its largest allocation before anything is allocated. The ISA's own limit,
element addresses of ``hw.isa.dram_addr`` bits, is checked when a program is built
(``vta.isa.program``).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter

import numpy as np
from numpy.typing import ArrayLike

from vta.config import BUFFER_KINDS, HwConfig
from vta.errors import InputError
from vta.isa import Allocation, Program, Uop, uop_layout
from vta.isa.encoding import EncodedUops

__all__ = ["Dram", "MAX_DRAM_BYTES", "check_dram_size", "entry_spec", "encode_uops",
           "uop_words", "random_inputs"]

#: Largest DRAM image the simulator allocates (1 GiB): a run's inputs, image and outputs then
#: stay within a few GiB of host memory. ResNet-18's largest layer image is about 2 MB.
MAX_DRAM_BYTES = 1 << 30


def check_dram_size(program: Program) -> None:
    """An ``InputError`` naming the largest allocation when ``program``'s DRAM image is larger
    than the simulator holds (``MAX_DRAM_BYTES``)."""
    total = program.dram_bytes
    if total <= MAX_DRAM_BYTES:
        return
    big = max(program.allocations, key=lambda a: a.nbytes)
    raise InputError(f"DRAM image of {total:,} bytes is larger than the simulator's "
                     f"{MAX_DRAM_BYTES:,}-byte limit; the largest allocation is {big.name!r} "
                     f"({big.elems:,} {big.kind} elements of {big.elem_bytes} B)")


def entry_spec(hw: HwConfig, kind: str) -> tuple[np.dtype, tuple[int, ...]]:
    """The little-endian dtype and the shape of one entry of buffer ``kind``
    (``HwConfig.entry``)."""
    e = hw.entry(kind)
    return np.dtype(e.dtype).newbyteorder("<"), e.shape


def encode_uops(uops: tuple[Uop, ...] | list[Uop], hw: HwConfig) -> np.ndarray:
    """Micro-ops as uint32 words, bit-identical to ``encode_uop`` but vectorised.

    Field ranges were checked when the micro-ops were added; an out-of-range one is still
    caught here (an ``InputError`` naming the field).
    """
    n = len(uops)
    word = np.zeros(n, dtype=np.uint64)
    for name, pos, width in uop_layout(hw):
        # one field of every micro-op, read in C (``map`` of an ``attrgetter``) straight into
        # an int64 array: the values ``np.array`` of a list of (dst, src, wgt) tuples gave, at
        # half its cost (a program's micro-ops: 19,348 for C1-C11, encoded on every run)
        v = np.fromiter(map(attrgetter(name), uops), dtype=np.int64, count=n)
        bad = np.flatnonzero((v < 0) | (v >= 1 << width))
        if bad.size:
            raise InputError(f"micro-op {int(bad[0])}: field {name}={int(v[bad[0]])} does not "
                             f"fit in {width} bits")
        word |= v.astype(np.uint64) << np.uint64(pos)
    return word.astype("<u4")


def uop_words(uops: Mapping[str, tuple[Uop, ...]], name: str, hw: HwConfig) -> np.ndarray:
    """Micro-op buffer ``name`` of a program's ``uops`` as the words DRAM holds: a buffer kept
    as words (``EncodedUops``, a program read back from the compile cache) as they are, but
    for any bit outside the micro-op's fields (cleared: the bits ``decode_uops`` reads and
    ``encode_uops`` writes, so the same words as encoding the decoded buffer, without making
    a ``Uop`` per word); any other buffer by ``encode_uops``."""
    if isinstance(uops, EncodedUops):
        mask = 0
        for _, pos, width in uop_layout(hw):
            mask |= ((1 << width) - 1) << pos
        return uops.words(name) & np.uint32(mask)
    return encode_uops(uops[name], hw)


class Dram:
    """A program's DRAM image (``buf``, uint8) with typed per-allocation views."""

    def __init__(self, program: Program, hw: HwConfig) -> None:
        check_dram_size(program)
        self.program = program
        self.hw = hw
        #: bytes of one entry of each buffer kind (``HwConfig.elem_bytes``, read per DMA)
        self.elem_bytes = {k: hw.elem_bytes(k) for k in BUFFER_KINDS}
        #: each kind's ``entry_spec`` (read per view: building a dtype costs more than a view)
        self.spec = {k: entry_spec(hw, k) for k in BUFFER_KINDS}
        self.buf = np.zeros(program.dram_bytes, dtype=np.uint8)
        for name in program.uops:
            words = uop_words(program.uops, name, hw)
            if len(words):
                self.view(name)[: len(words)] = words

    def view(self, name: str) -> np.ndarray:
        """A writable typed view of allocation ``name``: shape ``(elems, *entry shape)``."""
        a = self._alloc(name)
        dtype, shape = self.spec[a.kind]
        raw = self.buf[a.offset: a.offset + a.nbytes]
        return raw.view(dtype).reshape((a.elems, *shape))

    def read(self, name: str, copy: bool = True) -> np.ndarray:
        """Allocation ``name``'s contents in native byte order: a copy, or (``copy`` False)
        the image's own typed view where its dtype is already native."""
        v = self.view(name)
        if not copy and v.dtype.isnative:
            return v
        return v.astype(v.dtype.newbyteorder("="))

    def write(self, name: str, data: ArrayLike) -> None:
        """Fill allocation ``name`` from ``data``: any integer array of the right size whose
        values fit the allocation's dtype (it is reshaped to the entry layout)."""
        a = self._alloc(name)
        if a.kind == "uop":
            raise InputError(f"allocation {name!r} holds micro-ops, which come from the program, "
                             f"not from inputs")
        dtype, shape = self.spec[a.kind]
        data = np.asarray(data)
        view = self.view(name)
        if data.dtype == view.dtype.newbyteorder("=") and data.shape == view.shape:
            # already the entries' dtype (``random_inputs``, a previous run's outputs): every
            # value fits, so the range check of ``_checked`` has nothing to find, and the
            # assignment converts the byte order itself (no copy first)
            view[...] = data
            return
        view[...] = _checked(a, data, dtype, shape)

    def write_all(self, inputs: Mapping[str, ArrayLike]) -> None:
        for name, data in inputs.items():
            self.write(name, data)

    def outputs(self) -> dict[str, np.ndarray]:
        """Every allocation's contents, by name (micro-op allocations as uint32 words), for a
        run's result: the image's own typed views where its dtype is native (``read``'s
        values and dtypes; a run's image is its own, written by no later run, and a copy of
        every allocation would fault in and copy the whole image again), else ``read``'s
        converted copies. Each is read-only (``_frozen``): a view shares the image's memory,
        so a caller's in-place edit would silently change ``SimResult.dram`` and every other
        view of it; one who wants to edit takes a copy (``np.array(out)``)."""
        return {a.name: _frozen(self.read(a.name, copy=False)) for a in self.program.allocations}

    def _alloc(self, name: str) -> Allocation:
        try:
            return self.program.allocation(name)
        except KeyError as e:
            raise InputError(str(e.args[0])) from None


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` marked read-only (the flag of this array object only: the image it may view
    stays writable through the image itself)."""
    a.flags.writeable = False
    return a


def _checked(a: Allocation, data: np.ndarray, dtype: np.dtype,
             shape: tuple[int, ...]) -> np.ndarray:
    """``data`` reshaped to ``(elems, *shape)`` and cast to ``dtype``, or an InputError."""
    want = (a.elems, *shape)
    expect = f"expected shape {want} of {dtype.name} ({int(np.prod(want))} values)"
    if data.dtype != np.bool_ and not np.issubdtype(data.dtype, np.integer):
        raise InputError(f"input {a.name!r} ({a.kind}): {expect}, got dtype {data.dtype}")
    if data.size != int(np.prod(want)):
        raise InputError(f"input {a.name!r} ({a.kind}): {expect}, got shape {data.shape}")
    info = np.iinfo(dtype)
    if data.size and (data.min() < info.min or data.max() > info.max):
        raise InputError(f"input {a.name!r} ({a.kind}): {expect}; values must lie in "
                         f"{info.min}..{info.max}, got {data.min()}..{data.max()}")
    return data.reshape(want).astype(dtype)


def random_inputs(program: Program, hw: HwConfig, seed: int | None = None) -> dict[str, np.ndarray]:
    """Full-range uniform random contents for every inp, wgt and acc allocation."""
    check_dram_size(program)
    rng = np.random.default_rng(seed)
    out = {}
    for a in program.inputs:
        dtype, shape = entry_spec(hw, a.kind)
        info = np.iinfo(dtype)
        out[a.name] = rng.integers(info.min, info.max, size=(a.elems, *shape),
                                   dtype=dtype.newbyteorder("="), endpoint=True)
    return out
