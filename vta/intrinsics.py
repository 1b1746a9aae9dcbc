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
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from vta.compiler.accel.insn_intrin import instruction_intrinsics, usable
from vta.compiler.ir.intrin import BUILDER, TensorIntrinsic
from vta.compiler.ir.intrin import register as register_tensor_intrinsic
from vta.config import HwConfig, declare_intrinsic, forget_intrinsic
from vta.errors import HwConfigError
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
from vta.isa.defs import by_name, check_layouts, instance, registered
from vta.isa.defs import register as _register_instruction
from vta.isa.defs import unregister as _unregister_instruction
from vta.isa.insn import NO_DEPS, n_ops
from vta.isa.timing import alu_issues, loop_cycles, microop_cycles
from vta.sim.dram import entry_spec

__all__ = [
    "AsmSyntax", "BUILDER", "DefinitionError", "Deps", "Field", "InstructionDef", "MicroOpLoop",
    "Unit",
    "NO_DEPS", "Opcode", "Operand", "TensorIntrinsic", "alu_issues", "by_name",
    "elementwise_patterns", "instruction_intrinsics", "loop_cycles", "loop_head",
    "microop_cycles",
    "microop_syntax", "n_ops", "register", "register_tensor_intrinsic", "registered",
    "unregister", "usable", "validation_config", "wrap",
]


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

