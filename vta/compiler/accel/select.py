"""Instruction selection for element-wise updates: cover an expression with instruction patterns.

An epilogue stage on the accelerator reads ``acc[i] = f(acc[i], ...)``. Each element-wise
instruction the hardware implements (the ALU's functions, a user's, e.g. a fused requantize)
declares its pattern in the tensor IR (``InstructionDef.pattern``, built into
``TensorIntrinsic``s by ``vta.compiler.ir.intrin``): a compute of the destination ``x`` and its
operands (an acc entry read through ``src``, or immediates held in instruction fields). ``cover``
finds the cheapest sequence of instructions that computes ``f`` in place: each instruction
matches the top of an expression, its ``x`` binds to a sub-expression that earlier instructions
compute into the same entry (or to ``acc[i]`` itself), and the cost is the cycles one micro-op
takes (``InstructionDef.issue``). This is tree covering by dynamic programming, as classic
instruction selectors do; a larger pattern wins when it is cheaper than the small ones it spans.

Matching is structural, up to integer casts and the commutativity of ``+``, ``*``, ``min`` and
``max``; ``x - c`` is read as ``x + (-c)`` and ``x << c`` as ``x >> -c`` (the forms the ALU
has). A pattern sub-expression of immediates alone (a rounding term ``1 << (s - 1)``) matches a
constant once the immediates are bound. Immediates must fit their fields and lie where the
instruction computes its pattern (``InstructionDef.imm_range``: one SHR shifts by the low
``alu.shift_bits`` bits of its immediate, -16..15 on VTA). So a shift by a constant beyond one
SHR's range (``builtins.shift_range``) is also covered as shifts within it, largest first:
``x >> 24`` as ``(x >> 15) >> 9`` (arithmetic shifts compose; left shifts wrap alike); an amount
past the accumulator's width is the width's (``x >> 40`` is ``x >> 31`` on int32, as numpy
fills with the sign). A shift pattern also matches ``x * 2**k`` as ``x >> -k``: a
multiplication by a power of two is a left shift, which VTA's SHR does by a negative amount, so
it needs no MUL (``k`` up to the largest left shift one SHR holds; a MUL or a fused pattern with
a multiplier still matches the product as written, and the cheaper wins).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.accel.insn_intrin import instruction_intrinsics, usable
from vta.compiler.ir import expr as E
from vta.compiler.ir.intrin import TensorIntrinsic
from vta.compiler.ir.tensor import TensorRead
from vta.config import DTYPE_BITS, HwConfig
from vta.isa import registered
from vta.isa.builtins import shift_range
from vta.isa.defs import instance, layout_of

__all__ = ["Selected", "candidates", "cover", "canonical"]

_COMMUTATIVE = (E.Add, E.Mul, E.Min, E.Max)


def _strip(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast) and not e.dtype.startswith("float"):
        e = e.value
    return e


def canonical(e: E.Expr) -> E.Expr:
    """``x - c`` as ``x + (-c)``, ``x << c`` as ``x >> (-c)``, integer casts dropped."""
    def fn(n: Any) -> Any:
        if isinstance(n, E.Cast) and not n.dtype.startswith("float"):
            return canonical(n.value)
        if isinstance(n, E.Sub) and isinstance(_strip(n.b), E.IntImm):
            c = _strip(n.b)
            assert isinstance(c, E.IntImm)
            return E.Add(canonical(n.a), E.IntImm(-c.value, c.dtype), n.dtype)
        if isinstance(n, E.Shl) and isinstance(_strip(n.b), E.IntImm):
            c = _strip(n.b)
            assert isinstance(c, E.IntImm)
            return E.Shr(canonical(n.a), E.IntImm(-c.value, c.dtype), n.dtype)
        return None

    return E.substitute(e, fn)  # type: ignore[no-any-return]


@dataclass
class _Binding:
    """What a pattern's placeholders bound to while matching one expression."""

    x: E.Expr | None = None
    operands: dict[str, E.Expr] = field(default_factory=dict)
    imms: dict[str, int] = field(default_factory=dict)
    deferred: list[tuple[E.Expr, int]] = field(default_factory=list)

    def copy(self) -> _Binding:
        return _Binding(self.x, dict(self.operands), dict(self.imms), list(self.deferred))


@dataclass(frozen=True)
class Selected:
    """One chosen instruction: its intrinsic, the register operands (loads of acc buffers, by
    operand name) and the instruction fields it sets (the variant's fixed fields and the bound
    immediates)."""

    intrin: TensorIntrinsic
    operands: dict[str, E.Expr]
    fields: dict[str, Any]


#: ``_Matcher.imm_only``'s memo: (id of a pattern node, id of its intrinsic) -> (the node, the
#: intrinsic, the answer); bounded
_IMM_ONLY: dict[tuple[int, int], tuple[E.Expr, TensorIntrinsic, bool]] = {}
_IMM_ONLY_MAX = 4096


