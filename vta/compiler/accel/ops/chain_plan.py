"""Fused element-wise chains (``ops.chain.Chain``) on the accelerator.

``apply_chain`` builds a chain's stages on an accelerator op (``PackedOp``). An int8 operand
reaches the int32 accumulator through the GEMM core (``widen``: a GEMM against an identity
weight block, the only path from an int8 DRAM tensor to acc; LOAD ACC reads int32 words), then
its ``prep`` and the stage's arithmetic are ALU instructions chosen by instruction selection,
as for the epilogue: a residual add is an ALU ADD with a register operand. ``chain_plan`` lists
the instructions one accumulator entry costs (the schedule model and the machine bound price
them: ``chain_cost``, ``chain_cycles_per_entry``, ``chain_cycles_split``).

A stage with a scratch tile (``EwStage.side``: round half to even, a multiplication by shifts
and adds) gets a second accumulator tile: a zero tile (which tensorize makes an accumulator
reset), ``side`` computed on it in place (the running value and the operands read as register
operands), then ``join`` on the running value reading the scratch as a register operand. The
schedule model counts the scratch's tile (``ChainCost.copies``), its reset and instructions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vta.compiler.accel.cost import reset_instruction
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.select import candidates, cover
from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import Tensor, TensorRead, placeholder, reduce_axis
from vta.compiler.ir.tensor import sum_ as tsum
from vta.compiler.ops.chain import (
    CHANNEL,
    EYE,
    POSITION,
    TABLE,
    Chain,
    ChainOperand,
    EwStage,
    ew,
)
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa.builtins import GEMM
from vta.isa.defs import instance


def check_no_table(chain: Chain, what: str) -> None:
    """A ``CompileError`` when ``chain`` reads a table (``ops.chain.TABLE``): no accelerator
    instruction indexes a table (the GPU's chains take one)."""
    tables = [o.name for o in chain.operands if o.kind == TABLE]
    if tables:
        raise CompileError(f"{what}: chain operand {tables[0]} is a table; no accelerator "
                           f"instruction indexes a table")


def check_widening(hw: HwConfig, what: str) -> None:
    """Widening an int8 tensor through the GEMM core needs an out entry to be an input entry
    (``block_in == block_out``, int8 both): a ``CompileError`` naming ``what`` otherwise."""
    g = hw.gemm
    if g.block_in != g.block_out or g.inp_dtype != g.out_dtype:
        raise CompileError(f"{what}: {hw.name} cannot bring an int8 tensor into the "
                           f"accumulator (the identity GEMM needs block_in == block_out and "
                           f"inp_dtype == out_dtype; got {g.block_in}/{g.block_out}, "
                           f"{g.inp_dtype}/{g.out_dtype})")


def identity_weights(hw: HwConfig) -> Tensor:
    """The identity weight block (one wgt entry) a widening GEMM multiplies by."""
    g = hw.gemm
    return placeholder((1, 1, g.block_out, g.block_in), g.wgt_dtype, EYE)


def widen(src: Tensor, eye: Tensor, name: str) -> Tensor:
    """``src`` (int8, packed: the last two dims one entry) as int32 accumulators, computed by
    the GEMM core: ``sum_{k, i} src[..., b, i] * eye[k, 0, j, i]`` with the identity ``eye``.
    The unit reduction ``k`` keeps the init (a GEMM reset) outside the tensorized region."""
    rk = reduce_axis(1, "k1")
    ri = reduce_axis(src.shape[-1], "bi")
    def body(*ax: E.Var) -> E.Expr:
        idx: tuple[E.Expr, ...] = (*ax[:-1], ri.var)
        return tsum(src[idx].astype("int32")
                    * eye[rk, 0, ax[-1], ri].astype("int32"), [rk, ri])

    return ew(src.shape, body, name)


def _operand_value(op: PackedOp, o: ChainOperand, t: Tensor, ax: tuple[E.Var, ...]) -> E.Expr:
    if o.kind == CHANNEL:
        return t[ax[op.roles["oc"]], ax[-2], ax[-1]]
    return t[ax]


def apply_chain(op: PackedOp, chain: Chain, hw: HwConfig) -> PackedOp:
    """``op`` with ``chain`` after its epilogue: each operand a new input (int8 tensors shaped
    like the output; int32 channel vectors like the bias; int32 per-position tensors shaped
    like the accumulator, read as they are), int8 tensors widened into acc
    (``widen``, reading the identity block ``eye``, one more input) and scaled by their
    ``prep``, then one element-wise stage per ``EwStage``; the int8 output narrows the last."""
    if not chain:
        return op
    check_no_table(chain, op.name)
    shape = op.acc.shape
    g = hw.gemm
    inputs = list(op.inputs)
    stages: list[Tensor] = list(op.epilogue)
    values: list[Tensor] = []
    eye: Tensor | None = next((t for t in op.inputs if t.name == EYE), None)
    had_eye = eye is not None
    for o in chain.operands:
        if o.kind == CHANNEL:
            t = placeholder((shape[op.roles["oc"]], g.batch, g.block_out), g.acc_dtype, o.name)
            inputs.append(t)
            values.append(t)
            continue
        if o.kind == POSITION:  # int32 like the accumulator: LOAD ACC with each tile
            t = placeholder(shape, g.acc_dtype, o.name)
            inputs.append(t)
            values.append(t)
            continue
        check_widening(hw, f"operand {o.name} of {op.name}")
        if eye is None:
            eye = identity_weights(hw)
        t = placeholder(shape, g.out_dtype, o.name)
        inputs.append(t)
        w = widen(t, eye, f"{o.name}_acc")
        stages.append(w)
        if o.prep is not None:
            prep = o.prep
            w = ew(shape, lambda *ax, w=w, prep=prep: prep(w[ax]), f"{o.name}_prep")
            stages.append(w)
        values.append(w)
    if eye is not None and not had_eye:
        inputs.append(eye)
    cur = op.epilogue[-1] if op.epilogue else op.acc
    for s in chain.stages:
        src = cur
        reads = [(chain.operands[k], values[k]) for k in s.reads]
        side: Tensor | None = None
        if s.side is not None:  # a scratch tile (module docstring)
            zero = ew(shape, lambda *ax: E.const(0, g.acc_dtype), f"{op.name}_{s.name}_zero")

            def side_body(*ax: E.Var, src: Tensor = src, s: EwStage = s, zero: Tensor = zero,
                          reads: Sequence[tuple[ChainOperand, Tensor]] = reads) -> E.Expr:
                assert s.side is not None
                return s.side(zero[ax], src[ax], *(_operand_value(op, o, t, ax)
                                                   for o, t in reads))

            side = ew(shape, side_body, f"{op.name}_{s.name}_side")
            stages += [zero, side]

        def body(*ax: E.Var, src: Tensor = src, s: EwStage = s, side: Tensor | None = side,
                 reads: Sequence[tuple[ChainOperand, Tensor]] = reads) -> E.Expr:
            vals = [_operand_value(op, o, t, ax) for o, t in reads]
            if side is None:
                return s.fn(src[ax], *vals)
            assert s.join is not None
            return s.join(src[ax], *vals, side[ax])

        cur = ew(shape, body, f"{op.name}_{s.name}")
        stages.append(cur)
    last = cur
    res = ew(shape, lambda *ax: last[ax].astype(g.out_dtype), "res")
    return PackedOp(op.name, tuple(inputs), op.pad, op.acc, tuple(stages), res, op.roles)


@dataclass(frozen=True)
class ChainCost:
    """What a chain adds per accumulator tile, for the schedule model: its instructions per
    entry (``chain_instructions``), its int8 operands (an inp and an acc tile each), its
    per-channel operands (one acc entry per channel block each), its per-position int32
    operands (an acc tile each, loaded from DRAM with the tile) and its scratch tiles (an acc
    tile each, computed on chip: ``EwStage.side``)."""

    instructions: tuple[tuple[Any, dict[str, Any]], ...]
    tensors: int
    channels: int
    positions: int = 0
    copies: int = 0


def chain_cost(chain: Chain, hw: HwConfig) -> ChainCost:
    """``chain``'s ``ChainCost`` on ``hw`` (a ``CompileError`` when an instruction is missing)."""
    check_no_table(chain, "a fused chain")
    return ChainCost(chain_instructions(chain, hw), len(chain.tensors),
                     sum(o.kind == CHANNEL for o in chain.operands), len(chain.positions),
                     sum(s.side is not None for s in chain.stages))


def chain_instructions(chain: Chain, hw: HwConfig) -> tuple[tuple[Any, dict[str, Any]], ...]:
    """The instructions one accumulator entry of ``chain`` costs on ``hw``, in order, as
    ``(definition, fields)``: per int8 operand a GEMM reset and a GEMM (the widening) and its
    ``prep``'s ALU instructions, per scratch tile its reset (``EwStage.side``), then each
    stage's (``chain_plan``)."""
    out: list[tuple[Any, dict[str, Any]]] = []
    for _ in chain.tensors:  # the widening: a reset and one GEMM per entry
        out += [(GEMM, {"reset": True}), (GEMM, {})]
    for s in chain.stages:
        if s.side is not None:  # the scratch tile's reset
            reset, fields = reset_instruction(hw, GEMM)
            out.append((reset, {"reset": True, **dict(fields)}))
    for sel in chain_plan(chain, hw):
        out.append((sel.intrin.instruction, dict(sel.fields)))
    return tuple(out)


def chain_cycles_per_entry(chain: Chain, hw: HwConfig) -> int:
    """Cycles one accumulator entry of ``chain`` costs (``issue`` cycles of each of
    ``chain_instructions``, from their definitions), on whichever module runs them."""
    return sum(chain_cycles_split(chain, hw))


def chain_cycles_split(chain: Chain, hw: HwConfig) -> tuple[int, int]:
    """``chain_cycles_per_entry`` split as ``(GEMM core, ALU)``: the widening GEMMs and the ALU
    stages. On VTA's one compute pipeline the two add up; on hardware whose ALU is a pipeline
    of its own (``alu.separate_pipeline``) they run side by side, so a lower bound takes each
    on its own pipeline."""
    gemm = alu = 0
    for d, fields in chain_instructions(chain, hw):
        assert d.issue is not None
        cycles = int(d.issue(instance(d, **fields), hw))
        if d.alu:
            alu += cycles
        else:
            gemm += cycles
    return gemm, alu


def chain_plan(chain: Chain, hw: HwConfig) -> tuple[Any, ...]:
    """The ALU instructions (``select.Selected``) of the operands' ``prep`` and the chain's
    stages on one accumulator entry of ``hw``: instruction selection over each stage, as the
    ALU lowering does. A stage no instruction covers is a ``CompileError`` naming it."""
    return _plan(chain, (hw.gemm, hw.alu, hw.intrinsics), hw)


@lru_cache(maxsize=256)
def _plan(chain: Chain, key: tuple[Any, ...], hw: HwConfig) -> tuple[Any, ...]:
    g = hw.gemm
    shape = (1, 1, g.batch, g.block_out)
    acc = placeholder(shape, g.acc_dtype, "acc")
    cands = candidates(hw)
    out: list[Any] = []
    regs = {o.name: placeholder(shape, g.acc_dtype, o.name) for o in chain.operands}
    for o in chain.tensors:
        if o.prep is not None:
            out += _cover(o.prep(regs[o.name][0, 0, 0, 0]), regs[o.name][0, 0, 0, 0],
                          f"{o.name} ({o.label})", hw, cands, cover)
    for s in chain.stages:
        ax = (E.IntImm(0),) * 4
        vals = [regs[chain.operands[k].name][ax] if chain.operands[k].kind != CHANNEL else
                placeholder((1, g.batch, g.block_out), g.acc_dtype, "ch")[0, 0, 0]
                for k in s.reads]
        if s.side is not None and s.join is not None:  # the scratch's side, the join
            scratch = placeholder(shape, g.acc_dtype, "scratch")[ax]
            what = f"{s.name} ({s.label})"
            out += _cover(s.side(scratch, acc[ax], *vals), scratch, f"{what}: its scratch",
                          hw, cands, cover)
            out += _cover(s.join(acc[ax], *vals, scratch), acc[ax], what, hw, cands, cover)
            continue
        out += _cover(s.fn(acc[ax], *vals), acc[ax], f"{s.name} ({s.label})", hw, cands,
                      cover)
    return tuple(out)


def _cover(value: E.Expr, me: E.Expr, what: str, hw: HwConfig, cands: list[Any],
           cover: Callable[..., Any]) -> list[Any]:
    def register(e: E.Expr) -> bool:
        return isinstance(e, TensorRead) and e != me

    why: list[str] = []
    chosen = cover(value, me, register, hw, cands, why)
    if chosen is None:
        detail = f"; {why[0]}" if why else ""
        raise CompileError(f"fused stage {what}: no instruction of {hw.name} computes it "
                           f"(alu.ops: {', '.join(hw.alu.ops)}){detail}")
    return list(chosen)
