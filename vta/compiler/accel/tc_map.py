"""Automatic accelerator mapping of a TC definition: GEMM, ALU, or a named CPU fallback.

``plan_vta(func, hw)`` walks the tensor IR of a definition (``to_ir``) and assigns every value
to one of three kinds of task, in program order:

* **GEMM** (``GemmTask``): a contraction ``C[a] = sum_k int32(X[fx]) * int32(Y[fy])`` (or the
  same product without reduction indices: an outer product, K = 1) whose operands have the
  GEMM core's input and weight types. Its index structure is read off the access functions:
  output axes in both operands are *batch* axes, in ``X`` only *rows* (M), in ``Y`` only
  *columns* (N); reduction axes are K. Any affine index structure fits - transposed, batched,
  tensordot, strided or grouped convolution, depthwise, fully connected - because the host
  does the layout transform: it gathers ``X`` into a (batch, M, K) and ``Y`` into a (batch, N,
  K) matrix (an im2col for a convolution), the accelerator runs one ``M x N x K`` matmul per
  batch (the existing matmul op, default schedule and VTA pipeline), and the host scatters the
  (batch, M, N) result back into the output's layout.
* **ALU** (``AluTask``): an element-wise value, or a ``sum``/``max``/``min``/``prod``
  reduction of one read over a small window (max-pooling: one MAX per window tap), that is a
  *chain* of ALU operations on one accumulator: shift by a constant, add/multiply a constant,
  ``max``/``min`` with a constant (ReLU, clipping), or add/max/min/multiply with another
  tensor (loaded into the accumulator scratchpad, gathered by the host into the output's
  layout). Element-wise chains that read a GEMM's result point-wise (and nothing else reads
  that result) are fused into the GEMM program as its epilogue (one register operand, a bias
  indexed by the columns, allowed there). Everything runs on 32-bit accumulators; the result
  leaves through the ``out`` scratchpad, whose type is narrower (int8 on every shipped
  config): a value that may not fit is stored in ``out``-sized *planes* (``>> 8p``, low byte
  each, one program run per plane) and reassembled by the host; a value whose range provably
  fits (a clip to [-128, 127], a max-pool of int8) needs one plane.
* **CPU** (``CpuTask``): everything else - floats, non-chain expressions, conditions other
  than ReLU, immediates wider than the ALU's, operations the config's ALU lacks, pure copies
  (layout only) - is lowered with a plain schedule and run by the loop-nest IR interpreter on
  the host, and reported by statement and reason; never silently.

Work is counted per statement as the points of its domain (one MAC or one element operation
each); ``VtaPlan.accelerated`` says which statements ran on the accelerator.

The programs are built from the existing ops and passes: ``ops.matmul``'s packed layout and
``schedules.default``'s schedule for a GEMM (its epilogue stages are our ALU chain), a tiled
ALU-only schedule for the rest; ``pipeline.compile_func`` compiles both. The host transforms
(``gather``, packing) are numpy.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vta.compiler.accel import driver
from vta.compiler.accel.driver import Compiled, Rewrite
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import (
    ComputeOp,
    IterVar,
    Reduce,
    Tensor,
    TensorRead,
    compute,
    placeholder,
    post_order,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload
from vta.compiler.tc.to_ir import TcFunc
from vta.config import HwConfig
from vta.errors import VtaError
from vta.isa import Program
from vta.isa.builtins import shift_range

__all__ = ["Leaf", "AluStep", "ConvForm", "GemmTask", "AluTask", "CpuTask", "Task", "VtaPlan",
           "plan_vta", "gather", "gemm_program", "alu_program", "planes", "out_bits", "MAX_TAPS",
           "MAX_LEAVES", "AluProgram"]

#: most window taps an ALU reduction loads (each tap is one accumulator tile)
MAX_TAPS = 64
#: most tensors one ALU program loads per tile
MAX_LEAVES = 64

#: integer types the accelerator's ALU chains take (widths from ``expr.DTYPES``)
_INTS = ("int8", "int16", "int32")


def out_bits(hw: HwConfig) -> int:
    """Bits of one ``out`` scratchpad element: the width of a result plane."""
    return E.DTYPES[hw.gemm.out_dtype]


@dataclass(frozen=True, eq=False)
class Leaf:
    """A tensor read, its indices in the task's axis variables."""

    tensor: Tensor
    indices: tuple[E.Expr, ...]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype


@dataclass(frozen=True, eq=False)
class AluStep:
    """One ALU operation on the accumulator: ``op`` (ADD, MUL, SHR, MAX, MIN) with an
    immediate ``imm`` or a register operand ``leaf`` (a tensor loaded into acc). A product by a
    constant ``2**k`` is an SHR by ``-k`` (VTA's ALU has no MUL)."""

    op: str
    imm: int | None = None
    leaf: Leaf | None = None


