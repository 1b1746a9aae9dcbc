"""The runtime's packing between user layouts and the accelerator's packed layouts.

Packed layouts (b = gemm.batch, bi = block_in, bo = block_out):

* data    ``(N/b, IC/bi, H, W, b, bi)``          int8   (DRAM kind inp)
* kernel  ``(OC/bo, IC/bi, KH, KW, bo, bi)``     int8   (DRAM kind wgt)
* bias    ``(OC/bo, b, bo)``                     int32  (DRAM kind acc; repeated over b)
* result  ``(N/b, OC/bo, OH', OW', b, bo)``      int8   (DRAM kind out)

Every packed dimension may be larger than the user's (channels padded up to the block and to
the schedule's tile, output rows/columns up to whole tiles); the padding is zero on the way in
and dropped on the way out. Matrices (dense/matmul) pack as a 1 x M image: row m of ``x``
becomes pixel ``m // b`` of batch lane ``m % b``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_data", "pack_kernel", "pack_bias", "unpack_result", "pack_rows",
           "unpack_rows", "to_entries"]


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    pads = [(0, t - s) for s, t in zip(a.shape, shape)]
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


def pack_rows(x: np.ndarray, b: int, bi: int, packed_shape: tuple[int, ...]) -> np.ndarray:
    """(M, K) -> a 1 x M/b image ``(1, K/bi, 1, W', b, bi)``: row m = pixel m//b, lane m%b."""
    _, kb, _, wp = packed_shape[:4]
    x = _pad_to(x, (wp * b, kb * bi))
    return np.ascontiguousarray(x.reshape(wp, b, kb, bi).transpose(2, 0, 1, 3)[None, :, None])


def unpack_rows(r: np.ndarray, m: int, n: int) -> np.ndarray:
    """(1, N/bo, 1, W', b, bo) -> (M, N)."""
    _, nb_, _, wp, b, bo = r.shape
    x = r[0, :, 0].transpose(1, 2, 0, 3).reshape(wp * b, nb_ * bo)
    return np.ascontiguousarray(x[:m, :n])


def to_entries(packed: np.ndarray) -> np.ndarray:
    """A packed array as the simulator's ``(elems, rows, cols)`` view (last two dims = entry)."""
    return np.ascontiguousarray(packed.reshape(-1, *packed.shape[-2:]))
