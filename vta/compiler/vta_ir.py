"""The accelerator dialect: statements the VTA pipeline lowers the loop-nest IR into.

Each is a frozen dataclass subclassing ``stmt.Stmt`` with ``render`` (printer), ``exprs`` and
``buffers`` (verifier), as docs/ir.md asks of a target dialect. Fields that depend on enclosing
loops (DRAM offsets, SRAM bases that move with a virtual thread) are expressions; the flatten
step of latency hiding evaluates them into concrete ``Insn`` statements that wrap one
``vta.isa`` instruction each.

Index conventions: SRAM positions count *entries* of the scratchpad (one entry = batch x block
elements); DRAM offsets count entries of the DRAM buffer's kind *relative to the start of the
global buffer* (the emitter adds the allocation's base).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.expr import Expr, Var
from vta.compiler.stmt import Buffer, Stmt
from vta.isa import Alu, AluOp, Deps, Gemm, Instruction, Load, Store, Uop
from vta.isa.asm import format_insn

__all__ = ["DmaLoad", "DmaStore", "GemmNest", "AluNest", "GemmInsn", "AluInsn", "Insn",
           "NO_DEPS", "deps_str", "UopExpr"]

NO_DEPS = Deps()

Render = Callable[[Any], str]


def deps_str(d: Deps) -> str:
    flags = [n for n in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(d, n)]
    return f"  deps({', '.join(flags)})" if flags else ""


@dataclass(frozen=True, slots=True)
class DmaLoad(Stmt):
    """LOAD ``y_size`` x ``x_size`` entries (rows ``x_stride`` apart) of ``dram`` into ``sram``
    at entry ``sram_base``, zero padding the image on four sides (VTA's 2-D DMA)."""

    mem: str  # inp, wgt, acc, uop
    sram: Buffer
    sram_base: Expr
    dram: Buffer
    dram_base: Expr
    y_size: Expr
    x_size: Expr
    x_stride: Expr
    pad_y0: Expr
    pad_y1: Expr
    pad_x0: Expr
    pad_x1: Expr

    def render(self, e: Render, nm: Any) -> list[str]:
        return [f"dma_load.{self.mem}({nm(self.sram, self.sram.name)}@{e(self.sram_base)} <- "
                f"{nm(self.dram, self.dram.name)}@{e(self.dram_base)}, y={e(self.y_size)}, "
                f"x={e(self.x_size)}, stride={e(self.x_stride)}, pad=({e(self.pad_y0)}, "
                f"{e(self.pad_y1)}, {e(self.pad_x0)}, {e(self.pad_x1)}))"]

    def exprs(self) -> tuple[Expr, ...]:
        return (self.sram_base, self.dram_base, self.y_size, self.x_size, self.x_stride,
                self.pad_y0, self.pad_y1, self.pad_x0, self.pad_x1)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.sram, self.dram)


@dataclass(frozen=True, slots=True)
class DmaStore(Stmt):
    """STORE ``y_size`` x ``x_size`` out entries from SRAM entry ``sram_base`` (the out
    scratchpad mirrors acc: the narrowing cast is this write) to ``dram``."""

    sram: Buffer
    sram_base: Expr
    dram: Buffer
    dram_base: Expr
    y_size: Expr
    x_size: Expr
    x_stride: Expr

    def render(self, e: Render, nm: Any) -> list[str]:
        return [f"dma_store.out({nm(self.dram, self.dram.name)}@{e(self.dram_base)} <- "
                f"{nm(self.sram, self.sram.name)}@{e(self.sram_base)}, y={e(self.y_size)}, "
                f"x={e(self.x_size)}, stride={e(self.x_stride)})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (self.sram_base, self.dram_base, self.y_size, self.x_size, self.x_stride)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.sram, self.dram)


def _loops_str(loops: tuple[tuple[Var, int], ...], nm: Any) -> str:
    return ", ".join(f"{nm(v, v.name)}<{n}" for v, n in loops)


@dataclass(frozen=True, slots=True)
class GemmNest(Stmt):
    """A tensorized region: ``for loops: acc[dst] += inp[src] . wgt[w]^T`` (entry indices,
    affine in the loop variables), or ``acc[dst] = 0`` with ``reset``. Micro-op generation
    turns it into ``GemmInsn``s."""

    reset: bool
    loops: tuple[tuple[Var, int], ...]
    dst: Expr
    src: Expr
    wgt: Expr
    acc_buf: Buffer
    inp_buf: Buffer | None
    wgt_buf: Buffer | None

    def render(self, e: Render, nm: Any) -> list[str]:
        if self.reset:
            return [f"gemm.reset(for {_loops_str(self.loops, nm)}: acc[{e(self.dst)}] = 0)"]
        return [f"gemm(for {_loops_str(self.loops, nm)}: acc[{e(self.dst)}] += "
                f"inp[{e(self.src)}] . wgt[{e(self.wgt)}]^T)"]

    def exprs(self) -> tuple[Expr, ...]:
        return ()  # loop variables are bound by the node itself

    def buffers(self) -> tuple[Buffer, ...]:
        return tuple(b for b in (self.acc_buf, self.inp_buf, self.wgt_buf) if b is not None)


@dataclass(frozen=True, slots=True)
class AluNest(Stmt):
    """``for loops: acc[dst] = op(acc[dst], imm or acc[src])`` (entry indices)."""

    op: AluOp
    loops: tuple[tuple[Var, int], ...]
    dst: Expr
    src: Expr | None
    imm: int | None
    acc_buf: Buffer

    def render(self, e: Render, nm: Any) -> list[str]:
        operand = f"#{self.imm}" if self.src is None else f"acc[{e(self.src)}]"
        return [f"alu.{self.op.name.lower()}(for {_loops_str(self.loops, nm)}: acc[{e(self.dst)}]"
                f", {operand})"]

    def exprs(self) -> tuple[Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.acc_buf,)


@dataclass(frozen=True, slots=True)
class UopExpr:
    """A micro-op before flattening: entry indices as expressions (dataclass fields, so
    substitution and free-variable walks see them)."""

    dst: Expr
    src: Expr
    wgt: Expr

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.dst, self.src, self.wgt))


