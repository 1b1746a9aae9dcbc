"""Reduction folding for convolutions with few input channels (an im2col-style repacking).

A convolution whose ``IC`` is much smaller than the GEMM's ``block_in`` wastes most of every
tensor op on the zero lanes the channel padding adds (ResNet-18's stem: 3 of 16 lanes real).
Folding moves part of the reduction window into the channel axis of the packed input, so one
block holds ``IC`` x (folded window positions) real values. The folded problem is again a plain
convolution (``ConvFold.device``: a ``Conv2dSpec`` with a smaller window, stride 1, no
padding) over a repacked input and a repacked kernel, so the tensor IR (``conv2d_compute``),
the schedule model and the passes compile it unchanged; the runtime does the repacking
(``packing.fold_data`` / ``packing.fold_kernel``, like the NCHW -> NCHWnc packing and the
channel padding). The numpy reference stays the user's convolution.

Folds (``xp`` = the input zero-padded by ``pad``, ``s`` = stride):

* ``"kw"``: the kernel columns and the stride's row phases, ``r = s*r1 + r0``:
  ``X'[n, (r0*KW + q)*IC + c, Y, x] = xp[n, c, s*Y + r0, s*x + q]`` and
  ``K'[o, (r0*KW + q)*IC + c, r1, 0] = k[o, c, s*r1 + r0, q]`` (0 when ``s*r1 + r0 >= KH``):
  a ``ceil(KH/s)`` x 1 stride-1 convolution over ``s*KW*IC`` channels of
  ``(OH + ceil(KH/s) - 1)`` x ``OW`` pixels. The input grows by about ``KW/s`` x ``1/s``
  per real channel (smaller than the plain layout when the channel padding dominates).
* ``"khkw"``: the whole window (im2col): ``X'[n, (r*KW + q)*IC + c, y, x] =
  xp[n, c, s*y + r, s*x + q]``, ``K'[o, (r*KW + q)*IC + c, 0, 0] = k[o, c, r, q]``: a 1x1
  convolution over ``KH*KW*IC`` channels of ``OH`` x ``OW`` pixels (``KH*KW/s^2`` copies of
  every pixel in DRAM, the fewest GEMM cycles).

Every product of the user's convolution appears exactly once in the folded one (the added
products multiply zeros), and int32 addition wraps associatively, so the result is bit-exact.
``fold_candidates`` lists the folds worth scoring (only for ``IC < block_in`` and a window
larger than one pixel); ``driver.compile_workload`` lets the schedule model's estimate
(GEMM cycles against DRAM bytes on the config's bus) and then the timing simulator choose
among the plain and folded candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.config import HwConfig
from vta.errors import ShapeError

__all__ = ["FOLDS", "ConvFold", "fold_candidates"]

#: Fold kinds: none (the plain layout), kernel columns (+ row phases), the whole window.
FOLDS = ("none", "kw", "khkw")


@dataclass(frozen=True, slots=True)
class ConvFold:
    """A fold ``kind`` of the user's convolution ``spec``."""

    spec: Conv2dSpec
    kind: str = "none"

    def __post_init__(self) -> None:
        if self.kind not in FOLDS:
            raise ShapeError(f"conv2d fold must be one of {', '.join(FOLDS)}, got {self.kind!r}")

    @property
    def kh(self) -> int:
        """Kernel rows of the folded convolution."""
        if self.kind == "kw":
            return -(-self.spec.kh // self.spec.stride)
        return 1 if self.kind == "khkw" else self.spec.kh

    @property
    def device(self) -> Conv2dSpec:
        """The convolution the accelerator runs (the user's for ``"none"``)."""
        sp = self.spec
        if self.kind == "none":
            return sp
        if self.kind == "kw":
            return Conv2dSpec(n=sp.n, ic=sp.stride * sp.kw * sp.ic, h=sp.oh + self.kh - 1,
                              w=sp.ow, oc=sp.oc, kh=self.kh, kw=1, stride=1, pad=0)
        return Conv2dSpec(n=sp.n, ic=sp.kh * sp.kw * sp.ic, h=sp.oh, w=sp.ow, oc=sp.oc,
                          kh=1, kw=1, stride=1, pad=0)


def fold_candidates(spec: Conv2dSpec, hw: HwConfig) -> list[ConvFold]:
    """The plain layout first, then the folds worth scoring: only when the channels fill less
    than one ``block_in`` block and the window has more than one pixel."""
    out = [ConvFold(spec)]
    if spec.ic < hw.gemm.block_in and spec.kh * spec.kw > 1:
        out += [ConvFold(spec, "kw")] if spec.kw > 1 else []
        out.append(ConvFold(spec, "khkw"))
    return out
