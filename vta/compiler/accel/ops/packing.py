"""The runtime's packing between user layouts and the accelerator's packed layouts.

Packed layouts (b = gemm.batch, bi = block_in, bo = block_out):

* data    ``(N/b, IC/bi, H, W, b, bi)``          int8   (DRAM kind inp)
* kernel  ``(OC/bo, IC/bi, KH, KW, bo, bi)``     int8   (DRAM kind wgt)
* bias    ``(OC/bo, b, bo)``                     int32  (DRAM kind acc; repeated over b)
* result  ``(N/b, OC/bo, OH', OW', b, bo)``      int8   (DRAM kind out)

Every packed dimension may be larger than the user's (channels padded up to the block and to
the schedule's tile, output rows/columns up to whole tiles); the padding is zero on the way in
and dropped on the way out. Matrices (dense/matmul) pack into blocks: ``x`` (M, K) as
``(M/b, K/bi, b, bi)`` (row m is lane ``m % b`` of row block ``m // b``), ``w`` (N, K) as
``(N/bo, K/bi, bo, bi)``, the result as ``(M/b, N/bo, b, bo)``.

A convolution with few input channels may be folded first (``ops.fold``): ``fold_data`` /
``fold_kernel`` repack the user's NCHW input and OIHW kernel im2col-style into the input and
kernel of the folded convolution, which then pack as above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vta.compiler.accel.ops.fold import ConvFold

__all__ = ["pack_data", "pack_kernel", "pack_bias", "unpack_result", "pack_matrix",
           "unpack_matrix", "to_entries", "fold_data", "fold_kernel"]


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` zero padded at the end of each dimension to ``shape``; ``a`` itself, not a copy,
    where it has that shape (ResNet-18's channels are whole blocks: its 11 MB of weights were
    copied once by ``np.pad`` for nothing, then again into the packed order), so a caller
    that returns a view of it copies it (``_fresh``)."""
    if a.shape == shape:
        return a
    pads = [(0, t - s) for s, t in zip(a.shape, shape, strict=True)]
    if any(p[1] < 0 for p in pads):
        raise ValueError(f"cannot pad {a.shape} to {shape}")
    return np.pad(a, pads)


def _fresh(a: np.ndarray) -> np.ndarray:
    """A C-ordered copy of ``a`` (a view in the packed order): a packed array never shares
    memory with its input, whether or not ``_pad_to`` padded it (``np.ascontiguousarray``
    returns an array already in C order as it is)."""
    return np.array(a, order="C")


def pack_data(x: np.ndarray, b: int, bi: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """NCHW -> (N/b, IC/bi, H, W, b, bi), zero padded to ``packed_shape``."""
    nb, icb, h, w = packed_shape[:4]
    x = _pad_to(x, (nb * b, icb * bi, h, w))
    return _fresh(x.reshape(nb, b, icb, bi, h, w).transpose(0, 2, 4, 5, 1, 3))


def pack_kernel(k: np.ndarray, bo: int, bi: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """OIHW -> (OC/bo, IC/bi, KH, KW, bo, bi), zero padded."""
    ocb, icb, kh, kw = packed_shape[:4]
    k = _pad_to(k, (ocb * bo, icb * bi, kh, kw))
    return _fresh(k.reshape(ocb, bo, icb, bi, kh, kw).transpose(0, 2, 4, 5, 1, 3))


def pack_bias(bias: np.ndarray, b: int, bo: int, ocb: int) -> np.ndarray:
    """(OC,) -> (OC/bo, b, bo) int32, zero padded, repeated over the batch lanes."""
    v = _pad_to(bias.astype(np.int32), (ocb * bo,)).reshape(ocb, 1, bo)
    return np.ascontiguousarray(np.repeat(v, b, axis=1))


def unpack_result(r: np.ndarray, n: int, oc: int, oh: int, ow: int) -> np.ndarray:
    """(N/b, OC/bo, OH', OW', b, bo) -> NCHW, dropping the padding."""
    nb, ocb, ohp, owp, b, bo = r.shape
    x = r.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, ocb * bo, ohp, owp)
    return np.ascontiguousarray(x[:n, :oc, :oh, :ow])


def pack_matrix(x: np.ndarray, rows: int, cols: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """(R, C) -> (R/rows, C/cols, rows, cols) blocks, zero padded to ``packed_shape``."""
    rb, cb = packed_shape[:2]
    x = _pad_to(x, (rb * rows, cb * cols))
    return _fresh(x.reshape(rb, rows, cb, cols).transpose(0, 2, 1, 3))


def unpack_matrix(r: np.ndarray, m: int, n: int) -> np.ndarray:
    """(M/b, N/bo, b, bo) -> (M, N), dropping the padding."""
    mb, nb_, b, bo = r.shape
    return np.ascontiguousarray(r.transpose(0, 2, 1, 3).reshape(mb * b, nb_ * bo)[:m, :n])


def to_entries(packed: np.ndarray) -> np.ndarray:
    """A packed array as the simulator's ``(elems, rows, cols)`` view (last two dims = entry)."""
    return np.ascontiguousarray(packed.reshape(-1, *packed.shape[-2:]))


def _padded_input(x: np.ndarray, pad: int, rows: int) -> np.ndarray:
    """NCHW zero-padded by ``pad`` on every side, with at least ``rows`` rows (zeros below)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    return np.pad(xp, ((0, 0), (0, 0), (0, max(0, rows - xp.shape[2])), (0, 0)))


def fold_data(x: np.ndarray, fold: ConvFold) -> np.ndarray:
    """NCHW user input -> the folded NCHW input of ``fold.device`` (``ops.fold``; the
    im2col-style repacking, before ``pack_data``)."""
    sp, dev = fold.spec, fold.device
    if fold.kind == "none":
        return x
    s = sp.stride
    phases = s if fold.kind == "kw" else sp.kh  # row offsets folded into the channels
    xp = _padded_input(x, sp.pad, phases - 1 + s * (dev.h - 1) + 1)
    parts = [xp[:, :, r: r + s * (dev.h - 1) + 1: s, q: q + s * (sp.ow - 1) + 1: s]
             for r in range(phases) for q in range(sp.kw)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def fold_kernel(k: np.ndarray, fold: ConvFold) -> np.ndarray:
    """OIHW user kernel -> the folded OIHW kernel of ``fold.device`` (``ops.fold``)."""
    sp = fold.spec
    if fold.kind == "none":
        return k
    if fold.kind == "khkw":
        return np.ascontiguousarray(k.transpose(0, 2, 3, 1).reshape(sp.oc, -1, 1, 1))
    s, kh2 = sp.stride, fold.kh
    kp = np.pad(k, ((0, 0), (0, 0), (0, s * kh2 - sp.kh), (0, 0)))
    parts = [kp[:, :, r0::s, q] for r0 in range(s) for q in range(sp.kw)]  # (OC, IC, kh2) each
    return np.ascontiguousarray(np.concatenate(parts, axis=1)[..., None])