@dataclass(frozen=True, eq=False)
class ConvForm:
    """A contraction that is, per batch, a 2-D convolution (no padding: TC has none): the
    output axes ``n`` (image), ``k`` (output channel), ``h``, ``w`` and the reduction axes
    ``c``, ``r``, ``t`` it uses (None when absent: extent 1), its ``spec``, and the input read
    re-expressed over NCHW axes ``inp_axes`` (``inp_index``, the host's gather)."""

    n: IterVar | None
    k: IterVar | None
    h: IterVar
    w: IterVar | None
    c: IterVar | None
    r: IterVar
    t: IterVar | None
    spec: Conv2dSpec
    inp_axes: tuple[IterVar, ...]
    inp_index: tuple[E.Expr, ...]

    @property
    def out_axes(self) -> list[IterVar | None]:
        """The NCHW output axes (None: a dimension of extent 1 the output does not have)."""
        return [self.n, self.k, self.h, self.w]

    @property
    def wgt_axes(self) -> list[IterVar | None]:
        """The OIHW weight axes (None: extent 1)."""
        return [self.k, self.c, self.r, self.t]

    def inp_axes_extents(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.inp_axes)


def _conv_form(x: Leaf, batch: Sequence[IterVar], rows: Sequence[IterVar],
               cols: Sequence[IterVar], red: Sequence[IterVar]) -> ConvForm | None:
    """The convolution structure of a contraction, or None: every dimension of the input
    ``x`` is a batch axis, the image axis ``n``, the channel ``c`` (a reduction axis), a
    window ``s*h + r`` (an output and a reduction axis, the same stride for both windows) or a
    constant; every row axis is ``n`` or a window's output axis, every reduction axis ``c`` or
    a window's; at most one column axis (the output channel)."""
    if len(cols) > 1:
        return None
    bset, mset, kset = set(batch), set(rows), set(red)
    by_var = {a.var: a for a in (*batch, *rows, *red)}
    n = c = None
    wins: list[tuple[IterVar, IterVar, int, int]] = []  # (h, r, stride, dimension)
    for d, e in enumerate(x.indices):
        terms, _ = poly.linear_form(e)
        if any(not isinstance(v, E.Var) or v not in by_var for v in terms):
            return None
        axes = [(by_var[v], k) for v, k in terms.items()]  # type: ignore[index]
        if len(axes) == 1 and axes[0][1] == 1:
            a = axes[0][0]
            if a in bset:
                continue
            if a in mset and n is None:
                n = a
            elif a in kset and c is None:
                c = a
            else:
                return None
        elif len(axes) == 2:
            (a, ka), (b, kb) = sorted(axes, key=lambda p: p[0] not in mset)
            if a not in mset or b not in kset or kb != 1 or ka < 1:
                return None
            wins.append((a, b, ka, d))
        elif axes:
            return None
    if not 1 <= len(wins) <= 2 or len({s for _, _, s, _ in wins}) != 1:
        return None
    used_m = [a for a in (n, *(w[0] for w in wins)) if a is not None]
    used_k = [a for a in (c, *(w[1] for w in wins)) if a is not None]
    if set(used_m) != mset or len(used_m) != len(mset) or set(used_k) != kset \
            or len(used_k) != len(kset):
        return None
    stride = wins[0][2]
    (h, r, _, dh), (w, t, _, dw) = wins[0], (wins[1] if len(wins) == 2 else (None, None, 0, -1))
    ext = lambda a: a.extent if a is not None else 1  # noqa: E731
    spec = Conv2dSpec(n=ext(n), ic=ext(c), h=stride * (h.extent - 1) + r.extent,
                      w=stride * (ext(w) - 1) + ext(t), oc=ext(cols[0] if cols else None),
                      kh=r.extent, kw=ext(t), stride=stride)
    ia = (IterVar(E.Var("in_n"), spec.n), IterVar(E.Var("in_c"), spec.ic),
          IterVar(E.Var("in_y"), spec.h), IterVar(E.Var("in_x"), spec.w))
    idx = []
    for d, e in enumerate(x.indices):
        terms, const = poly.linear_form(e)
        if d == dh:
            idx.append(ia[2].var + const)
        elif d == dw:
            idx.append(ia[3].var + const)
        elif n is not None and terms.get(n.var):
            idx.append(ia[0].var + const)
        elif c is not None and terms.get(c.var):
            idx.append(ia[1].var + const)
        else:
            idx.append(e)  # a batch axis or a constant
    return ConvForm(n, cols[0] if cols else None, h, w, c, r, t, spec, ia, tuple(idx))


@dataclass(frozen=True, eq=False)
class GemmTask:
    """``out`` = the chain applied to the contraction of ``x`` and ``y``. ``batch``, ``rows``,
    ``cols`` and ``red`` are the axes (variables and extents) of the batched matmul; ``stmts``
    the statements (0-based) it computes; ``cast``: the narrowing at the end of the chain."""

    stages: tuple[Tensor, ...]
    out: Tensor
    axes: tuple[IterVar, ...]
    x: Leaf
    y: Leaf
    batch: tuple[IterVar, ...]
    rows: tuple[IterVar, ...]
    cols: tuple[IterVar, ...]
    red: tuple[IterVar, ...]
    steps: tuple[AluStep, ...]
    cast: str | None
    value_range: tuple[int, int]
    conv: ConvForm | None = None

    @property
    def spec(self) -> MatmulSpec:
        return MatmulSpec(_prod(self.rows), _prod(self.cols), _prod(self.red))

    @property
    def batches(self) -> int:
        return _prod(self.batch)

    @property
    def macs(self) -> int:
        return self.batches * self.spec.m * self.spec.n * self.spec.k

    @property
    def bias(self) -> Leaf | None:
        return next((s.leaf for s in self.steps if s.leaf is not None), None)


