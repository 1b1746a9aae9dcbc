"""CUDA C rendering: a pure function from a lowered GPU ``PrimFunc`` to kernel source text.

``render_cuda(func)`` expects the output of ``vta.gpu.lower_gpu.lower_for_gpu`` (thread-bound
loops replaced by ``ThreadIndex`` lets, barriers in place, WMMA regions lowered) and returns a
``CudaKernel``: the source, the entry name, the launch configuration and the parameter list. It
reads nothing but its argument, so it is tested without a GPU; the test suite compiles every
rendered kernel to PTX with nvcc.

The text computes what the IR means (``vta.compiler.ir.semantics``; checked by
``tests/compiler/test_semantics_diff.py``): integer narrowing casts wrap (nvcc two's
complement); an integer operator whose C type (after C's promotions) is not the node's dtype is
cast back to it, so ``int8``/``int16`` arithmetic wraps at its own width as the IR says; ``>>``
on signed integers is arithmetic; ``//`` and ``%`` round toward minus infinity: C's ``/`` and
``%`` where both operands are provably non-negative *without overflow* (interval bounds from
constants, thread indices and loop ranges), the prelude's helper otherwise (the 64-bit helper
is emitted only when used); unsigned division is C's. ``select`` evaluates only the chosen side
(so a padded load is never issued out of bounds). Signed 32/64-bit ``+ - *`` wrap on NVIDIA
GPUs (PTX integer arithmetic is modular); the rendered text relies on that. A scalar
intrinsic's call (``E.Call``, ``vta.gpu.intrinsic.GpuCall``) is its device function, defined
once before the kernel (``CALLS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem
from vta.compiler.ir import stmt as S
from vta.compiler.ir.printer import Namer
from vta.compiler.ir.visitor import Dispatch
from vta.errors import CudaRenderError
from vta.gpu.dialect import (
    CLUSTER,
    LAUNCH,
    WMMA_FRAGMENT,
    FragmentInfo,
    LaunchConfig,
    ThreadIndex,
    affine_terms,
    flat_index,
    resolve_call,
)
from vta.gpu.target import target_of

if TYPE_CHECKING:
    from vta.gpu.intrinsic import GpuCall

__all__ = ["CudaKernel", "render_cuda", "CTYPES", "CudaRenderError", "VectorCopy",
           "vector_copy_parts", "STMT_RULES", "HEADERS", "WRITES", "CALLS"]


#: IR scalar type -> CUDA type (read from ``vta.dtypes.DTYPES``)
CTYPES: dict[str, str] = {n: d.ctype for n, d in sem.DTYPES.items()}

#: the 64-bit floor division helpers, emitted after the prelude only where a kernel uses them
_PRELUDE64 = """\
#ifndef VTA_CUDA_PRELUDE64
#define VTA_CUDA_PRELUDE64
__device__ __forceinline__ long long vta_floordiv64(long long a, long long b) {
  long long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long vta_floormod64(long long a, long long b) {
  long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#endif
"""

_PRELUDE = """\
#include <cuda_fp16.h>
{headers}
#ifndef VTA_CUDA_PRELUDE
#define VTA_CUDA_PRELUDE
__device__ __forceinline__ int vta_floordiv(int a, int b) {{
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
__device__ __forceinline__ int vta_floormod(int a, int b) {{
  int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
#endif
"""


@dataclass(frozen=True)
class CudaKernel:
    """A rendered kernel: ``source`` defines ``extern "C" __global__ void name(params...)``."""

    name: str
    source: str
    launch: LaunchConfig
    params: tuple[S.Buffer, ...]
    #: bytes of dynamic shared memory the launch must request (0: all shared memory static)
    dynamic_shared: int = 0

    @property
    def grid(self) -> tuple[int, int, int]:
        return self.launch.grid

    @property
    def block(self) -> tuple[int, int, int]:
        return self.launch.block


def render_cuda(func: S.PrimFunc) -> CudaKernel:
    """Render a lowered GPU function as CUDA C (see the module docstring)."""
    launch = func.attr(LAUNCH)
    if not isinstance(launch, LaunchConfig):
        raise CudaRenderError(f"{func.name}: no launch configuration; run "
                              f"vta.gpu.lower_gpu.lower_for_gpu first")
    r = _Renderer(func, launch)
    # above the static limit shared buffers are carved out of dynamic shared memory, which
    # the launch requests (CudaKernel.dynamic_shared)
    r.dynamic = launch.shared_bytes > target_of(func).static_shared
    body = r.stmt(func.body, 1)
    if r.dynamic:
        body = ["  extern __shared__ __align__(128) unsigned char vta_dyn_smem[];", *body]
    used = {type(n) for n in E.walk(func.body)}
    headers = dict.fromkeys(h for cls in HEADERS if cls in used for h in HEADERS[cls])
    prelude = _PRELUDE.format(headers="\n".join(headers))
    stored = {n.buffer for n in E.walk(func.body) if isinstance(n, S.BufferStore)}
    stored |= {b for n in E.walk(func.body) if type(n) in WRITES for b in WRITES[type(n)](n)}
    params = []
    for b in func.params:
        const = "" if b in stored else "const "
        params.append(f"{const}{CTYPES[b.dtype]}* __restrict__ {r.name(b)}")
    nthreads = launch.threads_per_block
    cluster = func.attr(CLUSTER)
    dims = f"__cluster_dims__({cluster}, 1, 1) " if cluster is not None and cluster > 1 else ""
    head = (f'extern "C" __global__ void __launch_bounds__({nthreads}) {dims}'
            f'{func.name}({", ".join(params)}) {{')
    if r.uses64:
        prelude += _PRELUDE64
    prelude += "".join(r.calls.values())  # the device functions of the scalar intrinsics used
    src = prelude + "\n" + head + "\n" + "\n".join(body) + "\n}\n"
    return CudaKernel(func.name, src, launch, func.params, r.dyn_bytes if r.dynamic else 0)


class _Renderer:
    def __init__(self, func: S.PrimFunc, launch: LaunchConfig) -> None:
        self.func = func
        self.nm = Namer()
        self.nonneg: set[E.Var] = set()
        #: integer bounds of variables (loop counters, lets, thread indices' extents)
        self.ranges: dict[E.Var, tuple[int, int]] = {}
        self.launch = launch
        self.uses64 = False
        self.frags: dict[S.Buffer, FragmentInfo] = {}
        self.dynamic = False
        self.dyn_bytes = 0
        #: the scalar intrinsics the kernel calls: name -> their device function's source
        self.calls: dict[str, str] = {}
        for b in func.params:
            self.name(b)

    def name(self, obj: Any) -> str:
        hint = obj.name.replace(".", "_")
        return self.nm(obj, hint if hint.isidentifier() else "v")

    # ------------------------------------------------------------------ expressions
    def is_nonneg(self, e: E.Expr) -> bool:
        """Whether ``e`` is non-negative: built of non-negative parts by ``+ * // % min max``
        and, so that no wrap can make it negative, bounded inside its type (``bounds``)."""
        return self._nonneg_form(e) and self.bounds(e) is not None

    def _nonneg_form(self, e: E.Expr) -> bool:
        if isinstance(e, E.IntImm):
            return e.value >= 0
        if isinstance(e, ThreadIndex):
            return True
        if isinstance(e, E.Var):
            return e in self.nonneg
        if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)):
            return self._nonneg_form(e.a) and self._nonneg_form(e.b)
        return False

    def bounds(self, e: E.Expr) -> tuple[int, int] | None:
        """Integer bounds of ``e``'s value, or None when unknown or when some operator in it
        could wrap (a bound leaves its node's type)."""
        r = _BOUNDS(e, self)
        if r is None:
            return None
        t = sem.DTYPES.get(e.dtype)
        if t is None or not t.is_int or r[0] < t.min or r[1] > t.max:
            return None
        return r

    def bound_binop(self, e: E.BinOp) -> tuple[int, int] | None:
        a = self.bounds(e.a)
        b = self.bounds(e.b)
        if a is None or b is None:
            return None
        op = e.op
        if op in (sem.Op.ADD, sem.Op.SUB, sem.Op.MUL, sem.Op.MIN, sem.Op.MAX):
            f = sem.INT_OPS[op]
            if op is sem.Op.SUB:
                return a[0] - b[1], a[1] - b[0]
            vals = [f(x, y) for x in a for y in b]
            return min(vals), max(vals)
        if op in (sem.Op.FLOORDIV, sem.Op.SHR) and b[0] == b[1] and b[0] > 0:
            f = sem.INT_OPS[op]
            return f(a[0], b[0]), f(a[1], b[0])
        if op is sem.Op.FLOORMOD and b[0] == b[1] and b[0] > 0:
            return 0, b[0] - 1
        return None

    def expr(self, e: E.Expr) -> str:
        return _EXPR(e, self)

    def int_imm(self, e: E.IntImm) -> str:
        if e.dtype == "bool":
            return "true" if e.value else "false"
        t = sem.dtype(e.dtype)
        v = sem.wrap(e.value, t) if t.is_int else e.value
        if t.is_int and v == t.min and t.signed:
            # C has no negative literals: -2147483648 would be a long long
            lit = f"{v + 1}LL" if t.bits == 64 else str(v + 1)
            return f"(({t.ctype})({lit} - 1))" if t.bits < 32 else f"({lit} - 1)"
        if e.dtype == "int64":
            return f"{v}LL"
        if e.dtype in ("int32", "int16", "int8", "uint8"):
            return str(v) if e.dtype == "int32" else f"(({CTYPES[e.dtype]}){v})"
        if e.dtype.startswith("float"):
            return self.expr(E.FloatImm(float(e.value), e.dtype))
        return f"(({CTYPES[e.dtype]}){v})"

    def float_imm(self, e: E.FloatImm) -> str:
        v = repr(float(e.value))
        if v in ("inf", "-inf", "nan"):  # C has no literal: the bits, reinterpreted
            sign = "-" if v == "-inf" else ""
            bits = "0x7fffffff" if v == "nan" else "0x7f800000"
            f32 = f"{sign}__int_as_float({bits})"
            if e.dtype == "float16":
                return f"__float2half({f32})"
            return f32 if e.dtype == "float32" else f"((double){f32})"
        if e.dtype == "float16":
            return f"__float2half({v}f)"
        return f"{v}f" if e.dtype == "float32" else v

    def floor_div_mod(self, e: E.FloorDiv | E.FloorMod) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        t = sem.dtype(e.dtype)
        if not t.is_int:
            raise CudaRenderError(f"floor division of {t.name} in {self.func.name}")
        if t.kind == "uint" or (self.is_nonneg(e.a) and self.is_nonneg(e.b)):
            return self.wrapped(e, f"({a} {'/' if isinstance(e, E.FloorDiv) else '%'} {b})")
        fn = "floordiv" if isinstance(e, E.FloorDiv) else "floormod"
        if t.bits == 64:
            self.uses64 = True
            return f"vta_{fn}64({a}, {b})"
        return self.wrapped(e, f"vta_{fn}({a}, {b})", "int32")

    def wrapped(self, e: E.BinOp, text: str, ctype_of: str | None = None) -> str:
        """``text`` cast back to ``e.dtype`` where C computes it in another type (C promotes
        ``int8``/``int16`` to ``int``; mixed operands widen): the IR wraps at the node's type.
        ``ctype_of``: the IR type C computes ``text`` in, when not the operands' promotion."""
        t = sem.DTYPES.get(e.dtype)
        if t is None or not t.is_int:
            return text
        c = ctype_of or _c_arith(e.a.dtype, e.b.dtype)
        return text if c == t.name else f"(({t.ctype}){text})"

    def min_max(self, e: E.Min | E.Max) -> str:
        fn = "min" if isinstance(e, E.Min) else "max"
        if e.dtype == "float16":
            fn = "__hmin" if fn == "min" else "__hmax"
        return self.wrapped(e, f"{fn}({self.expr(e.a)}, {self.expr(e.b)})")

    def next_after(self, e: E.NextAfter) -> str:
        """C's ``nextafterf`` (``double``: ``nextafter``; ``float16`` has none: refused)."""
        if e.dtype == "float16":
            raise CudaRenderError(f"nextafter of float16 in {self.func.name}")
        fn = "nextafterf" if e.dtype == "float32" else "nextafter"
        return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"

    def binop(self, e: E.BinOp) -> str:
        if e.dtype == "bool":  # pragma: no cover - the IR builds no boolean arithmetic
            raise CudaRenderError(f"operator {e.symbol} on {e.dtype}")
        text = f"({self.expr(e.a)} {e.symbol} {self.expr(e.b)})"
        if e.op in (sem.Op.SHR, sem.Op.SHL):  # C types a shift by its promoted left operand
            return self.wrapped(e, text, _c_arith(e.a.dtype, e.a.dtype))
        return self.wrapped(e, text)

    def math(self, e: E.Math) -> str:
        """A math function (``semantics.MATH``): C's ``float`` function (``float16`` converted
        to ``float`` and back), ``double``'s without the ``f``."""
        fn = sem.MATH[e.fn].cuda
        a = self.expr(e.a)
        if e.dtype == "float16":
            return f"__float2half({fn}(__half2float({a})))"
        return f"{fn}({a})" if e.dtype == "float32" else f"{fn[:-1]}({a})"

    def call(self, e: E.Call) -> str:
        """A scalar intrinsic (``CALLS``): its device function, defined before the kernel."""
        c, why = resolve_call(CALLS, e, self.func.name, "CUDA form")
        if c is None:
            raise CudaRenderError(why)
        self.calls[c.name] = c.source
        return f"{c.function}({', '.join(self.expr(a) for a in e.args)})"

    def unknown_expr(self, e: E.Expr) -> str:
        raise CudaRenderError(f"{self.func.name}: cannot render expression {e!r}")

    def cast(self, dtype: str, v: E.Expr) -> str:
        inner = self.expr(v)
        src = v.dtype
        if dtype == "float16":
            return inner if src == "float16" else f"__float2half((float)({inner}))"
        if src == "float16":
            return f"(({CTYPES[dtype]})__half2float({inner}))"
        return f"(({CTYPES[dtype]})({inner}))"

    # ------------------------------------------------------------------ statements
    def stmt(self, s: S.Stmt, ind: int) -> list[str]:
        return STMT_RULES(s, self, ind)

    def store(self, s: S.BufferStore, ind: int) -> list[str]:
        if s.buffer in self.frags:
            raise CudaRenderError(f"scalar store into fragment {s.buffer.name}")
        idx = self.expr(flat_index(s.buffer, s.indices))
        return [f"{'  ' * ind}{self.name(s.buffer)}[{idx}] = {self.expr(s.value)};"]

    def let(self, s: S.LetStmt, ind: int) -> list[str]:
        if self.is_nonneg(s.value):
            self.nonneg.add(s.var)
        r = self.bounds(s.value)
        if r is not None:
            self.ranges[s.var] = r
        line = (f"{'  ' * ind}const {CTYPES[s.var.dtype]} {self.name(s.var)} = "
                f"{self.expr(s.value)};")
        return [line, *self.stmt(s.body, ind)]

    def branch(self, s: S.IfThenElse, ind: int) -> list[str]:
        pad = "  " * ind
        out = [f"{pad}if {self.paren(s.cond)} {{", *self.stmt(s.then_case, ind + 1)]
        if s.else_case is not None:
            out += [f"{pad}}} else {{", *self.stmt(s.else_case, ind + 1)]
        return [*out, f"{pad}}}"]

    def attr(self, s: S.AttrStmt, ind: int) -> list[str]:
        if s.key is WMMA_FRAGMENT and isinstance(s.body, S.Allocate):
            return self.allocate(s.body.buffer, s.value, ind) + self.stmt(s.body.body, ind)
        note = s.value.name if hasattr(s.value, "name") else str(s.value)
        return [f"{'  ' * ind}// {s.key}: {note}", *self.stmt(s.body, ind)]

    def other(self, s: S.Stmt, ind: int) -> list[str]:
        raise CudaRenderError(f"{self.func.name}: cannot render statement {type(s).__name__} "
                              f"(a GPU intrinsic's statement renders once its module registered "
                              f"it: vta.gpu.intrinsic.register_gpu_intrinsic)")

    def paren(self, e: E.Expr) -> str:
        t = self.expr(e)
        return t if t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]) else f"({t})"

    def frag(self, b: S.Buffer, idx: tuple[E.Expr, ...]) -> str:
        if b not in self.frags:
            raise CudaRenderError(f"{b.name} is used as a WMMA fragment but was not allocated "
                                  f"as one")
        if not idx:
            return f"{self.name(b)}[0]"
        return self.name(b) + "".join(f"[{self.expr(i)}]" for i in idx)

    def allocate(self, b: S.Buffer, info: Any, ind: int) -> list[str]:
        pad = "  " * ind
        ctype = CTYPES[b.dtype]
        if isinstance(info, FragmentInfo):
            self.frags[b] = info
            lead = b.shape[:-2]
            dims = "".join(f"[{d}]" for d in lead) or "[1]"
            role = f"wmma::{info.role}"
            lay = f", wmma::{info.layout}" if info.role != "accumulator" else ""
            return [f"{pad}wmma::fragment<{role}, {info.m}, {info.n}, {info.k}, {ctype}{lay}> "
                    f"{self.name(b)}{dims};"]
        if b.scope == "shared" and self.dynamic:
            off = -(-self.dyn_bytes // 128) * 128  # 128-byte aligned carve-out
            self.dyn_bytes = off + b.size * sem.dtype(b.dtype).bytes
            return [f"{pad}{ctype}* const {self.name(b)} = reinterpret_cast<{ctype}*>("
                    f"vta_dyn_smem + {off});"]
        if b.scope == "shared":
            return [f"{pad}__shared__ __align__(32) {ctype} {self.name(b)}[{b.size}];"]
        if b.scope in ("local", "global"):
            if b.scope == "global":
                raise CudaRenderError(f"{self.func.name}: global intermediate {b.name} cannot be "
                                      f"allocated inside a kernel; inline it or cache it")
            return [f"{pad}__align__(16) {ctype} {self.name(b)}[{b.size}];"]
        raise CudaRenderError(f"buffer {b.name}: scope {b.scope!r} has no CUDA form")

    def loop(self, s: S.For, ind: int) -> list[str]:
        pad = "  " * ind
        if s.kind is S.ForKind.THREAD_BINDING:
            raise CudaRenderError(f"loop {s.var.name} is still bound to {s.thread}; run "
                                  f"lower_for_gpu first")
        if self.is_nonneg(s.min):
            self.nonneg.add(s.var)
        lo_r, ext_r = self.bounds(s.min), self.bounds(s.extent)
        if lo_r is not None and ext_r is not None:
            self.ranges[s.var] = (lo_r[0], max(lo_r[0], lo_r[1] + ext_r[1] - 1))
        if s.kind is S.ForKind.VECTORIZED:
            vec = self.vector_copy(s, ind)
            if vec is not None:
                return vec
        v = self.name(s.var)
        lo = self.expr(s.min)
        hi = self.expr(s.min + s.extent)
        out = []
        if s.kind in (S.ForKind.UNROLLED, S.ForKind.VECTORIZED):
            out.append(f"{pad}#pragma unroll")
        out.append(f"{pad}for (int {v} = {lo}; {v} < {hi}; ++{v}) {{")
        return out + self.stmt(s.body, ind + 1) + [f"{pad}}}"]

    def vector_copy(self, s: S.For, ind: int) -> list[str] | None:
        """A vectorized loop whose body copies contiguous elements becomes one wide move."""
        vc = vector_copy_parts(s)
        if vc is None:
            return None
        vt = {4: "int", 8: "int2", 16: "int4"}[vc.nbytes]
        pad = "  " * ind
        dst = f"{self.name(vc.store.buffer)}[{self.expr(vc.dst0)}]"
        srcs = f"{self.name(vc.load.buffer)}[{self.expr(vc.src0)}]"
        load = f"*(const {vt}*)(&{srcs})"
        if vc.cond is not None:
            zeros = {"int": "0", "int2": "make_int2(0, 0)", "int4": "make_int4(0, 0, 0, 0)"}[vt]
            load = f"({self.expr(vc.cond)} ? {load} : {zeros})"
        return [f"{pad}*({vt}*)(&{dst}) = {load};"]


@dataclass(frozen=True)
class VectorCopy:
    """A vectorized loop that is one wide move: ``store`` copies ``load`` (guarded by ``cond``:
    zeros where it is false); ``dst0``/``src0`` are the flat indices of the first element."""

    store: S.BufferStore
    load: S.BufferLoad
    cond: E.Expr | None
    dst0: E.Expr
    src0: E.Expr
    nbytes: int


def vector_copy_parts(s: S.For) -> VectorCopy | None:
    """The wide move a ``VECTORIZED`` loop renders as (4, 8 or 16 contiguous bytes on both
    sides, unit stride in the loop variable), or None when it renders as a plain loop. The
    renderer and the emulator's profiler both use this, so they agree on what is one access."""
    if s.kind is not S.ForKind.VECTORIZED:
        return None
    b = s.body
    if not isinstance(b, S.BufferStore):
        return None
    cond: E.Expr | None = None
    src = b.value
    if (isinstance(src, E.Select) and s.var not in E.free_vars(src.cond)
            and isinstance(src.f, (E.IntImm, E.FloatImm)) and src.f.value == 0):
        cond, src = src.cond, src.t  # a guard on the whole vector: load it or zeros
    if not (isinstance(src, S.BufferLoad) and isinstance(s.extent, E.IntImm)
            and E.is_const(s.min, 0)):
        return None
    if src.buffer.dtype != b.buffer.dtype:
        return None
    nbytes = s.extent.value * sem.dtype(b.buffer.dtype).bytes
    if nbytes not in (4, 8, 16):
        return None
    fd, fs = flat_index(b.buffer, b.indices), flat_index(src.buffer, src.indices)
    # unit stride in the loop variable on both sides: one wide load and store (the schedule
    # that asked for vectorization guarantees the alignment of the first element)
    if not (_linear_in(fd, s.var) and _linear_in(fs, s.var)):
        return None
    zero = {s.var: E.IntImm(0)}
    return VectorCopy(b, src, cond, E.substitute(fd, zero), E.substitute(fs, zero), nbytes)


#: the CUDA text of each expression node (``vta.compiler.ir.visitor.Dispatch``; rules get the
#: renderer, which keeps the names and what it knows of signs)
_EXPR: Dispatch[str] = Dispatch("CUDA renderer", {
    E.Var: lambda e, r: r.name(e),
    E.IntImm: lambda e, r: r.int_imm(e),
    E.FloatImm: lambda e, r: r.float_imm(e),
    ThreadIndex: lambda e, r: f"((int){e.tag})",
    E.FloorDiv: lambda e, r: r.floor_div_mod(e),
    E.FloorMod: lambda e, r: r.floor_div_mod(e),
    E.Min: lambda e, r: r.min_max(e),
    E.Max: lambda e, r: r.min_max(e),
    E.NextAfter: lambda e, r: r.next_after(e),
    E.BinOp: lambda e, r: r.binop(e),
    E.Cmp: lambda e, r: f"({r.expr(e.a)} {e.op} {r.expr(e.b)})",
    E.And: lambda e, r: f"({r.expr(e.a)} && {r.expr(e.b)})",
    E.Or: lambda e, r: f"({r.expr(e.a)} || {r.expr(e.b)})",
    E.Not: lambda e, r: f"(!{r.expr(e.a)})",
    E.Select: lambda e, r: f"({r.expr(e.cond)} ? {r.expr(e.t)} : {r.expr(e.f)})",
    E.Cast: lambda e, r: r.cast(e.dtype, e.value),
    E.Call: lambda e, r: r.call(e),
    E.Math: lambda e, r: r.math(e),
    S.BufferLoad: lambda e, r: f"{r.name(e.buffer)}[{r.expr(flat_index(e.buffer, e.indices))}]",
}, default=lambda e, r: r.unknown_expr(e))

#: the CUDA lines of each statement node: the core statements here; each GPU intrinsic's
#: statement is added by ``vta.gpu.intrinsic.register_gpu_intrinsic`` (its render rule)
STMT_RULES: Dispatch[list[str]] = Dispatch("CUDA renderer", {
    S.SeqStmt: lambda s, r, ind: [line for x in s.stmts for line in r.stmt(x, ind)],
    S.BufferStore: lambda s, r, ind: r.store(s, ind),
    S.LetStmt: lambda s, r, ind: r.let(s, ind),
    S.For: lambda s, r, ind: r.loop(s, ind),
    S.IfThenElse: lambda s, r, ind: r.branch(s, ind),
    S.Allocate: lambda s, r, ind: r.allocate(s.buffer, None, ind) + r.stmt(s.body, ind),
    S.AttrStmt: lambda s, r, ind: r.attr(s, ind),
    S.Barrier: lambda s, r, ind: [f"{'  ' * ind}__syncthreads();"],
    S.Evaluate: lambda s, r, ind: [f"{'  ' * ind}{r.expr(s.value)};"],
}, default=lambda s, r, ind: r.other(s, ind))

#: statement class -> the lines its CUDA needs before the kernel (``#include <mma.h>``), from
#: ``register_gpu_intrinsic``
HEADERS: dict[type, tuple[str, ...]] = {}

#: call name -> its scalar GPU intrinsic (device function and source), from
#: ``vta.gpu.intrinsic.register_gpu_call``
CALLS: dict[str, GpuCall] = {}

#: statement class -> the buffers a statement writes (a kernel parameter it writes is not
#: ``const``), from ``register_gpu_intrinsic``
WRITES: dict[type, Callable[[Any], tuple[S.Buffer, ...]]] = {}


def _bound_imm(e: E.IntImm) -> tuple[int, int] | None:
    t = sem.DTYPES.get(e.dtype)
    if t is None or not t.is_int:
        return None
    v = sem.wrap(e.value, t)
    return v, v


def _bound_cast(e: E.Cast, r: _Renderer) -> tuple[int, int] | None:
    # an integer value keeps its bounds through a cast that holds them (``bounds`` checks the
    # cast's own type); a float's are unknown
    return r.bounds(e.value)


#: integer bounds of an expression's value (``_Renderer.bounds``); None: unknown
_BOUNDS: Dispatch[tuple[int, int] | None] = Dispatch("CUDA renderer bounds", {
    E.IntImm: lambda e, r: _bound_imm(e),
    ThreadIndex: lambda e, r: (0, r.launch.extent(e.tag) - 1),
    E.Var: lambda e, r: r.ranges.get(e),
    E.BinOp: lambda e, r: r.bound_binop(e),
    E.Cast: _bound_cast,
}, default=lambda e, r: None)


def _c_arith(a: str, b: str) -> str:
    """The IR type C computes ``a op b`` in for integer types (integer promotion to ``int``,
    then the usual arithmetic conversions)."""
    ta, tb = sem.DTYPES.get(a), sem.DTYPES.get(b)
    if ta is None or tb is None or not (ta.is_int or ta.kind == "bool") \
            or not (tb.is_int or tb.kind == "bool"):
        return "?"
    if 64 in (ta.bits, tb.bits):
        return "int64"
    if "uint32" in (a, b):
        return "uint32"
    return "int32"


def _linear_in(e: E.Expr, v: E.Var) -> bool:
    f = affine_terms(e)
    if f is not None:
        return f.get(v, 0) == 1
    # non-affine parts must not involve v
    if isinstance(e, (E.Add, E.Sub)):
        ok_a = v not in E.free_vars(e.a) or _linear_in(e.a, v)
        ok_b = v not in E.free_vars(e.b) or (isinstance(e, E.Add) and _linear_in(e.b, v))
        return ok_a and ok_b and not (v in E.free_vars(e.a) and v in E.free_vars(e.b))
    return False


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0
