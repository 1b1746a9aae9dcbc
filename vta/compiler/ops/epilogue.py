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
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler import expr as E
from vta.compiler.passes._common import CompileError
from vta.compiler.tensor import ComputeOp, Tensor, TensorRead, compute, placeholder

if TYPE_CHECKING:
    from vta.compiler.select import Selected
    from vta.config import HwConfig

__all__ = ["Epilogue", "PackedOp", "apply_epilogue", "epilogue_compute", "epilogue_plan",
           "epilogue_cycles_per_entry"]


@dataclass(frozen=True, slots=True)
class Epilogue:
    shift: int = 8
    bias: bool = True
    clip_lo: int = 0
    clip_hi: int = 127

    def __post_init__(self) -> None:
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


def epilogue_plan(epi: Epilogue, hw: HwConfig) -> tuple[Selected, ...]:
    """The instructions ``hw`` runs for ``epi`` on each accumulator entry, in order: instruction
    selection (``vta.compiler.select.cover``, the same the ALU lowering does) over the
    epilogue's stages. The cost model and the machine bound read their cycles from here."""
    return _plan(epi, (hw.gemm, hw.alu, hw.intrinsics), hw)


@lru_cache(maxsize=128)
def _plan(epi: Epilogue, key: tuple[Any, ...], hw: HwConfig) -> tuple[Selected, ...]:
    from vta.compiler.select import candidates, cover

    g = hw.gemm
    shape = (1, 1, g.batch, g.block_out)
    acc = placeholder(shape, g.acc_dtype, "acc")
    bias = placeholder((1, g.batch, g.block_out), g.acc_dtype, "bias") if epi.bias else None
    stages, _ = epilogue_compute(acc, bias, epi, channel_axis=1)
    cands = candidates(hw)
    out: list[Selected] = []
    prev = acc
    for st in stages:
        op = st.op
        assert isinstance(op, ComputeOp)
        axes = tuple(a.var for a in op.axes)
        me = prev[axes]

        def register(e: E.Expr, prev: Tensor = prev, lanes: tuple[E.Expr, ...] = axes[-2:]
                     ) -> bool:
            return isinstance(e, TensorRead) and e.tensor is not prev \
                and tuple(e.indices[-2:]) == lanes

        chosen = cover(op.body, me, register, hw, cands)
        if chosen is None:
            raise CompileError(f"epilogue stage {op.name} ({op.body}): no instruction of "
                               f"{hw.name} computes it (alu.ops: {', '.join(hw.alu.ops)})")
        out += chosen
        prev = st
    return tuple(out)


def epilogue_cycles_per_entry(epi: Epilogue, hw: HwConfig) -> int:
    """Cycles the compute module spends per accumulator entry outside the GEMMs: the
    accumulator reset (a GEMM reset micro-op) and the epilogue's instructions (``issue``
    cycles of each, from their definitions)."""
    from vta.isa.builtins import GEMM
    from vta.isa.defs import instance

    assert GEMM.issue is not None
    total = GEMM.issue(instance(GEMM, reset=True), hw)
    for sel in epilogue_plan(epi, hw):
        d = sel.intrin.instruction
        assert d is not None and d.issue is not None
        total += d.issue(instance(d, **sel.fields), hw)
    return total


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
