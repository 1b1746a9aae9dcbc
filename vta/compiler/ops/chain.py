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

A stage may need a second accumulator tile (``EwStage.side``): round half to even
(``even_round_stage``) reads the running value twice, and a multiplication by a constant
without ALU MUL (``shift_add_requant_stage``, ``shift_add_add_stage``) sums shifted copies of
its inputs (``mac``). The accelerator's ALU only updates an entry in place (``acc[dst] =
op(acc[dst], imm or acc[src])``), so there the stage is a scratch tile zeroed by a reset,
``side(scratch, x, *operands)`` computed on it in place (reading the running value ``x`` and
the operands as register operands), then ``join(x, *operands, scratch)`` on the running
value; the GPU inlines ``fn``, which is ``join`` of ``side`` of 0 (one statement).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence
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
           "scaled_operand", "even_round_stage", "even_rounding", "EVEN_ROUND_MAX_SHIFT", "mac",
           "shift_add_requant_stage", "shift_add_add_stage", "offset_stage", "channel_terms",
           "shift_add_channel_stage", "CHANNEL_SHIFT_MAX"]

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
    #: a stage with a scratch tile (module docstring): ``fn(x, *o)`` is ``join(x, *o,
    #: side(0, x, *o))``; both None for a stage without
    side: Callable[..., E.Expr] | None = None
    join: Callable[..., E.Expr] | None = None

    def __post_init__(self) -> None:
        if (self.side is None) != (self.join is None):
            raise CompileError(f"chain stage {self.name}: side and join go together")


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


#: the largest shift ``even_round_stage`` takes: its rounding constants ``2**(s-1)`` and
#: ``2**(s-1) - 1`` are ALU immediates (``vta.graph.ir.ROUND_BITS``'s bound) and its left shift
#: by ``s + 1`` one SHR (at most 16 on VTA)
EVEN_ROUND_MAX_SHIFT = 15


def even_rounding(shift: int) -> tuple[Callable[[E.Expr, E.Expr], E.Expr],
                                        Callable[[E.Expr, E.Expr], E.Expr]]:
    """``(side, join)`` with ``join(x, side(0, x))`` = ``x / 2**shift`` rounded half to even
    (ONNX Runtime's rounding) from ADD, SHR (left by a negative amount) and MAX: ``side(c, x)
    = ((c + x + h) >> (s+1)) << (s+1)`` on a zeroed scratch ``c`` (``h = 2**(s-1)``: the
    tie-up result made even, scaled back) and ``join(x, u) = max(x + h - 1, u) >> s``. ``(x +
    h - 1) >> s`` rounds ties down and ``u >> s`` is the even integer at or below the tie-up
    result; ``floor(max(a, 2**s b) / 2**s) = max(floor(a / 2**s), b)``, so this is
    ``vta.float_scale.rne_shift``'s ``max(down, even_up)`` with the MAX before the last shift.
    Per accumulator entry on VTA: the scratch's reset, ADD (the copy), ADD, SHR, SHR (left) on
    the scratch, ADD, MAX, SHR on the value: 7 ALU instructions against 2 (ADD, SHR) for the
    rounding shift half up."""
    if not 1 <= shift <= 31:
        raise CompileError(f"round half to even: the shift must be in 1..31, got {shift}")
    h = 1 << (shift - 1)

    def side(c: E.Expr, x: E.Expr) -> E.Expr:
        return ((c + x + h) >> (shift + 1)) << (shift + 1)

    def join(x: E.Expr, u: E.Expr) -> E.Expr:
        return E.max_(_offset(x, h - 1), u) >> shift

    return side, join


def _fn(side: Callable[..., E.Expr], join: Callable[..., E.Expr]) -> Callable[..., E.Expr]:
    """``fn(x, *o) = join(x, *o, side(0, x, *o))``: a scratch stage as one expression."""
    return lambda x, *o: join(x, *o, side(E.const(0, "int32"), x, *o))


def even_round_stage(shift: int, lo: int, hi: int, zero: int = 0,
                     name: str = "round_even") -> EwStage:
    """``clip(rne(x / 2**shift) + zero, lo, hi)``: a requantize by a power of two with ONNX
    Runtime's rounding, half to even (``even_rounding``; ``zero``: the output zero point)."""
    side, join = even_rounding(shift)

    def joined(x: E.Expr, u: E.Expr) -> E.Expr:
        return E.min_(E.max_(_offset(join(x, u), zero), lo), hi)

    return EwStage(name, _fn(side, joined),
                   label=f"round_even({shift},{lo},{hi}{_zeros_label(0, zero)})",
                   side=side, join=joined)


def mac(c: E.Expr, terms: list[tuple[E.Expr, int]]) -> E.Expr:
    """``c * 2**e + sum(v * m for v, m in terms)`` by shifts and adds alone (Horner's rule
    over the set bits of the multipliers, from the highest: shift the sum left by the gap to
    the next set bit, add each value whose multiplier has that bit; ``e`` the lowest set
    bit): with ``c`` 0, the products without a multiplier (each step wraps to int32, so the
    sum is the products' int32 sum). Multipliers are non-negative."""
    if any(m < 0 for _, m in terms):
        raise CompileError(f"shift-and-add: multipliers must be non-negative, got "
                           f"{[m for _, m in terms]}")
    bits = sorted({b for _, m in terms for b in range(m.bit_length()) if m >> b & 1},
                  reverse=True)
    acc, prev = c, None
    for b in bits:
        if prev is not None:
            acc = acc << (prev - b)
        for v, m in terms:
            if m >> b & 1:
                acc = acc + v
        prev = b
    return acc << prev if prev else acc