@dataclass(frozen=True, eq=False)
class AluTask:
    """``out`` = ``root`` followed by ``steps``, over ``out``'s axes; a window reduction's taps
    are separate leaves (the ``taps`` values of its reduction variables are substituted)."""

    stages: tuple[Tensor, ...]
    out: Tensor
    axes: tuple[IterVar, ...]
    root: Leaf
    steps: tuple[AluStep, ...]
    cast: str | None
    value_range: tuple[int, int]

    @property
    def leaves(self) -> list[Leaf]:
        return [self.root, *(s.leaf for s in self.steps if s.leaf is not None)]


@dataclass(frozen=True, eq=False)
class CpuTask:
    """``out`` computed on the host (the IR interpreter), because of ``reason``."""

    stages: tuple[Tensor, ...]
    out: Tensor
    reason: str


Task = GemmTask | AluTask | CpuTask


@dataclass(frozen=True)
class VtaPlan:
    """The tasks of a definition in order, and per statement (0-based) the tasks that
    compute it."""

    func: TcFunc
    tasks: tuple[Task, ...]
    stmt_of: dict[Tensor, int] = field(default_factory=dict)

    def statements(self, task: Task) -> list[int]:
        return sorted({self.stmt_of[t] for t in task.stages if t in self.stmt_of})

    def accelerated(self) -> set[int]:
        """Statements whose computation (the core of the statement) runs on the accelerator."""
        cores = {s.core: s.stmt.index for s in self.func.stmts}
        return {cores[t] for task in self.tasks if not isinstance(task, CpuTask)
                for t in task.stages if t in cores}


def _prod(axes: Sequence[IterVar]) -> int:
    return math.prod(a.extent for a in axes)


# ---------------------------------------------------------------------------- analysis


class _NoMap(Exception):
    """Why a value does not map to the accelerator (becomes the CPU fallback's reason)."""


def _strip(e: E.Expr) -> E.Expr:
    """Drop integer casts that widen (the host widens leaves; the accumulator is 32-bit)."""
    while isinstance(e, E.Cast) and e.dtype == "int32" and e.value.dtype in _INTS:
        e = e.value
    return e


def _leaf(e: E.Expr, what: str) -> Leaf:
    e = _strip(e)
    if not isinstance(e, TensorRead):
        raise _NoMap(f"{what} {e} is not a tensor read")
    if e.tensor.dtype not in _INTS:
        raise _NoMap(f"{e.tensor.name} is {e.tensor.dtype}; the accelerator computes on "
                     f"integers")
    for i in e.indices:
        if any(isinstance(n, TensorRead) for n in E.walk(i)):
            raise _NoMap(f"{e} has a data-dependent index (a gather: the host reads it, "
                         f"checking its bounds)")
        try:
            poly.to_isl(i, {v: f"v{k}" for k, v in enumerate(E.free_vars(i))})
        except poly.PolyError:
            raise _NoMap(f"{e} has a non-affine index (the host reads it, checking its "
                         f"bounds)") from None
    return Leaf(e.tensor, e.indices)


def _narrowing(e: E.Expr) -> tuple[str | None, E.Expr]:
    """``(dtype, value)`` of a narrowing to int8/int16 at the top of ``e`` (also when the
    narrowed value is widened again, ``int32(int8(x))``: the host sign-extends), else
    ``(None, e)``."""
    if isinstance(e, E.Cast) and e.dtype == "int32" and isinstance(e.value, E.Cast):
        e = e.value
    if isinstance(e, E.Cast) and e.dtype in _INTS and e.dtype != "int32" \
            and e.value.dtype in _INTS:
        return e.dtype, e.value
    return None, e


def _const(e: E.Expr) -> int | None:
    """The value of an integer expression without variables or reads (folded), else None."""
    e = _strip(e)
    return e.value if isinstance(e, E.IntImm) else None


