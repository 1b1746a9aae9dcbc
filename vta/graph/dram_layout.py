"""Packed layouts of graph tensors on the accelerator, and the host's pack/unpack.

Every int8 activation the accelerator reads or writes lives in DRAM in the GEMM core's packed
layout ``(N/b, C/k, H, W, b, k)`` (b = batch lanes, k = block: NCHW``b``n``k``c); a 2-D
``(N, C)`` tensor is the same with ``H = W = 1``, which is also the packed matrix layout of a
dense layer's input and output. The layout is *exact*: no padded channels, rows or columns,
so one kernel's output is the next kernel's input byte for byte (the kernels are compiled
with ``exact=True``). The one exception is a convolution with few input channels reading a
graph input: the host's pack folds its window into the channels (``ops.fold``), so its
``PackedLayout`` carries the fold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vta.compiler.accel.ops import packing
from vta.compiler.accel.ops.fold import ConvFold
from vta.config import HwConfig
from vta.graph.ir import TensorType

__all__ = ["PackedLayout", "canonical", "pack", "unpack"]


@dataclass(frozen=True)
class PackedLayout:
    """The packed entries ``shape`` of a tensor (6-D), and the fold a folded input went
    through (None: the plain layout)."""

    shape: tuple[int, ...]
    fold: ConvFold | None = None
    #: the buffer whose entries hold it: ``inp`` (an activation), or ``wgt`` (a runtime
    #: weight: a matrix ``(M, K)`` packed as ``(M/bo, K/bi, bo, bi)`` weight entries, what a
    #: dense layer whose weight is an activation reads)
    buffer: str = "inp"

    @property
    def entries(self) -> int:
        return int(np.prod(self.shape[:-2]))

    def nbytes(self, hw: HwConfig) -> int:
        return self.entries * hw.elem_bytes(self.buffer)

    def describe(self) -> str:
        dims = "x".join(map(str, self.shape))
        if self.buffer != "inp":
            return f"{dims} {self.buffer}"
        return f"{dims} folded ({self.fold.kind})" if self.fold is not None else dims


def _nchw(t: TensorType) -> tuple[int, int, int, int]:
    s = t.shape
    return (s[0], s[1], s[2], s[3]) if len(s) == 4 else (s[0], s[1], 1, 1)


def canonical(t: TensorType, hw: HwConfig) -> PackedLayout:
    """The exact packed layout of an activation of type ``t``."""
    g = hw.gemm
    n, c, h, w = _nchw(t)
    return PackedLayout((math.ceil(n / g.batch), math.ceil(c / g.block_out), h, w, g.batch,
                         g.block_out))


def pack(x: np.ndarray, t: TensorType, layout: PackedLayout, hw: HwConfig) -> np.ndarray:
    """``x`` (of type ``t``) as the simulator's entries of ``layout`` (the host's pack: the
    fold's repacking first when the layout is folded)."""
    g = hw.gemm
    if layout.buffer == "wgt":  # a runtime weight: the dense layer's (M, K) matrix
        return packing.to_entries(packing.pack_matrix(x, g.block_out, g.block_in,
                                                      layout.shape))
    a = x.reshape(_nchw(t))
    if layout.fold is not None and layout.fold.kind != "none":
        a = packing.fold_data(a, layout.fold)
    return packing.to_entries(packing.pack_data(a, g.batch, g.block_in, layout.shape))


def unpack(entries: np.ndarray, t: TensorType, layout: PackedLayout) -> np.ndarray:
    """The tensor of type ``t`` held in ``entries`` of (plain) ``layout``."""
    n, c, h, w = _nchw(t)
    r = np.asarray(entries).reshape(layout.shape)
    return packing.unpack_result(r, n, c, h, w).reshape(t.shape)
