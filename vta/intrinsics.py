"""Define your own accelerator instruction (or GPU tensor intrinsic): one definition, every
layer follows.

An accelerator instruction is one ``InstructionDef`` (``vta.isa.defs``): its encoding (a free
opcode, or a new function of an existing one such as the ALU's, with fields whose widths come
from the ``HwConfig``), the module it runs on, its duration as a function of its fields and the
``HwConfig`` (read by the simulator and by the compiler's cost model), its semantics as one numpy
function (read by the reference interpreter and by the cycle-level machine), its operands (which
scratchpad each micro-op field addresses) and its pattern in the tensor IR (what ``tensorize``
matches, or what instruction selection covers an epilogue with). ``register`` makes it known to
every layer and checks it at once: an encoding that collides, a pattern that is not a compute
over its own placeholders, a duration that is not a positive integer, or semantics returning
the wrong dtype or shape is a ``DefinitionError`` naming the definition.

A hardware config lists the optional instructions it implements under ``intrinsics:`` with their
parameters (declared here by ``register(..., params=...)``); compiling for a config that lacks
one leaves the compiler with what the config has (instruction selection falls back to other
instructions; an explicit ``tensorize`` names the missing intrinsic). The built-in LOAD, STORE,
GEMM, ALU and FINISH (``vta.isa.builtins``) and the GPU's WMMA intrinsics
(``vta.gpu.wmma``) are defined through the same types. See docs/custom_intrinsics.md and
examples/intrinsics/.

Where an instruction runs follows from its opcode: one with the ALU's opcode (a new function
of the ALU) runs on the ALU pipeline, the compute module's or, on hardware whose ALU is a
pipeline of its own (``alu.separate_pipeline``), the ALU module's (``InstructionDef.alu``,
None by default, resolves so; give it to override).

Plugins: ``load_plugin(spec)`` imports a file (``path/to/mine.py``) or module (``pkg.mine``)
and calls its ``define()`` when it has one (the examples' convention; else importing it must
register), so that ``vta run/tune/sweep --plugin FILE`` can read a config whose
``intrinsics:`` lists the user's instruction. ``load_entry_points()`` does the same for every
installed package's ``vta.intrinsics`` entry point (``[project.entry-points."vta.intrinsics"]
mine = "pkg.mine:define"``). Encoding helpers: ``free_opcodes()`` lists the opcodes no
instruction uses, ``free_functions(opcode, field)`` the function values of an opcode nobody
uses, and ``bits_left(*fields)`` the width a last field
may take in a half word; the widths a config derives (index bits per buffer, the ALU opcode's)
are ``hw.isa``, which a ``layout(hw)`` reads.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vta.compiler.accel.insn_intrin import instruction_intrinsics, usable
from vta.compiler.ir.intrin import BUILDER, TensorIntrinsic
from vta.compiler.ir.intrin import register as register_tensor_intrinsic
from vta.config import HwConfig, declare_intrinsic, forget_intrinsic
from vta.errors import HwConfigError, PluginError
from vta.isa import (
    AsmSyntax,
    DefinitionError,
    Deps,
    Field,
    InstructionDef,
    MicroOpLoop,
    Opcode,
    Operand,
    Unit,
)
from vta.isa.asm import microop_syntax
from vta.isa.builtins import elementwise_patterns, loop_head, wrap
from vta.isa.defs import (
    by_name,
    check_layouts,
    free_opcodes,
    instance,
    registered,
    resolved_layout,
)
from vta.isa.defs import register as _register_instruction
from vta.isa.defs import unregister as _unregister_instruction
from vta.isa.insn import NO_DEPS, n_ops
from vta.isa.timing import alu_issues, loop_cycles, microop_cycles
from vta.sim.dram import entry_spec
from vta.words import INSN_HALF_BITS

__all__ = [
    "AsmSyntax", "BUILDER", "DefinitionError", "Deps", "Field", "InstructionDef", "MicroOpLoop",
    "Unit",
    "NO_DEPS", "Opcode", "Operand", "TensorIntrinsic", "alu_issues", "by_name",
    "elementwise_patterns", "instruction_intrinsics", "loop_cycles", "loop_head",
    "microop_cycles",
    "microop_syntax", "n_ops", "register", "register_tensor_intrinsic", "registered",
    "unregister", "usable", "validation_config", "wrap", "load_plugin", "load_entry_points",
    "free_functions", "free_opcodes", "bits_left", "PluginError", "ENTRY_POINT_GROUP",
]

#: the entry-point group installed packages list their instructions' ``define`` under
ENTRY_POINT_GROUP = "vta.intrinsics"


def __getattr__(name: str) -> Any:
    """Names kept for one release after a rename, with a ``DeprecationWarning``."""
    if name == "Module":
        warnings.warn("vta.intrinsics.Module is now vta.intrinsics.Unit (the hardware unit an "
                      "instruction runs on; vta.Module is a built module)", DeprecationWarning,
                      stacklevel=2)
        return Unit
    raise AttributeError(f"module 'vta.intrinsics' has no attribute {name!r}")

#: a neutral configuration definitions are checked against when no ``hw`` is given
_VALIDATION = {
    "name": "validation",
    "gemm": {"batch": 1, "block_in": 16, "block_out": 16},
    "scratchpad": {"uop": 32768, "inp": 32768, "wgt": 262144, "acc": 131072, "out": 32768},
    "memory": {"bus_bytes": 8},
}


def validation_config() -> HwConfig:
    """The configuration ``register`` checks a definition on when none is given (a 1x16x16
    int8 GEMM with VTA's default buffer sizes)."""
    return HwConfig.from_dict(_VALIDATION, source="<validation>")


def register(defn: InstructionDef, *, params: Mapping[str, Any] | None = None,
             hw: HwConfig | None = None, example: Mapping[str, Any] | None = None,
             replace: bool = False) -> InstructionDef:
    """Make ``defn`` known to every layer, after checking it on ``hw`` (default:
    ``validation_config()``), with the config intrinsic it ``requires`` listed with ``params``
    (their defaults; a config's ``intrinsics:`` entry may override them).

    ``example`` gives field values for the checks (an instruction whose semantics cannot run
    with all fields zero, e.g. a shift by ``shift - 1``). Raises ``DefinitionError`` naming the
    definition when anything is wrong; nothing stays registered then."""
    _register_instruction(defn, replace=replace)
    declared = False
    try:
        if defn.requires is not None:
            declare_intrinsic(defn.requires, dict(params or {}))
            declared = True
        ref = _with_intrinsic(hw or validation_config(), defn)
        problems = [p for p in check_layouts(ref)
                    if defn.name in p.definitions or not p.definitions]
        if problems:
            raise DefinitionError(f"instruction {defn.name!r}: {problems[0]}")
        proto = _example(defn, example)
        _check_duration(defn, proto, ref)
        if defn.is_microop:
            _check_semantics(defn, proto, ref)
        instruction_intrinsics(defn, ref)  # builds and checks the pattern
    except Exception:
        _unregister_instruction(defn.name)
        if declared and defn.requires is not None and not any(
                d.requires == defn.requires for d in registered()):
            forget_intrinsic(defn.requires)
        raise
    return defn


def unregister(name: str) -> None:
    """Forget the instruction ``name`` (and its config intrinsic when no other uses it)."""
    try:
        d = by_name(name)
    except DefinitionError:
        return
    _unregister_instruction(name)
    if d.requires is not None and not any(x.requires == d.requires for x in registered()):
        forget_intrinsic(d.requires)


def _with_intrinsic(hw: HwConfig, defn: InstructionDef) -> HwConfig:
    if defn.requires is None or hw.intrinsic(defn.requires) is not None:
        return hw
    try:
        return hw.with_changes(**{f"intrinsics.{defn.requires}": {}})
    except HwConfigError as e:
        raise DefinitionError(f"instruction {defn.name!r}: {e}") from None


def _example(defn: InstructionDef, example: Mapping[str, Any] | None) -> Any:
    loop = {"iter_out": 2, "iter_in": 3, "uop_end": 4} if defn.is_microop else {}
    try:
        return instance(defn, **{**loop, **dict(example or {})})
    except (TypeError, ValueError) as e:
        raise DefinitionError(f"instruction {defn.name!r}: cannot build an example instance: "
                              f"{e}") from None


def _check_duration(defn: InstructionDef, proto: Any, hw: HwConfig) -> None:
    try:
        cycles = defn.duration(proto, hw)
    except Exception as e:
        raise DefinitionError(f"instruction {defn.name!r}: duration failed on {proto}: "
                              f"{type(e).__name__}: {e}") from None
    if isinstance(cycles, bool) or not isinstance(cycles, (int, np.integer)) or cycles < 1:
        raise DefinitionError(f"instruction {defn.name!r}: duration must be a positive integer "
                              f"number of cycles, got {cycles!r} for {proto}")
    if defn.issue is not None:
        issue = defn.issue(proto, hw)
        if isinstance(issue, bool) or not isinstance(issue, (int, np.integer)) or issue < 1:
            raise DefinitionError(f"instruction {defn.name!r}: issue must be a positive integer "
                                  f"number of cycles per micro-op, got {issue!r}")


def _check_semantics(defn: InstructionDef, proto: Any, hw: HwConfig) -> None:
    rng = np.random.default_rng(0)
    n = 3

    def entries(memory: str) -> np.ndarray:
        dtype, shape = entry_spec(hw, memory)
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=(n, *shape), dtype=np.int64,
                            endpoint=True)

    operands = {o.name: entries(o.memory) for o in defn.reads(proto, hw)}
    dst = entries(defn.dst.memory)
    try:
        if defn.kind == "accumulate":
            defn.delta(proto, operands, hw, dst.shape)
        else:
            defn.update(proto, dst, operands, hw)
    except DefinitionError:
        raise
    except Exception as e:
        raise DefinitionError(f"instruction {defn.name!r}: semantics failed on {proto} (give "
                              f"register(example=...) field values it can run with): "
                              f"{type(e).__name__}: {e}") from None