class _Chain:
    """Decompose an element-wise integer expression into an ALU chain on one accumulator."""

    def __init__(self, hw: HwConfig, running: Tensor | None, axes_map: dict[E.Var, E.Expr],
                 reg_ok: Callable[[Leaf], str | None]) -> None:
        self.hw, self.running, self.axes_map, self.reg_ok = hw, running, axes_map, reg_ok
        self.lim = 1 << (hw.alu.imm_bits - 1)

    def op(self, name: str) -> None:
        if name.lower() not in self.hw.alu.ops:
            raise _NoMap(f"{self.hw.name}'s ALU has no {name} (alu.ops: "
                         f"{', '.join(self.hw.alu.ops)})")

    def imm(self, name: str, c: int) -> AluStep:
        if name == "MUL" and c == 0:
            raise _NoMap("a multiplication by zero (a constant, not an ALU operation)")
        if name == "MUL" and c >= 2 and not c & (c - 1) \
                and c.bit_length() - 1 <= -shift_range(self.hw)[0]:
            return self.imm("SHR", 1 - c.bit_length())  # x * 2**k is SHR by -k: no MUL
        self.op(name)
        if not -self.lim <= c < self.lim:
            raise _NoMap(f"immediate {c} does not fit the ALU's {self.hw.alu.imm_bits}-bit "
                         f"immediate")
        return AluStep(name, imm=c)

    def reg(self, name: str, e: E.Expr) -> AluStep:
        self.op(name)
        lf = _leaf(e, "operand")
        lf = Leaf(lf.tensor, tuple(E.substitute(i, self.axes_map) for i in lf.indices))
        why = self.reg_ok(lf)
        if why:
            raise _NoMap(why)
        return AluStep(name, leaf=lf)

    def is_running(self, e: E.Expr) -> bool:
        e = _strip(e)
        return isinstance(e, TensorRead) and self.running is not None \
            and e.tensor is self.running

    def chainable(self, e: E.Expr) -> bool:
        """Whether ``e`` contains the running value (or any read, when there is none yet)."""
        for n in E.walk(e):
            if isinstance(n, TensorRead) and (self.running is None or n.tensor is self.running):
                return True
        return False

    def walk(self, e: E.Expr) -> tuple[Leaf | None, list[AluStep]]:
        """``(root leaf or None for the running value, steps)``."""
        if e.dtype.startswith("float"):
            raise _NoMap(f"floating-point value {e}")
        e = _strip(e)
        if self.is_running(e):
            return None, []
        if isinstance(e, TensorRead):
            if self.running is not None:
                raise _NoMap(f"{e} is not the running accumulator")
            return _leaf(e, "value"), []
        if isinstance(e, (E.Shr, E.Shl)):
            c = _const(e.b)
            if c is None:
                raise _NoMap(f"shift by a non-constant {e.b}")
            root, steps = self.walk(e.a)
            return root, [*steps, self.imm("SHR", c if isinstance(e, E.Shr) else -c)]
        if isinstance(e, E.Select):
            return self.relu(e)
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Max, E.Min)):
            return self.binary(e)
        raise _NoMap(f"{type(e).__name__} {e} is not an ALU operation")

    def binary(self, e: E.BinOp) -> tuple[Leaf | None, list[AluStep]]:
        name = {E.Add: "ADD", E.Sub: "ADD", E.Mul: "MUL", E.Max: "MAX", E.Min: "MIN"}[type(e)]
        if name in ("ADD", "MUL") and e.dtype != "int32":
            raise _NoMap(f"{e.dtype} arithmetic {e} (the accumulator is int32)")
        sides = [(e.a, e.b)] if isinstance(e, E.Sub) else [(e.a, e.b), (e.b, e.a)]
        for main, other in sides:
            c = _const(other)
            if c is not None and self.chainable(main):
                root, steps = self.walk(main)
                return root, [*steps, self.imm(name, -c if isinstance(e, E.Sub) else c)]
        if isinstance(e, E.Sub):
            raise _NoMap(f"subtraction of a tensor {e.b} (the ALU has no register SUB)")
        for main, other in sides:
            if self.chainable(main) and isinstance(_strip(other), TensorRead) \
                    and not self.chainable_running(other):
                root, steps = self.walk(main)
                return root, [*steps, self.reg(name, other)]
        raise _NoMap(f"{e} combines two computed values (not a chain of operations on one "
                     f"accumulator)")

    def chainable_running(self, e: E.Expr) -> bool:
        return self.running is not None and any(
            isinstance(n, TensorRead) and n.tensor is self.running for n in E.walk(e))

    def relu(self, e: E.Select) -> tuple[Leaf | None, list[AluStep]]:
        c = e.cond
        if isinstance(c, E.Cmp) and _const(e.f) == 0:
            x = None
            if c.op in (">", ">=") and _const(c.b) == 0:
                x = c.a
            elif c.op in ("<", "<=") and _const(c.a) == 0:
                x = c.b
            if x is not None and _strip(x) == _strip(e.t):
                root, steps = self.walk(e.t)
                return root, [*steps, self.imm("MAX", 0)]
        raise _NoMap(f"the condition {e.cond} is not a ReLU (x > 0 ? x : 0)")


def _range_after(r: tuple[int, int], steps: Sequence[AluStep]) -> tuple[int, int]:
    """A bound on the accumulator's value after ``steps`` (full int32 range if it may wrap)."""
    full = (-(1 << 31), (1 << 31) - 1)
    lo, hi = r
    for s in steps:
        o = _leaf_range(s.leaf) if s.leaf is not None else (s.imm, s.imm)
        assert o[0] is not None and o[1] is not None
        if s.op == "ADD":
            lo, hi = lo + o[0], hi + o[1]
        elif s.op == "MUL":
            cands = [lo * o[0], lo * o[1], hi * o[0], hi * o[1]]
            lo, hi = min(cands), max(cands)
        elif s.op == "SHR":
            k = o[0]
            lo, hi = (lo >> k, hi >> k) if k >= 0 else (lo << -k, hi << -k)
        elif s.op == "MAX":
            lo, hi = max(lo, o[0]), max(hi, o[1])
        else:
            lo, hi = min(lo, o[0]), min(hi, o[1])
        if lo < full[0] or hi > full[1]:
            lo, hi = full
    return lo, hi


