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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.ir.expr import Expr, Var
from vta.compiler.ir.stmt import AttrKey, Buffer, Stmt
from vta.compiler.ir.visitor import slot_setters
from vta.isa import Deps, Instruction, InstructionDef, Uop
from vta.isa.asm import format_insn
from vta.isa.insn import DEP_FLAGS, NO_DEPS

__all__ = ["VTHREAD", "BOUNDS", "SRAM", "DmaLoad", "DmaStore", "ComputeNest", "ComputeInsn",
           "Insn", "NO_DEPS", "deps_str", "UopExpr", "UopTable", "Offsets", "make_uops"]

#: the keys accelerator passes hand on (``AttrStmt`` / ``PrimFunc.attr``): a virtual thread's
#: copy of its stage (``virtual_thread``; its index)
VTHREAD: AttrKey[int] = AttrKey("vthread", __name__)
#: each on-chip buffer's region, ((buffer, ((lo, hi), ...)), ...) (``region_inference``)
BOUNDS: AttrKey[tuple[tuple[Buffer, tuple[tuple[int, int], ...]], ...]] = AttrKey("bounds",
                                                                                   __name__)
#: each on-chip buffer's place, ((buffer, base entry, entries), ...) (``scratchpad_alloc``; the
#: base is an expression in the virtual-thread variable where the buffer has a copy per thread)
SRAM: AttrKey[tuple[tuple[Buffer, Expr, int], ...]] = AttrKey("sram", __name__)

Render = Callable[[Any], str]


def deps_str(d: Deps) -> str:
    flags = [n for n in DEP_FLAGS if getattr(d, n)]
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


def _params_str(params: tuple[tuple[str, Any], ...]) -> str:
    return "".join(f" {k}={int(v)}" for k, v in params)


@dataclass(frozen=True, slots=True)
class ComputeNest(Stmt):
    """A region that one micro-op instruction computes: ``for loops: <instruction>`` with each
    operand's entry index (``indices``, parallel to ``operands``: expressions affine in the
    loop variables, including the buffer's SRAM base; the destination first) and the
    instruction's other fields (``params``: immediates, the ALU's ``use_imm``). With ``reset``
    the destination is zeroed. Micro-op generation turns it into ``ComputeInsn``s."""

    instruction: InstructionDef
    reset: bool
    loops: tuple[tuple[Var, int], ...]
    operands: tuple[str, ...]
    indices: tuple[Expr, ...]
    params: tuple[tuple[str, Any], ...]
    operand_buffers: tuple[Buffer, ...]

    def render(self, e: Render, nm: Any) -> list[str]:
        mem = {o.name: o.memory for o in self.instruction.operands}
        ops = ", ".join(f"{f}={mem[f]}[{e(x)}]"
                        for f, x in zip(self.operands, self.indices, strict=True))
        name = self.instruction.name.lower() + (".reset" if self.reset else "")
        return [f"{name}(for {_loops_str(self.loops, nm)}: {ops}{_params_str(self.params)})"]

    def binds(self) -> tuple[Var, ...]:
        """The loop variables this node binds (its indices use them)."""
        return tuple(v for v, _n in self.loops)

    def exprs(self) -> tuple[Expr, ...]:
        return self.indices

    def buffers(self) -> tuple[Buffer, ...]:
        return self.operand_buffers

    def index(self, operand: str) -> Expr | None:
        """The entry index of ``operand`` (None if the instruction does not read it)."""
        return dict(zip(self.operands, self.indices, strict=True)).get(operand)


@dataclass(frozen=True, slots=True)
class UopExpr:
    """A micro-op before flattening: entry indices as expressions (``UopTable.rows``)."""

    dst: Expr
    src: Expr
    wgt: Expr

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.dst, self.src, self.wgt))


class Offsets(tuple):  # type: ignore[type-arg]
    """Integer ``(dst, src, wgt)`` offsets, one triple per micro-op. A tuple subclass, so IR
    traversals (which descend into plain tuples of nodes only) treat it as one leaf."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class UopTable:
    """The micro-ops of one instruction before flattening: per field (dst, src, wgt) one base
    expression, affine in the loops around the instruction and the virtual thread, plus an
    integer offset per micro-op (the enumerated loops' share, ``offsets``). Only the three
    bases are IR children, so a thread's copy (substitution) and free-variable walks touch
    three expressions however many micro-ops there are (VTA's HLS timing makes micro-op
    generation enumerate hundreds per instruction), and flattening evaluates the bases once per
    execution and adds the offsets."""

    base: tuple[Expr, Expr, Expr]
    offsets: Offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def rows(self) -> tuple[UopExpr, ...]:
        """Each micro-op's entry expressions (base + offset; for printing and tests)."""
        d, s, w = self.base
        return tuple(UopExpr(d + a, s + b, w + c) for a, b, c in self.offsets)

    def evaluate(self, ev: Callable[[Expr], int]) -> tuple[Uop, ...]:
        """The concrete micro-ops, the bases evaluated by ``ev`` (under the loops' values)."""
        d, s, w = (ev(x) for x in self.base)
        return make_uops(d, s, w, self.offsets)


def maker(cls: type) -> Callable[..., Any]:
    """A constructor equal to ``cls(*fields)`` (every field given, in order), about twice as
    fast where ``slot_setters`` allows: the slots are filled as the generated ``__init__``
    fills them, without its keyword handling and ``object.__setattr__`` per field (flatten makes
    an instruction and its ``Insn`` for every DMA it executes)."""
    setters = slot_setters(cls)
    if setters is None:
        return cls
    args = ", ".join(f"a{k}" for k in range(len(setters)))
    body = "".join(f"    s{k}(new, a{k})\n" for k in range(len(setters)))
    src = f"def make({args}):\n    new = _new(_cls)\n{body}    return new\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls,
                             **{f"s{k}": f for k, f in enumerate(setters)}}
    exec(src, scope)  # generated from the slot count alone, as dataclasses generates __init__
    made: Callable[..., Any] = scope["make"]
    return made