# ---------------------------------------------------------------------------- plugins


def _import_plugin(spec: str) -> Any:
    """The module ``spec`` names: a ``.py`` file (imported under its stem) or a dotted module
    name; a ``PluginError`` naming it when it cannot be found or fails to import."""
    path = Path(spec)
    try:
        if spec.endswith(".py"):
            if not path.is_file():
                raise PluginError(f"--plugin {spec}: no such file")
            name = f"vta_plugin_{path.stem}"
            if name in sys.modules:
                return sys.modules[name]
            loader = importlib.util.spec_from_file_location(name, path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            sys.modules[name] = module
            try:
                loader.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
        return importlib.import_module(spec)
    except PluginError:
        raise
    except ModuleNotFoundError as e:
        raise PluginError(f"--plugin {spec}: cannot import it ({e}); give a .py file or an "
                          f"importable module name") from None
    except (DefinitionError, HwConfigError) as e:
        raise PluginError(f"--plugin {spec}: {e}") from None
    except Exception as e:
        raise PluginError(f"--plugin {spec}: importing it failed: {type(e).__name__}: "
                          f"{e}") from None


def _define(what: str, define: Any) -> list[str]:
    """Call a plugin's ``define`` and return the instructions it registered."""
    before = {d.name for d in registered()}
    try:
        define()
    except (DefinitionError, HwConfigError) as e:
        raise PluginError(f"{what}: {e}") from None
    except Exception as e:
        raise PluginError(f"{what}: define() failed: {type(e).__name__}: {e}") from None
    return sorted({d.name for d in registered()} - before)


def load_plugin(spec: str) -> list[str]:
    """Import the plugin ``spec`` (module docstring) and call its ``define()`` when it has
    one; the instructions it registered (a plugin loaded twice registers nothing the second
    time)."""
    before = {d.name for d in registered()}
    module = _import_plugin(spec)
    define = getattr(module, "define", None)
    if callable(define) and not getattr(module, "_vta_defined", False):
        _define(f"--plugin {spec}", define)
        module._vta_defined = True
    return sorted({d.name for d in registered()} - before)


def load_entry_points() -> list[str]:
    """Call every installed ``vta.intrinsics`` entry point (a ``define`` function, or a
    module with one); the instructions they registered. ``importlib.metadata`` (about 25 ms
    of every command's start: its import, ``email``'s among them, and its parse of every
    package's metadata) is asked only where ``may_list_entry_points`` finds the group named
    on the import path."""
    if not may_list_entry_points(ENTRY_POINT_GROUP, sys.path, sys.meta_path):
        return []
    from importlib.metadata import entry_points

    out: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        what = f"entry point {ep.name} ({ep.value}) of group {ENTRY_POINT_GROUP}"
        try:
            obj = ep.load()
        except Exception as e:
            raise PluginError(f"{what}: cannot load it: {type(e).__name__}: {e}") from None
        define = obj if callable(obj) else getattr(obj, "define", None)
        if not callable(define):
            raise PluginError(f"{what}: neither a function nor a module with define()")
        if ep.value in _LOADED:
            continue  # already defined in this process
        out += _define(what, define)
        _LOADED.add(ep.value)
    return out


#: entry points already called in this process (``load_entry_points`` is idempotent)
_LOADED: set[str] = set()

#: the metadata directories ``importlib.metadata`` reads a package's entry points from
_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def may_list_entry_points(group: str, path: Iterable[str], finders: Iterable[Any]) -> bool:
    """Whether ``importlib.metadata.entry_points(group=group)`` may list anything, judged
    without it: False only when every ``path`` entry (``sys.path``) is a directory or absent
    and no ``*.dist-info``/``*.egg-info`` directory in them has an ``entry_points.txt`` that
    mentions ``group``, and no finder but the standard ``PathFinder`` (``finders``:
    ``sys.meta_path``) can list distributions. Anything else (a zip or egg on the path, a
    directory or file that cannot be read, another finder) is True: ``importlib.metadata``
    decides."""
    if any(hasattr(f, "find_distributions") and f is not importlib.machinery.PathFinder
           for f in finders):
        return True
    needle = f"[{group}]"
    for entry in path:
        root = entry or "."
        if not os.path.isdir(root):
            if os.path.exists(root):
                return True  # a zip file (or an egg): importlib.metadata reads inside it
            continue
        if root.endswith(".egg"):
            return True
        try:
            with os.scandir(root) as it:
                infos = [e.path for e in it if e.name.lower().endswith(_METADATA_SUFFIXES)]
        except OSError:
            return True
        for info in infos:
            try:
                text = Path(info, "entry_points.txt").read_text(errors="replace")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
                continue  # what importlib.metadata reads as no entry points (an egg-info file)
            except OSError:
                return True
            if needle in text:
                return True
    return False


def free_functions(opcode: int, field: str, hw: HwConfig | None = None) -> list[int]:
    """The values of the function field ``field`` of ``opcode`` that no registered
    instruction uses and that fit the field's width on ``hw`` (default: the validation
    config): what a new function of an existing opcode (``function=(field, value)``) may
    take. Built-in ALU functions take 0..4 of ``op``; a fresh value is ``free_functions(
    Opcode.ALU, "op")[0]``."""
    hw = hw or validation_config()
    taken = {d.function[1] for d in registered()
             if d.opcode == opcode and d.function is not None and d.function[0] == field}
    widths = [f.width for d in registered() if d.opcode == opcode
              for half in resolved_layout(d, hw.isa) for f in half if f.name == field]
    if not widths:
        raise DefinitionError(f"no registered instruction of opcode {int(opcode)} has a "
                              f"field {field!r}")
    return [v for v in range(1 << max(widths)) if v not in taken]


def bits_left(*fields: Field) -> int:
    """The bits of a 64-bit half word (``vta.words.INSN_HALF_BITS``) that ``fields`` leave:
    the width of a last field that fills the half, written from the others instead of by hand
    (a multiplier after the others: ``Field("mult", bits_left(*others), signed=True)``). A
    ``DefinitionError`` when they already take more than the half."""
    used = sum(f.width for f in fields)
    if used > INSN_HALF_BITS:
        raise DefinitionError(f"fields {', '.join(f.name for f in fields)} take {used} bits, "
                              f"more than a {INSN_HALF_BITS}-bit half word")
    return INSN_HALF_BITS - used