def _leaf_range(lf: Leaf) -> tuple[int, int]:
    b = E.DTYPES[lf.dtype]
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


def planes(value_range: tuple[int, int], cast: str | None, hw: HwConfig) -> int:
    """How many ``out``-sized planes the result needs: one for a narrowing to the out type (or
    narrower), else enough bytes for the value's range (all four for an int32 that may wrap)."""
    ob = out_bits(hw)
    if cast is not None:
        return -(-E.DTYPES[cast] // ob)
    most = -(-E.DTYPES[hw.gemm.acc_dtype] // ob)
    lo, hi = value_range
    for p in range(1, most):
        bits = p * ob
        if -(1 << (bits - 1)) <= lo and hi < 1 << (bits - 1):
            return p
    return most


class _Planner:
    def __init__(self, f: TcFunc, hw: HwConfig) -> None:
        self.f, self.hw = f, hw
        self.comps = [t for t in post_order(f.outputs) if isinstance(t.op, ComputeOp)]
        self.outs = set(f.outputs)
        self.readers: dict[Tensor, list[Tensor]] = {t: [] for t in self.comps}
        for t in self.comps:
            op = t.op
            assert isinstance(op, ComputeOp)
            for n in E.walk(op.body):
                if isinstance(n, TensorRead) and n.tensor in self.readers \
                        and t not in self.readers[n.tensor]:
                    self.readers[n.tensor].append(t)
        self.done: set[Tensor] = set()

    # ------------------------------------------------------------------ chains

    def extend(self, cur: Tensor, axes: tuple[IterVar, ...], steps: list[AluStep],
               stages: list[Tensor], reg_ok: Callable[[Leaf], str | None],
               ) -> tuple[Tensor, str | None]:
        """Fuse following element-wise stages that read ``cur`` point-wise and nothing else
        reads (their register operands must be computed already); returns the last stage and
        its narrowing cast."""
        def ready(lf: Leaf) -> str | None:
            if isinstance(lf.tensor.op, ComputeOp) and lf.tensor not in self.done:
                return f"{lf.tensor.name} is computed later"
            return reg_ok(lf)

        cast = None
        while cast is None and cur not in self.outs and len(self.readers[cur]) == 1:
            nxt = self.readers[cur][0]
            op = nxt.op
            assert isinstance(op, ComputeOp)
            if isinstance(op.body, Reduce) or nxt.shape != cur.shape:
                break
            if not all(_pointwise(n, op.axes) for n in E.walk(op.body)
                       if isinstance(n, TensorRead) and n.tensor is cur):
                break
            c, body = _narrowing(op.body)
            amap: dict[E.Var, E.Expr] = {a.var: b.var for a, b in zip(op.axes, axes,
                                                                      strict=True)}
            try:
                root, more = _Chain(self.hw, cur, amap, ready).walk(body)
            except _NoMap:
                break
            if root is not None:
                break
            steps += more
            stages.append(nxt)
            cur, cast = nxt, c
        if cast is None:
            op = cur.op
            assert isinstance(op, ComputeOp)
            if op.dtype in _INTS and op.dtype != "int32":
                cast = op.dtype
        return cur, cast

    # ------------------------------------------------------------------ GEMM

    def gemm(self, t: Tensor) -> GemmTask:
        op = t.op
        assert isinstance(op, ComputeOp)
        body = op.body
        red: tuple[IterVar, ...] = ()
        if isinstance(body, Reduce):
            if body.combiner != "sum":
                raise _NoMap(f"a {body.combiner} reduction is not a contraction")
            red, body = body.axes, body.source
        if body.dtype != self.hw.gemm.acc_dtype:
            raise _NoMap(f"a {body.dtype} value; the GEMM core accumulates "
                         f"{self.hw.gemm.acc_dtype}")
        if not isinstance(body, E.Mul):
            raise _NoMap("not a product of two tensor reads")
        g = self.hw.gemm
        x, y = (_strip(body.a), _strip(body.b))
        if not (isinstance(x, TensorRead) and isinstance(y, TensorRead)):
            raise _NoMap("not a product of two tensor reads")
        if (x.tensor.dtype, y.tensor.dtype) != (g.inp_dtype, g.wgt_dtype):
            if (y.tensor.dtype, x.tensor.dtype) == (g.inp_dtype, g.wgt_dtype):
                x, y = y, x
            else:
                raise _NoMap(f"operands {x.tensor.dtype} x {y.tensor.dtype}; the GEMM core "
                             f"multiplies {g.inp_dtype} x {g.wgt_dtype}")
        for rd in (x, y):
            for i in rd.indices:
                try:
                    poly.to_isl(i, {a.var: f"v{k}" for k, a in enumerate((*op.axes, *red))})
                except poly.PolyError as e:
                    raise _NoMap(f"index {i} of {rd.tensor.name}: {e}") from None
        vx = set().union(*(E.free_vars(i) for i in x.indices))
        vy = set().union(*(E.free_vars(i) for i in y.indices))
        batch = tuple(a for a in op.axes if a.var in vx and a.var in vy)
        cols = tuple(a for a in op.axes if a.var in vy and a.var not in vx)
        rows = tuple(a for a in op.axes if a not in batch and a not in cols)
        stages = [t]
        steps: list[AluStep] = []
        bvars = {a.var for a in (*batch, *cols)}

        def bias_ok(lf: Leaf) -> str | None:
            if any(s.leaf is not None for s in steps):
                return "a second register operand in a GEMM epilogue"
            if not set().union(*(E.free_vars(i) for i in lf.indices)) <= bvars:
                return f"{lf.tensor.name} is not indexed by the output columns only (a bias)"
            return None

        last, cast = self.extend(t, op.axes, steps, stages, bias_ok)
        k_ext = _prod(red)
        pr = [a * b for a in _leaf_range(Leaf(x.tensor, ()))
              for b in _leaf_range(Leaf(y.tensor, ()))]
        acc = (min(pr) * k_ext, max(pr) * k_ext)
        if acc[0] < -(1 << 31) or acc[1] >= 1 << 31:
            acc = (-(1 << 31), (1 << 31) - 1)
        xl = Leaf(x.tensor, x.indices)
        return GemmTask(tuple(stages), last, op.axes, xl, Leaf(y.tensor, y.indices), batch, rows,
                        cols, red, tuple(steps), cast, _range_after(acc, steps),
                        _conv_form(xl, batch, rows, cols, red))

    # ------------------------------------------------------------------ ALU

    def alu(self, t: Tensor) -> AluTask:
        op = t.op
        assert isinstance(op, ComputeOp)
        body = op.body
        outvars = {a.var for a in op.axes}

        def any_ok(lf: Leaf) -> str | None:
            if not set().union(*(E.free_vars(i) for i in lf.indices)) <= outvars:
                return f"operand {lf.tensor.name} depends on a reduction index"
            return None

        stages = [t]
        if isinstance(body, Reduce):
            taps = _prod(body.axes)
            if taps > MAX_TAPS:
                raise _NoMap(f"a window of {taps} taps (the ALU program loads at most "
                             f"{MAX_TAPS})")
            src = _leaf(body.source, "the reduced value")
            name = {"sum": "ADD", "max": "MAX", "min": "MIN", "prod": "MUL"}[body.combiner]
            chain = _Chain(self.hw, None, {}, any_ok)
            chain.op(name)
            leaves = []
            for point in np.ndindex(*(a.extent for a in body.axes)):
                sub = {a.var: E.IntImm(int(v)) for a, v in zip(body.axes, point, strict=True)}
                leaves.append(Leaf(src.tensor, tuple(poly.simplify(E.substitute(i, sub))
                                                    for i in src.indices)))
            root = leaves[0]
            steps = [AluStep(name, leaf=lf) for lf in leaves[1:]]
            if not steps:
                steps = [chain.imm("ADD", 0)]
        cast0 = None
        if not isinstance(body, Reduce):
            cast0, body = _narrowing(body)
            r, steps = _Chain(self.hw, None, {}, any_ok).walk(body)
            assert r is not None
            root = r
            if not steps:
                raise _NoMap("a copy (no arithmetic): the host does layout transforms")
        if len(steps) + 1 > MAX_LEAVES:
            raise _NoMap(f"{len(steps) + 1} operands (the ALU program loads at most "
                         f"{MAX_LEAVES})")
        cast: str | None
        if cast0 is not None:  # the narrowing happens on the STORE: nothing can follow it
            last, cast = t, cast0
        else:
            last, cast = self.extend(t, op.axes, steps, stages,
                                     lambda lf: any_ok(lf) if len(steps) + 1 < MAX_LEAVES
                                     else f"more than {MAX_LEAVES} operands")
        rng = _range_after(_leaf_range(root), steps)
        return AluTask(tuple(stages), last, op.axes, root, tuple(steps), cast, rng)

    # ------------------------------------------------------------------ all

    def run(self) -> VtaPlan:
        tasks: list[Task] = []
        placing = {s.final for s in self.f.stmts if s.final is not s.core
                   and isinstance(_body(s.final), E.Select)}
        for t in self.comps:
            if t in self.done:
                continue
            task: Task
            why_gemm = why_alu = ""
            if t in placing:
                tasks.append(CpuTask((t,), t, _placement(t)))
                self.done.add(t)
                continue
            try:
                task = self.gemm(t)
            except _NoMap as e:
                why_gemm = str(e)
                try:
                    task = self.alu(t)
                except _NoMap as e2:
                    why_alu = str(e2)
                    task = CpuTask((t,), t, _reason(t, why_gemm, why_alu))
            tasks.append(task)
            self.done.update(task.stages)
        stmt_of: dict[Tensor, int] = {}
        for s in self.f.stmts:
            stmt_of[s.core] = s.stmt.index
            stmt_of[s.final] = s.stmt.index
        return VtaPlan(self.f, tuple(tasks), stmt_of)


def _placement(t: Tensor) -> str:
    body = t.op.body if isinstance(t.op, ComputeOp) else None
    if isinstance(body, E.Select) and isinstance(body.t, TensorRead):
        return ("places the statement's result over part of the tensor (a select on its range: "
                "a layout transform)")
    return ("combines the statement's result with the tensor's previous value over part of "
            "the tensor (a select on its range)")


def _reason(t: Tensor, why_gemm: str, why_alu: str) -> str:
    op = t.op
    assert isinstance(op, ComputeOp)
    if isinstance(op.body, Reduce) and op.body.combiner == "sum" \
            and isinstance(op.body.source, E.Mul):
        return f"not a GEMM: {why_gemm}"
    return why_alu


def _pointwise(n: TensorRead, axes: Sequence[IterVar]) -> bool:
    return len(n.indices) == len(axes) and all(
        isinstance(poly.simplify(i), E.Var) and poly.simplify(i) is a.var
        for i, a in zip(n.indices, axes, strict=True))


def plan_vta(f: TcFunc, hw: HwConfig) -> VtaPlan:
    """Assign every value of ``f`` to a GEMM, ALU or CPU task (module docstring)."""
    return _Planner(f, hw).run()


# ---------------------------------------------------------------------------- host transforms


def _eval_index(e: E.Expr, env: Mapping[E.Var, np.ndarray]) -> np.ndarray:
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return np.asarray(e.value, np.int64)
    if isinstance(e, E.Cast):
        return _eval_index(e.value, env)
    if isinstance(e, E.BinOp):
        a, b = _eval_index(e.a, env), _eval_index(e.b, env)
        fn = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
              E.FloorMod: np.mod}.get(type(e))
        if fn is not None:
            return fn(a, b)
    raise VtaError(f"index {e} cannot be evaluated by the host")


def gather(leaf: Leaf, axes: Sequence[IterVar], values: Mapping[Tensor, np.ndarray]
           ) -> np.ndarray:
    """``leaf``'s tensor read at every point of ``axes`` (array of the axes' extents, int32):
    the host's layout transform (transpose, reshape, im2col, window taps)."""
    env: dict[E.Var, np.ndarray] = {}
    for d, a in enumerate(axes):
        shp = [1] * len(axes)
        shp[d] = a.extent
        env[a.var] = np.arange(a.extent, dtype=np.int64).reshape(shp)
    idx = tuple(np.broadcast_to(_eval_index(i, env), [a.extent for a in axes]).astype(np.intp)
                for i in leaf.indices)
    src = values[leaf.tensor]
    for d, (ix, n) in enumerate(zip(idx, src.shape, strict=True)):
        if ix.size and (ix.min() < 0 or ix.max() >= n):
            raise VtaError(f"gathering {leaf.tensor.name}: dimension {d} index runs from "
                           f"{ix.min()} to {ix.max()}, outside [0, {n})")
    out = src[idx] if idx else np.broadcast_to(src, [a.extent for a in axes])
    return np.broadcast_to(out, [a.extent for a in axes]).astype(np.int32)


# ---------------------------------------------------------------------------- programs


@dataclass
class AluProgram:
    """An ALU-only program (an ALU task's plane) with the layout the host packs for it."""

    program: Program
    seconds: float
    packed: tuple[int, int]  # (tiles, entries per tile)


def _effective(steps: Sequence[AluStep], loaded: bool) -> list[AluStep]:
    """``steps`` without the identities ``+ 0`` and ``* 1`` (expression building folds them
    away, which would leave a bare copy that no instruction performs). A ``loaded`` value
    (LOAD ACC, not a GEMM result) with nothing left gets one ``>> 0`` (not folded): the out
    buffer holds only what the GEMM or the ALU wrote."""
    out = [s for s in steps if s.leaf is not None or (s.op, s.imm) not in (("ADD", 0),
                                                                          ("MUL", 1))]
    return out or ([AluStep("SHR", imm=0)] if loaded else [])


def _chain_stages(acc: Tensor, steps: Sequence[AluStep], regs: Sequence[Tensor],
                  reg_index: Callable[[tuple[E.Var, ...]], tuple[E.Expr, ...]],
                  shift: int, loaded: bool) -> tuple[list[Tensor], Tensor]:
    """One element-wise stage per ALU step over ``acc``'s shape (register operands read
    ``regs`` in order at ``reg_index(axes)``), a final ``>> shift`` for a plane, and the int8
    output (the narrowing is the STORE)."""
    stages: list[Tensor] = []
    cur = acc
    k = 0
    every = _effective([*steps, *([AluStep("SHR", imm=shift)] if shift else [])], loaded)
    for n, s in enumerate(every):
        src = cur
        reg = regs[k] if s.leaf is not None else None
        k += s.leaf is not None

        def fn(*ax: E.Var, s: AluStep = s, src: Tensor = src, reg: Tensor | None = reg
               ) -> E.Expr:
            v: E.Expr = src[ax]
            o = reg[reg_index(ax)] if reg is not None else E.IntImm(s.imm or 0)
            if s.op == "SHR":
                k = s.imm or 0
                return v >> k if k >= 0 else v << -k
            return {"ADD": E.Add, "MUL": E.Mul, "MAX": E.Max, "MIN": E.Min}[s.op](v, o, "int32")

        cur = _ew(acc.shape, fn, f"alu{n}")
        stages.append(cur)
    last = cur
    out = _ew(acc.shape, lambda *ax: last[ax].astype("int8"), "res")
    return stages, out


def _ew(shape: tuple[int, ...], fn: Callable[..., E.Expr], name: str) -> Tensor:
    def f(*ax: E.Var) -> E.Expr:
        return fn(*ax)

    f.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"a{d}", inspect.Parameter.POSITIONAL_ONLY) for d in range(len(shape))])
    return compute(shape, f, name)


