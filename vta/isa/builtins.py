"""The built-in instructions, defined through the same API a user's instruction uses
(``vta.isa.defs.InstructionDef``): LOAD, STORE, GEMM, the ALU's functions MIN, MAX, ADD, SHR,
MUL (opcode 4, told apart by the ``op`` field), and FINISH.

Each definition below is the one place its encoding, routing, duration, semantics and assembly
syntax are written; the assembler, the encoder, both simulators and the compiler read them.
The formulas are documented in ``vta.isa.timing`` and docs/isa.md.

The semantics at the ISA's edges are those of VTA's HLS design (apache/tvm-vta@d4a15f6
hardware/xilinx/src/vta.cc), with a config field where vta.cc's behaviour reads as a hardware
bug (docs/isa.md, "Semantics"):

* SHR shifts by the low ``alu.shift_bits`` bits of its operand read as a signed number (vta.cc
  line 376: ``aluop_shr_arg_T shft_by = src_1.range(VTA_SHR_ARG_BIT_WIDTH - 1, 0)``, an
  ``ap_int`` of ``VTA_LOG_ACC_WIDTH`` = 5 bits), and a negative amount shifts left (line 393,
  ``src_0 >> shft_by`` with a signed amount);
* an ALU instruction's reset flag does what ``alu.reset`` says (vta.cc's ``alu()``, lines
  327-413, never reads it);
* a GEMM reset zeroes the accumulator and writes to out what ``gemm.reset_out`` says (vta.cc
  lines 302-306: ``a_tensor = reset ? 0 : accum``, ``o_tensor = accum.range(...)``: the low
  bits of acc + inp . wgt^T);
* LOAD per memory type: ``vta.isa.insn.Load`` (WGT ignores pads, UOP copies ``x_size`` entries,
  INP/ACC write their pads even without data).

ALU function 4 is MUL, our extension (as VTA's functional simulator): ``acc = wrap(acc *
operand)``. Neither of VTA's hardware designs implements it (``VTA_INSTRUCTIONS`` lists what
they do): a config enables it in ``alu.ops`` and then does not claim to be VTA (``stock:
false``). A shift left is an SHR by a negative amount, as VTA's compiler expresses ``<<``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any, cast

import numpy as np

from vta.config import VTA_ALU_OPS, HwConfig
from vta.isa.asm import AsmLine, microop_args, microop_syntax, microop_text
from vta.isa.defs import (
    AsmSyntax,
    Field,
    InstructionDef,
    Operand,
    ResetMode,
    by_name,
    definition_of,
    function_field,
    register,
)
from vta.isa.insn import (
    DEP_FLAGS,
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Load,
    MemType,
    Opcode,
    Store,
    Unit,
)
from vta.isa.program import Program
from vta.isa.timing import (
    DmaTiming,
    alu_issues,
    chisel_refusal,
    dma_offsets,
    dma_timing,
    empty_dma_cycles,
    finish_cycles,
    loop_cycles,
)

__all__ = ["LOAD", "STORE", "GEMM", "ALU", "FINISH", "VTA_INSTRUCTIONS", "is_vta_instruction",
           "instruction_counts", "non_vta_instructions", "loop_head", "alu_shift",
           "shift_amount", "shift_range", "load_image", "store_rows", "wrap",
           "elementwise_patterns", "gemm_pattern"]


# ------------------------------------------------------------------------------ layouts


def loop_head(w: Any) -> tuple[Field, ...]:
    """The low-half fields every micro-op loop instruction starts with (VTA's GEMM/ALU)."""
    return (Field("reset", 1), Field("uop_bgn", w.uop_idx), Field("uop_end", w.uop_idx + 1),
            Field("iter_out", w.loop_iter), Field("iter_in", w.loop_iter))


def _mem_lo(w: Any) -> tuple[Field, ...]:
    return (Field("mem", 3), Field("sram_base", w.sram_addr), Field("dram_base", w.dram_addr))


def _load_layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    w = hw.isa
    return _mem_lo(w), (Field("y_size", w.mem_size), Field("x_size", w.mem_size),
                        Field("x_stride", w.mem_size), Field("pad_y0", w.pad),
                        Field("pad_y1", w.pad), Field("pad_x0", w.pad), Field("pad_x1", w.pad))


def _store_layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    w = hw.isa
    return _mem_lo(w), (Field("y_size", w.mem_size), Field("x_size", w.mem_size),
                        Field("x_stride", w.mem_size), Field("_pads", 4 * w.pad))


def _base_field(w: Any) -> tuple[Field, ...]:
    """The micro-op base (``gemm.uop_base``): one bit in the gap VTA leaves at bit 63 of a
    GEMM/ALU word's low half (VTA_REFERENCE.md), absent on VTA's own hardware."""
    return (Field("uop_base", w.uop_base),) if getattr(w, "uop_base", 0) else ()


def _gemm_layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    w = hw.isa
    return (*loop_head(w), *_base_field(w)), (
        Field("dst_factor_out", w.acc_idx), Field("dst_factor_in", w.acc_idx),
        Field("src_factor_out", w.inp_idx), Field("src_factor_in", w.inp_idx),
        Field("wgt_factor_out", w.wgt_idx), Field("wgt_factor_in", w.wgt_idx))


def _alu_layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    w = hw.isa
    return (*loop_head(w), *_base_field(w)), (
        Field("dst_factor_out", w.acc_idx), Field("dst_factor_in", w.acc_idx),
        Field("src_factor_out", w.acc_idx), Field("src_factor_in", w.acc_idx),
        Field("op", w.alu_opcode), Field("use_imm", 1), Field("imm", w.imm, signed=True))


def _finish_layout(hw: Any) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
    return (), ()


# ------------------------------------------------------------------------------ DMA


def load_image(insn: Load, data: np.ndarray) -> np.ndarray:
    """LOAD's semantics: the ``(rows, cols, *entry)`` SRAM image of ``data`` (the ``(data_rows,
    x_size, *entry)`` entries read from DRAM) with the zero pads its memory type writes around
    it (``Load.pads``). Both simulators call this; they differ only in how they read the DRAM
    rows."""
    y0, _, x0, _ = insn.pads
    img = np.zeros((insn.rows, insn.cols, *data.shape[2:]), dtype=data.dtype)
    img[y0:y0 + insn.data_rows, x0:x0 + insn.x_size] = data
    return img


def store_rows(insn: Store, entries: np.ndarray) -> np.ndarray:
    """STORE's semantics: ``y_size * x_size`` consecutive out entries as ``(y_size, x_size,
    *entry)`` rows, each written to DRAM ``x_stride`` entries after the previous (in row order:
    where rows overlap, the later row wins)."""
    return entries.reshape(insn.y_size, insn.x_size, *entries.shape[1:])


def _load_unit(insn: Load) -> Unit:
    return Unit.LOAD if insn.mem in (MemType.INP, MemType.WGT) else Unit.COMPUTE


def _load_timing(insn: Load, hw: HwConfig) -> DmaTiming | None:
    """A LOAD on the read channel: its data rows at their DRAM addresses, and the pads its
    memory type writes (``Load.pads``: none for WGT and UOP; ``Load.data_rows``: one for UOP);
    None when it moves no data (``vta.isa.timing``)."""
    e = hw.elem_bytes(insn.mem.kind)
    return dma_timing(hw, insn.data_rows, insn.x_size, e, insn.pads, kind=insn.mem.kind,
                      addr=insn.dram_base * e, stride=insn.x_stride * e)


def _load_duration(insn: Load, hw: HwConfig) -> int:
    """A LOAD's cycles alone on the port. One without data is VTA's token carrier: its module's
    control cycles (``empty_dma_cycles``), and then the pads it still writes (INP/ACC), one
    entry a cycle and no port, as vta.cc's ``reset_mem`` does."""
    t = _load_timing(insn, hw)
    if t is None:
        return empty_dma_cycles(hw, insn.mem.kind) + insn.sram_elems
    return t.alone


def _store_timing(insn: Store, hw: HwConfig) -> DmaTiming | None:
    """A STORE on the write channel."""
    e = hw.elem_bytes(insn.mem.kind)
    return dma_timing(hw, insn.y_size, insn.x_size, e, kind=insn.mem.kind, write=True,
                      addr=insn.dram_base * e, stride=insn.x_stride * e)


def _dma_duration(timing: Callable[[Any, HwConfig], DmaTiming | None]
                  ) -> Callable[[Any, HwConfig], int]:
    def duration(insn: Any, hw: HwConfig) -> int:
        t = timing(insn, hw)
        if t is None:
            return empty_dma_cycles(hw, insn.mem.kind, isinstance(insn, Store))
        return t.alone
    return duration


def _dma(insn: Load | Store, hw: HwConfig) -> tuple[str, int] | None:
    """The memory kind and bytes a DMA moves (pads excluded; None: no data)."""
    n = insn.data_elems if isinstance(insn, Load) else insn.y_size * insn.x_size
    if n <= 0:
        return None
    return insn.mem.kind, n * hw.elem_bytes(insn.mem.kind)


#: an instruction's dependency flags as a tuple of bools (``Deps``'s own ``__hash__`` and
#: ``__eq__`` are Python calls; a timing key holds the flags this way)
_flags = attrgetter(*DEP_FLAGS)


def _dma_key(insn: Load | Store, hw: HwConfig) -> Hashable:
    """A LOAD's or STORE's ``timing_key``: every field but its addresses, and of those only
    what ``dma_timing`` reads (``dma_offsets``: where its rows fall within a burst boundary,
    nothing when none crosses one; the SRAM base changes no timing). Its dependency flags
    as plain bools (``_flags``): equal exactly when the ``Deps`` are."""
    e = hw.elem_bytes(insn.mem.kind)
    if isinstance(insn, Load):
        pads: tuple[int, ...] = (insn.pad_y0, insn.pad_y1, insn.pad_x0, insn.pad_x1)
        rows = insn.data_rows
    else:
        pads, rows = (), insn.y_size
    return (type(insn), insn.mem, insn.y_size, insn.x_size, pads, _flags(insn.deps),
            dma_offsets(hw, rows, insn.x_size * e, insn.dram_base * e, insn.x_stride * e))


_MEM_OK = {"LOAD": (MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC),
           "STORE": (MemType.OUT,)}


def _mem_check(name: str) -> Callable[[Any, HwConfig], str | None]:
    def check(insn: Any, hw: HwConfig) -> str | None:
        if insn.mem not in _MEM_OK[name]:
            return (f"field mem={insn.mem.name} is not a valid target (allowed "
                    f"{', '.join(m.name for m in _MEM_OK[name])})")
        return chisel_refusal(insn, hw)
    return check


def _mem_syntax(name: str) -> AsmSyntax:
    cls = Load if name == "LOAD" else Store

    def fmt(insn: Any, dram: Callable[[str, int], str]) -> str:
        pad = ""
        if name == "LOAD":
            pads = (insn.pad_y0, insn.pad_y1, insn.pad_x0, insn.pad_x1)
            pad = f" pad={','.join(map(str, pads))}" if any(pads) else ""
        return (f"{name}.{insn.mem.name} sram={insn.sram_base} "
                f"dram={dram(insn.mem.kind, insn.dram_base)} y={insn.y_size} x={insn.x_size} "
                f"stride={insn.x_stride}{pad}")

    def parse(line: AsmLine, suffix: str, toks: list[str], deps: Deps) -> Any:
        try:
            mem = MemType[suffix]
        except KeyError:
            raise line.error(f"unknown memory type {suffix!r} (expected: "
                             f"{', '.join(m.name for m in MemType)})") from None
        base = {"sram", "dram", "y", "x", "stride"}
        kv, words = line.args(toks, base | ({"pad"} if name == "LOAD" else set()), base)
        if words:
            raise line.error(f"unexpected word(s) {', '.join(sorted(words))}")
        kw: dict[str, Any] = dict(
            mem=mem, sram_base=line.integer("sram", kv["sram"]), dram_base=line.dram(kv["dram"],
                                                                                 mem.kind),
            y_size=line.integer("y", kv["y"]), x_size=line.integer("x", kv["x"]),
            x_stride=line.integer("stride", kv["stride"]), deps=deps)
        if "pad" in kv:
            pads = [line.integer("pad", p) for p in kv["pad"].split(",")]
            if len(pads) != 4:
                raise line.error("pad: expected four integers 'y0,y1,x0,x1'")
            kw.update(pad_y0=pads[0], pad_y1=pads[1], pad_x0=pads[2], pad_x1=pads[3])
        return cls(**kw)

    return AsmSyntax(fmt, parse)


LOAD = register(InstructionDef(
    name="LOAD", cls=Load, opcode=Opcode.LOAD, layout=_load_layout, unit=_load_unit,
    duration=_load_duration, dma_timing=_load_timing, timing_key=_dma_key,
    asm=_mem_syntax("LOAD"),
    dma=_dma, direction="load",
    semantics=load_image, mnemonic=lambda i: f"LOAD.{i.mem.name}", check=_mem_check("LOAD"),
    doc="2-D strided DMA from DRAM into a scratchpad with zero padding on four sides"))

STORE = register(InstructionDef(
    name="STORE", cls=Store, opcode=Opcode.STORE, layout=_store_layout, unit=Unit.STORE,
    duration=_dma_duration(_store_timing), dma_timing=_store_timing, timing_key=_dma_key,
    asm=_mem_syntax("STORE"),
    dma=_dma, direction="store",
    semantics=store_rows, mnemonic=lambda i: f"STORE.{i.mem.name}", check=_mem_check("STORE"),
    doc="2-D strided DMA from the out scratchpad to DRAM"))


# ------------------------------------------------------------------------------ GEMM


def _uop_order(insn: Any, hw: HwConfig) -> str | None:
    if insn.uop_end < insn.uop_bgn:
        return f"uop_end={insn.uop_end} is before uop_bgn={insn.uop_bgn}"
    if getattr(insn, "uop_base", 0) and not hw.gemm.uop_base:
        return (f"uop_base={insn.uop_base} needs a micro-op base field, which {hw.name} does "
                f"not have (gemm.uop_base: false)")
    return chisel_refusal(insn, hw)


def gemm_semantics(insn: Gemm, operands: dict[str, np.ndarray], hw: HwConfig) -> np.ndarray:
    """One tensor op per execution: ``inp[src] (batch x block_in) . wgt[wgt]^T (block_in x
    block_out)``, exact in int64 (numpy's integer matmul does not round)."""
    return np.matmul(operands["src"], np.swapaxes(operands["wgt"], -1, -2))


def gemm_pattern(t: Any, hw: HwConfig) -> list[tuple[Any, dict[Any, str], dict[str, Any]]]:
    """``out[b, o] = sum_k inp[b, k] * wgt[o, k]`` over one ``batch x block_in x block_out``
    block, accumulating in ``acc_dtype``."""
    g = hw.gemm
    inp = t.placeholder((g.batch, g.block_in), g.inp_dtype, "vta_gemm_inp")
    wgt = t.placeholder((g.block_out, g.block_in), g.wgt_dtype, "vta_gemm_wgt")
    k = t.reduce_axis(g.block_in, "k")
    out = t.compute((g.batch, g.block_out),
                    lambda i, j: t.sum_(inp[i, k].astype(g.acc_dtype)
                                        * wgt[j, k].astype(g.acc_dtype), k), "vta_gemm_out")
    return [(out, {inp: "src", wgt: "wgt", out: "dst"}, {})]


Patterns = Callable[[Any, HwConfig], list[tuple[Any, dict[Any, str], dict[str, Any]]]]


def elementwise_patterns(fn: Callable[..., Any], name: str, *, register_operand: bool = True,
                         immediates: tuple[str, ...] = ("imm",), selector: str | None = "use_imm",
                         fixed: dict[str, Any] | None = None) -> Patterns:
    """Patterns of an ALU-style function ``fn(t, x, *operands)`` on one accumulator entry:
    ``x`` is the destination; the operands are, in one variant, an acc entry read through
    ``src`` (when ``register_operand``) and in the other the 0-d immediates named by
    ``immediates`` (instruction fields). ``selector`` names the field that tells the two
    apart (the ALU's ``use_imm``: False for the register variant, True for the immediate one;
    None when the instruction has only one); ``fixed`` sets further fields."""

    def patterns(t: Any, hw: HwConfig) -> list[tuple[Any, dict[Any, str], dict[str, Any]]]:
        return _elementwise(t, hw, fn, name, register_operand, immediates, selector, fixed)

    return patterns


def _elementwise(t: Any, hw: HwConfig, fn: Callable[..., Any], name: str, register: bool,
                 immediates: tuple[str, ...], selector: str | None,
                 fixed: dict[str, Any] | None) -> list[tuple[Any, dict[Any, str], dict[str, Any]]]:
    g = hw.gemm
    shape = (g.batch, g.block_out)
    out = []
    if register:
        x = t.placeholder(shape, g.acc_dtype, f"{name}_x")
        y = t.placeholder(shape, g.acc_dtype, f"{name}_y")
        decl = t.compute(shape, lambda i, j: fn(t, x[i, j], y[i, j]), f"{name}_reg")
        sel = {selector: False} if selector else {}
        out.append((decl, {x: "dst", y: "src", decl: "dst"}, {**sel, **(fixed or {})}))
    if immediates:
        x = t.placeholder(shape, g.acc_dtype, f"{name}_x")
        imms = [t.placeholder((), g.acc_dtype, f"{name}_{f}") for f in immediates]
        decl = t.compute(shape, lambda i, j: fn(t, x[i, j], *(m[()] for m in imms)),
                         f"{name}_imm")
        bind = {x: "dst", decl: "dst", **dict(zip(imms, immediates, strict=True))}
        sel = {selector: True} if selector else {}
        out.append((decl, bind, {**sel, **(fixed or {})}))
    return out


def _gemm_reset(hw: HwConfig) -> ResetMode:
    """A GEMM reset zeroes acc and writes to out what ``gemm.reset_out`` says (vta.cc: ``sum``);
    the config's values are reset modes."""
    return cast(ResetMode, hw.gemm.reset_out)


def _fill(section: Any) -> int:
    """A micro-op loop's fill (``gemm.fill`` / ``alu.fill``, set from the model)."""
    assert section.fill is not None
    return int(section.fill)


GEMM = register(InstructionDef(
    name="GEMM", cls=Gemm, opcode=Opcode.GEMM, layout=_gemm_layout, unit=Unit.COMPUTE,
    duration=lambda i, hw: loop_cycles(i, hw, hw.gemm.ii, _fill(hw.gemm),
                                       flat=hw.gemm.flat_loop),
    asm=microop_syntax("GEMM"), check=_uop_order,
    operands=(Operand("dst", "acc", writes=True, factors=("dst_factor_out", "dst_factor_in"),
                      base="uop_base", base_steps=True),
              Operand("src", "inp", factors=("src_factor_out", "src_factor_in"),
                      base="uop_base", base_steps=True),
              Operand("wgt", "wgt", factors=("wgt_factor_out", "wgt_factor_in"),
                      base="uop_base", base_steps=True)),
    kind="accumulate", semantics=gemm_semantics,
    issue=lambda i, hw: hw.gemm.ii, pipeline_depth=lambda hw: hw.gemm.pipeline_depth,
    macs=lambda i, hw: hw.gemm.batch * hw.gemm.block_in * hw.gemm.block_out,
    pattern=gemm_pattern, reset=_gemm_reset,
    doc="acc[dst] += inp[src] . wgt[wgt]^T (batch x block_in x block_out per micro-op)"))


# ------------------------------------------------------------------------------ ALU


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """``values`` (int64) as ``bits``-wide two's complement integers: for semantics that wrap
    an intermediate result to the accumulator's width, as the hardware does."""
    half = np.int64(1 << (bits - 1))
    return ((np.asarray(values, dtype=np.int64) + half) & np.int64((1 << bits) - 1)) - half


def alu_shift(x: np.ndarray, s: np.ndarray | np.int64) -> np.ndarray:
    """A shift by amount ``s``: arithmetic ``floor(x / 2**s)`` for ``s >= 0``, ``x * 2**-s``
    for ``s < 0`` (exact int64; the caller wraps). ``x`` is at most 32 bits wide, so clamping
    the amount to 63 changes nothing: ``x >> 63`` is already 0 or -1 and ``x << 63`` has no bits
    left below bit 32."""
    s = np.broadcast_to(np.asarray(s, dtype=np.int64), np.broadcast(x, s).shape)
    right = x >> np.clip(s, 0, 63)
    left = (x.astype(np.uint64) << np.clip(-s, 0, 63).astype(np.uint64)).astype(np.int64)
    return np.where(s >= 0, right, left)


def shift_amount(operand: np.ndarray | np.int64, hw: HwConfig) -> np.ndarray:
    """The amount SHR shifts by: the low ``alu.shift_bits`` bits of its operand, signed (vta.cc
    line 376, ``src_1.range(VTA_SHR_ARG_BIT_WIDTH - 1, 0)`` into an ``ap_int``): with 5 bits, 16
    is -16 and 24 is -8 (left shifts)."""
    assert hw.alu.shift_bits is not None
    return wrap(np.asarray(operand, dtype=np.int64), hw.alu.shift_bits)


def shift_range(hw: HwConfig) -> tuple[int, int]:
    """The amounts one SHR shifts by as written: ``-2**(shift_bits-1) .. 2**(shift_bits-1)-1``
    (-16..15 with vta.cc's 5 bits); a larger immediate wraps into this range."""
    assert hw.alu.shift_bits is not None
    half = 1 << (hw.alu.shift_bits - 1)
    return -half, half - 1


def _shr(x: np.ndarray, operand: Any, hw: HwConfig) -> np.ndarray:
    return alu_shift(x, shift_amount(operand, hw))


#: what each ALU function computes, in the tensor IR (its pattern) and in numpy (its semantics)
ALU_PATTERNS: dict[AluOp, Callable[..., Any]] = {
    AluOp.MIN: lambda t, x, y: t.min_(x, y),
    AluOp.MAX: lambda t, x, y: t.max_(x, y),
    AluOp.ADD: lambda t, x, y: x + y,
    AluOp.SHR: lambda t, x, y: x >> y,
    AluOp.MUL: lambda t, x, y: x * y,
}

#: the ALU's functions: AluOp -> exact int64 ``f(acc, operand, hw)`` (MUL: our extension)
ALU_FUNCTIONS: dict[AluOp, Callable[[np.ndarray, Any, HwConfig], np.ndarray]] = {
    AluOp.MIN: lambda x, y, hw: np.minimum(x, y),
    AluOp.MAX: lambda x, y, hw: np.maximum(x, y),
    AluOp.ADD: lambda x, y, hw: np.add(x, y),
    AluOp.SHR: _shr,
    AluOp.MUL: lambda x, y, hw: np.multiply(x, y),
}


def alu_operand(insn: Alu, operands: dict[str, np.ndarray]) -> Any:
    """The second operand of an ALU function: the src entries, or the immediate."""
    return operands["src"] if "src" in operands else np.int64(insn.imm)


def _alu_semantics(fn: Callable[[np.ndarray, Any, HwConfig], np.ndarray]
                   ) -> Callable[..., np.ndarray]:
    def semantics(insn: Alu, dst: np.ndarray, operands: dict[str, np.ndarray],
                  hw: HwConfig) -> np.ndarray:
        return np.asarray(fn(dst, alu_operand(insn, operands), hw), dtype=np.int64)
    return semantics


def _alu_reset(hw: HwConfig) -> ResetMode:
    """An ALU instruction's reset flag does what ``alu.reset`` says (vta.cc: ``ignored``)."""
    return cast(ResetMode, hw.alu.reset)


def _shr_range(insn: Alu, hw: HwConfig) -> dict[str, tuple[int, int]]:
    """SHR's pattern ``x >> imm`` holds for immediates inside the shift range only (a larger one
    wraps: 24 shifts left by 8 with 5 bits)."""
    return {"imm": shift_range(hw)} if insn.use_imm else {}


def _shr_patterns(t: Any, hw: HwConfig) -> list[tuple[Any, dict[Any, str], dict[str, Any]]]:
    """SHR's patterns: ``x >> imm`` (an immediate in the shift range, ``_shr_range``), and with
    a register operand ``x << (0 - y)``: a left shift by the negated register, which SHR
    computes exactly for ``y`` in ``-2**(shift_bits-1) .. 0`` (0..16 places with vta.cc's 5
    bits; a larger amount wraps into a right shift, and the IR's ``<<`` by a negative amount
    has no meaning). No pass can see a register's values, so a compiler writing ``x << (0 -
    y)`` keeps ``y`` in that range (``vta.compiler.ops.chain.channel_terms``, whose per-channel
    multipliers by shifts and adds use it); a plain ``x >> y`` still has no SHR."""
    imm = elementwise_patterns(ALU_PATTERNS[AluOp.SHR], "vta_alu_shr",
                               register_operand=False)(t, hw)
    reg = elementwise_patterns(lambda t, x, y: x << (0 - y), "vta_alu_shl", immediates=())(t, hw)
    return reg + imm


def alu_issue(insn: Alu, hw: HwConfig) -> int:
    """Cycles per ALU micro-op: the vector's issues at ``alu.ii_imm`` (immediate) or
    ``alu.ii`` (register operand)."""
    assert hw.alu.ii_imm is not None
    return alu_issues(hw) * (hw.alu.ii_imm if insn.use_imm else hw.alu.ii)


def _alu_check(op: AluOp) -> Callable[[Any, HwConfig], str | None]:
    def check(insn: Alu, hw: HwConfig) -> str | None:
        if op.name.lower() not in hw.alu.ops:
            return (f"ALU function {op.name} is not enabled in {hw.name}'s alu.ops "
                    f"({', '.join(hw.alu.ops)})")
        return _uop_order(insn, hw)
    return check


def alu_text(insn: Any) -> str:
    """``ALU.OP [reset] uop=.. iter=.. dst=.. src=..`` plus ``imm=N`` (immediate) or ``reg
    imm=N`` (a register operand whose ignored immediate field is non-zero), so the text round-
    trips every encodable word exactly."""
    imm = f" imm={insn.imm}" if insn.use_imm else (f" reg imm={insn.imm}" if insn.imm else "")
    return microop_text(definition_of(insn), insn, extra=False) + imm


def _alu_syntax(op: AluOp) -> AsmSyntax:
    def fmt(insn: Any, _dram: Callable[[str, int], str]) -> str:
        return alu_text(insn)

    def parse(line: AsmLine, suffix: str, toks: list[str], deps: Deps) -> Any:
        kw, rest, words = microop_args(by_name(f"ALU.{op.name}"), line, toks, {"imm"}, {"reg"})
        use_imm = "imm" in rest and "reg" not in words
        imm = line.integer("imm", rest["imm"]) if "imm" in rest else 0
        return Alu(op=op, use_imm=use_imm, imm=imm, deps=deps, **kw)

    return AsmSyntax(fmt, parse)


def _alu_def(op: AluOp) -> InstructionDef:
    return InstructionDef(
        name=f"ALU.{op.name}", cls=Alu, opcode=Opcode.ALU, function=("op", int(op)),
        layout=_alu_layout, unit=Unit.COMPUTE, alu=True,
        duration=lambda i, hw: loop_cycles(i, hw, alu_issue(i, hw), _fill(hw.alu),
                                           flat=hw.alu.flat_loop),
        asm=_alu_syntax(op), check=_alu_check(op),
        operands=(Operand("dst", "acc", writes=True, factors=("dst_factor_out",
                                                              "dst_factor_in"),
                          base="uop_base", base_steps=True),
                  Operand("src", "acc", factors=("src_factor_out", "src_factor_in"),
                          base="uop_base", base_steps=True,
                          used=lambda i: not i.use_imm, unused="dst")),
        kind="update", semantics=_alu_semantics(ALU_FUNCTIONS[op]), issue=alu_issue,
        pipeline_depth=lambda hw: hw.alu.pipeline_depth,
        # SHR shifts by the low shift_bits bits of a register operand, which the IR's ``>>``
        # does not say: an immediate in its range, or a left shift by a register (_shr_patterns)
        pattern=_shr_patterns if op is AluOp.SHR else
        elementwise_patterns(ALU_PATTERNS[op], f"vta_alu_{op.name.lower()}"),
        imm_range=_shr_range if op is AluOp.SHR else None,
        reset=_alu_reset,
        doc=f"acc[dst] = {op.name.lower()}(acc[dst], imm or acc[src])")


ALU = {op: register(_alu_def(op)) for op in AluOp}


# ------------------------------------------------------------------------------ FINISH


def _finish_syntax() -> AsmSyntax:
    def parse(line: AsmLine, suffix: str, toks: list[str], deps: Deps) -> Any:
        if toks or suffix:
            raise line.error("FINISH takes no operands")
        return Finish(deps)

    return AsmSyntax(lambda insn, _dram: "FINISH", parse)


FINISH = register(InstructionDef(
    name="FINISH", cls=Finish, opcode=Opcode.FINISH, layout=_finish_layout,
    unit=Unit.COMPUTE, duration=lambda i, hw: finish_cycles(hw), asm=_finish_syntax(),
    drains=(Unit.LOAD, Unit.ALU, Unit.STORE),
    doc="ends the program once the load, ALU (when separate) and store modules have drained"))


# ------------------------------------------------------------------------------ VTA's own

#: VTA's instructions: what a config that claims to be VTA (``HwConfig.stock``) runs. LOAD,
#: STORE, GEMM, FINISH and the ALU functions VTA's hardware implements
#: (``vta.config.VTA_ALU_OPS``: MIN, MAX, ADD, SHR); not ALU MUL, not a user's intrinsic.
VTA_INSTRUCTIONS: tuple[InstructionDef, ...] = (
    LOAD, STORE, GEMM, *(ALU[AluOp[op.upper()]] for op in VTA_ALU_OPS), FINISH)


def is_vta_instruction(d: InstructionDef) -> bool:
    """Whether ``d`` is one of VTA's own instructions (``VTA_INSTRUCTIONS``)."""
    return any(d is v for v in VTA_INSTRUCTIONS)


def instruction_counts(program: Program) -> dict[str, int]:
    """How many instructions of each definition ``program`` holds (``ALU.SHR``, ``GEMM``, ...;
    a LOAD or STORE counted as ``LOAD``/``STORE`` whatever its buffer), by name. Counted by
    class, and within a class whose instances are told apart by a field (the ALU's ``op``,
    ``function_field``) by that field's value: the definition is looked up once for each
    (a warm ``vta run resnet18`` looked up each of its 23 kernels' 18,639 instructions)."""
    insns = program.instructions
    classes = list(map(type, insns))
    one_of = dict(zip(classes, insns, strict=True))  # an instance of each class
    counts: Counter[str] = Counter()
    for cls, n in Counter(classes).items():
        fn_field = function_field(cls)
        if fn_field is None:  # the class alone tells the definition (or that there is none)
            counts[definition_of(one_of[cls]).name] += n
            continue
        value = attrgetter(fn_field)
        same = list(compress(insns, map(is_, classes, repeat(cls))))
        of_value = dict(zip(map(value, same), same, strict=True))
        for v, m in Counter(map(value, same)).items():
            counts[definition_of(of_value[v]).name] += m
    return dict(sorted(counts.items()))


def non_vta_instructions(program: Program) -> dict[str, int]:
    """The counts of ``program``'s instructions that are not VTA's (``VTA_INSTRUCTIONS``): an
    ALU MUL, a user's intrinsic; empty for a program VTA's hardware runs."""
    names = {d.name for d in VTA_INSTRUCTIONS}
    return {k: n for k, n in instruction_counts(program).items() if k not in names}
