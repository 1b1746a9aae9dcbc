"""Instruction definitions: one object per instruction, read by every layer through tables.

An ``InstructionDef`` is the single home of what the accelerator knows about one instruction:

* **encoding**: its 3-bit opcode and, when several definitions share an opcode (the ALU's
  functions), the *function field* and value that tell them apart; its fields in each 64-bit
  half of the 128-bit word, with widths computed from the ``HwConfig`` (``layout``). The
  opcode and the four dependency flags (the *head*) are common to every format and prepended
  here, once;
* **its Python form**: the frozen dataclass of its instances (``cls``), whose field names are
  the layout's;
* **where it runs**: the module that executes it (fetch routes by this; which token queue a flag
  names is a property of the module, ``vta.isa.insn.queue_of``), whether it moves data over the
  memory port, and whether it ends the program (FINISH);
* **its duration**: one function of the instruction's fields and the ``HwConfig``, read by the
  cycle-level simulator and by the compiler's cost model alike;
* for **micro-op compute instructions** (GEMM, the ALU's functions, a user's unit): its
  operands (which scratchpad each micro-op index field addresses, and whether it is written),
  its semantics as one numpy function (read by the reference interpreter and by the machine),
  the cycles one micro-op occupies the unit (``issue``) and its pipeline depth, from which the
  accumulator hazard window follows;
* its **assembly** syntax, and what the compiler needs to match it (``vta.compiler.ir.intrin``).

Built-in definitions (LOAD, STORE, GEMM, ALU.MIN/MAX/ADD/SHR/MUL, FINISH) are registered by
``vta.isa.builtins`` exactly as a user's are (``vta.intrinsics``). Lookups are tables: by the
instance's class (and function value), by mnemonic, by opcode.

Semantics of a micro-op compute instruction (``semantics`` with ``kind``):

* ``"accumulate"``: ``semantics(insn, operands, hw) -> delta``; every execution adds ``delta`` to
  the destination entry (wrapping to the accumulator width). ``operands`` maps each read
  operand's name to an int64 array ``(n, *entry shape)`` of the entries the ``n`` executions
  read; ``delta`` is int64 ``(n, *dst entry shape)``. Because addition wraps the same in any
  order, a simulator may sum all executions of one instruction before wrapping.
* ``"update"``: ``semantics(insn, dst, operands, hw) -> new``; ``dst`` is the destination
  entries' current values; the result is the exact new value (int64), wrapped by the caller.
  Executions run in loop order: a simulator may batch them only when no execution reads an
  entry an earlier one wrote.

A ``reset`` flag (every micro-op instruction has one) does what the definition's ``reset``
says for the hardware (``reset_mode``): ``"zero"`` (the default: acc and out entries zeroed,
nothing read), ``"keep"`` (acc zeroed, out not written, nothing read), ``"sum"`` (acc zeroed;
out gets the narrowing of what the execution would have written without reset, so its
operands are read: vta.cc's GEMM) or ``"ignored"`` (the instruction computes as without it:
vta.cc's ALU). Implemented once by each simulator.

Immediates. ``imm_range(insn, hw)`` gives, per immediate field, the values for which the
pattern states what the instruction computes, where that is narrower than the field (SHR:
the shift amounts ``alu.shift_bits`` reads without wrapping): instruction selection keeps to
them, and emit checks every program it builds (``outside_range``).

Patterns. ``pattern(t, hw)`` states what the instruction computes in the compiler's tensor IR,
so that the compiler can recognise it; ``t`` is the tensor-IR builder the compiler passes in
(``placeholder``, ``compute``, ``reduce_axis``, ``sum_``, ``min_``, ``max_``, ``select``), so
this module needs no compiler import. It returns one or more variants ``(decl, bind, fixed)``:
``decl`` is a compute over the variant's own placeholders; ``bind`` maps each placeholder (and
``decl`` itself, the destination) to a micro-op operand (``"dst"``, ``"src"``, ``"wgt"``) or,
for a 0-d placeholder, to the instruction field that holds it as an immediate; ``fixed`` sets
other fields for this variant (the ALU's ``use_imm``). A reduction pattern (GEMM) is matched
against a loop region by ``tensorize``; an element-wise one (the ALU's functions) against the
epilogue expressions by instruction selection (``vta.compiler.accel.passes.lower_alu``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from vta.config import DATA_KINDS
from vta.errors import DefinitionError
from vta.isa.insn import DEP_FLAGS, POP_FLAGS, PUSH_FLAGS, Deps, Opcode, Unit, queue_of
from vta.words import INSN_BITS, INSN_HALF_BITS, OPCODE_BITS, UOP_BITS

if TYPE_CHECKING:
    import numpy as np

    from vta.config import HwConfig

__all__ = [
    "DefinitionError", "Field", "Operand", "InstructionDef", "AsmSyntax", "HEAD",
    "register", "unregister", "registered", "by_name", "function_field",
    "definition_of", "family", "available", "layout_of", "resolved_layout", "check_layouts",
    "LayoutProblem",
    "module_of", "pops_of", "pushes_of", "require", "free_opcodes", "decode_table", "positions",
    "instance", "ResetMode", "RESET_MODES",
]



@dataclass(frozen=True, slots=True)
class Field:
    """One field of an instruction word: its name (an attribute of the instruction's class, or
    a head field), width in bits, and whether it is a signed (two's complement) value."""

    name: str
    width: int
    signed: bool = False

    @property
    def range(self) -> tuple[int, int]:
        if self.signed:
            return -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1
        return 0, (1 << self.width) - 1


#: what a micro-op instruction's reset flag does (module docstring)
ResetMode = Literal["zero", "keep", "sum", "ignored"]
RESET_MODES: tuple[str, ...] = ("zero", "keep", "sum", "ignored")


def _zero_reset(_hw: HwConfig) -> ResetMode:
    return "zero"


#: the head of every instruction word: opcode, then the four dependency flags
HEAD_FLAGS = DEP_FLAGS


def HEAD(opcode_bits: int) -> tuple[Field, ...]:
    """The head fields: the opcode, then pop_prev, pop_next, push_prev, push_next."""
    return (Field("opcode", opcode_bits), *(Field(f, 1) for f in HEAD_FLAGS))


Half = tuple[Field, ...]
Layout = Callable[[Any], tuple[Half, Half]]  # called with an object whose .isa are the widths


def _always(_insn: Any) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Operand:
    """A micro-op index field and the scratchpad it addresses.

    ``field`` is the micro-op field holding the base index (``dst``, ``src`` or ``wgt``); the
    index of execution ``(o, i)`` is ``uop.field + o * insn.<factors[0]> + i *
    insn.<factors[1]>`` (+ ``insn.<base>`` when the instruction has a base field; times
    ``insn.<factors[0]>`` with ``base_steps``: the outer loop starts at that iteration). ``memory``
    is the scratchpad (``acc``, ``inp``, ``wgt``); the destination (``writes``) is an acc entry
    whose narrowed copy the out scratchpad mirrors. ``used(insn)`` says whether this
    instruction reads the operand at all (an ALU immediate does not read ``src``)."""

    name: str
    memory: str
    writes: bool = False
    factors: tuple[str, str] | None = None
    base: str | None = None
    #: the base counts outer iterations (offset ``base * factor_out``), not entries
    base_steps: bool = False
    used: Callable[[Any], bool] = _always
    #: what the compiler puts in the micro-op field when the instruction does not read the
    #: operand: ``"zero"``, or ``"dst"`` (the ALU's convention for an immediate's src)
    unused: Literal["zero", "dst"] = "zero"

    def placement(self, insn: Any) -> tuple[int, int, int]:
        """``(factor_out, factor_in, base)`` of this operand in ``insn``: execution ``(o, i)`` of
        micro-op ``u`` addresses entry ``u.<name> + o * factor_out + i * factor_in + base``."""
        fo, fi = (getattr(insn, self.factors[0]), getattr(insn, self.factors[1])) \
            if self.factors else (0, 0)
        return fo, fi, self.offset(insn)

    def offset(self, insn: Any) -> int:
        """What the instruction's base field adds to every index of this operand."""
        if not self.base:
            return 0
        b = int(getattr(insn, self.base))
        return b * getattr(insn, self.factors[0]) if self.base_steps and self.factors else b

    def reads(self, insn: Any) -> bool:
        """Whether executing ``insn`` reads this operand when it computes (what a reset reads
        is the definition's: ``InstructionDef.reads``)."""
        return (not self.writes) and self.used(insn)


@dataclass(frozen=True, slots=True)
class AsmSyntax:
    """How an instruction reads and prints as assembly (``vta.isa.asm``).

    ``format(insn, dram_text) -> str`` prints the line without dependency flags (``dram_text``
    turns a LOAD/STORE's DRAM address into ``NAME+OFFSET``); ``parse(ctx, suffix, tokens)``
    builds the instruction from the words after the mnemonic (``suffix`` is what follows a
    ``.`` in the mnemonic, e.g. ``INP`` in ``LOAD.INP``); ``ctx`` offers error reporting and
    DRAM symbol resolution (``vta.isa.asm._Line``)."""

    format: Callable[..., str]
    parse: Callable[..., Any]


@dataclass(frozen=True, eq=False)
class InstructionDef:
    """One instruction (see the module docstring). Identity is the object."""

    name: str
    cls: type
    opcode: int
    layout: Layout
    unit: Unit | Callable[[Any], Unit]
    duration: Callable[[Any, HwConfig], int]
    asm: AsmSyntax
    #: (function field, value) telling this definition apart from others with its opcode
    function: tuple[str, int] | None = None
    #: mnemonic of one instance (``LOAD.INP``); default: the name
    mnemonic: Callable[[Any], str] | None = None
    #: extra validity checks of an instance beyond field ranges: a message, or None
    check: Callable[[Any, HwConfig], str | None] | None = None
    #: ``(memory kind, bytes)`` the instruction moves over the memory port (None: it does not)
    dma: Callable[[Any, HwConfig], tuple[str, int] | None] | None = None
    #: a DMA's timing on the memory port (``vta.isa.timing.DmaTiming``; None: an empty one):
    #: its duration is this alone on the port, the simulator shares the port among DMAs
    dma_timing: Callable[[Any, HwConfig], Any] | None = None
    #: what of an instance its unit, duration, token queues, DMA (bytes and timing), mnemonic
    #: and counted work depend on on a config (a hashable value; None: the whole instance):
    #: the simulator describes each distinct key once and shares the description (a tiled
    #: program's DMAs differ mostly in addresses that do not change their timing). It must
    #: cover every field those functions read; the field checks still see every instance
    timing_key: Callable[[Any, HwConfig], Hashable] | None = None
    #: runs on the ALU: the compute module's, or the ALU module of hardware whose ALU is a
    #: separate pipeline (``alu.separate_pipeline``). None (the default): it follows from the
    #: opcode, so an instruction with the ALU's opcode (a new ALU function) runs where the
    #: ALU does; give True or False to override
    alu: bool | None = None
    #: a DMA's direction: ``"load"`` (DRAM -> scratchpad) or ``"store"`` (out -> DRAM)
    direction: Literal["load", "store"] | None = None
    #: FINISH: waits for these modules to drain and ends the program
    drains: tuple[Unit, ...] = ()
    # ----------------------------------------------------------- micro-op compute instructions
    operands: tuple[Operand, ...] = ()
    kind: Literal["accumulate", "update"] | None = None
    semantics: Callable[..., np.ndarray] | None = None
    #: cycles one micro-op execution occupies the unit (the initiation interval x issues)
    issue: Callable[[Any, HwConfig], int] | None = None
    #: cycles from issuing a micro-op to its destination write-back
    pipeline_depth: Callable[[HwConfig], int] | None = None
    #: multiply-accumulates one execution performs (GOP/s counts 2 ops per MAC)
    macs: Callable[[Any, HwConfig], int] | None = None
    #: what the compiler matches it against: ``pattern(t, hw) -> [(decl, bind, fixed), ...]``
    #: (see "Patterns" in the module docstring); None: the compiler never selects it
    pattern: Callable[[Any, HwConfig], Sequence[tuple[Any, Mapping[Any, str],
                                                      Mapping[str, Any]]]] | None = None
    #: what the reset flag does on a config (``ResetMode``, module docstring); default: zero
    reset: Callable[[HwConfig], ResetMode] = _zero_reset
    #: ``imm_range(insn, hw) -> {field: (lo, hi)}``: the immediates for which ``pattern``
    #: states what the instruction computes, where narrower than the field (module docstring)
    imm_range: Callable[[Any, HwConfig], Mapping[str, tuple[int, int]]] | None = None
    #: the HwConfig intrinsic that enables this definition (None: every config has it)
    requires: str | None = None
    doc: str = ""

    #: IR traversals treat a definition as a leaf (statements carry it as an annotation)
    _ir_opaque: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.alu is None:  # frozen: the resolved value is set once, here
            object.__setattr__(self, "alu", self.opcode == Opcode.ALU)

    # ------------------------------------------------------------------ queries

    def unit_of(self, insn: Any, hw: HwConfig | None = None) -> Unit:
        """The module that executes ``insn`` (on ``hw``: an ALU instruction goes to the ALU
        module when the hardware's ALU is a separate pipeline)."""
        if self.alu and hw is not None and hw.alu.separate_pipeline:
            return Unit.ALU
        return self.unit if isinstance(self.unit, Unit) else self.unit(insn)

    def mnemonic_of(self, insn: Any) -> str:
        return self.name if self.mnemonic is None else self.mnemonic(insn)

    @property
    def role(self) -> str:
        """How simulators execute it: ``load`` / ``store`` (a DMA), ``compute`` (a micro-op
        loop), ``finish`` (drains and ends the program) or ``none``."""
        if self.direction is not None:
            return self.direction
        if self.operands:
            return "compute"
        return "finish" if self.drains else "none"

    @property
    def is_microop(self) -> bool:
        """Whether this is a micro-op loop instruction (GEMM-like: uop range, iter, factors)."""
        return bool(self.operands)

    @property
    def dst(self) -> Operand:
        """The written operand of a micro-op instruction."""
        for o in self.operands:
            if o.writes:
                return o
        raise DefinitionError(f"{self.name}: no operand is written")

    def reset_mode(self, insn: Any, hw: HwConfig) -> ResetMode | None:
        """What ``insn``'s reset flag does on ``hw`` (``"zero"``, ``"keep"``, ``"sum"``), or None
        when it computes as usual (no reset, or a reset ``hw`` ignores)."""
        if not getattr(insn, "reset", False):
            return None
        mode = self.reset(hw)
        if mode not in RESET_MODES:
            raise DefinitionError(f"{self.name}: reset returned {mode!r}; expected one of "
                                  f"{', '.join(RESET_MODES)}")
        return None if mode == "ignored" else mode

    def reads(self, insn: Any, hw: HwConfig) -> tuple[Operand, ...]:
        """The operands executing ``insn`` on ``hw`` reads besides its destination (none for a
        reset that zeroes or keeps out; vta.cc's GEMM reset reads them for the out value)."""
        if self.reset_mode(insn, hw) in ("zero", "keep"):
            return ()
        return tuple(o for o in self.operands if o.reads(insn))

    def outside_range(self, insn: Any, hw: HwConfig) -> str | None:
        """Which immediate of ``insn`` lies outside ``imm_range`` (a message), or None."""
        if self.imm_range is None:
            return None
        for name, (lo, hi) in self.imm_range(insn, hw).items():
            v = getattr(insn, name)
            if not lo <= v <= hi:
                return (f"{self.name}'s {name}={v} is outside {lo}..{hi}, the values for "
                        f"which it computes its pattern on {hw.name}")
        return None

    def delta(self, insn: Any, operands: dict[str, np.ndarray], hw: HwConfig,
              shape: tuple[int, ...]) -> np.ndarray:
        """An ``accumulate`` instruction's contribution of each execution (checked to be an
        integer array of ``shape``: executions x destination entry)."""
        assert self.semantics is not None
        return self._checked(self.semantics(insn, operands, hw), shape)

    def update(self, insn: Any, dst: np.ndarray, operands: dict[str, np.ndarray],
               hw: HwConfig) -> np.ndarray:
        """An ``update`` instruction's new destination values (exact, checked to be an integer
        array of ``dst``'s shape)."""
        assert self.semantics is not None
        return self._checked(self.semantics(insn, dst, operands, hw), dst.shape)

    def _checked(self, out: Any, shape: tuple[int, ...]) -> np.ndarray:
        import numpy as np

        arr = np.asarray(out)
        if arr.dtype.kind not in "iub" or arr.shape != tuple(shape):
            raise DefinitionError(f"{self.name}: semantics returned {arr.dtype} of shape "
                                  f"{arr.shape}; expected integers of shape {tuple(shape)} "
                                  f"(executions x destination entry)")
        return arr.astype(np.int64, copy=False)

    def hazard_lag(self, insn: Any, hw: HwConfig) -> int:
        """How many later executions may still see an entry before an execution writes it back:
        with ``issue`` cycles per execution and pipeline depth ``d``, execution ``k`` writes
        ``d`` cycles after issue while execution ``j`` reads ``(j - k) * issue`` cycles after
        it, so lags ``1 .. ceil(d / issue) - 1`` are at risk (0: none)."""
        if self.issue is None or self.pipeline_depth is None:
            return 0
        return max(0, -(-self.pipeline_depth(hw) // max(1, self.issue(insn, hw))) - 1)

    def __repr__(self) -> str:
        return f"InstructionDef({self.name}, opcode={self.opcode})"


# ------------------------------------------------------------------------------ registry

_DEFS: dict[str, InstructionDef] = {}
#: class -> (function field or None, {function value or None: definition})
_BY_CLASS: dict[type, tuple[str | None, dict[int | None, InstructionDef]]] = {}


def _validate(d: InstructionDef) -> None:
    where = f"instruction {d.name!r}"
    if not d.name or not all(p and (p[0].isalpha()) and p.replace("_", "").isalnum()
                             for p in d.name.split(".")):
        raise DefinitionError(f"{where}: the name must be a mnemonic like MAC or ALU.ABS "
                              f"(letters, digits, _ and one optional '.')")
    if not 0 <= d.opcode < 1 << OPCODE_BITS:
        raise DefinitionError(f"{where}: opcode must be in 0..{(1 << OPCODE_BITS) - 1} (a "
                              f"{OPCODE_BITS}-bit field), got "
                              f"{d.opcode}")
    if not hasattr(d.cls, "__dataclass_fields__") or "deps" not in d.cls.__dataclass_fields__:
        raise DefinitionError(f"{where}: cls must be a dataclass with a 'deps' field (the "
                              f"dependency flags), got {d.cls!r}")
    if d.is_microop:
        names = [o.name for o in d.operands]
        if len(set(names)) != len(names) or not set(names) <= {"dst", "src", "wgt"}:
            raise DefinitionError(f"{where}: operands must be distinct micro-op fields among "
                                  f"dst, src, wgt, got {names}")
        if sum(o.writes for o in d.operands) != 1 or d.dst.name != "dst" \
                or d.dst.memory != "acc":
            raise DefinitionError(f"{where}: exactly one operand, 'dst' in acc, is written")
        for o in d.operands:
            if o.memory not in ("acc", "inp", "wgt"):
                raise DefinitionError(f"{where}: operand {o.name} addresses {o.memory!r}; "
                                      f"expected acc, inp or wgt")
        need = {"reset", "uop_bgn", "uop_end", "iter_out", "iter_in"}
        for o in d.operands:
            need |= set(o.factors or ()) | ({o.base} if o.base else set())
        missing = need - set(d.cls.__dataclass_fields__)
        if missing:
            raise DefinitionError(f"{where}: cls {d.cls.__name__} lacks the micro-op fields "
                                  f"{', '.join(sorted(missing))}")
        if d.kind not in ("accumulate", "update") or d.semantics is None:
            raise DefinitionError(f"{where}: a micro-op instruction needs semantics and kind "
                                  f"'accumulate' or 'update'")
        if d.issue is None or d.pipeline_depth is None:
            raise DefinitionError(f"{where}: a micro-op instruction needs issue and "
                                  f"pipeline_depth (its timing)")


def register(d: InstructionDef, *, replace: bool = False) -> InstructionDef:
    """Make ``d`` known to every layer. A second definition with the same name, the same class
    and function value, or the same opcode without distinct function values is a
    ``DefinitionError`` (unless ``replace`` names the same definition by name)."""
    _validate(d)
    old = _DEFS.get(d.name)
    if old is not None and old is not d:
        if not replace:
            raise DefinitionError(f"instruction {d.name!r} is already defined (opcode "
                                  f"{old.opcode}); pass replace=True to redefine it")
        unregister(d.name)
    fam = [x for x in _DEFS.values() if x.opcode == d.opcode and x is not d]
    for x in fam:
        if d.function is None or x.function is None:
            raise DefinitionError(
                f"instruction {d.name!r}: opcode {d.opcode} is taken by {x.name!r}; choose a "
                f"free opcode ({', '.join(map(str, free_opcodes())) or 'none free'}) or add a "
                f"function of {x.name.split('.')[0]} (function=(field, value))")
        if x.function[0] != d.function[0]:
            raise DefinitionError(f"instruction {d.name!r}: the opcode {d.opcode} family tells "
                                  f"its members apart by field {x.function[0]!r}, not "
                                  f"{d.function[0]!r}")
        if x.function[1] == d.function[1]:
            raise DefinitionError(f"instruction {d.name!r}: encoding collides with {x.name!r} "
                                  f"(opcode {d.opcode}, {d.function[0]}={d.function[1]})")
    # instances are told apart by the function field when their class carries it (ALU.ADD and
    # ALU.MAX are both Alu); a class of its own identifies its definition alone
    own = d.function[0] if d.function and d.function[0] in dataclass_field_names(d.cls) \
        else None
    fn_field, table = _BY_CLASS.get(d.cls, (own, {}))
    key = d.function[1] if own and d.function else None
    if own != fn_field or key in table:
        other = table.get(key)
        raise DefinitionError(f"instruction {d.name!r}: class {d.cls.__name__} already stands "
                              f"for {other.name if other else 'another definition'}; give it its "
                              f"own class or a distinct function value")
    _DEFS[d.name] = d
    table[key] = d
    _BY_CLASS[d.cls] = (fn_field, table)
    _cache_clear()
    return d


def unregister(name: str) -> None:
    """Forget a definition (tests, notebooks redefining an instruction)."""
    d = _DEFS.pop(name, None)
    if d is None:
        return
    fn_field, table = _BY_CLASS[d.cls]
    table.pop(d.function[1] if fn_field and d.function else None, None)
    if not table:
        del _BY_CLASS[d.cls]
    _cache_clear()


def _cache_clear() -> None:
    resolved_layout.cache_clear()
    _decode_table.cache_clear()


def registered() -> tuple[InstructionDef, ...]:
    """Every definition, in registration order."""
    return tuple(_DEFS.values())


def free_opcodes() -> list[int]:
    used = {d.opcode for d in _DEFS.values()}
    return [o for o in range(1 << OPCODE_BITS) if o not in used]


def by_name(name: str) -> InstructionDef:
    """The definition named ``name`` (a ``DefinitionError`` with a suggestion otherwise)."""
    try:
        return _DEFS[name]
    except KeyError:
        hint = difflib.get_close_matches(name, list(_DEFS), n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise DefinitionError(f"no instruction named {name!r}{did}") from None


def definition_of(insn: Any) -> InstructionDef:
    """The definition of an instruction instance (table lookup by class, then function)."""
    entry = _BY_CLASS.get(type(insn))
    if entry is None:
        raise DefinitionError(f"{type(insn).__name__} is not a registered instruction class")
    fn_field, table = entry
    key = None if fn_field is None else int(getattr(insn, fn_field))
    d = table.get(key)
    if d is None:
        raise DefinitionError(f"{type(insn).__name__} with {fn_field}={key} is not a registered "
                              f"instruction")
    return d


def function_field(cls: type) -> str | None:
    """The field whose value tells the instances of ``cls`` apart by definition (ALU.ADD and
    ALU.MAX are both Alu, told apart by ``op``): ``definition_of`` an instance depends on its
    class and that field's value alone. None for a class that stands for one definition (or
    is not registered): every instance has the definition of any other (or none). Lets a
    caller look up one instance per class and value instead of each (``instruction_counts``)."""
    entry = _BY_CLASS.get(cls)
    return None if entry is None else entry[0]


def module_of(insn: Any, hw: HwConfig | None = None) -> Unit:
    """Which module executes ``insn`` (fetch routes by this, as VTA's fetch module does); with
    ``hw``, as that hardware routes it (its ALU may be a module of its own)."""
    return definition_of(insn).unit_of(insn, hw)


def family(opcode: int) -> tuple[InstructionDef, ...]:
    """The definitions sharing ``opcode``."""
    return tuple(d for d in _DEFS.values() if d.opcode == opcode)


def available(hw: HwConfig) -> tuple[InstructionDef, ...]:
    """The definitions ``hw`` implements: the core ones and those its ``intrinsics`` list."""
    have = {i.name for i in hw.intrinsics}
    return tuple(d for d in _DEFS.values() if d.requires is None or d.requires in have)


def instance(d: InstructionDef, **values: Any) -> Any:
    """An instance of ``d``'s class with ``values``, every other field zero (False, the first
    enum member) and the function field set: a prototype for timing or checks."""
    kw = dict(_zeros(d))
    unknown = set(values) - set(kw)
    if unknown:
        raise DefinitionError(f"{d.name}: no field(s) {', '.join(sorted(unknown))} in "
                              f"{d.cls.__name__}")
    kw.update(values)
    return d.cls(**kw)


_ZEROS: dict[InstructionDef, dict[str, Any]] = {}


def _zeros(d: InstructionDef) -> dict[str, Any]:
    """Each field of ``d``'s class at zero (typed by its annotation), computed once."""
    hit = _ZEROS.get(d)
    if hit is None:
        import typing


        hints = typing.get_type_hints(d.cls)
        hit = {}
        for f in fields(d.cls):
            if f.name == "deps":
                hit[f.name] = Deps()
            elif d.function is not None and f.name == d.function[0]:
                hit[f.name] = _typed(hints.get(f.name, int), d.function[1])
            else:
                hit[f.name] = _typed(hints.get(f.name, int), 0)
        _ZEROS[d] = hit
    return hit


def _typed(t: Any, v: int) -> Any:
    import typing
    from enum import Enum

    members = [a for a in typing.get_args(t) if isinstance(a, type)] or [t]
    if bool in members:
        return bool(v)
    for m in members:
        if isinstance(m, type) and issubclass(m, Enum):
            try:
                return m(v)
            except ValueError:
                if int in members:
                    return v
                return next(iter(m))
    return v


def require(d: InstructionDef, hw: HwConfig) -> None:
    """A ``DefinitionError`` unless ``hw`` implements ``d``."""
    if d.requires is not None and d.requires not in {i.name for i in hw.intrinsics}:
        raise DefinitionError(f"{d.name} is not implemented by {hw.name}: its intrinsics do not "
                              f"list {d.requires!r} (add it under 'intrinsics:' in "
                              f"{hw.source})")


# ------------------------------------------------------------------------------ layouts


def layout_of(d: InstructionDef, hw: HwConfig) -> tuple[Half, Half]:
    """The low and high halves of ``d``'s word on ``hw``, head included."""
    return resolved_layout(d, hw.isa)


@lru_cache(maxsize=512)
def resolved_layout(d: InstructionDef, w: Any) -> tuple[Half, Half]:
    """``layout_of`` keyed by the ISA widths (cached)."""
    lo, hi = d.layout(_WidthsOnly(w))
    return (*HEAD(w.opcode), *lo), tuple(hi)


class _WidthsOnly:
    """What a layout function may read: ``hw.isa`` (layouts depend on the widths alone, so
    they can be cached by them)."""

    def __init__(self, w: Any) -> None:
        self.isa = w


def positions(half: Iterable[Field], base: int) -> dict[str, tuple[int, int]]:
    """``{field: (first bit, width)}`` of a half starting at bit ``base``."""
    out, pos = {}, base
    for f in half:
        out[f.name] = (pos, f.width)
        pos += f.width
    return out


@lru_cache(maxsize=64)
def _decode_table(w: Any, listed: frozenset[str]) -> dict[int, tuple[tuple[int, int] | None,
                                                                    dict[int | None,
                                                                         InstructionDef]]]:
    """opcode -> (position of the function field or None, {function value: definition}), over
    the definitions a config with intrinsics ``listed`` implements."""
    table: dict[int, tuple[tuple[int, int] | None, dict[int | None, InstructionDef]]] = {}
    for d in _DEFS.values():
        if d.requires is not None and d.requires not in listed:
            continue
        pos = None
        if d.function is not None:
            lo, hi = resolved_layout(d, w)
            where = {**positions(lo, 0), **positions(hi, INSN_HALF_BITS)}
            pos = where.get(d.function[0])
        entry = table.setdefault(d.opcode, (pos, {}))
        entry[1][d.function[1] if d.function else None] = d
    return table


def decode_table(hw: HwConfig) -> Mapping[int, tuple[tuple[int, int] | None,
                                                     dict[int | None, InstructionDef]]]:
    """How ``hw``'s words decode: only the instructions it implements have opcodes."""
    return _decode_table(hw.isa, frozenset(i.name for i in hw.intrinsics))


#: the scratchpads whose depths widen each part of the formats (``LayoutProblem.blame``): a
#: low half holding the micro-op range grows with the micro-op buffer; any other low half holds
#: an SRAM base sized by the deepest buffer; the rest (high halves, micro-ops) hold indices into
#: the accumulator, input and weight buffers
_UOP_RANGE: tuple[str, ...] = ("uop",)
_SRAM_BASE: tuple[str, ...] = ("uop", *DATA_KINDS)
_INDICES: tuple[str, ...] = ("acc", "inp", "wgt")


@dataclass(frozen=True, slots=True)
class LayoutProblem:
    """One problem ``check_layouts`` found: its message, the definitions it concerns (empty for
    the micro-op format, which every micro-op instruction shares) and the scratchpads whose
    depths widened the fields at fault, deepest first decides whom a config check blames."""

    text: str
    definitions: tuple[str, ...] = ()
    blame: tuple[str, ...] = _INDICES

    def __str__(self) -> str:
        return self.text


def check_layouts(hw: HwConfig) -> list[LayoutProblem]:
    """Problems with the registered definitions' layouts on ``hw``: a half over 64 bits (with the
    breakdown), a family whose function field sits at different bits, a field a class lacks,
    a micro-op over 32 bits (empty: every format fits)."""
    w = hw.isa
    problems: list[LayoutProblem] = []
    depths = ", ".join(f"{k}={hw.depth(k)}" for k in ("uop", "inp", "wgt", "acc"))
    for d in available(hw):
        def problem(text: str, blame: tuple[str, ...] = _INDICES, d: InstructionDef = d) -> None:
            problems.append(LayoutProblem(f"{d.name}: {text}", (d.name,), blame))

        try:
            halves = resolved_layout(d, w)
        except Exception as e:  # a user layout function failing is a definition problem
            problem(f"its layout function failed: {e}")
            continue
        names = [f.name for h in halves for f in h]
        if len(set(names)) != len(names):
            problem("a field appears twice in its layout")
        for f in (f for h in halves for f in h):
            if f.width < 0 or (f.width == 0 and not f.name.startswith("_")):
                problem(f"field {f.name} has width {f.width} on these buffer depths (fields need "
                        f"at least one bit)")
        for which, half in zip(("low", "high"), halves, strict=True):
            used = sum(f.width for f in half)
            if used > INSN_HALF_BITS:
                parts = " + ".join(f"{f.width} ({f.name})" for f in half)
                blame = (_INDICES if which == "high" else
                         _UOP_RANGE if any(f.name == "uop_bgn" for f in half) else _SRAM_BASE)
                problems.append(LayoutProblem(
                    f"ISA fields no longer fit the {INSN_BITS}-bit instruction: {d.name} needs "
                    f"{used} bits in the {which} {INSN_HALF_BITS}-bit half = {parts} (buffer "
                    f"depths {depths}); shrink a buffer or the ALU immediate", (d.name,), blame))
        cls_fields = dataclass_field_names(d.cls)
        own = ("opcode", *HEAD_FLAGS, *((d.function[0],) if d.function else ()))
        for f in (f for h in halves for f in h):
            if f.name not in own and f.name not in cls_fields and not f.name.startswith("_"):
                problem(f"layout field {f.name!r} is not a field of {d.cls.__name__} (name "
                        f"reserved bits with a leading '_')")
    for fam in {d.opcode for d in available(hw)}:
        members = [d for d in available(hw) if d.opcode == fam and d.function is not None]
        spots = set()
        for d in members:
            assert d.function is not None
            lo, hi = resolved_layout(d, w)
            where = {**positions(lo, 0), **positions(hi, INSN_HALF_BITS)}
            if d.function[0] not in where:
                problems.append(LayoutProblem(
                    f"{d.name}: its function field {d.function[0]!r} is not in its layout",
                    (d.name,)))
                continue
            pos, width = where[d.function[0]]
            spots.add((pos, width))
            if not 0 <= d.function[1] < 1 << width:
                problems.append(LayoutProblem(
                    f"{d.name}: function value {d.function[1]} does not fit the {width}-bit "
                    f"field {d.function[0]}", (d.name,)))
        if len(spots) > 1:
            member_names = ", ".join(d.name for d in members)
            problems.append(LayoutProblem(
                f"opcode {fam} family ({member_names}): the function field must sit at the same "
                f"bits in every member, got {sorted(spots)}", tuple(d.name for d in members)))
    uop_bits = w.acc_idx + w.uop_src + w.wgt_idx
    if uop_bits > UOP_BITS:
        problems.append(LayoutProblem(
            f"micro-op fields need {uop_bits} bits (dst {w.acc_idx} + src {w.uop_src} + wgt "
            f"{w.wgt_idx}), more than {UOP_BITS} (buffer depths {depths})"))
    return problems


def dataclass_field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _flag_queues(insn: Any, flags: tuple[str, ...], hw: HwConfig | None,
                 module: Unit | None) -> list[tuple[Unit, Unit]]:
    m = module_of(insn, hw) if module is None else module
    separate = hw is not None and hw.alu.separate_pipeline
    out = []
    for flag in flags:
        if getattr(insn.deps, flag):
            q = queue_of(m, flag, separate)
            if q is None:
                raise ValueError(f"{definition_of(insn).mnemonic_of(insn)}: {flag} has no token "
                                 f"queue on the {m.label} module")
            out.append(q)
    return out


def pops_of(insn: Any, hw: HwConfig | None = None, module: Unit | None = None
            ) -> list[tuple[Unit, Unit]]:
    """Token queues this instruction pops from, in flag order (pop_prev, pop_next); with
    ``hw``, on that hardware's module chain (``vta.isa.insn.FLAG_QUEUES``). ``module``: the
    module executing it (``module_of(insn, hw)``) where the caller has it."""
    return _flag_queues(insn, POP_FLAGS, hw, module)


def pushes_of(insn: Any, hw: HwConfig | None = None, module: Unit | None = None
              ) -> list[tuple[Unit, Unit]]:
    """Token queues this instruction pushes to, in flag order (push_prev, push_next);
    ``hw`` and ``module`` as ``pops_of``'s."""
    return _flag_queues(insn, PUSH_FLAGS, hw, module)


def _config_check(hw: HwConfig) -> list[tuple[str, str]]:
    """The layout check as the config runs it, each problem blamed on the deepest scratchpad
    among those whose depths widened its fields (``LayoutProblem.blame``)."""
    return [("scratchpad." + max(p.blame, key=hw.depth), p.text) for p in check_layouts(hw)]
