"""Matrix multiply / dense: ``y = epilogue(x @ w.T)`` with x (M, K) int8, w (N, K) int8: the
problem and its bit-exact numpy reference.

``MatmulSpec.as_conv`` is the equivalent 1x1 convolution (row blocks are its output columns),
which the accelerator's schedule model sizes tiles on. The packed form is
``vta.compiler.accel.ops.matmul_packed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.errors import ShapeError

__all__ = ["MatmulSpec", "matmul_acc", "matmul_reference"]


@dataclass(frozen=True, slots=True)
class MatmulSpec:
    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        for f in ("m", "n", "k"):
            if getattr(self, f) < 1:
                raise ShapeError(f"matmul: {f.upper()} must be >= 1, got {getattr(self, f)}")

    def as_conv(self, batch: int) -> Conv2dSpec:
        """The equivalent 1x1 conv: batch lanes x (1 x ceil(M/batch)) pixels."""
        return Conv2dSpec(n=batch, ic=self.k, h=1, w=-(-self.m // batch), oc=self.n, kh=1, kw=1)

    @property
    def ops(self) -> int:
        return 2 * self.m * self.n * self.k

    def describe(self) -> str:
        return f"matmul M={self.m} N={self.n} K={self.k}"


def matmul_acc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Bit-exact numpy accumulators ``x @ w.T`` (M, N) int32, wrapping like the hardware's."""
    return (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)


def matmul_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                     epi: Epilogue) -> np.ndarray:
    """Bit-exact numpy reference: the accumulators, then the epilogue."""
    return apply_epilogue(matmul_acc(x, w), bias, epi, channel_axis=1)


