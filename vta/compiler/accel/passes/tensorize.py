"""Tensorize: regions under ``AttrStmt(TENSORIZE, region)`` become nests of the matched
intrinsic's instruction.

Pre:  DMA insertion has run. ``lower`` wrapped each tensorized region (the intrinsic's own
      loops, e.g. GEMM's batch x block_out x block_in) in ``AttrStmt(TENSORIZE,
      TensorizeRegion)``, which carries the intrinsic, its instruction definition and the
      ``Match`` translated to the lowered loops and buffers; the loops around it up to the
      enclosing allocation or sequence form a perfect nest (the instruction's outer loops); the
      last two indices of every operand buffer are one scratchpad entry. A perfect nest that
      stores the constant 0 into an acc buffer (a reduction's init nest) is a reset.
Post: each region is a ``ComputeNest`` of the intrinsic's instruction (the outer loops, and each
      operand's entry index as an affine expression including its buffer's SRAM base), under
      ``AttrStmt(STAGE, "<dst>.update")``; init nests are ``ComputeNest(reset)`` of the
      instruction that accumulates into that buffer (GEMM when none does), or an ALU reset on
      hardware whose ALU is a separate pipeline (``cost.reset_instruction``), under
      ``"<dst>.init"``. The intrinsic's own loops are gone (one micro-op executes them all).
      Which buffer is which operand comes from the region's binding, never from scopes or
      names; an operand in the wrong scratchpad, or a block that is not one entry, is a
      ``TensorizeError`` naming the buffer.
"""

from __future__ import annotations

from collections.abc import Iterator

from vta.compiler.accel.cost import reset_instruction
from vta.compiler.accel.passes._common import flat_entry, loop_nest, map_stmt, sram_map
from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.intrin import TensorizeRegion
from vta.config import HwConfig
from vta.errors import TensorizeError
from vta.isa import DefinitionError, InstructionDef
from vta.isa.builtins import GEMM
from vta.isa.defs import require

__all__ = ["tensorize", "TensorizeError"]


def tensorize(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)
    resets: dict[S.Buffer, InstructionDef] = {}
    for n in _statements(func.body):
        if isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE \
                and isinstance(n.value, TensorizeRegion) and n.value.intrin.instruction:
            resets[n.value.buffer("dst")] = n.value.intrin.instruction

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key is S.TENSORIZE:
            g = _compute(func, [], s, bases, hw)
            return S.AttrStmt(S.STAGE, f"{g.operand_buffers[0].name}.update", g)
        if not isinstance(s, S.For):
            return None
        outer, inner = _peel(s)
        if isinstance(inner, S.AttrStmt) and inner.key is S.TENSORIZE:
            g = _compute(func, outer, inner, bases, hw)
            return S.AttrStmt(S.STAGE, f"{g.operand_buffers[0].name}.update", g)
        if not isinstance(inner, S.BufferStore):
            return None  # not a perfect nest around one store: no init nest
        r = _reset(outer, inner, bases, resets, hw)
        return None if r is None else S.AttrStmt(S.STAGE, f"{r.operand_buffers[0].name}.init", r)

    return func.with_body(map_stmt(func.body, rewrite))


def _statements(s: S.Stmt) -> Iterator[S.Stmt]:
    """Every statement under ``s`` (itself included) in ``expr.walk``'s pre-order, without
    entering expressions: the regions are statements, and a walk of every node reads each
    index and value expression of the function (most of its nodes) for nothing. The core
    statements' statement fields are read directly; any other statement's through
    ``expr.children``."""
    stack: list[S.Stmt] = [s]
    while stack:
        n = stack.pop()
        yield n
        t = type(n)
        if t is S.SeqStmt:
            stack.extend(reversed(n.stmts))  # type: ignore[attr-defined]
        elif t in _ONE_BODY:
            stack.append(n.body)  # type: ignore[attr-defined]
        elif t is S.IfThenElse:
            assert isinstance(n, S.IfThenElse)
            if n.else_case is not None:
                stack.append(n.else_case)
            stack.append(n.then_case)
        elif t is not S.BufferStore:
            stack.extend(reversed([x for x in E.children(n) if isinstance(x, S.Stmt)]))


#: statements whose one statement field is ``body``
_ONE_BODY = frozenset({S.For, S.AttrStmt, S.Allocate, S.LetStmt})


def _peel(s: S.Stmt) -> tuple[list[tuple[E.Var, int]], S.Stmt]:
    loops: list[tuple[E.Var, int]] = []
    while (isinstance(s, S.For) and E.is_const(s.min, 0) and isinstance(s.extent, E.IntImm)):
        loops.append((s.var, s.extent.value))
        s = s.body
    return loops, s


