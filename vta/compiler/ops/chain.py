"""Fused element-wise chains: the operators fusion appends to an op's epilogue, for both targets.

A ``Chain`` is what graph-level fusion (``vta.graph.passes.fuse``) hands the compiler after an
anchor's own requantizing epilogue (``ops.epilogue.Epilogue``): element-wise ``EwStage``s, each
``x -> fn(x, *operands)`` on the running int32 value, and the ``ChainOperand``s they read:

* ``"tensor"``: an int8 tensor shaped like the op's output (a residual branch), optionally
  scaled first (``prep``: e.g. ``b * mult_b``, the add's requantization of its other branch);
* ``"channel"``: an int32 vector per output channel (like a bias);
* ``"position"``: an int32 tensor shaped like the op's output (a bias per output position:
  the correction that folds an input zero point's padding into the accumulator,
  ``vta.graph.passes.fold_pad``), loaded into the accumulator with each tile.
* ``"table"``: an int8 ``(256, 256)`` table read at computed indices (ONNX Runtime's
  element-wise function of two int8 tensors, ``vta.graph.ir.Lut2``, fused into the GPU
  kernel that produces one of them; a stage receives it as a function ``(i, j) -> int32``).
  No accelerator instruction indexes a table: the accelerator's chains refuse it.

Each stage states its integer formula once, in the tensor IR; the accelerator builds it on
its packed op (``vta.compiler.accel.ops.chain_plan.apply_chain``) and the GPU ops on their
output stage (``vta.gpu.ops``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import Tensor, compute
from vta.errors import CompileError
from vta.resources import REQUANT_F32

__all__ = ["ChainOperand", "EwStage", "Chain", "TENSOR", "CHANNEL", "POSITION", "TABLE", "KINDS",
           "TABLE_SIZE", "EYE", "lut2_stage",
           "ew", "requant_stage", "channel_requant_stage", "exact_requant_stage",
           "round_clip_stage", "rounding", "clip_stage", "add_stage", "bias_stage",
           "scaled_operand"]

TENSOR, CHANNEL, POSITION, TABLE = "tensor", "channel", "position", "table"
#: every operand kind (module docstring)
KINDS = (TENSOR, CHANNEL, POSITION, TABLE)
#: entries of a table operand along each index: every int8 value (index = value + 128)
TABLE_SIZE = 256
#: the name of the identity weight block an op that widens int8 operands reads
EYE = "eye"


@dataclass(frozen=True, eq=False)
class ChainOperand:
    """An extra input of a chain (module docstring). ``label`` describes ``prep`` (it enters
    the chain's ``key``)."""

    name: str
    kind: str
    prep: Callable[[E.Expr], E.Expr] | None = None
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CompileError(f"chain operand {self.name}: kind must be one of "
                               f"{', '.join(map(repr, KINDS))}, got {self.kind!r}")
        if self.prep is not None and self.kind != TENSOR:
            raise CompileError(f"chain operand {self.name}: only a {TENSOR!r} operand has a "
                               f"prep, not a {self.kind!r} one")


@dataclass(frozen=True, eq=False)
class EwStage:
    """``x -> fn(x, *values of operands[reads])``; ``label`` states the formula with its
    constants (it enters the chain's ``key``)."""

    name: str
    fn: Callable[..., E.Expr]
    reads: tuple[int, ...] = ()
    label: str = ""


@dataclass(frozen=True, eq=False)
class Chain:
    """Element-wise stages after an op's epilogue, and the operands they read."""

    stages: tuple[EwStage, ...] = ()
    operands: tuple[ChainOperand, ...] = field(default=())

    @property
    def key(self) -> tuple[Any, ...]:
        """A structural key: equal keys compute the same function of the same operands."""
        return (tuple((s.label, s.reads) for s in self.stages),
                tuple((o.kind, o.label) for o in self.operands))

    @property
    def tensors(self) -> list[ChainOperand]:
        return [o for o in self.operands if o.kind == TENSOR]

    @property
    def positions(self) -> list[ChainOperand]:
        """The int32 per-position operands (loaded into acc with each tile, not widened)."""
        return [o for o in self.operands if o.kind == POSITION]

    def __bool__(self) -> bool:
        return bool(self.stages)


# ------------------------------------------------------------------------------ stages


def rounding(x: E.Expr, pre: int, post: int) -> E.Expr:
    """``((x >> pre) + 2**(post-1)) >> post``: a rounding shift right by ``pre + post`` whose
    rounding constant is a small immediate (``vta.graph.ir.split_shift``)."""
    if pre:
        x = x >> pre
    return (x + (1 << (post - 1))) >> post


def _times(x: E.Expr, mult: int) -> E.Expr:
    """``x * mult``; just ``x`` for a multiplier of 1 (no MUL instruction needed)."""
    return x if mult == 1 else x * mult


def _offset(x: E.Expr, c: int) -> E.Expr:
    """``x + c``; just ``x`` for 0 (no instruction)."""
    return x + c if c else x


def _zeros_label(offset: int, zero: int) -> str:
    """The label suffix of a stage's offset and zero point (empty when both are 0, so that
    symmetric chains keep their keys)."""
    return (f",off={offset}" if offset else "") + (f",zero={zero}" if zero else "")


def requant_stage(mult: int, pre: int, post: int, lo: int, hi: int,
                  name: str = "requant", offset: int = 0, zero: int = 0) -> EwStage:
    """``clip(rounding((x + offset) * mult, pre, post) + zero, lo, hi)``, each step wrapping to
    int32 (``offset``: an input zero point's term; ``zero``: the output zero point)."""
    return EwStage(name, lambda x: E.min_(E.max_(_offset(rounding(
        _times(_offset(x, offset), mult), pre, post), zero), lo), hi),
        label=f"requant({mult},{pre},{post},{lo},{hi}{_zeros_label(offset, zero)})")


def channel_requant_stage(operand: int, pre: int, post: int, zero: int, lo: int, hi: int,
                          name: str = "requant_ch") -> EwStage:
    """``clip(rounding(x * m, pre, post) + zero, lo, hi)`` with ``m`` the per-channel
    multiplier read from channel operand ``operand`` (per-channel weight scales)."""
    return EwStage(name, lambda x, m: E.min_(E.max_(_offset(rounding(x * m, pre, post), zero),
                                                    lo), hi), (operand,),
                   label=f"requant_ch({pre},{post},{lo},{hi}{_zeros_label(0, zero)})")


def exact_requant_stage(operand: int, zero: int, lo: int, hi: int,
                        name: str = "requant_f32", offset: int = 0) -> EwStage:
    """``clip(REQUANT_F32(x + offset, w) + zero, lo, hi)`` with ``w`` the scale word read from
    channel operand ``operand``: ONNX Runtime's float32 requantization (``vta.isa.requant``;
    the call is ``ALU.REQUANT_F32``'s pattern, covered by no other instruction); ``offset``:
    an input zero point's term (a global average pool's ``-H*W * zero_x``)."""
    return EwStage(name, lambda x, w: E.min_(E.max_(_offset(E.Call(
        REQUANT_F32, (_offset(x, offset), w)), zero), lo), hi), (operand,),
        label=f"requant_f32({lo},{hi}{_zeros_label(offset, zero)})")


def round_clip_stage(pre: int, post: int, lo: int, hi: int, name: str = "round",
                     zero: int = 0) -> EwStage:
    """``clip(rounding(x, pre, post) + zero, lo, hi)`` (``zero``: the output zero point)."""
    return EwStage(name, lambda x: E.min_(E.max_(_offset(rounding(x, pre, post), zero), lo),
                                          hi),
                   label=f"round({pre},{post},{lo},{hi}{_zeros_label(0, zero)})")


def clip_stage(lo: int, hi: int, name: str = "clip") -> EwStage:
    """``min(max(x, lo), hi)`` (a ReLU is ``clip(0, 127)``)."""
    return EwStage(name, lambda x: E.min_(E.max_(x, lo), hi), label=f"clip({lo},{hi})")


def add_stage(mult: int, operand: int, name: str = "add", zero: int = 0) -> EwStage:
    """``(x - zero) * mult + operand`` (the operand already prepared by its ``prep``;
    ``zero``: the running value's zero point)."""
    return EwStage(name, lambda x, o: _times(_offset(x, -zero), mult) + o, (operand,),
                   label=f"madd({mult}{_zeros_label(0, zero)})")


def bias_stage(operand: int, name: str = "pos_bias", label: str = "add_pos") -> EwStage:
    """``x + operand``: a bias added to the running value, per position (a ``POSITION``
    operand) or per channel (a ``CHANNEL`` one); one ALU ADD with a register operand."""
    return EwStage(name, lambda x, o: x + o, (operand,), label=label)


def lut2_stage(table: int, other: int | None, running_first: bool = True,
               name: str = "lut2") -> EwStage:
    """``table[x + 128, o + 128]`` (``running_first``) or ``table[o + 128, x + 128]``, with
    ``x`` the running value (an int8 value: the stage before ends in a clip to int8) and ``o``
    the int8 tensor operand ``other`` (``None``: ``x`` itself, both indices); ``table`` is a
    ``TABLE`` operand."""
    h = TABLE_SIZE // 2
    reads = (table,) if other is None else (table, other)

    def fn(x: E.Expr, tab: Any, o: E.Expr | None = None) -> E.Expr:
        y = x if o is None else o
        i, j = (x, y) if running_first else (y, x)
        return tab(i + h, j + h)

    order = "" if other is None else ("(x,o)" if running_first else "(o,x)")
    return EwStage(name, fn, reads, label=f"lut2{order}")


def scaled_operand(name: str, mult: int, zero: int = 0) -> ChainOperand:
    """An int8 tensor operand less its zero point ``zero``, multiplied by ``mult``, on its own
    tile first."""
    if not zero:
        return ChainOperand(name, TENSOR, (lambda v: v * mult) if mult != 1 else None,
                            f"*{mult}" if mult != 1 else "")
    return ChainOperand(name, TENSOR, lambda v: _times(v + (-zero), mult),
                        f"-{zero}*{mult}")


# ------------------------------------------------------------------------------ building


def ew(shape: tuple[int, ...], fn: Callable[..., E.Expr], name: str) -> Tensor:
    """``compute(shape, fn, name)`` with ``fn`` taking one axis per dimension positionally."""
    def f(*ax: E.Var) -> E.Expr:
        return fn(*ax)

    f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"a{d}", inspect.Parameter.POSITIONAL_ONLY)
         for d in range(len(shape))])
    return compute(shape, f, name)


# ------------------------------------------------------------------------------ cost


