"""The fused requantizing epilogue, its per-layer calibration and its numpy reference.

Two forms (``Epilogue.kind``), both with int32 wrapping arithmetic and an int8 result:

* ``"shift"`` (VTA's benchmark epilogue): ``out = narrow(clip((acc >> shift) + bias, lo, hi))``:
  the accumulator shifted right arithmetically, the per-output-channel bias added, the result
  clipped and narrowed to int8. On the accelerator (pynq) each step is one ALU instruction
  (SHR imm, ADD reg, MAX imm, MIN imm) and the narrowing is the STORE from the out scratchpad,
  which keeps the low bits (it wraps). Without ``clip`` the output is those low bits of
  ``(acc >> shift) + bias``: ``Epilogue.none(8 * p)`` reads byte ``p`` of the raw accumulators
  (``vta run --epilogue none``).
* ``"fixed_point"`` (TFLite-style requantization by a fixed-point multiplier):
  ``out = narrow(clip(((acc + bias) * mult + 2**(shift-1)) >> shift, lo, hi))``, the rounding
  shift dividing by ``2**shift`` to nearest; each step wraps to int32 as the accelerator's
  32-bit accumulator does.

``Epilogue.stages`` states each form once, as element-wise functions; ``epilogue_compute``
(the accelerator's packed layout) and the GPU ops build their tensor-IR stages from it, and on
the accelerator instruction selection chooses the instructions of each stage (``epilogue_plan``,
which the cost model and the machine bound price). ``apply_epilogue`` is the independent numpy
reference.

Calibration (``calibrated_epilogue``): a quantized network picks each layer's requantizing shift
from the range its accumulators take, so that the int8 outputs use their range instead of
sitting at the clip limits. Every run here (``vta run``, the tests, the benches) draws inputs
and weights uniformly over int8 and the bias uniformly over ``[-bias_bound, bias_bound]``, so
the range follows from the layer's reduction length ``K`` analytically (no data pass, so the
shift is known at compile time and the numpy reference and the compiled program use the same
one): each product ``x*w`` has ``E[(xw)^2] = E[x^2]^2`` and ``E[xw] = E[x]^2``, hence
``E[acc^2] = K E[x^2]^2 + K(K-1) E[x]^4``. The shift is the smallest one that maps
``CALIBRATION_Z`` times that RMS (the two-sided 99% point of the normal the sum tends to; sums of
few bounded products have lighter tails) into the clip range less the bias bound. The outputs
then saturate rarely (under 1% on ResNet-18's layers; ``tests/test_epilogue.py`` holds every
layer and random shapes under 5%) and most of them carry information, so a check that compares
them is a check of the accumulators.

``epilogue_compute`` states the same steps in the tensor IR (one element-wise stage each, the
cast as the output), and ``PackedOp`` bundles an accelerator op's tensors for the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import Tensor, compute
from vta.errors import CompileError

if TYPE_CHECKING:
    pass

__all__ = ["CALIBRATION_Z", "Epilogue", "apply_epilogue", "calibrated_epilogue", "epilogue_compute",
           "random_bias", "saturated_fraction"]

#: an element-wise stage: ``(name, fn(x, bias) -> expression)``; ``bias`` is the bias read at
#: the element's channel (None without a bias)
Stage = tuple[str, Callable[[E.Expr, E.Expr | None], E.Expr]]

EPILOGUE_KINDS = ("shift", "fixed_point")

#: Inputs and weights are int8 and the output is int8 (``GemmConfig``'s dtypes on every
#: shipped config); the clip range of a calibrated epilogue is the output type's whole range.
OUT_LO, OUT_HI = -128, 127
IN_LO, IN_HI = -128, 127

#: The calibrated shift maps this many RMS of |acc| inside the clip range: the two-sided 99%
#: point of the standard normal.
CALIBRATION_Z = 2.5758


@dataclass(frozen=True, slots=True)
class Epilogue:
    """``narrow(clip((acc >> shift) + bias, clip_lo, clip_hi))``; without ``clip`` the
    narrowing wraps (keeps the low 8 bits). The defaults are VTA's benchmark epilogue; runs use
    ``calibrated_epilogue`` (``Workload.epilogue``)."""

    shift: int = 8
    bias: bool = True
    clip_lo: int = 0
    clip_hi: int = 127
    clip: bool = True
    #: ``"shift"`` or ``"fixed_point"`` (module docstring)
    kind: str = "shift"
    #: the fixed-point multiplier (``fixed_point`` only)
    mult: int = 1

    def __post_init__(self) -> None:
        if self.kind not in EPILOGUE_KINDS:
            raise CompileError(f"epilogue kind must be one of {', '.join(EPILOGUE_KINDS)}, got "
                               f"{self.kind!r}")
        if not 0 <= self.shift <= 31:
            raise CompileError(f"epilogue shift must be in [0, 31], got {self.shift}")
        if self.kind == "fixed_point" and not (1 <= self.shift and -(1 << 15) <= self.mult
                                               < 1 << 15 and self.mult != 0):
            raise CompileError(f"fixed-point epilogue: shift must be >= 1 and mult a non-zero "
                               f"16-bit signed integer, got shift {self.shift}, mult {self.mult}")
        if not OUT_LO <= self.clip_lo <= self.clip_hi <= OUT_HI:
            raise CompileError(f"epilogue clip range must lie in [{OUT_LO}, {OUT_HI}] with "
                               f"lo <= hi, got [{self.clip_lo}, {self.clip_hi}]")

    @classmethod
    def none(cls, shift: int = 0) -> Epilogue:
        """No requantization: the output is the low 8 bits of ``acc >> shift`` (``shift = 8p``
        reads byte ``p`` of the accumulators)."""
        return cls(shift=shift, bias=False, clip_lo=OUT_LO, clip_hi=OUT_HI, clip=False)

    @property
    def bias_bound(self) -> int:
        """Random biases lie in ``[-bias_bound, bias_bound]``: an eighth of the clip range, so
        they move outputs visibly without pushing them to the limits."""
        return (self.clip_hi - self.clip_lo + 1) // 8

    def stages(self, with_bias: bool = True) -> list[Stage]:
        """The epilogue as element-wise stages, in order (the one statement of each form);
        ``with_bias`` False leaves the bias out even when ``bias`` is set (no bias tensor)."""
        use_bias = self.bias and with_bias
        lo, hi, clip = self.clip_lo, self.clip_hi, self.clip
        if self.kind == "fixed_point":
            m, s, r = self.mult, self.shift, 1 << (self.shift - 1)

            def requant(x: E.Expr, b: E.Expr | None) -> E.Expr:
                y = x + b if use_bias and b is not None else x
                z = (y * m + r) >> s
                return E.min_(E.max_(z, lo), hi) if clip else z

            return [("res_requant", requant)]
        out: list[Stage] = []
        if self.shift:
            out.append(("res_shr", lambda x, b: x >> self.shift))
        if use_bias:
            out.append(("res_bias", lambda x, b: x + b if b is not None else x))
        if clip:
            out.append(("res_clip", lambda x, b: E.min_(E.max_(x, lo), hi)))
        return out


@cache
def _uniform_moments(lo: int, hi: int) -> tuple[float, float]:
    """``E[x]`` and ``E[x^2]`` of x uniform over the integers ``lo..hi``."""
    vals = np.arange(lo, hi + 1, dtype=np.float64)
    return float(vals.mean()), float((vals * vals).mean())


def acc_rms(reduction: int) -> float:
    """RMS of an accumulator summing ``reduction`` products of independent uniform int8."""
    m1, m2 = _uniform_moments(IN_LO, IN_HI)
    k = reduction
    return math.sqrt(k * m2 * m2 + k * (k - 1) * m1 ** 4)


def calibrated_epilogue(reduction: int) -> Epilogue:
    """The requantizing epilogue of a layer whose outputs each sum ``reduction`` products
    (``IC*KH*KW`` for conv2d, ``K`` for matmul): clip to the whole int8 range, bias, and the
    smallest shift mapping ``CALIBRATION_Z`` RMS of the accumulator inside the clip range less
    the bias bound (module docstring)."""
    if reduction < 1:
        raise CompileError(f"epilogue calibration: reduction length must be >= 1, "
                           f"got {reduction}")
    epi = Epilogue(shift=0, bias=True, clip_lo=OUT_LO, clip_hi=OUT_HI)
    room = min(-OUT_LO, OUT_HI) - epi.bias_bound
    need = CALIBRATION_Z * acc_rms(reduction) / room
    shift = max(0, math.ceil(math.log2(need))) if need > 1 else 0
    return Epilogue(shift=min(shift, 31), bias=True, clip_lo=OUT_LO, clip_hi=OUT_HI)


def random_bias(epi: Epilogue, channels: int, rng: np.random.Generator) -> np.ndarray:
    """A random int32 bias per output channel, uniform over ``epi``'s bias bound."""
    b = epi.bias_bound
    return rng.integers(-b, b, size=(channels,), dtype=np.int32, endpoint=True)


