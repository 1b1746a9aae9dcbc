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
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_data", "pack_kernel", "pack_bias", "unpack_result", "pack_matrix",
           "unpack_matrix", "to_entries"]


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    pads = [(0, t - s) for s, t in zip(a.shape, shape, strict=True)]
    if any(p[1] < 0 for p in pads):
        raise ValueError(f"cannot pad {a.shape} to {shape}")
    return np.pad(a, pads)


def pack_data(x: np.ndarray, b: int, bi: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """NCHW -> (N/b, IC/bi, H, W, b, bi), zero padded to ``packed_shape``."""
    nb, icb, h, w = packed_shape[:4]
    x = _pad_to(x, (nb * b, icb * bi, h, w))
    return np.ascontiguousarray(x.reshape(nb, b, icb, bi, h, w).transpose(0, 2, 4, 5, 1, 3))


def pack_kernel(k: np.ndarray, bo: int, bi: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """OIHW -> (OC/bo, IC/bi, KH, KW, bo, bi), zero padded."""
    ocb, icb, kh, kw = packed_shape[:4]
    k = _pad_to(k, (ocb * bo, icb * bi, kh, kw))
    return np.ascontiguousarray(k.reshape(ocb, bo, icb, bi, kh, kw).transpose(0, 2, 4, 5, 1, 3))


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
    return np.ascontiguousarray(x.reshape(rb, rows, cb, cols).transpose(0, 2, 1, 3))


def unpack_matrix(r: np.ndarray, m: int, n: int) -> np.ndarray:
    """(M/b, N/bo, b, bo) -> (M, N), dropping the padding."""
    mb, nb_, b, bo = r.shape
    return np.ascontiguousarray(r.transpose(0, 2, 1, 3).reshape(mb * b, nb_ * bo)[:m, :n])


def to_entries(packed: np.ndarray) -> np.ndarray:
    """A packed array as the simulator's ``(elems, rows, cols)`` view (last two dims = entry)."""
    return np.ascontiguousarray(packed.reshape(-1, *packed.shape[-2:]))
