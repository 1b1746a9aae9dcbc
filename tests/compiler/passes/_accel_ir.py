"""Helpers for the accelerator's before/expected pass tests: the hardware, hand-written
instruction streams (assembly text, as ``vta.isa.disassemble`` prints it) and the annotations
earlier passes leave (the SRAM table, a matched GEMM region)."""

from __future__ import annotations

from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.intrin import Match, TensorizeRegion
from vta.config import HwConfig
from vta.isa import Instruction, Uop, assemble

PYNQ = HwConfig.load("pynq")


def isa(text: str, hw: HwConfig = PYNQ) -> list[Instruction]:
    """The instructions of assembly ``text`` (one a line, range-checked against ``hw``)."""
    return list(assemble(text, hw).instructions)


def uops(*rows: tuple[int, int, int]) -> tuple[Uop, ...]:
    """Micro-ops from (dst, src, wgt) triples."""
    return tuple(Uop(*r) for r in rows)


def stream(params: list[S.Buffer], allocs: list[S.Buffer], *insns: Insn,
           name: str = "f") -> S.PrimFunc:
    """A flat instruction stream, as ``flatten`` leaves it: allocations around ``Insn``s."""
    body: S.Stmt = S.seq(*insns)
    for b in reversed(allocs):
        body = S.Allocate(b, body)
    return S.PrimFunc(name, tuple(params), body)


def sram(*rows: tuple[S.Buffer, E.ExprLike, int]) -> tuple[tuple[S.Buffer, E.Expr, int], ...]:
    """``attrs["sram"]`` as scratchpad allocation records it: (buffer, base entry, entries)."""
    return tuple((b, E.as_expr(base), n) for b, base, n in rows)


def gemm_region(dst: S.Buffer, src: S.Buffer, wgt: S.Buffer, i: E.Var, j: E.Var, k: E.Var,
                hw: HwConfig = PYNQ) -> TensorizeRegion:
    """What ``lower`` leaves on a region matched to the GEMM intrinsic: its batch, block_out
    and block_in loops ``i``, ``j``, ``k`` and the three operand buffers."""
    intrin = vta_gemm_intrinsic(hw)
    op = intrin.op
    axes = (*op.axes, *op.reduce_axes)
    buffers = {intrin.decl: dst, intrin.placeholder_for("src"): src,
               intrin.placeholder_for("wgt"): wgt}
    return TensorizeRegion(intrin, Match({}, {}), dict(zip(axes, (i, j, k), strict=True)),
                           buffers)
