"""The GPU dialect of the loop-nest IR: thread indices, launch configuration and WMMA statements.

These nodes exist only after GPU lowering (``vta.gpu.lower_gpu``); the schedule's lowering never
produces them. They follow the dialect contract of docs/ir.md: frozen dataclasses subclassing
``Stmt`` (or ``Expr``) that print themselves (``render``) and expose their expressions and
buffers to the verifier (``exprs`` / ``buffers``).

Fragments. A tensor-core operand lives in a *fragment*: an opaque register tile owned by a whole
warp. In the IR a fragment array is a ``local`` buffer whose trailing two dimensions are the
fragment's rows and columns (leading dimensions index the warp's register tile of fragments),
allocated under ``AttrStmt(WMMA_FRAGMENT, FragmentInfo(...), Allocate(...))``. Only the WMMA
statements below touch fragment buffers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import Expr
from vta.compiler.ir.stmt import Buffer, Stmt
from vta.errors import CudaRenderError

__all__ = [
    "ThreadIndex", "LaunchConfig", "FragmentInfo", "WmmaFill", "WmmaLoad", "WmmaMma",
    "WmmaStore", "THREAD_TAGS", "WMMA_STMTS", "affine_terms", "flat_index", "LAUNCH",
    "REGISTERS", "KNOBS", "KERNEL", "PATCH", "WMMA_FRAGMENT",
]

# The device's limits (warp size, threads, shared memory, registers) are fields of
# ``vta.gpu.target.GpuTarget``.

#: the thread-index builtins a loop may be bound to
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z")


@dataclass(frozen=True, slots=True)
class ThreadIndex(Expr):
    """The value of a CUDA thread-index builtin (``threadIdx.x``, ``blockIdx.y``, ...)."""

    tag: str
    dtype: str = "int32"

    def __repr__(self) -> str:
        return self.tag


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """Grid and block dimensions (x, y, z) and the static shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def extent(self, tag: str) -> int:
        dims = self.grid if tag.startswith("blockIdx") else self.block
        return dims["xyz".index(tag[-1])]


@dataclass(frozen=True, slots=True)
class FragmentInfo:
    """What a fragment buffer holds: ``role`` in matrix_a / matrix_b / accumulator, the WMMA
    shape ``m x n x k``, and for operands the layout (``row_major`` / ``col_major``)."""

    role: str
    m: int
    n: int
    k: int
    layout: str = ""

    def __str__(self) -> str:
        lay = f", {self.layout}" if self.layout else ""
        return f"fragment({self.role}, {self.m}x{self.n}x{self.k}{lay})"


#: the keys GPU passes and kernels hand on (``PrimFunc.attr`` / ``AttrStmt``):
#: the launch shape ``bind_threads`` records (the emulator and the CUDA renderer read it)
LAUNCH: S.AttrKey[LaunchConfig] = S.AttrKey("launch", __name__)
#: 32-bit registers a thread's tiles need (``check_registers``)
REGISTERS: S.AttrKey[int] = S.AttrKey("registers", __name__)
#: the knobs a kernel was built with (a schedule's or a task mapping's)
KNOBS: S.AttrKey[Any] = S.AttrKey("knobs", __name__)
#: which kernel family built the function (``"task-mapping"``)
KERNEL: S.AttrKey[str] = S.AttrKey("kernel", __name__)
#: how a task-mapping convolution gathers its input patches (``ConvGeometry.mode``)
PATCH: S.AttrKey[str] = S.AttrKey("patch", __name__)
#: thread-block cluster size along x (sm_90: ``__cluster_dims__(n, 1, 1)``; the grid's x is a
#: multiple of it and blocks ``c n .. c n + n - 1`` form cluster ``c``); absent: no clusters
CLUSTER: S.AttrKey[int] = S.AttrKey("cluster", __name__)
#: over an ``Allocate``: the buffer is a WMMA fragment (``FragmentInfo``)
WMMA_FRAGMENT: S.AttrKey[FragmentInfo] = S.AttrKey("wmma.fragment", __name__)


def _idx(render: Callable[[Any], str], idx: tuple[Expr, ...]) -> str:
    return ", ".join(render(i) for i in idx)