@dataclass(frozen=True, slots=True)
class GemmInsn(Stmt):
    """One GEMM instruction: micro-ops (dst, src, wgt entry expressions) run under the two
    folded loops ``iter_out`` x ``iter_in`` with per-field factors."""

    reset: bool
    uops: tuple[UopExpr, ...]
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    wgt_factor_out: int
    wgt_factor_in: int

    def render(self, e: Render, nm: Any) -> list[str]:
        head = (f"gemm{'.reset' if self.reset else ''} iter=({self.iter_out}, {self.iter_in}) "
                f"dst_f=({self.dst_factor_out}, {self.dst_factor_in}) src_f=({self.src_factor_out}"
                f", {self.src_factor_in}) wgt_f=({self.wgt_factor_out}, {self.wgt_factor_in}) "
                f"uops[{len(self.uops)}]")
        shown = ", ".join(f"({e(d)}, {e(s)}, {e(w)})" for d, s, w in self.uops[:3])
        more = ", ..." if len(self.uops) > 3 else ""
        return [f"{head}: {shown}{more}"]

    def exprs(self) -> tuple[Expr, ...]:
        return tuple(x for u in self.uops for x in u)


@dataclass(frozen=True, slots=True)
class AluInsn(Stmt):
    """One ALU instruction over acc entries (micro-op src indexes acc)."""

    op: AluOp
    uops: tuple[UopExpr, ...]
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    use_imm: bool
    imm: int

    def render(self, e: Render, nm: Any) -> list[str]:
        operand = f"imm={self.imm}" if self.use_imm else "reg"
        shown = ", ".join(f"({e(d)}, {e(s)})" for d, s, _ in self.uops[:3])
        more = ", ..." if len(self.uops) > 3 else ""
        return [f"alu.{self.op.name.lower()} {operand} iter=({self.iter_out}, {self.iter_in}) "
                f"dst_f=({self.dst_factor_out}, {self.dst_factor_in}) src_f=({self.src_factor_out}"
                f", {self.src_factor_in}) uops[{len(self.uops)}]: {shown}{more}"]

    def exprs(self) -> tuple[Expr, ...]:
        return tuple(x for u in self.uops for x in u)


@dataclass(frozen=True, slots=True)
class Insn(Stmt):
    """A concrete instruction after flattening: the ISA instruction (DRAM offsets relative to
    ``dram``), its micro-ops (GEMM/ALU; ``uop_bgn``/``uop_end`` are filled in by the emitter)
    and the thread it came from (for printing)."""

    insn: Instruction
    dram: Buffer | None = None
    uops: tuple[Uop, ...] = ()
    thread: int = 0
    note: str = field(default="", compare=False)

    def render(self, e: Render, nm: Any) -> list[str]:
        where = f"  ; {nm(self.dram, self.dram.name)}" if self.dram is not None else ""
        extra = f"  ; uops[{len(self.uops)}]" if self.uops else ""
        vt = f"  ; vt{self.thread}" if self.thread else ""
        return [f"{format_insn(self.insn)}{where}{extra}{vt}"]

    def exprs(self) -> tuple[Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    @property
    def deps(self) -> Deps:
        return self.insn.deps


def is_mem(insn: Instruction) -> bool:
    return isinstance(insn, (Load, Store))


def is_compute(insn: Instruction) -> bool:
    return isinstance(insn, (Gemm, Alu))
