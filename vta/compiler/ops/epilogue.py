"""The fused requantizing epilogue (VTA's benchmark epilogue) and its numpy reference.

``out = int8(clip((acc >> shift) + bias, lo, hi))`` with int32 wrapping arithmetic: the
accumulator is shifted right arithmetically, the per-output-channel bias added, the result
clipped and narrowed. On the accelerator each step is one ALU instruction (SHR imm, ADD reg,
MAX imm, MIN imm) and the narrowing is the STORE from the out scratchpad.

``epilogue_compute`` states the same steps in the tensor IR (one element-wise stage each, the
cast as the output), and ``PackedOp`` bundles an accelerator op's tensors for the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vta.compiler import expr as E
from vta.compiler.tensor import Tensor, compute

__all__ = ["Epilogue", "PackedOp", "apply_epilogue", "epilogue_compute"]


@dataclass(frozen=True, slots=True)
class Epilogue:
    shift: int = 8
    bias: bool = True
    clip_lo: int = 0
    clip_hi: int = 127

    def __post_init__(self) -> None:
        from vta.compiler.passes._common import CompileError

        if not 0 <= self.shift <= 31:
            raise CompileError(f"epilogue shift must be in [0, 31], got {self.shift}")
        if not -128 <= self.clip_lo <= self.clip_hi <= 127:
            raise CompileError(f"epilogue clip range must lie in [-128, 127] with lo <= hi, "
                               f"got [{self.clip_lo}, {self.clip_hi}]")


def apply_epilogue(acc: np.ndarray, bias: np.ndarray | None, epi: Epilogue,
                   channel_axis: int) -> np.ndarray:
    """Bit-exact reference: ``acc`` int32, ``bias`` int32 per channel along ``channel_axis``."""
    x = acc.astype(np.int32) >> np.int32(epi.shift)
    if epi.bias and bias is not None:
        shape = [1] * x.ndim
        shape[channel_axis] = -1
        with np.errstate(over="ignore"):
            x = (x + bias.astype(np.int32).reshape(shape)).astype(np.int32)
    x = np.minimum(np.maximum(x, epi.clip_lo), epi.clip_hi)
    return x.astype(np.int8)


def epilogue_compute(acc: Tensor, bias: Tensor | None, epi: Epilogue,
                     channel_axis: int) -> tuple[list[Tensor], Tensor]:
    """The epilogue over ``acc`` (packed, the last two dims one entry) as element-wise stages:
    ``>> shift`` (when shift > 0), ``+ bias[channel block, lane, block]`` (when bias), clip
    (``max`` then ``min``); returns those stages and the int8 output that narrows the last."""
    stages: list[Tensor] = []
    cur = acc
    names = [f"a{d}" for d in range(len(acc.shape))]

    def ew(name: str, f) -> Tensor:  # type: ignore[no-untyped-def]
        src = cur
        # a lambda with one named parameter per dimension (compute reads the names)
        fn = eval(f"lambda {', '.join(names)}: f(src, ({', '.join(names)},))",
                  {"f": f, "src": src})
        t = compute(acc.shape, fn, name)
        stages.append(t)
        return t

    if epi.shift:
        cur = ew("res_shr", lambda t, i: t[i] >> epi.shift)
    if epi.bias and bias is not None:
        cur = ew("res_bias", lambda t, i: t[i] + bias[i[channel_axis], i[-2], i[-1]])
    cur = ew("res_clip", lambda t, i: E.min_(E.max_(t[i], epi.clip_lo), epi.clip_hi))
    last = cur
    out = compute(acc.shape, eval(f"lambda {', '.join(names)}: last[{', '.join(names)}]"
                                  ".astype('int8')", {"last": last}), "res")
    return stages, out


@dataclass(frozen=True)
class PackedOp:
    """An accelerator op in the tensor IR: ``inputs`` (placeholders, in parameter order),
    the padding stage to inline into the input copy (or None), the int32 reduction ``acc``
    (reduce axes: channel blocks first, block lanes last), the epilogue stages and the int8
    output. ``roles`` name the output's tile axes (``n``, ``oc``, ``oh``, ``ow``) by position."""

    name: str
    inputs: tuple[Tensor, ...]
    pad: Tensor | None
    acc: Tensor
    epilogue: tuple[Tensor, ...]
    out: Tensor
    roles: Mapping[str, int]

    @property
    def data(self) -> Tensor:
        return self.inputs[0]

    @property
    def kernel(self) -> Tensor:
        return self.inputs[1]

    @property
    def bias(self) -> Tensor | None:
        return self.inputs[2] if len(self.inputs) > 2 else None

    @property
    def args(self) -> list[Tensor]:
        return [*self.inputs, self.out]
