"""2-D convolution (NCHW int8 in, int32 accumulate, requantizing epilogue, int8 out): the
problem and its bit-exact numpy reference.

``Conv2dSpec`` describes the user's problem; ``conv2d_acc`` computes its int32 accumulators
(wrapping like the hardware's) and ``conv2d_reference`` applies the epilogue to them. The
accelerator's packed form is ``vta.compiler.accel.ops.conv2d_packed``, the GPU's implicit GEMM
``vta.gpu.ops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.errors import ShapeError

if TYPE_CHECKING:
    pass

__all__ = ["Conv2dSpec", "conv2d_acc", "conv2d_reference"]


@dataclass(frozen=True, slots=True)
class Conv2dSpec:
    """NCHW convolution: ``n`` images of ``ic`` x ``h`` x ``w``, ``oc`` filters ``kh`` x ``kw``."""

    n: int
    ic: int
    h: int
    w: int
    oc: int
    kh: int
    kw: int
    stride: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        for f in ("n", "ic", "h", "w", "oc", "kh", "kw", "stride"):
            if getattr(self, f) < 1:
                raise ShapeError(f"conv2d: {f} must be >= 1, got {getattr(self, f)}")
        if self.pad < 0:
            raise ShapeError(f"conv2d: pad must be >= 0, got {self.pad}")
        if self.pad >= max(self.kh, self.kw):
            raise ShapeError(f"conv2d: pad must be smaller than the kernel, got "
                             f"pad {self.pad} for a {self.kh}x{self.kw} kernel")
        if self.oh < 1 or self.ow < 1:
            raise ShapeError(f"conv2d: kernel {self.kh}x{self.kw} does not fit the padded "
                             f"{self.h}x{self.w} input")

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.kh) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.kw) // self.stride + 1

    @property
    def ops(self) -> int:
        """Arithmetic operations (2 per MAC) of the convolution proper."""
        return 2 * self.n * self.oc * self.oh * self.ow * self.ic * self.kh * self.kw

    def describe(self) -> str:
        return (f"conv2d N={self.n} {self.ic}x{self.h}x{self.w} -> {self.oc}x{self.oh}x{self.ow}"
                f" k={self.kh}x{self.kw} s={self.stride} p={self.pad}")


def conv2d_acc(x: np.ndarray, k: np.ndarray, spec: Conv2dSpec) -> np.ndarray:
    """Bit-exact numpy accumulators (N, OC, OH, OW) int32, wrapping like the hardware's."""
    s, p = spec.stride, spec.pad
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p, p), (p, p)))
    acc = np.zeros((spec.n, spec.oc, spec.oh, spec.ow), np.int64)
    kk = k.astype(np.int64)
    for r in range(spec.kh):
        for q in range(spec.kw):
            win = xp[:, :, r: r + s * (spec.oh - 1) + 1: s, q: q + s * (spec.ow - 1) + 1: s]
            acc += np.einsum("nchw,oc->nohw", win, kk[:, :, r, q], optimize=True)
    return acc.astype(np.int32)  # wraps like the hardware's int32 accumulator


def conv2d_reference(x: np.ndarray, k: np.ndarray, bias: np.ndarray | None, spec: Conv2dSpec,
                     epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: int32 accumulate (wrapping), then the epilogue."""
    return apply_epilogue(conv2d_acc(x, k, spec), bias, epi, channel_axis=1)


