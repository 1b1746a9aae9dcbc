"""Window operators: max-pooling, sum-pooling (the global average pool's sum) and
stand-alone element-wise groups, over an NCHW int8 tensor, with fused chains.

``WindowSpec(kind, n, c, h, w, kernel, stride, pad)``:

* ``"max"``: ``max`` over each ``kernel x kernel`` window (zero padding: the caller places a
  padded max-pool only where its input cannot be negative, so zero never wins);
* ``"sum"``: the sum over each window, no padding: the global average pool is a ``sum`` over
  the whole image followed by its requantization (a fused chain);
* ``"ewise"``: a 1x1 window, whose fused chain is the whole operator (a stand-alone add, ReLU
  or clip: graph operators not fused into a producer).

The accelerator's form is ``vta.compiler.accel.ops.window_packed``, the GPU's
``vta.gpu.window``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.errors import ShapeError

__all__ = ["WindowSpec", "KINDS"]

KINDS = ("max", "sum", "ewise")


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A window operator over an NCHW int8 tensor (module docstring)."""

    kind: str
    n: int
    c: int
    h: int
    w: int
    kernel: int = 1
    stride: int = 1
    pad: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ShapeError(f"window op: kind must be one of {', '.join(KINDS)}, got "
                             f"{self.kind!r}")
        for f in ("n", "c", "h", "w", "kernel", "stride"):
            if getattr(self, f) < 1:
                raise ShapeError(f"{self.kind} window: {f} must be >= 1, got {getattr(self, f)}")
        if not 0 <= self.pad < self.kernel:
            raise ShapeError(f"{self.kind} window: pad must be in [0, kernel), got {self.pad}")
        if self.kind != "max" and self.pad:
            raise ShapeError(f"{self.kind} window: only max-pooling pads (got pad {self.pad})")
        if self.kind == "ewise" and (self.kernel, self.stride) != (1, 1):
            raise ShapeError("ewise window: kernel and stride must be 1")
        if self.oh < 1 or self.ow < 1:
            raise ShapeError(f"{self.kind} window: a {self.kernel}x{self.kernel} window does not "
                             f"fit the {self.h}x{self.w} input padded by {self.pad}")

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def taps(self) -> int:
        return self.kernel * self.kernel

    def describe(self) -> str:
        what = {"max": "max-pool", "sum": "sum-pool", "ewise": "element-wise"}[self.kind]
        win = "" if self.kind == "ewise" else \
            f" k={self.kernel}x{self.kernel} s={self.stride} p={self.pad}"
        return f"{what} N={self.n} {self.c}x{self.h}x{self.w} -> {self.c}x{self.oh}x{self.ow}{win}"