def _rewrite(task: GemmTask, hw: HwConfig, plane: int) -> Rewrite:
    """Replace the op's epilogue by the task's ALU chain (plus the plane's shift): the bias
    register operand is the op's own bias input (packed per output channel)."""
    ob = out_bits(hw)

    def rewrite(op: PackedOp) -> PackedOp:
        oc = op.roles["oc"]
        regs = [op.bias] if op.bias is not None else []
        stages, res = _chain_stages(op.acc, task.steps, regs,
                                    lambda ax: (ax[oc], ax[-2], ax[-1]), ob * plane, False)
        return PackedOp(op.name, op.inputs, op.pad, op.acc, tuple(stages), res, op.roles)

    return rewrite


def gemm_program(task: GemmTask, hw: HwConfig, plane: int,
                 cost: Callable[[Program], int] | None = None, refine: int = 1
                 ) -> Compiled:
    """The accelerator program of one batch of ``task`` (one ``out``-sized plane): the
    convolution op when the contraction is one (``task.conv``), else the matmul op, scheduled
    by the default model (``driver.compile_workload``: its layout folds, its ranking, the
    fastest of the ``refine`` best under ``cost``), with the task's chain as the epilogue."""
    spec = task.conv.spec if task.conv is not None else task.spec
    epi = Epilogue(shift=0, bias=task.bias is not None, clip_lo=-128, clip_hi=127)
    return driver.compile_workload(Workload(f"tc:{task.out.name}", spec), hw, epilogue=epi,
                                   refine=max(1, refine), cost=cost,
                                   rewrite=_rewrite(task, hw, plane))