def _before_clip(acc: np.ndarray, bias: np.ndarray | None, epi: Epilogue,
                 channel_axis: int) -> np.ndarray:
    """The value the clip sees, in int32 with every step wrapping (written out independently
    of ``Epilogue.stages``): ``(acc >> shift) + bias``, or for the fixed-point form
    ``((acc + bias) * mult + 2**(shift-1)) >> shift``."""
    b = None
    if epi.bias and bias is not None:
        shape = [1] * acc.ndim
        shape[channel_axis] = -1
        b = bias.astype(np.int32).reshape(shape)
    x = acc.astype(np.int32)
    with np.errstate(over="ignore"):
        if epi.kind == "fixed_point":
            if b is not None:
                x = (x + b).astype(np.int32)
            x = (x * np.int32(epi.mult)).astype(np.int32)
            x = (x + np.int32(1 << (epi.shift - 1))).astype(np.int32) >> np.int32(epi.shift)
        else:
            x = x >> np.int32(epi.shift)
            if b is not None:
                x = (x + b).astype(np.int32)
    return x


def apply_epilogue(acc: np.ndarray, bias: np.ndarray | None, epi: Epilogue,
                   channel_axis: int) -> np.ndarray:
    """Bit-exact reference: ``acc`` int32, ``bias`` int32 per channel along ``channel_axis``."""
    x = _before_clip(acc, bias, epi, channel_axis)
    if epi.clip:
        x = np.minimum(np.maximum(x, epi.clip_lo), epi.clip_hi)
    return x.astype(np.int8)  # without the clip: the low 8 bits, as the STORE narrows