def _reset(loops: list[tuple[E.Var, int]], body: S.BufferStore, bases: dict[S.Buffer, E.Expr],
           resets: dict[S.Buffer, InstructionDef], hw: HwConfig) -> ComputeNest | None:
    """The reset of an init nest: ``loops`` (``_peel``'s, every one from 0 with a constant
    extent) around ``body`` storing 0 into an acc buffer; None for any other store."""
    if not (body.buffer.scope == "acc"
            and isinstance(body.value, E.IntImm) and body.value.value == 0):
        return None
    entry = set(body.indices[-2:])
    outer = tuple((v, n) for v, n in loops if v not in entry)
    dst = bases[body.buffer] + flat_entry(body.buffer, body.indices)
    defn, params = reset_instruction(hw, resets.get(body.buffer, GEMM))
    return ComputeNest(defn, True, outer, ("dst",), (dst,), params, (body.buffer,))


def _entry_index(where: str, buf: S.Buffer, indices: tuple[E.Expr, ...],
                 own: set[E.Var], bases: dict[S.Buffer, E.Expr]) -> E.Expr:
    """``buf``'s SRAM entry index at ``indices``: the intrinsic's own loops may only walk the
    entry (the last two dims), so one micro-op addresses one entry."""
    lead = indices[:-2]
    if any(E.free_vars(i) & own for i in lead):
        raise TensorizeError(f"{where}: the intrinsic's block of {buf.name} is not one "
                             f"scratchpad entry (its loops index {list(lead)}, the entry dims "
                             f"are the last two)")
    return bases[buf] + flat_entry(buf, indices)


def _compute(func: S.PrimFunc, outer_loops: list[tuple[E.Var, int]], attr: S.AttrStmt,
             bases: dict[S.Buffer, E.Expr], hw: HwConfig) -> ComputeNest:
    region = attr.value
    where = f"{func.name}: tensorize region"
    if not isinstance(region, TensorizeRegion):
        raise TensorizeError(f"{where}: expected a matched region from lower, got {region!r}")
    intrin = region.intrin
    defn = intrin.instruction
    where = f"{func.name}: tensorize with {intrin.name}"
    if defn is None and intrin.target == "vta":
        raise TensorizeError(f"{where}: no accelerator instruction implements it (an "
                             f"intrinsic of the accelerator is made from an instruction: "
                             f"vta.intrinsics.register it, and list its config intrinsic under "
                             f"the hardware config's intrinsics:)")
    if defn is None:
        raise TensorizeError(f"{where}: {intrin.name} is an intrinsic of {intrin.target} (a "
                             f"GPU), which the accelerator cannot run; build this schedule for "
                             f"'cuda-emu' or 'cuda', or tensorize with an accelerator intrinsic")
    try:
        require(defn, hw)
    except DefinitionError as e:
        raise TensorizeError(f"{where}: {e}") from None
    inner, body = loop_nest(attr.body)
    loops = [*outer_loops, *inner]
    dst = region.buffer("dst")
    if not isinstance(body, S.BufferStore) or body.buffer is not dst:
        raise TensorizeError(f"{where}: the region must store into {dst.name}")
    own = set(region.loops.values())
    ops, idx, bufs = [], [], []
    loads = [n for n in E.walk(body.value) if isinstance(n, S.BufferLoad)]
    for op in (defn.dst, *(o for o in defn.operands if not o.writes)):
        buf = region.buffer(op.name)
        if buf is None:
            continue
        if buf.scope != op.memory:
            raise TensorizeError(f"{where}: operand {op.name} of {defn.name} lives in the "
                                 f"{op.memory} scratchpad, but {buf.name} is in {buf.scope} "
                                 f"(cache_read/cache_write it into {op.memory})")
        if op.writes:
            at = body.indices
        else:
            reads = {ld.indices for ld in loads if ld.buffer is buf}
            if len(reads) != 1:
                raise TensorizeError(f"{where}: operand {op.name} reads {buf.name} "
                                     f"{'at several places' if reads else 'nowhere'}")
            (at,) = reads
        ops.append(op.name)
        idx.append(_entry_index(where, buf, at, own, bases))
        bufs.append(buf)
    nest = tuple((v, n) for v, n in loops if v not in own and n != 1)
    params = tuple(sorted(intrin.fixed.items()))
    return ComputeNest(defn, False, nest, tuple(ops), tuple(idx), params, tuple(bufs))
