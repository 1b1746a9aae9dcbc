"""Tensor intrinsics built from the accelerator's instruction definitions.

Every accelerator intrinsic comes from an instruction's definition
(``vta.isa.defs.InstructionDef``): its ``pattern`` builds the declaration with the tensor-IR
builder (``ir.intrin.BUILDER``), ``bind`` says which micro-op operand (or immediate field) each
placeholder is, and ``instruction`` is the definition the back end emits (its encoding,
semantics, timing). ``instruction_intrinsics(defn, hw)`` builds them per hardware (cached);
``vta_gemm_intrinsic(hw)`` is the GEMM core's; ``usable`` says whether a config implements an
instruction variant.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from vta.compiler.ir import expr as E
from vta.compiler.ir.intrin import BUILDER, TensorIntrinsic
from vta.compiler.ir.tensor import (
    ComputeOp,
    PlaceholderOp,
    Tensor,
    TensorRead,
)
from vta.isa import DefinitionError, InstructionDef
from vta.isa.builtins import GEMM
from vta.isa.defs import dataclass_field_names, instance, require

if TYPE_CHECKING:
    from vta.config import HwConfig


def _hw_key(hw: HwConfig) -> tuple[Any, ...]:
    """What an instruction's patterns may depend on: the GEMM shape, the ALU and the listed
    intrinsics (not the file name or the memory system)."""
    return (hw.gemm, hw.alu, hw.intrinsics)


def instruction_intrinsics(defn: InstructionDef, hw: HwConfig) -> tuple[TensorIntrinsic, ...]:
    """The intrinsics (one per pattern variant) of instruction ``defn`` on ``hw``. A pattern
    that is not a compute over its own placeholders, binds something unknown, or names an
    immediate that is not a 0-d placeholder raises ``DefinitionError``."""
    return _instruction_intrinsics(defn, _hw_key(hw), hw)


@lru_cache(maxsize=256)
def _instruction_intrinsics(defn: InstructionDef, key: tuple[Any, ...],
                            hw: HwConfig) -> tuple[TensorIntrinsic, ...]:
    if defn.pattern is None:
        return ()
    try:
        variants = list(defn.pattern(BUILDER, hw))
    except Exception as e:  # a user's pattern function: any failure is a definition problem
        raise DefinitionError(f"instruction {defn.name!r}: its pattern cannot be built: "
                              f"{type(e).__name__}: {e}") from None
    return tuple(_check_variant(defn, k, v, len(variants)) for k, v in enumerate(variants))


def _check_variant(defn: InstructionDef, k: int, v: Any, n: int) -> TensorIntrinsic:
    where = f"instruction {defn.name!r}: pattern {k}"
    if not (isinstance(v, tuple) and len(v) == 3):
        raise DefinitionError(f"{where}: expected (decl, bind, fixed), got {v!r}")
    decl, bind, fixed = v
    if not isinstance(decl, Tensor) or not isinstance(decl.op, ComputeOp):
        raise DefinitionError(f"{where}: decl must be a tensor made by compute, got {decl!r}")
    reads = {n.tensor for n in E.walk(decl.op.body) if isinstance(n, TensorRead)}
    for t in reads:
        if not isinstance(t.op, PlaceholderOp):
            raise DefinitionError(f"{where}: reads {t.name}, which is not one of its own "
                                  f"placeholders")
    cls_fields = set(dataclass_field_names(defn.cls))
    operands = {o.name for o in defn.operands}
    for t, role in dict(bind).items():
        if t is not decl and t not in reads:
            raise DefinitionError(f"{where}: binds {getattr(t, 'name', t)!r}, which the "
                                  f"pattern does not read")
        if role in operands:
            continue
        if role not in cls_fields:
            raise DefinitionError(f"{where}: binds {t.name} to {role!r}, neither an operand "
                                  f"({', '.join(sorted(operands))}) nor a field of "
                                  f"{defn.cls.__name__}")
        if t.shape != ():
            raise DefinitionError(f"{where}: immediate {t.name} (field {role}) must be a 0-d "
                                  f"placeholder, got shape {t.shape}")
    unbound = [t.name for t in reads if t not in bind]
    if unbound or bind.get(decl) != "dst":
        raise DefinitionError(f"{where}: every placeholder and the output must be bound (the "
                              f"output to 'dst'); unbound: {unbound or ['the output']}")
    for f in fixed:
        if f not in cls_fields:
            raise DefinitionError(f"{where}: fixes {f!r}, not a field of {defn.cls.__name__}")
    name = f"vta.{defn.name.lower()}" + (f".{k}" if n > 1 else "")
    return TensorIntrinsic(name, "vta", decl, instruction=defn,
                           bind=MappingProxyType(dict(bind)), fixed=MappingProxyType(dict(fixed)))


@lru_cache(maxsize=64)
def _vta_gemm(key: tuple[Any, ...], hw: HwConfig) -> TensorIntrinsic:
    g = hw.gemm
    (base,) = instruction_intrinsics(GEMM, hw)
    name = (f"vta.gemm.{g.batch}x{g.block_in}x{g.block_out}."
            f"{g.inp_dtype}.{g.wgt_dtype}.{g.acc_dtype}")
    return replace(base, name=name)


def vta_gemm_intrinsic(hw: HwConfig) -> TensorIntrinsic:
    """The accelerator's GEMM core as an intrinsic: ``batch x block_in`` inputs times
    ``block_out x block_in`` weights into ``batch x block_out`` accumulators, dtypes from
    ``hw.gemm`` (the GEMM definition's pattern). The same GEMM shape gives the same object."""
    return _vta_gemm((hw.gemm,), hw)


def usable(defn: InstructionDef, hw: HwConfig, **fields: Any) -> bool:
    """Whether ``hw`` implements ``defn`` (its intrinsics list it, and its own checks accept an
    instance with ``fields``: an ALU function must be enabled in ``alu.ops``)."""
    try:
        require(defn, hw)
    except DefinitionError:
        return False
    if defn.check is None:
        return True
    # a micro-op instruction that runs one micro-op once (an empty one is a token relay, which
    # some hardware refuses: ``vta.isa.timing.chisel_refusal``)
    busy = {"uop_end": 1, "iter_out": 1, "iter_in": 1} if defn.is_microop else {}
    return defn.check(instance(defn, **{**busy, **fields}), hw) is None