def saturated_fraction(acc: np.ndarray, bias: np.ndarray | None, epi: Epilogue,
                       channel_axis: int) -> float:
    """The fraction of outputs the clip changed (their value says only "at least lo/hi")."""
    if not epi.clip or acc.size == 0:
        return 0.0
    x = _before_clip(acc, bias, epi, channel_axis)
    return float(np.count_nonzero((x < epi.clip_lo) | (x > epi.clip_hi))) / x.size


def _stage_fn(fn: Callable[[E.Expr, E.Expr | None], E.Expr], bias: Tensor | None,
              channel_axis: int) -> Callable[[Tensor, tuple[E.Expr, ...]], E.Expr]:
    """``(t, idx) -> fn(t[idx], bias at idx's channel)`` in the packed layout."""
    def f(t: Tensor, i: tuple[E.Expr, ...]) -> E.Expr:
        b = bias[i[channel_axis], i[-2], i[-1]] if bias is not None else None
        return fn(t[i], b)
    return f


def epilogue_compute(acc: Tensor, bias: Tensor | None, epi: Epilogue,
                     channel_axis: int) -> tuple[list[Tensor], Tensor]:
    """The epilogue over ``acc`` (packed, the last two dims one entry) as element-wise stages
    (``Epilogue.stages``; the bias read at ``bias[channel block, lane, block]``); returns those
    stages and the int8 output that narrows the last (``acc`` itself when there is no stage)."""
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

    for name, fn in epi.stages(with_bias=bias is not None):
        cur = ew(name, _stage_fn(fn, bias, channel_axis))
    last = cur
    out = compute(acc.shape, eval(f"lambda {', '.join(names)}: last[{', '.join(names)}]"
                                  ".astype('int8')", {"last": last}), "res")
    return stages, out


