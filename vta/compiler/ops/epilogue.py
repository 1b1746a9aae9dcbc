"""The fused requantizing epilogue (VTA's benchmark epilogue) and its numpy reference.

``out = int8(clip((acc >> shift) + bias, lo, hi))`` with int32 wrapping arithmetic: the
accumulator is shifted right arithmetically, the per-output-channel bias added, the result
clipped and narrowed. On the accelerator each step is one ALU instruction (SHR imm, ADD reg,
MAX imm, MIN imm) and the narrowing is the STORE from the out scratchpad.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Epilogue", "apply_epilogue"]


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
