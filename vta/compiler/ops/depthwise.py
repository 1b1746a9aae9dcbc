"""Depthwise conv2d (one filter per channel, MobileNet's 3x3 layers): its shape and its
bit-exact numpy reference.

``out[n, c, y, x] = epilogue(sum_{r,q} in[n, c, y*s + r - p, x*s + q - p] * w[c, r, q])``.

The accelerator's form is ``vta.compiler.accel.ops.depthwise_packed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.errors import ShapeError

if TYPE_CHECKING:
    pass

__all__ = ["DepthwiseSpec", "depthwise_acc", "depthwise_reference"]


@dataclass(frozen=True, slots=True)
class DepthwiseSpec:
    n: int
    c: int
    h: int
    w: int
    k: int
    stride: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        for f in ("n", "c", "h", "w", "k", "stride"):
            if getattr(self, f) < 1:
                raise ShapeError(f"depthwise conv2d: {f} must be >= 1, got {getattr(self, f)}")
        if not 0 <= self.pad < self.k:
            raise ShapeError(f"depthwise conv2d: pad must be in [0, kernel), got {self.pad} "
                             f"for a {self.k}x{self.k} kernel")
        if self.oh < 1 or self.ow < 1:
            raise ShapeError(f"depthwise conv2d: kernel {self.k} does not fit the padded "
                             f"{self.h}x{self.w} input")

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.k) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.k) // self.stride + 1

    @property
    def ops(self) -> int:
        """Arithmetic operations (2 per useful MAC)."""
        return 2 * self.n * self.c * self.oh * self.ow * self.k * self.k

    def describe(self) -> str:
        return (f"depthwise conv2d N={self.n} {self.c}x{self.h}x{self.w} -> "
                f"{self.c}x{self.oh}x{self.ow} k={self.k}x{self.k} s={self.stride} p={self.pad}")


def depthwise_acc(x: np.ndarray, w: np.ndarray, spec: DepthwiseSpec) -> np.ndarray:
    """Bit-exact numpy accumulators (N, C, OH, OW) int32 (wrapping like the hardware's):
    ``x`` NCHW int8, ``w`` (C, K, K) int8."""
    s, p = spec.stride, spec.pad
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p, p), (p, p)))
    acc = np.zeros((spec.n, spec.c, spec.oh, spec.ow), np.int64)
    for r in range(spec.k):
        for q in range(spec.k):
            win = xp[:, :, r: r + s * (spec.oh - 1) + 1: s, q: q + s * (spec.ow - 1) + 1: s]
            acc += win * w[None, :, r, q, None, None].astype(np.int64)
    return acc.astype(np.int32)


def depthwise_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                        spec: DepthwiseSpec, epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: the int32 accumulators (``depthwise_acc``), then the
    epilogue."""
    return apply_epilogue(depthwise_acc(x, w, spec), bias, epi, channel_axis=1)