def _body(t: Tensor) -> E.Expr:
    assert isinstance(t.op, ComputeOp)
    return t.op.body


def alu_tile(hw: HwConfig, leaves: int, entries: int) -> int:
    """Accumulator entries per tile of an ALU program: every leaf's tile fits ``acc`` and the
    result's fits ``out``."""
    g = hw.gemm
    acc_entry = g.batch * g.block_out * E.DTYPES[g.acc_dtype] // 8
    out_entry = g.batch * g.block_out * out_bits(hw) // 8
    fit = min(hw.scratchpad.acc // (acc_entry * max(1, leaves)), hw.scratchpad.out // out_entry)
    return max(1, min(entries, fit))


def alu_program(task: AluTask, hw: HwConfig, plane: int, entries: int) -> AluProgram:
    """The ALU-only program of ``task`` over ``entries`` accumulator entries (one plane)."""
    t0 = time.perf_counter()
    g = hw.gemm
    leaves = task.leaves
    tile = alu_tile(hw, len(leaves), entries)
    tiles = -(-entries // tile)
    shape = (tiles, tile, g.batch, g.block_out)
    phs = [placeholder(shape, "int32", f"L{k}") for k in range(len(leaves))]
    root = phs[0]
    ob = out_bits(hw)
    stages, res = _chain_stages(root, task.steps, phs[1:], lambda ax: ax, ob * plane, True)
    s = create_schedule(res)
    readers = {phs[0]: s[stages[0]]}
    for ph in phs[1:]:
        readers[ph] = next(s[st] for st in stages if any(
            isinstance(n, TensorRead) and n.tensor is ph for n in E.walk(_body(st))))
    caches = [s.cache_read(p, "acc", [r]) for p, r in readers.items()]
    out = s[res]
    t_axis = out.axis[0]
    for c in caches:
        s[c].compute_at(out, t_axis)
    for st in stages:
        s[st].set_scope("acc")
        s[st].compute_at(out, t_axis)
    func = lower(s, [*phs, res], "alu")
    r = compile_func(func, hw, keep_ir=False)
    return AluProgram(r.program, time.perf_counter() - t0, (tiles, tile))


def pack_rows(a: np.ndarray, packed: tuple[int, int], hw: HwConfig) -> np.ndarray:
    """A flat int32 array as ALU program entries ``(tiles * tile, batch, block_out)``, zero
    padded."""
    tiles, tile = packed
    g = hw.gemm
    flat = np.zeros(tiles * tile * g.batch * g.block_out, np.int32)
    flat[:a.size] = a.reshape(-1)
    return flat.reshape(tiles * tile, g.batch, g.block_out)


def combine_planes(parts: Sequence[np.ndarray], dtype: str, out_bits: int) -> np.ndarray:
    """Reassemble a value from its ``out``-sized planes (plane p = low bits of ``v >> p*out_bits``)
    as ``dtype`` (two's complement, sign-extended from the planes' top bit)."""
    acc = np.zeros(parts[0].shape, np.int64)
    mask = (1 << out_bits) - 1
    for p, a in enumerate(parts):
        acc |= (a.astype(np.int64) & mask) << (p * out_bits)
    bits = out_bits * len(parts)
    acc = np.where(acc >= 1 << (bits - 1), acc - (1 << bits), acc)
    return acc.astype(np.int64).astype(dtype)

