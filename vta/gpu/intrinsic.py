"""``GpuIntrinsic``: the one way a GPU instruction (a dialect statement) is defined.

A GPU intrinsic is one typed object: the dialect statement class that stands for it in the
lowered IR, its CUDA *render rule* (the statement's lines of CUDA C), its *emulate rule* (the
closure the SIMT emulator runs for all lanes), the instruction shapes and operand types it
takes, the numpy semantics of one instruction where it computes (a tensor-core MMA), the tensor
IR pattern ``tensorize`` matches where the schedule reaches it that way (the shared
``vta.compiler.ir.intrin.TensorIntrinsic``), the headers its CUDA needs, the buffers it writes,
and whether a whole warp executes it. ``register_gpu_intrinsic`` enters it in the registry (by
name) and its rules in the CUDA renderer's and the emulator's dispatch tables
(``Dispatch.register``), exactly as a user's intrinsic would be: the built-in WMMA
(``vta.gpu.wmma``) and PTX statements (``vta.gpu.mma``: ``cp.async``, ``ldmatrix``,
``mma.sync``) are registered through this call.

A *scalar* GPU intrinsic (``GpuCall``) is an expression instead: the tensor IR's opaque call
``E.Call(name, args)`` (an instruction the accelerator defines, such as ``ALU.REQUANT_F32``'s
``requant_f32``, reached by a fused chain's stage). It is a CUDA device function (its name and
its definition, emitted once before any kernel that calls it) and its numpy ``semantics`` on
the lanes' values, which the emulator runs; ``register_gpu_call`` enters it in both tables
(``cuda.CALLS``, ``emulator.CALLS``) by the call's name. ``vta.gpu.requant`` registers the
built-in one.

Several intrinsics may share one statement class (the int8 and fp16 WMMA MMAs are both
``WmmaMma``, told apart by the statement's ``intrin`` field); they must then share its rules, and
registering different rules for a class another intrinsic holds is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.intrin import TensorIntrinsic
from vta.errors import IntrinError
from vta.gpu import cuda, emulator

__all__ = ["GpuIntrinsic", "register_gpu_intrinsic", "gpu_intrinsic", "gpu_intrinsics",
           "for_pattern", "RenderRule", "EmulateRule", "Semantics", "GpuCall", "CallSemantics",
           "register_gpu_call", "gpu_call"]

#: ``rule(stmt, renderer, indent) -> lines of CUDA``
RenderRule = Callable[[Any, Any, int], list[str]]
#: ``rule(stmt, emulator) -> closure(ctx, mask)`` run for the active lanes
EmulateRule = Callable[[Any, Any], Callable[[Any, Any], None]]
#: one instruction's numpy semantics on operand tiles: ``d = f(a, b, c)``
Semantics = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: a scalar intrinsic's numpy semantics: the result for the lanes' argument values (arrays or
#: scalars, broadcast), any integer type (the emulator converts it to the call's type)
CallSemantics = Callable[..., Any]


@dataclass(frozen=True, eq=False)
class GpuIntrinsic:
    """One GPU intrinsic (module docstring). Identity is the object."""

    #: unique name (``wmma.m16n16k16.s8s8s32``, ``mma.sync``, ``cp.async``)
    name: str
    #: the dialect statement class that stands for the intrinsic in the lowered IR
    stmt: type[S.Stmt]
    #: the statement's CUDA lines
    render: RenderRule
    #: the statement's emulator closure
    emulate: EmulateRule
    #: instruction shapes ``(m, n, k)`` it takes (empty for data movement and synchronisation)
    shapes: tuple[tuple[int, int, int], ...] = ()
    #: ``(input, accumulator)`` dtype pairs it takes (empty where it has no arithmetic)
    dtypes: tuple[tuple[str, str], ...] = ()
    #: numpy semantics of one instruction (``d = semantics(a, b, c)``), where it computes
    semantics: Semantics | None = None
    #: the tensor-IR pattern ``tensorize`` matches, where a schedule reaches it that way
    pattern: TensorIntrinsic | None = None
    #: executed by a whole warp (the emulator refuses a launch that is not whole warps)
    warp_wide: bool = False
    #: lines the CUDA source needs before its kernels (``#include <mma.h>``)
    headers: tuple[str, ...] = ()
    #: the instruction the profiler counts per active warp (None: the rule counts itself)
    counted_as: str | None = None
    #: the buffers a statement writes (the renderer makes a written parameter non-const)
    writes: Callable[[Any], tuple[S.Buffer, ...]] = lambda s: ()

    def __post_init__(self) -> None:
        if not self.name:
            raise IntrinError("GPU intrinsic: name must not be empty")
        if not (isinstance(self.stmt, type) and issubclass(self.stmt, S.Stmt)):
            raise IntrinError(f"GPU intrinsic {self.name}: stmt must be a Stmt subclass, got "
                              f"{self.stmt!r}")
        for m, n, k in self.shapes:
            if min(m, n, k) < 1:
                raise IntrinError(f"GPU intrinsic {self.name}: shape {m}x{n}x{k} must be "
                                  f"positive")

    @property
    def shape(self) -> tuple[int, int, int]:
        """The one instruction shape (an error where there is not exactly one)."""
        if len(self.shapes) != 1:
            raise IntrinError(f"GPU intrinsic {self.name} has {len(self.shapes)} shapes, not one")
        return self.shapes[0]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"GpuIntrinsic({self.name}, {self.stmt.__name__})"


_REGISTRY: dict[str, GpuIntrinsic] = {}
#: statement class -> the intrinsic whose rules the tables hold for it
_BY_STMT: dict[type[S.Stmt], GpuIntrinsic] = {}


def register_gpu_intrinsic(intr: GpuIntrinsic, replace_existing: bool = False) -> GpuIntrinsic:
    """Make ``intr`` known by name and enter its rules in the CUDA renderer's and the SIMT
    emulator's statement tables. A taken name, or a statement class whose rules another
    intrinsic registered differently, is an error unless ``replace_existing``."""
    old = _REGISTRY.get(intr.name)
    if old is not None and old is not intr and not replace_existing:
        raise IntrinError(f"GPU intrinsic {intr.name!r} is already registered; pass "
                          f"replace_existing=True to replace it")
    holder = _BY_STMT.get(intr.stmt)
    if (holder is not None and holder.name != intr.name and not replace_existing
            and (holder.render is not intr.render or holder.emulate is not intr.emulate)):
        raise IntrinError(f"GPU intrinsic {intr.name}: statement {intr.stmt.__name__} already "
                          f"renders and emulates by {holder.name}'s rules")
    _REGISTRY[intr.name] = intr
    _BY_STMT[intr.stmt] = intr
    cuda.STMT_RULES.register(intr.stmt)(intr.render)
    if intr.headers:
        cuda.HEADERS[intr.stmt] = intr.headers
    cuda.WRITES[intr.stmt] = intr.writes
    if intr.warp_wide:
        emulator.WARP_WIDE.add(intr.stmt)
    emulate = intr.emulate
    kind = intr.counted_as
    if kind is None:
        emulator.STMT_RULES.register(intr.stmt)(emulate)
    else:
        emulator.STMT_RULES.register(intr.stmt)(
            lambda s, em: em._counted_stmt(emulate(s, em), kind))
    return intr


def gpu_intrinsic(name: str) -> GpuIntrinsic:
    """The registered intrinsic ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise IntrinError(f"no GPU intrinsic named {name!r} (registered: {known})") from None