class _Matcher:
    """Matches one intrinsic's pattern against expressions of one stage; ``left_most`` is the
    largest left shift an SHR does (a shift pattern matches ``x * 2**k`` up to it)."""

    def __init__(self, intrin: TensorIntrinsic, register: Callable[[E.Expr], bool],
                 left_most: int = 0) -> None:
        self.intrin, self.register, self.left_most = intrin, register, left_most
        self.roles = dict(intrin.bind)

    def as_shift(self, e: E.Mul) -> E.Expr:
        """``x * 2**k`` as ``x >> -k`` (``1 <= k <= left_most``), else ``e`` itself."""
        for x, c in ((e.a, e.b), (e.b, e.a)):
            c = _strip(c)
            if isinstance(c, E.IntImm) and c.value >= 2 and not c.value & (c.value - 1):
                k = c.value.bit_length() - 1
                if k <= self.left_most:
                    return E.Shr(x, E.IntImm(-k, c.dtype), e.dtype)
        return e

    def imm_only(self, p: E.Expr) -> bool:
        """Whether the pattern sub-expression ``p`` reads immediates only (memoised per
        pattern node and intrinsic in ``_IMM_ONLY``: every expression a cover tries asks it of
        the same few pattern nodes)."""
        key = (id(p), id(self.intrin))
        hit = _IMM_ONLY.get(key)
        if hit is not None and hit[0] is p and hit[1] is self.intrin:
            return hit[2]
        reads = [n for n in E.walk(p) if isinstance(n, TensorRead)]
        out = bool(reads) and all(self.roles.get(r.tensor) not in ("dst", "src", "wgt")
                                  for r in reads)
        if len(_IMM_ONLY) >= _IMM_ONLY_MAX:
            _IMM_ONLY.clear()
        _IMM_ONLY[key] = (p, self.intrin, out)  # both held: their ids stay their own
        return out

    def match(self, p: E.Expr, e: E.Expr, b: _Binding) -> _Binding | None:
        p, e = _strip(p), _strip(e)
        if isinstance(p, E.Shr) and isinstance(e, E.Mul):
            e = self.as_shift(e)
        if isinstance(p, TensorRead):
            return self.leaf(p, e, b)
        if type(p) is not type(e) and type(e) is not E.IntImm:
            return None  # what either branch below answers, without walking ``p``
        if self.imm_only(p):
            if not isinstance(e, E.IntImm):
                return None
            b = b.copy()
            b.deferred.append((p, e.value))
            return b
        if type(p) is not type(e):
            return None
        if isinstance(p, E.IntImm):
            return b if isinstance(e, E.IntImm) and p.value == e.value else None
        if isinstance(p, E.Cmp) and p.op != e.op:  # type: ignore[attr-defined]
            return None
        if isinstance(p, E.Call) and p.name != e.name:  # type: ignore[attr-defined]
            return None
        pc, ec = list(E.children(p)), list(E.children(e))
        if len(pc) != len(ec):
            return None
        orders = [ec]
        if isinstance(p, _COMMUTATIVE):
            orders.append(ec[::-1])
        for order in orders:
            nb: _Binding | None = b
            for pp, ee in zip(pc, order, strict=True):
                nb = self.match(pp, ee, nb) if nb is not None else None
            if nb is not None:
                return nb
        return None

    def leaf(self, p: TensorRead, e: E.Expr, b: _Binding) -> _Binding | None:
        role = self.roles.get(p.tensor)
        b = b.copy()
        if role == "dst":  # the value computed so far into the entry
            if b.x is not None and b.x != e:
                return None
            b.x = e
            return b
        if role in ("src", "wgt"):  # a register operand: another acc entry, same lanes
            if not self.register(e):
                return None
            if role in b.operands and b.operands[role] != e:
                return None
            b.operands[role] = e
            return b
        if isinstance(e, E.IntImm) and role is not None:  # an immediate field
            if b.imms.get(role, e.value) != e.value:
                return None
            b.imms[role] = e.value
            return b
        return None

    def resolve(self, b: _Binding) -> bool:
        """Check the deferred immediate expressions against the constants they met."""
        for p, value in b.deferred:
            def fn(n: Any) -> Any:
                if isinstance(n, TensorRead):
                    role = self.roles.get(n.tensor)
                    if role not in b.imms:
                        raise KeyError(role)
                    return E.IntImm(b.imms[role])
                return None

            try:
                v = E.substitute(p, fn)
            except KeyError:
                return False
            if not (isinstance(v, E.IntImm) and v.value == value):
                return False
        return True


