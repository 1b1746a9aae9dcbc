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

Each instruction's syntax belongs to its definition (``InstructionDef.asm``); a micro-op
instruction without its own uses ``microop_syntax``: ``NAME [reset] uop=B:E iter=O,I`` then
``OPERAND=F_OUT,F_IN`` per operand and ``FIELD=VALUE`` for every other field (GEMM's form).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection
from dataclasses import fields
from typing import Any

from vta.config import HwConfig
from vta.errors import AsmError, DefinitionError, IsaError
from vta.isa.defs import AsmSyntax, InstructionDef, by_name, definition_of, registered
from vta.isa.encoding import check_fields
from vta.isa.insn import DEP_FLAGS, Deps, Instruction, Uop
from vta.isa.program import Program, ProgramBuilder

__all__ = ["AsmError", "assemble", "disassemble", "format_insn", "microop_syntax", "AsmLine",
           "where"]

_FLAGS = DEP_FLAGS
#: fields every micro-op instruction has, printed by the common part of its syntax
MICROOP_FIELDS = ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in")
#: the optional micro-op base of GEMM/ALU (``gemm.uop_base``), written ``base=N`` when not 0
BASE_FIELD = "uop_base"


# --------------------------------------------------------------------------------- printing


def _deps_text(d: Deps) -> str:
    on = [f for f in _FLAGS if getattr(d, f)]
    return f" | {' '.join(on)}" if on else ""


def format_insn(insn: Instruction, program: Program | None = None) -> str:
    """One instruction as a line of assembly (DRAM addresses symbolic when ``program`` given)."""
    d = definition_of(insn)

    def dram_text(kind: str, addr: int) -> str:
        if program is not None:
            a = program.find(kind, addr)
            if a is not None:
                return f"{a.name}+{addr - a.base}"
        return str(addr)

    return d.asm.format(insn, dram_text) + _deps_text(insn.deps)


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

_KEY_RE = re.compile(r"^([a-z_][a-z0-9_]*)=(.*)$")


class AsmLine:
    """One source line being parsed: error reporting and the pieces syntaxes share."""

    def __init__(self, source: str, lineno: int, text: str, builder: ProgramBuilder) -> None:
        self.source, self.lineno, self.text, self.builder = source, lineno, text, builder

    def error(self, msg: str) -> AsmError:
        return AsmError(f"{self.source}:{self.lineno}: {msg}: {self.text.strip()!r}")

    def integer(self, key: str, text: str) -> int:
        try:
            return int(text, 0)
        except ValueError:
            raise self.error(f"{key}: expected an integer, got {text!r}") from None

    def pair(self, key: str, text: str) -> tuple[int, int]:
        parts = text.split(",")
        if len(parts) != 2:
            raise self.error(f"{key}: expected two integers 'a,b', got {text!r}")
        return self.integer(key, parts[0]), self.integer(key, parts[1])

    def range(self, text: str) -> tuple[int, int]:
        parts = text.split(":")
        if len(parts) != 2:
            raise self.error(f"uop: expected 'begin:end', got {text!r}")
        return self.integer("uop", parts[0]), self.integer("uop", parts[1])

    def args(self, tokens: list[str], allowed: set[str],
             required: set[str]) -> tuple[dict[str, str], set[str]]:
        """``key=value`` operands (only ``allowed``, all of ``required``) and bare words."""
        kv: dict[str, str] = {}
        words: set[str] = set()
        for tok in tokens:
            m = _KEY_RE.match(tok)
            if m:
                if m.group(1) not in allowed:
                    raise self.error(f"unknown operand {m.group(1)!r} (expected: "
                                     f"{', '.join(sorted(allowed))})")
                kv[m.group(1)] = m.group(2)
            else:
                words.add(tok)
        missing = required - kv.keys()
        if missing:
            raise self.error(f"missing operand(s) {', '.join(sorted(missing))}")
        return kv, words

    def dram(self, text: str, kind: str) -> int:
        """A DRAM element address: ``NAME+OFFSET`` of an allocation of ``kind``, or absolute."""
        if "+" in text or not re.match(r"^-?(0x)?[0-9a-fA-F]+$", text):
            name, _, off = text.partition("+")
            alloc = next((a for a in self.builder._allocs if a.name == name), None)
            if alloc is None:
                raise self.error(f"dram: no allocation named {name!r}")
            if alloc.kind != kind:
                raise self.error(f"dram: allocation {name!r} holds {alloc.kind} elements, "
                                 f"this instruction moves {kind}")
            return alloc.base + (self.integer("dram", off) if off else 0)
        return self.integer("dram", text)


def _deps(line: AsmLine, text: str) -> Deps:
    flags = text.split()
    for f in flags:
        if f not in _FLAGS:
            raise line.error(f"unknown dependency flag {f!r} (expected: {', '.join(_FLAGS)})")
    return Deps(*(f in flags for f in _FLAGS))


# ------------------------------------------------------------------ the micro-op syntax


def _extra_fields(d: InstructionDef) -> list[str]:
    """Fields of a micro-op instruction printed as ``FIELD=VALUE``: all but the common ones,
    the operands' factors and the function field."""
    skip = set(MICROOP_FIELDS) | {"deps", BASE_FIELD}
    for o in d.operands:
        skip |= set(o.factors or ())
    if d.function is not None:
        skip.add(d.function[0])
    return [f.name for f in fields(d.cls) if f.name not in skip]


def microop_text(d: InstructionDef, insn: Any, extra: bool = True) -> str:
    """``NAME [reset] uop=B:E iter=O,I OPERAND=F_OUT,F_IN ... [FIELD=VALUE ...]``."""
    parts = [d.mnemonic_of(insn) + (" reset" if insn.reset else ""),
             f"uop={insn.uop_bgn}:{insn.uop_end}", f"iter={insn.iter_out},{insn.iter_in}"]
    for o in d.operands:
        if o.factors:
            parts.append(f"{o.name}={getattr(insn, o.factors[0])},{getattr(insn, o.factors[1])}")
    if getattr(insn, BASE_FIELD, 0):
        parts.append(f"base={getattr(insn, BASE_FIELD)}")
    if extra:
        parts += [f"{n}={int(getattr(insn, n))}" for n in _extra_fields(d)]
    return " ".join(parts)


def microop_args(d: InstructionDef, line: AsmLine, tokens: list[str],
                 extra: Collection[str] = (), words_ok: Collection[str] = ()
                 ) -> tuple[dict[str, Any], dict[str, str], set[str]]:
    """The common part of a micro-op instruction: keyword arguments for its class (reset, uop
    range, iterations, operand factors), the remaining ``key=value`` pairs (``extra`` keys)
    and bare words (``words_ok`` besides ``reset``)."""
    factored = [o for o in d.operands if o.factors]
    keys = {"uop", "iter", *(o.name for o in factored)}
    has_base = BASE_FIELD in {f.name for f in fields(d.cls)}
    kv, words = line.args(tokens, keys | set(extra) | ({"base"} if has_base else set()), keys)
    bad = words - {"reset"} - set(words_ok)
    if bad:
        raise line.error(f"unexpected word(s) {', '.join(sorted(bad))}")
    bgn, end = line.range(kv["uop"])
    io, ii = line.pair("iter", kv["iter"])
    out: dict[str, Any] = dict(reset="reset" in words, uop_bgn=bgn, uop_end=end, iter_out=io,
                               iter_in=ii)
    for o in factored:
        assert o.factors is not None
        out[o.factors[0]], out[o.factors[1]] = line.pair(o.name, kv[o.name])
    if "base" in kv:
        out[BASE_FIELD] = line.integer("base", kv["base"])
    rest = {k: v for k, v in kv.items() if k not in keys and k != "base"}
    return out, rest, words


def microop_syntax(d_name: str) -> AsmSyntax:
    """The generic micro-op syntax of the definition named ``d_name`` (looked up when used, so
    the syntax can be built before the definition)."""
    def fmt(insn: Any, _dram: Callable[[str, int], str]) -> str:
        return microop_text(by_name(d_name), insn)

    def parse(line: AsmLine, suffix: str, tokens: list[str], deps: Deps) -> Any:
        d = by_name(d_name)
        if suffix:
            raise line.error(f"{d_name} takes no suffix")
        extra = _extra_fields(d)
        kw, rest, _ = microop_args(d, line, tokens, set(extra))
        missing = [e for e in extra if e not in rest]
        if missing:
            raise line.error(f"missing operand(s) {', '.join(missing)}")
        for k, v in rest.items():
            kw[k] = line.integer(k, v)
        if d.function is not None and d.function[0] in {f.name for f in fields(d.cls)}:
            kw[d.function[0]] = d.function[1]
        return d.cls(**kw, deps=deps)

    return AsmSyntax(fmt, parse)


# ------------------------------------------------------------------ directives and dispatch


def _directive(line: AsmLine, toks: list[str], b: ProgramBuilder) -> None:
    if toks[0] == ".alloc":
        if len(toks) != 4:
            raise line.error(".alloc takes NAME KIND COUNT")
        try:
            b.alloc(toks[1], toks[2], line.integer("count", toks[3]))
        except ValueError as e:
            raise line.error(str(e)) from None
    elif toks[0] == ".uop":
        if len(toks) != 5:
            raise line.error(".uop takes NAME DST SRC WGT")
        dst, src, wgt = (line.integer(k, t)
                         for k, t in zip(("dst", "src", "wgt"), toks[2:], strict=True))
        try:
            b.add_uops(toks[1], [Uop(dst, src, wgt)])
        except (KeyError, ValueError) as e:
            raise line.error(str(e.args[0])) from None
    else:
        raise line.error(f"unknown directive {toks[0]!r} (expected .alloc or .uop)")


def _find(line: AsmLine, word: str) -> tuple[InstructionDef, str]:
    """The definition a mnemonic names and its suffix: ``GEMM`` and ``ALU.ADD`` by name,
    ``LOAD.INP`` as LOAD with suffix INP."""
    mnemonic = word.upper()
    defs = {d.name: d for d in registered()}
    if mnemonic in defs:
        return defs[mnemonic], ""
    base, _, sub = mnemonic.partition(".")
    if base in defs:
        return defs[base], sub
    members = sorted(n.partition(".")[2] for n in defs if n.startswith(base + "."))
    if members:
        raise line.error(f"unknown {base} op {sub!r} (expected: {', '.join(members)})")
    shapes = sorted({n.partition(".")[0] + (".<op>" if "." in n else "") for n in defs})
    raise line.error(f"unknown instruction {word!r} (expected: {', '.join(shapes)})")


def assemble(text: str, hw: HwConfig, source: str = "<asm>") -> Program:
    """Parse assembly text into a Program; every field is range-checked against ``hw``."""
    b = ProgramBuilder(hw)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = AsmLine(source, lineno, raw, b)
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
        d, suffix = _find(line, toks[0])
        insn = d.asm.parse(line, suffix, toks[1:], deps)
        try:
            check_fields(insn, hw)
        except (IsaError, DefinitionError) as e:
            raise line.error(str(e)) from None
        b.emit(insn)
    return b.build()


def where(index: int, insn: Instruction, program: Program | None) -> str:
    """``instruction 7 (GEMM uop=0:4 ...)``: how every per-instruction error names its culprit."""
    return f"instruction {index} ({format_insn(insn, program)})"
