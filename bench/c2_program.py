"""ResNet-18 layer C2 as one accelerator program (a hand-scheduled benchmark, not the compiler).

C2: N=1, 56x56 input, 64 -> 64 channels, 3x3 kernel, pad 1, stride 1; 451,584 tensor ops on a
1x16x16 core. Layouts (entries of the packed VTA layouts): data ``(IC/16, H, W)`` of
``(batch=1, 16)``, kernel ``(OC/16, IC/16, 3, 3)`` of ``(16, 16)``, output ``(OC/16, H, W)``.

Schedule (fits the pynq scratchpads, double-buffered): tiles of ``rows`` output rows x 56
columns x all 64 output channels. Per tile: one padded LOAD.INP per input-channel block (the
halo rows and the zero border come from the DMA's pads), a reset GEMM, and ONE GEMM whose
micro-ops enumerate (ic block, kh, kw, w) and whose iter_out/iter_in loops run over output
channel blocks and output rows; then one STORE per output channel block. The whole kernel is
loaded once. Output = the low 8 bits of the int32 sums (the documented narrowing).
"""

from __future__ import annotations

import numpy as np

from vta.config import HwConfig
from vta.isa import Gemm, Instruction, Load, MemType, Program, ProgramBuilder, Store, Uop
from vta.sim.examples import pipelined

__all__ = ["C2", "c2_program", "pack_c2", "unpack_c2", "conv2d_expected"]

#: (H=W, IC, OC, K, pad, stride)
C2 = (56, 64, 64, 3, 1, 1)


def c2_program(hw: HwConfig, rows: int = 2, nbuf: int = 2, size: int = 56,
               channels: int = 64) -> Program:
    """The C2 convolution (or a smaller ``size``/``channels`` variant) as a Program."""
    g = hw.gemm
    if g.batch != 1 or g.block_in != g.block_out or channels % g.block_in or size % rows:
        raise ValueError("c2_program needs batch 1, square blocks and divisible shapes")
    blk = g.block_in
    cb, h, k = channels // blk, size, 3
    cols = h + 2
    inp_tile, acc_tile = cb * (rows + 2) * cols, cb * rows * h
    b = ProgramBuilder(hw)
    data = b.alloc("I", "inp", cb * h * h)
    kern = b.alloc("K", "wgt", cb * cb * k * k)
    out = b.alloc("O", "out", cb * h * h)
    uops = b.alloc("U", "uop", 0)
    first_uop = []
    for buf in range(nbuf):
        i0, a0 = buf * inp_tile, buf * acc_tile
        first_uop.append(b.add_uops("U", [Uop(a0 + w, 0, 0) for w in range(h)]))
        b.add_uops("U", [Uop(a0 + w, i0 + ic * (rows + 2) * cols + kh * cols + kw + w,
                             (ic * k + kh) * k + kw)
                         for ic in range(cb) for kh in range(k) for kw in range(k)
                         for w in range(h)])
    n_main = cb * k * k * h
    n_uops = nbuf * (h + n_main)
    prologue = [Load(MemType.UOP, 0, uops.base, 1, n_uops, n_uops)]
    tiles = []
    for t in range(h // rows):
        buf, r0 = t % nbuf, t * rows
        u = first_uop[buf]
        top, bottom = r0 - 1, r0 + rows  # input rows the tile needs (inclusive)
        pad_y0, pad_y1 = int(top < 0), int(bottom > h - 1)
        y = rows + 2 - pad_y0 - pad_y1
        loads: list[Instruction] = []
        if t == 0:
            loads.append(Load(MemType.WGT, 0, kern.base, 1, cb * cb * k * k, cb * cb * k * k))
        for ic in range(cb):
            loads.append(Load(MemType.INP, buf * inp_tile + ic * (rows + 2) * cols,
                              data.base + ic * h * h + max(top, 0) * h, y, h, h,
                              pad_y0, pad_y1, 1, 1))
        computes: list[Instruction] = [
            Gemm(True, u, u + h, cb, rows, rows * h, h, 0, 0, 0, 0),
            Gemm(False, u + h, u + h + n_main, cb, rows, rows * h, h, 0, cols, k * k * cb, 0),
        ]
        stores: list[Instruction] = [
            Store(MemType.OUT, buf * acc_tile + oc * rows * h, out.base + oc * h * h + r0 * h,
                  1, rows * h, rows * h) for oc in range(cb)]
        tiles.append((loads, computes, stores))
    return pipelined(b, prologue, tiles, nbuf)


def pack_c2(hw: HwConfig, data: np.ndarray, kernel: np.ndarray) -> dict[str, np.ndarray]:
    """Program inputs from NCHW ``data (1, C, H, W)`` and OIHW ``kernel (O, I, 3, 3)``."""
    blk = hw.gemm.block_in
    _, c, h, w = data.shape
    o = kernel.shape[0]
    d = data[0].reshape(c // blk, blk, h, w).transpose(0, 2, 3, 1).reshape(-1, 1, blk)
    kk = kernel.reshape(o // blk, blk, c // blk, blk, 3, 3).transpose(0, 2, 4, 5, 1, 3)
    return {"I": d, "K": kk.reshape(-1, blk, blk)}


def unpack_c2(hw: HwConfig, out: np.ndarray, channels: int, size: int) -> np.ndarray:
    """NCHW ``(1, OC, H, W)`` from the packed output allocation."""
    blk = hw.gemm.block_out
    return out.reshape(channels // blk, size, size, blk).transpose(0, 3, 1, 2) \
        .reshape(1, channels, size, size)


def conv2d_expected(hw: HwConfig, data: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """numpy's 3x3, pad 1, stride 1 convolution: int32-wrapped sums narrowed to the out dtype.

    Computed as one exact float64 im2col product (|sum| < 2**24)."""
    _, c, h, w = data.shape
    padded = np.pad(data[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # c,h,w,3,3
    cols = win.transpose(1, 2, 0, 3, 4).reshape(h * w, c * 9)
    acc = cols @ kernel.reshape(kernel.shape[0], -1).astype(np.float64).T  # (h*w, o)
    res = acc.astype(np.int64).astype(hw.gemm.acc_dtype).astype(hw.gemm.out_dtype)
    return res.T.reshape(1, -1, h, w)