def shift_add_requant_stage(mult: int, pre: int, post: int, lo: int, hi: int, zero: int = 0,
                            name: str = "requant_sa") -> EwStage:
    """``clip(rounding(x * mult, pre, post) + zero, lo, hi)`` (``requant_stage`` without its
    offset) with ``x * mult`` as ``x + mac(0, [(x, mult - 1)])``: shifts and adds on a scratch
    tile, for an ALU without MUL (the same int32 bits as the multiply)."""
    if mult < 1:
        raise CompileError(f"shift-and-add requantize: the multiplier must be >= 1, got {mult}")

    def side(c: E.Expr, x: E.Expr) -> E.Expr:
        return mac(c, [(x, mult - 1)])

    def join(x: E.Expr, u: E.Expr) -> E.Expr:
        return E.min_(E.max_(_offset(rounding(x + u, pre, post), zero), lo), hi)

    return EwStage(name, _fn(side, join), side=side, join=join,
                   label=f"requant_sa({mult},{pre},{post},{lo},{hi}{_zeros_label(0, zero)})")


def shift_add_add_stage(mult: int, mult_o: int, operand: int | None,
                        name: str = "add_sa") -> EwStage:
    """``x * mult + o * mult_o`` (``o`` the tensor operand ``operand``, unscaled; None: ``x *
    mult`` alone) as ``x + mac(0, [(x, mult - 1), (o, mult_o)])``: an add's two multipliers
    by shifts and adds."""
    if mult < 1 or mult_o < 0:
        raise CompileError(f"shift-and-add add: multipliers must be >= 1 and >= 0, got "
                           f"{mult}, {mult_o}")

    def side(c: E.Expr, x: E.Expr, *o: E.Expr) -> E.Expr:
        return mac(c, [(x, mult - 1), *((v, mult_o) for v in o)])

    def join(x: E.Expr, *rest: E.Expr) -> E.Expr:
        return x + rest[-1]

    reads = () if operand is None else (operand,)
    return EwStage(name, _fn(side, join), reads, label=f"madd_sa({mult},{mult_o})",
                   side=side, join=join)


#: the largest left shift a register SHR does (its amount is 5 bits signed: -16..15 on VTA)
CHANNEL_SHIFT_MAX = 16


def channel_terms(mults: Sequence[int], what: str = "requantize") -> list[list[int]]:
    """Per channel, ``mults[c]`` (>= 0) as exactly ``P`` powers of two ``2**e_1 + ... +
    2**e_P``, ``e`` non-increasing (``P`` the largest bit count; a channel with fewer bits
    splits its lowest term ``2**e`` into two of ``2**(e-1)``), given as the Horner's shifts of
    ``shift_add_channel_stage``: the gaps ``e_1 - e_2, ..., e_{P-1} - e_P``, then ``e_P``. A
    ``CompileError`` naming ``what`` and the channel when one cannot (a value below ``P``, or a
    shift beyond ``CHANNEL_SHIFT_MAX``)."""
    bits = [[b for b in range(m.bit_length() - 1, -1, -1) if m >> b & 1] for m in mults]
    p = max((len(b) for b in bits), default=0)
    out = []
    for c, e in enumerate(bits):
        e = list(e)
        while 0 < len(e) < p:
            k = max((i for i, v in enumerate(e) if v >= 1), default=None)
            if k is None:
                break
            e[k:k + 1] = [e[k] - 1, e[k] - 1]
        shifts = [a - b for a, b in itertools.pairwise(e)] + e[-1:]
        if len(e) != p or any(g > CHANNEL_SHIFT_MAX for g in shifts):
            raise CompileError(f"{what}: channel {c}'s multiplier {mults[c]} has no "
                               f"{p}-term shift-and-add form with shifts up to "
                               f"{CHANNEL_SHIFT_MAX} (one register SHR each)")
        out.append(shifts)
    return out


def shift_add_channel_stage(operands: tuple[int, ...], pre: int, post: int, zero: int, lo: int,
                            hi: int, name: str = "requant_ch_sa") -> EwStage:
    """``clip(rounding(x * m, pre, post) + zero, lo, hi)`` with ``m`` per channel, by shifts and
    adds: ``x + h`` where ``h = x * (m - 1)`` is Horner's rule over ``channel_terms(m - 1)``
    (``P`` terms): ``h = x; h = (h << g_i) + x`` for each gap ``g_i``, then ``h << e_P``. The
    ``P`` channel operands ``operands`` hold ``-g_1 .. -g_{P-1}, -e_P`` per channel; a left
    shift by a register is VTA's SHR by the negative amount the register holds (``x << (0 -
    d)``, which instruction selection reads as ``x >> d``)."""
    if not operands:
        raise CompileError("shift-and-add per-channel requantize: no shift operands")

    def side(c: E.Expr, x: E.Expr, *d: E.Expr) -> E.Expr:
        h = c + x
        for g in d[:-1]:
            h = (h << (0 - g)) + x
        return h << (0 - d[-1])

    def join(x: E.Expr, *rest: E.Expr) -> E.Expr:
        return E.min_(E.max_(_offset(rounding(x + rest[-1], pre, post), zero), lo), hi)

    return EwStage(name, _fn(side, join), operands, side=side, join=join,
                   label=f"requant_ch_sa({len(operands)},{pre},{post},{lo},{hi}"
                         f"{_zeros_label(0, zero)})")


def offset_stage(c: int, name: str = "offset") -> EwStage:
    """``x + c`` (a zero point's or a pool's constant before a shift-and-add stage)."""
    return EwStage(name, lambda x: _offset(x, c), label=f"offset({c})")


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