def gpu_intrinsics() -> list[GpuIntrinsic]:
    """Every registered GPU intrinsic, in registration order."""
    return list(_REGISTRY.values())


def for_pattern(pattern: TensorIntrinsic) -> GpuIntrinsic | None:
    """The GPU intrinsic whose tensorize pattern is ``pattern`` (None: none is)."""
    return next((g for g in _REGISTRY.values() if g.pattern is pattern), None)


def of_stmt(cls: type) -> GpuIntrinsic | None:
    """The intrinsic holding the rules of statement class ``cls`` (None: a core statement)."""
    return _BY_STMT.get(cls)


# ------------------------------------------------------------------------ scalar intrinsics


@dataclass(frozen=True, eq=False)
class GpuCall:
    """A scalar GPU intrinsic (module docstring): the call ``E.Call(name, args)`` with
    arguments of types ``args`` and a result of type ``dtype``; in CUDA the device function
    ``function`` that ``source`` defines (inside an include guard, so that kernels compiled
    together define it once), in the emulator ``semantics``."""

    name: str
    args: tuple[str, ...]
    dtype: str
    function: str
    source: str
    semantics: CallSemantics

    def __post_init__(self) -> None:
        if not self.name or not self.function.isidentifier():
            raise IntrinError(f"GPU call {self.name!r}: needs a name and a C identifier for "
                              f"its device function, got {self.function!r}")
        if self.function not in self.source:
            raise IntrinError(f"GPU call {self.name}: its source does not define "
                              f"{self.function}")

    def mismatch(self, e: E.Call) -> str | None:
        """Why ``e`` is not a call of this intrinsic (arity, argument or result types), or
        None."""
        got = tuple(a.dtype for a in e.args)
        if got != self.args or e.dtype != self.dtype:
            return (f"call {e.name}({', '.join(got)}) -> {e.dtype}: the GPU intrinsic takes "
                    f"({', '.join(self.args)}) -> {self.dtype}")
        return None

    def __repr__(self) -> str:
        return f"GpuCall({self.name}, {self.function})"


_CALLS: dict[str, GpuCall] = {}


def register_gpu_call(c: GpuCall, replace_existing: bool = False) -> GpuCall:
    """Make the scalar intrinsic ``c`` known by its call's name to the CUDA renderer and the
    emulator. A taken name is an error unless ``replace_existing``."""
    old = _CALLS.get(c.name)
    if old is not None and old is not c and not replace_existing:
        raise IntrinError(f"GPU call {c.name!r} is already registered; pass "
                          f"replace_existing=True to replace it")
    _CALLS[c.name] = c
    cuda.CALLS[c.name] = c
    emulator.CALLS[c.name] = c
    return c


def gpu_call(name: str) -> GpuCall:
    """The registered scalar intrinsic called ``name``."""
    try:
        return _CALLS[name]
    except KeyError:
        known = ", ".join(sorted(_CALLS)) or "none"
        raise IntrinError(f"no GPU call named {name!r} (registered: {known})") from None