def candidates(hw: HwConfig) -> list[TensorIntrinsic]:
    """The element-wise (``update``) instruction patterns ``hw`` implements, with acc
    destinations, usable with their variant's fixed fields (an ALU function must be enabled).
    Memoised per configuration and registry (``_CANDIDATES``: the ALU lowering and the cost
    model ask it for every candidate); a definition registered since is seen."""
    defs = registered()
    hit = _CANDIDATES.get(hw)
    if hit is not None and len(hit[0]) == len(defs) \
            and all(a is b for a, b in zip(hit[0], defs, strict=True)):
        return list(hit[1])
    out = []
    for d in defs:
        if d.kind != "update" or d.pattern is None or d.dst.memory != "acc":
            continue
        for intrin in instruction_intrinsics(d, hw):
            if usable(d, hw, **intrin.fixed):
                out.append(intrin)
    if len(_CANDIDATES) >= _CANDIDATES_MAX:
        _CANDIDATES.clear()
    _CANDIDATES[hw] = (defs, tuple(out))
    return out


#: ``candidates``' memo: configuration -> (the registry's definitions then, the patterns)
_CANDIDATES: dict[HwConfig, tuple[tuple[Any, ...], tuple[TensorIntrinsic, ...]]] = {}
_CANDIDATES_MAX = 64


def _fits(intrin: TensorIntrinsic, fields: dict[str, Any], hw: HwConfig) -> str | None:
    """Why ``fields`` (the variant's fixed ones and the bound immediates) cannot be the
    instruction's: a value its field does not encode, or an immediate outside ``imm_range``."""
    d = intrin.instruction
    assert d is not None
    widths = {f.name: f for half in layout_of(d, hw) for f in half}
    for name, v in fields.items():
        f = widths.get(name)
        if f is not None and not f.range[0] <= v <= f.range[1]:
            return (f"immediate {v} does not fit {d.name}'s {f.width}-bit "
                    f"field {name} ({f.range[0]}..{f.range[1]})")
    return d.outside_range(instance(d, **fields), hw) if d.imm_range is not None else None


def _split_shift(e: E.Expr, hw: HwConfig) -> E.Expr | None:
    """``x >> c`` with a constant ``c`` beyond one SHR's range as ``(x >> step) >> (c -
    step)``, ``step`` the range's end on ``c``'s side (module docstring); None otherwise."""
    if not isinstance(e, E.Shr):
        return None
    c = _strip(e.b)
    if not isinstance(c, E.IntImm):
        return None
    lo, hi = shift_range(hw)
    bits = DTYPE_BITS.get(e.dtype, DTYPE_BITS[hw.gemm.acc_dtype])
    amount = max(-bits, min(c.value, bits - 1))  # past the width: the same bits
    if lo <= amount <= hi:
        return None if amount == c.value else E.Shr(e.a, E.IntImm(amount, c.dtype), e.dtype)
    step = hi if amount > 0 else lo
    inner = E.Shr(e.a, E.IntImm(step, c.dtype), e.dtype)
    return E.Shr(inner, E.IntImm(amount - step, c.dtype), e.dtype)


def cover(value: E.Expr, me: E.Expr, register: Callable[[E.Expr], bool], hw: HwConfig,
          cands: Sequence[TensorIntrinsic], why: list[str] | None = None
          ) -> list[Selected] | None:
    """The cheapest instruction sequence (innermost first) computing ``value`` in place into
    the entry ``me`` reads, or None. ``register(e)`` says whether ``e`` can be a register
    operand (another accumulator entry at the same lanes); ``why`` collects the reasons
    candidates were refused."""
    value, me = canonical(value), canonical(me)
    left_most = -shift_range(hw)[0]
    memo: dict[int, tuple[float, list[Selected]] | None] = {}
    keep: list[E.Expr] = []  # keep sub-expressions alive so their ids stay unique

    def best(e: E.Expr) -> tuple[float, list[Selected]] | None:
        if e == me:
            return 0.0, []
        key = id(e)
        if key in memo:
            return memo[key]
        keep.append(e)
        memo[key] = None  # a cycle is no cover
        found: tuple[float, list[Selected]] | None = None
        for intrin in cands:
            m = _Matcher(intrin, register, left_most)
            b = m.match(intrin.op.body, e, _Binding())
            if b is None or not m.resolve(b):
                continue
            fields = {**intrin.fixed, **b.imms}
            bad = _fits(intrin, fields, hw)
            if bad:
                if why is not None:
                    why.append(bad)
                continue
            assert intrin.instruction is not None
            cost = float(intrin.instruction.issue(instance(intrin.instruction, **fields), hw)) \
                if intrin.instruction.issue else 1.0
            rest = best(b.x) if b.x is not None else (0.0, [])
            if rest is None:
                continue
            total = cost + rest[0]
            if found is None or total < found[0]:
                found = (total, [*rest[1], Selected(intrin, b.operands, fields)])
        split = _split_shift(e, hw)
        if split is not None:
            keep.append(split)
            alt = best(split)
            if alt is not None and (found is None or alt[0] < found[0]):
                found = alt
        memo[key] = found
        return found

    r = best(value)
    return None if r is None else r[1]