#: ``Uop``'s setters (dst, src, wgt) for ``make_uops``, None where it is not that dataclass
_UOP_SLOTS = slot_setters(Uop) if tuple(getattr(Uop, "__dataclass_fields__", ())) == (
    "dst", "src", "wgt") else None


def make_uops(d: int, s: int, w: int, offsets: Iterable[tuple[int, int, int]]
              ) -> tuple[Uop, ...]:
    """``tuple(Uop(d + a, s + b, w + c) for a, b, c in offsets)``, built twice as fast: the
    three slots are filled as the dataclass's generated ``__init__`` fills them (flatten makes
    one ``Uop`` per micro-op of every instruction it executes: 150,000 for ResNet-18's eleven
    layers' candidates)."""
    if _UOP_SLOTS is None:
        return tuple(Uop(d + a, s + b, w + c) for a, b, c in offsets)
    set_d, set_s, set_w = _UOP_SLOTS
    new = object.__new__
    out = []
    for a, b, c in offsets:
        u = new(Uop)
        set_d(u, d + a)
        set_s(u, s + b)
        set_w(u, w + c)
        out.append(u)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ComputeInsn(Stmt):
    """One micro-op instruction: micro-ops (``UopTable``: dst, src, wgt entry indices) run
    under the two folded loops ``iter_out`` x ``iter_in`` with per-operand factors (``factors``:
    operand -> (factor_out, factor_in)); ``params`` are its other fields."""

    instruction: InstructionDef
    reset: bool
    uops: UopTable
    iter_out: int
    iter_in: int
    factors: tuple[tuple[str, int, int], ...]
    params: tuple[tuple[str, Any], ...] = ()

    def render(self, e: Render, nm: Any) -> list[str]:
        fs = " ".join(f"{f}_f=({fo}, {fi})" for f, fo, fi in self.factors)
        name = self.instruction.name.lower() + (".reset" if self.reset else "")
        first = UopTable(self.uops.base, Offsets(self.uops.offsets[:3])).rows()
        shown = ", ".join(f"({e(d)}, {e(s)}, {e(w)})" for d, s, w in first)
        more = ", ..." if len(self.uops) > 3 else ""
        return [f"{name}{_params_str(self.params)} iter=({self.iter_out}, {self.iter_in}) {fs} "
                f"uops[{len(self.uops)}]: {shown}{more}"]

    def exprs(self) -> tuple[Expr, ...]:
        return self.uops.base


@dataclass(frozen=True, slots=True)
class Insn(Stmt):
    """A concrete instruction after flattening: the ISA instruction (DRAM offsets relative to
    ``dram``), its micro-op block (GEMM/ALU) and the thread it came from (for printing). Until
    the emitter places the block in the uop buffer, the instruction's ``uop_bgn``/``uop_end``
    count within its own block: the whole of it from flatten, a slice for one part of a split
    instruction (``passes.drain_tail``); the emitter adds the block's position."""

    insn: Instruction
    dram: Buffer | None = None
    uops: tuple[Uop, ...] = ()
    thread: int = 0
    note: str = field(default="", compare=False)

    @property
    def executed(self) -> tuple[Uop, ...]:
        """The micro-ops this instruction runs: ``uops[uop_bgn:uop_end]`` (before emit)."""
        x: Any = self.insn
        return self.uops[x.uop_bgn:x.uop_end] if self.uops else ()

    def render(self, e: Render, nm: Any) -> list[str]:
        where = f"  ; {nm(self.dram, self.dram.name)}" if self.dram is not None else ""
        extra = f"  ; uops[{len(self.uops)}]" if self.uops else ""
        vt = f"  ; vt{self.thread}" if self.thread else ""
        return [f"{format_insn(self.insn)}{where}{extra}{vt}"]

    def exprs(self) -> tuple[Expr, ...]:
        return ()  # every field is concrete

    def buffers(self) -> tuple[Buffer, ...]:
        return () if self.dram is None else (self.dram,)

    @property
    def deps(self) -> Deps:
        return self.insn.deps