@dataclass(frozen=True, slots=True)
class WmmaFill(Stmt):
    """``fill_fragment(frag[index], value)`` (executed by a whole warp)."""

    frag: Buffer
    index: tuple[Expr, ...]
    value: Expr

    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        return [f"wmma.fill({nm(self.frag, self.frag.name)}[{_idx(r, self.index)}], "
                f"{r(self.value)})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.value)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.frag,)


@dataclass(frozen=True, slots=True)
class WmmaLoad(Stmt):
    """``load_matrix_sync(frag[index], &src[offset], ldm)``: the tile whose first element is
    ``src[offset]``; consecutive rows (row_major) or columns (col_major) are ``ldm`` elements
    apart in ``src``'s flat storage."""

    frag: Buffer
    index: tuple[Expr, ...]
    src: Buffer
    offset: tuple[Expr, ...]
    ldm: int
    layout: str

    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        return [f"wmma.load({nm(self.frag, self.frag.name)}[{_idx(r, self.index)}], "
                f"&{nm(self.src, self.src.name)}[{_idx(r, self.offset)}], ldm={self.ldm}, "
                f"{self.layout})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, *self.offset)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.frag, self.src)


@dataclass(frozen=True, slots=True)
class WmmaMma(Stmt):
    """``mma_sync(d, a, b, c)``: d = a . b + c with the accumulator's type."""

    d: Buffer
    d_index: tuple[Expr, ...]
    a: Buffer
    a_index: tuple[Expr, ...]
    b: Buffer
    b_index: tuple[Expr, ...]
    c: Buffer
    c_index: tuple[Expr, ...]
    #: the ``vta.gpu.intrinsic.GpuIntrinsic`` this realises (its ``semantics``, shape, dtypes)
    intrin: Any = None

    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        def f(b: Buffer, i: tuple[Expr, ...]) -> str:
            return f"{nm(b, b.name)}[{_idx(r, i)}]"

        return [f"wmma.mma({f(self.d, self.d_index)}, {f(self.a, self.a_index)}, "
                f"{f(self.b, self.b_index)}, {f(self.c, self.c_index)})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.d_index, *self.a_index, *self.b_index, *self.c_index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.d, self.a, self.b, self.c)


@dataclass(frozen=True, slots=True)
class WmmaStore(Stmt):
    """``store_matrix_sync(&dst[offset], frag[index], ldm, layout)``."""

    dst: Buffer
    offset: tuple[Expr, ...]
    frag: Buffer
    index: tuple[Expr, ...]
    ldm: int
    layout: str = "row_major"

    def render(self, r: Callable[[Any], str], nm: Any) -> list[str]:
        return [f"wmma.store(&{nm(self.dst, self.dst.name)}[{_idx(r, self.offset)}], "
                f"{nm(self.frag, self.frag.name)}[{_idx(r, self.index)}], ldm={self.ldm}, "
                f"{self.layout})"]

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.offset, *self.index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.dst, self.frag)


WMMA_STMTS = (WmmaFill, WmmaLoad, WmmaMma, WmmaStore)


def affine_terms(e: E.Expr) -> dict[object, int] | None:
    """``e`` as {var or thread index: coefficient, 1: constant} (``poly.linear_form``), or None
    when a term is not a plain variable."""
    terms, const = poly.linear_form(e)
    if any(not isinstance(a, (E.Var, ThreadIndex)) for a in terms):
        return None
    out: dict[object, int] = {a: c for a, c in terms.items()}  # widens the key type
    out[1] = const
    return out


def flat_index(b: S.Buffer, idx: tuple[E.Expr, ...]) -> E.Expr:
    """The row-major flat index of ``idx`` into ``b`` (what a C array access takes)."""
    if len(idx) != b.ndim:
        raise CudaRenderError(f"access to {b.name}: {len(idx)} indices for {b.ndim} dimensions")
    flat: E.Expr = E.IntImm(0)
    for i, d in zip(idx, b.shape, strict=False):
        flat = flat * d + i
    return flat


def resolve_call(calls: dict[str, Any], e: E.Call, kernel: str, form: str) -> tuple[Any, str]:
    """The registered scalar intrinsic (``vta.gpu.intrinsic.GpuCall``) that ``e`` calls, from
    the renderer's or the emulator's table ``calls``, and ``""``; or None and why not (no
    intrinsic of that name: ``form`` says what is missing, e.g. "CUDA form"; or the arity /
    types differ), the message naming ``kernel``. One rule for both back ends."""
    c = calls.get(e.name)
    if c is None:
        known = ", ".join(sorted(calls)) or "none"
        return None, (f"{kernel}: no {form} for call {e.name}() (the GPU calls registered: "
                      f"{known})")
    why = c.mismatch(e)
    return (None, f"{kernel}: {why}") if why is not None else (c, "")
