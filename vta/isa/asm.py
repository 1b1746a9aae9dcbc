"""Text assembler and disassembler. ``assemble(disassemble(p), hw) == p`` for every program.

Syntax (one statement a line; ``#`` or ``;`` starts a comment)::

    .alloc A inp 64            # DRAM allocation: name, kind (inp wgt acc out uop), elements
    .uop   U 0 0 0             # append a micro-op (dst src wgt) to uop allocation U
    LOAD.UOP  sram=0 dram=U+0 y=1 x=4 stride=4
    LOAD.INP  sram=0 dram=A+0 y=4 x=4 stride=4 pad=1,1,1,1 | push_next
    GEMM      reset uop=0:4 iter=2,3 dst=1,0 src=4,0 wgt=0,1 | pop_prev
    ALU.MAX   uop=0:1 iter=16,1 dst=1,0 src=1,0 imm=0
    ALU.ADD   uop=0:1 iter=16,1 dst=1,0 src=1,0          # register operand (src indexes acc)
    STORE.OUT sram=0 dram=C+0 y=1 x=16 stride=16 | pop_prev push_prev
    FINISH

``dram=`` takes ``NAME+OFFSET`` (elements from the allocation's start) or an absolute element
address. Dependency flags follow ``|``: pop_prev pop_next push_prev push_next. Pads are
``y0,y1,x0,x1``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from vta.config import HwConfig
from vta.errors import VtaError
from vta.isa.encoding import IsaError, check_fields
from vta.isa.insn import Alu, AluOp, Deps, Finish, Gemm, Instruction, Load, MemType, Store, Uop
from vta.isa.program import Program, ProgramBuilder, dram_kind

__all__ = ["AsmError", "assemble", "disassemble", "format_insn"]

_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


class AsmError(VtaError, ValueError):
    """A line of assembly is malformed; the message names the source, line and problem."""


# --------------------------------------------------------------------------------- printing


def _deps_text(d: Deps) -> str:
    on = [f for f in _FLAGS if getattr(d, f)]
    return f" | {' '.join(on)}" if on else ""


def _dram_text(insn: Load | Store, program: Program | None) -> str:
    if program is not None:
        a = program.find(dram_kind(insn), insn.dram_base)
        if a is not None:
            return f"{a.name}+{insn.dram_base - a.base}"
    return str(insn.dram_base)


def format_insn(insn: Instruction, program: Program | None = None) -> str:
    """One instruction as a line of assembly (DRAM addresses symbolic when ``program`` given)."""
    if isinstance(insn, Load):
        pads = (insn.pad_y0, insn.pad_y1, insn.pad_x0, insn.pad_x1)
        pad = f" pad={','.join(map(str, pads))}" if any(pads) else ""
        body = (f"LOAD.{insn.mem.name} sram={insn.sram_base} dram={_dram_text(insn, program)} "
                f"y={insn.y_size} x={insn.x_size} stride={insn.x_stride}{pad}")
    elif isinstance(insn, Store):
        body = (f"STORE.{insn.mem.name} sram={insn.sram_base} dram={_dram_text(insn, program)} "
                f"y={insn.y_size} x={insn.x_size} stride={insn.x_stride}")
    elif isinstance(insn, Gemm):
        body = (f"GEMM{' reset' if insn.reset else ''} uop={insn.uop_bgn}:{insn.uop_end} "
                f"iter={insn.iter_out},{insn.iter_in} "
                f"dst={insn.dst_factor_out},{insn.dst_factor_in} "
                f"src={insn.src_factor_out},{insn.src_factor_in} "
                f"wgt={insn.wgt_factor_out},{insn.wgt_factor_in}")
    elif isinstance(insn, Alu):
        # ``reg`` keeps a register operand while an (ignored) immediate field is non-zero, so
        # the text round-trips every encodable word exactly
        imm = f" imm={insn.imm}" if insn.use_imm else (f" reg imm={insn.imm}" if insn.imm else "")
        body = (f"ALU.{insn.op.name}{' reset' if insn.reset else ''} "
                f"uop={insn.uop_bgn}:{insn.uop_end} iter={insn.iter_out},{insn.iter_in} "
                f"dst={insn.dst_factor_out},{insn.dst_factor_in} "
                f"src={insn.src_factor_out},{insn.src_factor_in}{imm}")
    elif isinstance(insn, Finish):
        body = "FINISH"
    else:  # pragma: no cover
        raise TypeError(f"not an instruction: {insn!r}")
    return body + _deps_text(insn.deps)


def disassemble(program: Program) -> str:
    """The whole program as assembly text: allocations, micro-ops, then instructions."""
    lines = []
    for a in program.allocations:
        lines.append(f".alloc {a.name} {a.kind} {a.elems}")
    for name, uops in program.uops.items():
        for u in uops:
            lines.append(f".uop {name} {u.dst} {u.src} {u.wgt}")
    for insn in program.instructions:
        lines.append(format_insn(insn, program))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------- parsing

_KEY_RE = re.compile(r"^([a-z_]+)=(.*)$")


class _Line:
    def __init__(self, source: str, lineno: int, text: str) -> None:
        self.source, self.lineno, self.text = source, lineno, text

    def error(self, msg: str) -> AsmError:
        return AsmError(f"{self.source}:{self.lineno}: {msg}: {self.text.strip()!r}")


def _int(line: _Line, key: str, text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise line.error(f"{key}: expected an integer, got {text!r}") from None


def _pair(line: _Line, key: str, text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2:
        raise line.error(f"{key}: expected two integers 'a,b', got {text!r}")
    return _int(line, key, parts[0]), _int(line, key, parts[1])


def _range(line: _Line, text: str) -> tuple[int, int]:
    parts = text.split(":")
    if len(parts) != 2:
        raise line.error(f"uop: expected 'begin:end', got {text!r}")
    return _int(line, "uop", parts[0]), _int(line, "uop", parts[1])


def _parse_args(line: _Line, tokens: list[str], allowed: set[str],
                required: set[str]) -> tuple[dict[str, str], set[str]]:
    kv: dict[str, str] = {}
    words: set[str] = set()
    for tok in tokens:
        m = _KEY_RE.match(tok)
        if m:
            if m.group(1) not in allowed:
                raise line.error(f"unknown operand {m.group(1)!r} (expected: "
                                 f"{', '.join(sorted(allowed))})")
            kv[m.group(1)] = m.group(2)
        else:
            words.add(tok)
    missing = required - kv.keys()
    if missing:
        raise line.error(f"missing operand(s) {', '.join(sorted(missing))}")
    return kv, words


def _deps(line: _Line, text: str) -> Deps:
    flags = text.split()
    for f in flags:
        if f not in _FLAGS:
            raise line.error(f"unknown dependency flag {f!r} (expected: {', '.join(_FLAGS)})")
    return Deps(*(f in flags for f in _FLAGS))


def _dram(line: _Line, text: str, kind: str, b: ProgramBuilder) -> int:
    if "+" in text or not re.match(r"^-?(0x)?[0-9a-fA-F]+$", text):
        name, _, off = text.partition("+")
        alloc = next((a for a in b._allocs if a.name == name), None)
        if alloc is None:
            raise line.error(f"dram: no allocation named {name!r}")
        if alloc.kind != kind:
            raise line.error(f"dram: allocation {name!r} holds {alloc.kind} elements, "
                             f"this instruction moves {kind}")
        return alloc.base + (_int(line, "dram", off) if off else 0)
    return _int(line, "dram", text)


def _mem_insn(line: _Line, op: str, sub: str, toks: list[str], deps: Deps,
              b: ProgramBuilder) -> Instruction:
    try:
        mem = MemType[sub]
    except KeyError:
        raise line.error(f"unknown memory type {sub!r} (expected: "
                         f"{', '.join(m.name for m in MemType)})") from None
    keys = {"sram", "dram", "y", "x", "stride"} | ({"pad"} if op == "LOAD" else set())
    kv, words = _parse_args(line, toks, keys, {"sram", "dram", "y", "x", "stride"})
    if words:
        raise line.error(f"unexpected word(s) {', '.join(sorted(words))}")
    common: dict[str, Any] = dict(
        mem=mem, sram_base=_int(line, "sram", kv["sram"]),
        dram_base=_dram(line, kv["dram"], mem.kind, b),
        y_size=_int(line, "y", kv["y"]), x_size=_int(line, "x", kv["x"]),
        x_stride=_int(line, "stride", kv["stride"]), deps=deps)
    if op == "STORE":
        return Store(**common)
    pads = [0, 0, 0, 0]
    if "pad" in kv:
        pads = [_int(line, "pad", p) for p in kv["pad"].split(",")]
        if len(pads) != 4:
            raise line.error("pad: expected four integers 'y0,y1,x0,x1'")
    return Load(**common, pad_y0=pads[0], pad_y1=pads[1], pad_x0=pads[2], pad_x1=pads[3])


def _loop_insn(line: _Line, op: str, sub: str, toks: list[str], deps: Deps) -> Instruction:
    keys = {"uop", "iter", "dst", "src"} | ({"wgt"} if op == "GEMM" else {"imm"})
    kv, words = _parse_args(line, toks, keys, keys - {"imm"})
    allowed_words = {"reset"} | ({"reg"} if op == "ALU" else set())
    if words - allowed_words:
        raise line.error(f"unexpected word(s) {', '.join(sorted(words - allowed_words))}")
    bgn, end = _range(line, kv["uop"])
    io, ii = _pair(line, "iter", kv["iter"])
    do, di = _pair(line, "dst", kv["dst"])
    so, si = _pair(line, "src", kv["src"])
    common: dict[str, Any] = dict(
        reset="reset" in words, uop_bgn=bgn, uop_end=end, iter_out=io, iter_in=ii,
        dst_factor_out=do, dst_factor_in=di, src_factor_out=so, src_factor_in=si, deps=deps)
    if op == "GEMM":
        if sub:
            raise line.error("GEMM takes no suffix")
        wo, wi = _pair(line, "wgt", kv["wgt"])
        return Gemm(**common, wgt_factor_out=wo, wgt_factor_in=wi)
    try:
        alu_op = AluOp[sub]
    except KeyError:
        raise line.error(f"unknown ALU op {sub!r} (expected: "
                         f"{', '.join(o.name for o in AluOp)})") from None
    use_imm = "imm" in kv and "reg" not in words
    imm = _int(line, "imm", kv["imm"]) if "imm" in kv else 0
    return Alu(op=alu_op, use_imm=use_imm, imm=imm, **common)


def _directive(line: _Line, toks: list[str], b: ProgramBuilder) -> None:
    if toks[0] == ".alloc":
        if len(toks) != 4:
            raise line.error(".alloc takes NAME KIND COUNT")
        try:
            b.alloc(toks[1], toks[2], _int(line, "count", toks[3]))
        except ValueError as e:
            raise line.error(str(e)) from None
    elif toks[0] == ".uop":
        if len(toks) != 5:
            raise line.error(".uop takes NAME DST SRC WGT")
        dst, src, wgt = (_int(line, k, t)
                         for k, t in zip(("dst", "src", "wgt"), toks[2:], strict=True))
        try:
            b.add_uops(toks[1], [Uop(dst, src, wgt)])
        except (KeyError, ValueError) as e:
            raise line.error(str(e.args[0])) from None
    else:
        raise line.error(f"unknown directive {toks[0]!r} (expected .alloc or .uop)")


def assemble(text: str, hw: HwConfig, source: str = "<asm>") -> Program:
    """Parse assembly text into a Program; every field is range-checked against ``hw``."""
    b = ProgramBuilder(hw)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _Line(source, lineno, raw)
        code = re.split(r"[#;]", raw, maxsplit=1)[0].strip()
        if not code:
            continue
        body, _, flags = code.partition("|")
        try:
            toks = shlex.split(body)
        except ValueError as e:
            raise line.error(str(e)) from None
        if not toks:
            raise line.error("dependency flags without an instruction")
        if toks[0].startswith("."):
            if flags:
                raise line.error("directives take no dependency flags")
            _directive(line, toks, b)
            continue
        deps = _deps(line, flags)
        op, _, sub = toks[0].upper().partition(".")
        if op in ("LOAD", "STORE"):
            insn = _mem_insn(line, op, sub, toks[1:], deps, b)
        elif op in ("GEMM", "ALU"):
            insn = _loop_insn(line, op, sub, toks[1:], deps)
        elif op == "FINISH":
            if len(toks) > 1 or sub:
                raise line.error("FINISH takes no operands")
            insn = Finish(deps)
        else:
            raise line.error(f"unknown instruction {toks[0]!r} (expected LOAD.<mem>, "
                             f"STORE.OUT, GEMM, ALU.<op>, FINISH)")
        try:
            check_fields(insn, hw)
        except IsaError as e:
            raise line.error(str(e)) from None
        b.emit(insn)
    return b.build()
