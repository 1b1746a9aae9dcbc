"""A lockstep SIMT emulator: runs a lowered GPU kernel's IR on the CPU with numpy.

The model. All threads of a block - and, batched, many blocks - are *lanes* of numpy vectors:
a value that differs between threads is an array indexed by lane, a value every thread agrees
on (a serial loop's counter, a constant) stays a Python scalar. The kernel body is compiled once
into nested closures; each statement then runs for all active lanes before the next one starts,
so a barrier is a point every lane reaches together. Divergence is a lane mask: ``if`` runs
both sides under complementary masks, a loop with a thread-dependent trip count runs to the
longest and masks the finished lanes; a barrier under a partial mask is an error. The one
exception to a single instruction stream is a ``warp_roles`` split (``vta.gpu.emulator_roles``:
a producer warpgroup and consumer warpgroups that synchronise only through mbarriers): its
branches run as concurrent roles, one at a time, handing over when an mbarrier wait cannot
pass; a batch then holds whole thread-block clusters (``CLUSTER``).

Memory. Global buffers are the caller's arrays. Shared buffers hold one region per block of the
batch, local buffers one region per lane, WMMA fragments one tile per warp (with W the target's
``warp_size``, lanes Wk..Wk+W-1 of a block form warp k). Every access is bounds-checked (an
error names the buffer).

Races. Lockstep execution would hide a missing barrier, so it checks instead: per shared element
it tracks the thread that wrote it and the thread(s) that read it since the last barrier; a read
of another thread's write, or a write over another thread's read or write, raises
``EmulatorRaceError`` naming the buffer, element and threads. Blocks run batched, which is
exact unless blocks communicate through global memory; for global buffers the kernel both reads
and writes, the block that last wrote each element is tracked and a read of another block's
write is reported.

Arithmetic is the IR's, read from ``vta.compiler.ir.semantics`` (the table the loop-nest
interpreter and constant folding read too): values carry the IR dtype as numpy dtypes, or are
Python ints wrapped to theirs (a serial loop's counter, an ``int32`` constant), so int8 products
wrap as int8 unless cast first (``int32(a) * int32(b)``), narrowing casts wrap, ``>>`` is
arithmetic, ``//`` and ``%`` floor; a division by zero or an out-of-range shift on an active
lane is an ``EmulatorError``. GPU intrinsics (``vta.gpu.intrinsic``: WMMA, cp.async, ldmatrix,
mma.sync) run by the emulate rules their definitions register in ``STMT_RULES``; ``wmma.mma`` on
int8 accumulates exactly in int32 (with wraparound), on fp16 in fp32. A scalar intrinsic's call
(``E.Call``, ``vta.gpu.intrinsic.GpuCall``: ``requant_f32``) runs its numpy semantics from
``CALLS``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import Dispatch
from vta.errors import EmulatorError, EmulatorRaceError
from vta.gpu.cuda import vector_copy_parts
from vta.gpu.dialect import (
    CLUSTER,
    LAUNCH,
    WMMA_FRAGMENT,
    FragmentInfo,
    LaunchConfig,
    ThreadIndex,
    resolve_call,
)
from vta.gpu.emulator_roles import ROLES_STATE, WARP_ROLES, RoleScheduler, role_branches
from vta.gpu.profile import Profile
from vta.gpu.target import target_of

if TYPE_CHECKING:
    from vta.gpu.intrinsic import GpuCall

__all__ = ["EmulatorError", "EmulatorRaceError", "Emulator", "emulate", "NP_DTYPES",
           "STMT_RULES", "WARP_WIDE", "CALLS"]

#: IR scalar type -> numpy scalar type (read from ``vta.dtypes.DTYPES``)
NP_DTYPES: dict[str, Any] = {n: d.np.type for n, d in sem.DTYPES.items()}

Mask = "np.ndarray | None"

ExprFn = Callable[["_Ctx", Any], Any]
StmtFn = Callable[["_Ctx", Any], None]

#: operators that can have no meaning for some operands (``semantics.undefined``)
_PARTIAL = (sem.Op.FLOORDIV, sem.Op.FLOORMOD, sem.Op.SHR, sem.Op.SHL)


def _is_vec(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


class _Ctx:
    """The state of one batch of blocks."""

    def __init__(self, launch: LaunchConfig, first_block: int, nblocks: int,
                 warp_size: int) -> None:
        bx, by, _bz = launch.block
        #: lanes of a warp (the kernel's ``GpuTarget.warp_size``)
        self.W = warp_size
        gx, gy, _gz = launch.grid
        self.T = launch.threads_per_block
        self.B = nblocks
        self.L = self.T * nblocks
        lane = np.arange(self.L, dtype=np.int32)
        self.blk = lane // self.T
        self.tid = lane % self.T
        bid = self.blk + first_block
        self.first_block = first_block
        self.thread: dict[str, np.ndarray] = {
            "threadIdx.x": self.tid % bx, "threadIdx.y": (self.tid // bx) % by,
            "threadIdx.z": self.tid // (bx * by),
            "blockIdx.x": bid % gx, "blockIdx.y": (bid // gx) % gy, "blockIdx.z": bid // (gx * gy),
        }
        self.env: dict[E.Var, Any] = {}
        self.mem: dict[S.Buffer, np.ndarray] = {}
        self.writer: dict[S.Buffer, np.ndarray] = {}
        self.reader: dict[S.Buffer, np.ndarray] = {}
        self._bases: dict[tuple[str, int], np.ndarray] = {}
        self.wpb = max(1, -(-self.T // self.W))  # warps per block (a partial last one counts)
        self.leaders = np.nonzero(self.tid % self.W == 0)[0]
        self.warp_of_lane = self.blk * self.wpb + self.tid // self.W
        #: shared buffer -> per element, the cp.async copies still in flight (vta.gpu.mma)
        self.inflight: dict[S.Buffer, np.ndarray] = {}
        #: per-kernel state of dialect statements (cp.async groups), keyed by their module
        self.dialect: dict[str, Any] = {}

    def warps(self, m: Any) -> int:
        """Warps with at least one active lane under mask ``m``."""
        if m is None:
            return self.B * self.wpb
        if self.T % self.W == 0:
            return int(np.count_nonzero(m.reshape(-1, self.W).any(axis=1)))
        return int(np.unique(self.warp_of_lane[m]).size)

    def base(self, scope: str, size: int) -> np.ndarray:
        key = (scope, size)
        b = self._bases.get(key)
        if b is None:
            if scope == "shared":
                b = self.blk.astype(np.int64) * size
            else:
                b = np.arange(self.L, dtype=np.int64) * size
            self._bases[key] = b
        return b


class Emulator:
    """Compile a lowered GPU ``PrimFunc`` once; ``run`` it on numpy arrays many times."""

    def __init__(self, func: S.PrimFunc, check_races: bool = True, max_lanes: int = 1 << 15,
                 profile: bool = False) -> None:
        launch = func.attr(LAUNCH)
        if not isinstance(launch, LaunchConfig):
            raise EmulatorError(f"{func.name}: no launch configuration; run "
                                f"vta.gpu.lower_gpu.lower_for_gpu first")
        self.func = func
        self.launch = launch
        #: the GPU the kernel was lowered for (its warp size groups the lanes)
        self.target = target_of(func)
        self.check_races = check_races
        #: counters of what makes the kernel slow (vta.gpu.profile), filled by ``run``
        self.profile = Profile(func.name, launch.num_blocks, launch.threads_per_block) \
            if profile else None
        self._quiet = 0  # > 0 while a wide move records itself as one access
        self.max_lanes = max_lanes
        self.frags: dict[S.Buffer, FragmentInfo] = {}
        self.scope_of: dict[S.Buffer, str] = {b: "global" for b in func.params}
        loaded = {n.buffer for n in E.walk(func.body) if isinstance(n, S.BufferLoad)}
        stored = {n.buffer for n in E.walk(func.body) if isinstance(n, S.BufferStore)}
        #: global buffers read and written by the kernel: tracked for inter-block races
        self.rw_globals = {b for b in func.params if b in loaded and b in stored}
        wide = sorted({type(n).__name__ for n in E.walk(func.body) if type(n) in WARP_WIDE})
        if wide and launch.threads_per_block % self.target.warp_size:
            raise EmulatorError(f"{func.name}: {', '.join(wide)} need whole warps, but a block "
                                f"has {launch.threads_per_block} threads")
        #: blocks of a thread-block cluster (``CLUSTER``; 1 without): a batch holds whole ones
        self.cluster = func.attr(CLUSTER) or 1
        if launch.grid[0] % self.cluster:
            raise EmulatorError(f"{func.name}: grid x {launch.grid[0]} is not a multiple of "
                                f"the cluster size {self.cluster}")
        self.body = self.stmt(func.body)

    # ------------------------------------------------------------------ running
    def run(self, *arrays: np.ndarray) -> None:
        """Execute the kernel; output parameters are written in place (C-contiguous arrays)."""
        f = self.func
        if len(arrays) != len(f.params):
            raise EmulatorError(f"{f.name}: takes {len(f.params)} arrays "
                                f"({', '.join(b.name for b in f.params)}), got {len(arrays)}")
        flat: dict[S.Buffer, np.ndarray] = {}
        for b, a in zip(f.params, arrays, strict=False):
            if tuple(a.shape) != tuple(b.shape) or a.dtype != NP_DTYPES[b.dtype]:
                raise EmulatorError(f"{f.name}: argument {b.name} must be "
                                    f"{b.dtype}{list(b.shape)}, "
                                    f"got {a.dtype}{list(a.shape)}")
            if not a.flags.c_contiguous:
                raise EmulatorError(f"{f.name}: argument {b.name} must be C-contiguous")
            flat[b] = a.reshape(-1)
        gwriter = {b: np.full(b.size, -1, np.int32) for b in self.rw_globals}
        nblocks = self.launch.num_blocks
        per = max(1, min(nblocks, self.max_lanes // max(1, self.launch.threads_per_block)))
        per = max(self.cluster, per - per % self.cluster)  # a batch holds whole clusters
        with np.errstate(all="ignore"):
            for first in range(0, nblocks, per):
                ctx = _Ctx(self.launch, first, min(per, nblocks - first),
                           self.target.warp_size)
                ctx.mem.update(flat)
                ctx.writer.update(gwriter)
                self.body(ctx, None)
                if self.profile is not None:
                    self.profile.end_batch()

    # ------------------------------------------------------------------ expressions
    def expr(self, e: E.Expr) -> ExprFn:
        fn = self._expr(e)
        if self.profile is not None and isinstance(e, (E.BinOp, E.Cmp, E.Select, E.Cast,
                                                       E.Call)):
            return self._counted(fn)
        return fn

    def _counted(self, fn: ExprFn) -> ExprFn:
        """``fn`` that also counts one ALU instruction per warp when its value is per-thread."""
        prof = self.profile
        assert prof is not None

        def run(ctx: _Ctx, m: Any) -> Any:
            v = fn(ctx, m)
            if _is_vec(v) and not self._quiet:
                prof.count("alu", ctx.warps(m))
            return v
        return run

    def _expr(self, e: E.Expr) -> ExprFn:
        return _EXPR(e, self)

    def var(self, e: E.Var) -> ExprFn:
        def var(ctx: _Ctx, m: Any, v: E.Var = e) -> Any:
            try:
                return ctx.env[v]
            except KeyError:
                raise EmulatorError(f"{self.func.name}: variable {v.name} is unbound") from None
        return var

    def const(self, e: E.IntImm | E.FloatImm) -> ExprFn:
        t = sem.dtype(e.dtype)
        # int32 constants stay Python ints (wrapped to int32), so scalar index arithmetic
        # stays in Python; ``semantics.binary`` wraps every result to its node's type
        c = sem.wrap(int(e.value), t) if e.dtype == "int32" else t.np.type(e.value)
        return lambda ctx, m: c

    def thread_index(self, e: ThreadIndex) -> ExprFn:
        tag = e.tag
        return lambda ctx, m: ctx.thread[tag]

    def compare(self, e: E.Cmp) -> ExprFn:
        a, b = self.expr(e.a), self.expr(e.b)
        op = e.op
        return lambda ctx, m: sem.compare(op, a(ctx, m), b(ctx, m))

    def logic(self, fn: Callable[..., Any], *args: E.Expr) -> ExprFn:
        xs = [self.expr(x) for x in args]
        return lambda ctx, m: fn(*(x(ctx, m) for x in xs))

    def cast(self, e: E.Cast) -> ExprFn:
        v = self.expr(e.value)
        t = sem.dtype(e.dtype)
        return lambda ctx, m: sem.cast(v(ctx, m), t)

    def call(self, e: E.Call) -> ExprFn:
        """A scalar intrinsic (``CALLS``): its numpy semantics on the lanes' values (every
        lane: a call has no side effect), converted to the call's type."""
        c, why = resolve_call(CALLS, e, self.func.name, "emulation")
        if c is None:
            raise EmulatorError(why)
        args = [self.expr(a) for a in e.args]
        fn, t = c.semantics, sem.dtype(c.dtype)
        return lambda ctx, m: sem.cast(np.asarray(fn(*(a(ctx, m) for a in args))), t)

    def math(self, e: E.Math) -> ExprFn:
        """A math function (``semantics.MATH``) of the lanes' values."""
        a, t, fn = self.expr(e.a), sem.dtype(e.dtype), e.fn
        return lambda ctx, m: sem.math(fn, a(ctx, m), t)

    def unknown(self, e: E.Expr) -> ExprFn:
        raise EmulatorError(f"{self.func.name}: cannot emulate expression {e!r}")

    def binop(self, e: E.BinOp) -> ExprFn:
        """``a op b`` as ``semantics`` means it; an undefined case on an active lane fails."""
        a, b = self.expr(e.a), self.expr(e.b)
        t = sem.dtype(e.dtype)
        op = e.op
        binary = sem.binary
        if not (t.is_int and op in _PARTIAL):
            return lambda ctx, m: binary(op, a(ctx, m), b(ctx, m), t)
        name = self.func.name

        def run(ctx: _Ctx, m: Any) -> Any:
            x, y = a(ctx, m), b(ctx, m)
            why = sem.undefined(op, x, y, t, m)
            if why is not None:
                raise EmulatorError(f"{name}: {why} in {e}")
            return binary(op, x, y, t)
        return run

    def select(self, e: E.Select) -> ExprFn:
        c, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        t_sel = sem.dtype(e.dtype)

        def run(ctx: _Ctx, m: Any) -> Any:
            cond = c(ctx, m)
            if not _is_vec(cond):
                return t(ctx, m) if cond else f(ctx, m)
            tm = cond if m is None else (m & cond)
            fm = ~cond if m is None else (m & ~cond)
            # only the chosen side's loads are issued (C's ?: semantics)
            tv = t(ctx, tm) if tm.any() else 0
            fv = f(ctx, fm) if fm.any() else 0
            return sem.cast(np.where(cond, tv, fv), t_sel)
        return run

    # ------------------------------------------------------------------ memory
    def flat_index(self, b: S.Buffer, idx: tuple[E.Expr, ...]) -> ExprFn:
        fns = [self.expr(i) for i in idx]
        shape = b.shape
        if len(fns) != len(shape):
            raise EmulatorError(f"access to {b.name}: {len(fns)} indices for {len(shape)} dims")

        def run(ctx: _Ctx, m: Any) -> Any:
            flat: Any = 0
            for fn, d in zip(fns, shape, strict=False):
                flat = flat * d + fn(ctx, m)
            return flat
        return run

    def _where(self, b: S.Buffer, kind: str, inner: Any, ctx: _Ctx, m: Any) -> Any:
        """Bounds-check ``inner`` (flat index within one region) for the active lanes and turn
        it into an index into the buffer's storage."""
        size = b.size
        if _is_vec(inner):
            act = inner if m is None else inner[m]
            if act.size and (act.min() < 0 or act.max() >= size):
                bad = act[(act < 0) | (act >= size)][0]
                raise EmulatorError(f"{self.func.name}: {kind} {b.name}: flat index {bad} out of "
                                    f"bounds for shape {b.shape}")
            if m is not None:
                inner = np.where(m, inner, 0)
        else:
            inner = int(inner)
            if (inner < 0 or inner >= size) and (m is None or m.any()):
                raise EmulatorError(f"{self.func.name}: {kind} {b.name}: flat index {inner} out "
                                    f"of bounds for shape {b.shape}")
            if inner < 0 or inner >= size:
                inner = 0
        scope = self.scope_of.get(b, b.scope)
        if scope == "global":
            return inner
        return ctx.base(scope, size) + inner

    def storage(self, ctx: _Ctx, b: S.Buffer) -> np.ndarray:
        arr = ctx.mem.get(b)
        if arr is None:
            raise EmulatorError(f"{self.func.name}: {b.name} is used outside its allocation")
        return arr

    def load(self, e: S.BufferLoad) -> ExprFn:
        b = e.buffer
        if b in self.frags:
            raise EmulatorError(f"scalar load from fragment {b.name}")
        fi = self.flat_index(b, e.indices)
        shared = b.scope == "shared"
        tracked_global = b in self.rw_globals
        item = sem.dtype(b.dtype).bytes

        def run(ctx: _Ctx, m: Any) -> Any:
            where = self._where(b, "load from", fi(ctx, m), ctx, m)
            arr = self.storage(ctx, b)
            val = arr[where]
            if shared and ctx.inflight:
                self.check_inflight(ctx, b, where, m, "reads")
            if self.check_races and (shared or tracked_global):
                self.check_read(ctx, b, where, m)
            if self.profile is not None and not self._quiet:
                self.observe(ctx, b, where, m, item, False)
            return val
        return run

    def check_inflight(self, ctx: _Ctx, b: S.Buffer, where: Any, m: Any, what: str) -> None:
        """An access to shared elements that a ``cp.async`` still copies into is a race."""
        fl = ctx.inflight.get(b)
        if fl is None:
            return
        busy = fl[where] > 0
        if m is not None and np.ndim(busy):
            busy = busy & m
        if np.any(busy):
            el = np.broadcast_to(where, np.shape(busy))[int(np.argmax(busy))]
            raise EmulatorRaceError(f"{self.func.name}: a thread {what} {b.name} element "
                                    f"{int(el) % b.size} while a cp.async into it is in flight "
                                    f"(missing cp.async.wait_group before the access)")

    def observe(self, ctx: _Ctx, b: S.Buffer, where: Any, m: Any, width: int, store: bool,
                kind: str | None = None) -> None:
        """Report one warp-wide access (``where``: storage indices per lane) to the profile."""
        prof = self.profile
        if prof is None or b.scope == "local" or b in self.frags:
            return
        scope = self.scope_of.get(b, b.scope)
        where = np.broadcast_to(np.asarray(where, np.int64), (ctx.L,))
        item = sem.dtype(b.dtype).bytes
        if scope == "global":
            addr = where * item
        else:
            addr = (where - ctx.base(scope, b.size)) * item
        if m is not None:
            addr = np.where(m, addr, -1)
        nw = ctx.B * ctx.wpb
        full = np.full(nw * ctx.W, -1, np.int64)
        full[ctx.warp_of_lane * ctx.W + ctx.tid % ctx.W] = addr
        block = np.arange(nw) // ctx.wpb + ctx.first_block
        prof.access(b.name, scope, full.reshape(nw, ctx.W), block, width, store, kind)

    def check_read(self, ctx: _Ctx, b: S.Buffer, where: Any, m: Any) -> None:
        if b.scope == "global":
            w = ctx.writer[b][where]
            own = ctx.blk + ctx.first_block
            bad = (w != -1) & (w != own)
            if m is not None:
                bad &= m
            if np.any(bad):
                raise EmulatorRaceError(
                    f"{self.func.name}: a block reads {b.name} written by another block in the "
                    f"same launch (blocks run batched; inter-block communication is a race)")
            return
        tid = ctx.tid
        where = np.broadcast_to(where, tid.shape)
        if m is not None:
            where, tid = where[m], tid[m]
        self.check_read_lanes(ctx, b, where, tid)

    def check_read_lanes(self, ctx: _Ctx, b: S.Buffer, where: np.ndarray, tid: np.ndarray
                         ) -> None:
        """Thread ``tid[i]`` reads shared element ``where[i]`` (storage index): a race when
        another thread wrote it since the last barrier; the read is recorded for WAR checks."""
        w = ctx.writer[b][where]
        bad = (w != -1) & (w != tid)
        if bad.any():
            i = int(np.argmax(bad))
            raise EmulatorRaceError(
                f"{self.func.name}: shared-memory race on {b.name}: thread {tid[i]} reads element "
                f"{where[i] % b.size} written by thread {w[i]} with no barrier in between")
        r = ctx.reader[b]
        cur = r[where]
        new = np.where((cur == -1) | (cur == tid), tid, -2).astype(np.int32)
        r[where] = new
        back = r[where]
        r[where[back != new]] = -2

    def check_write(self, ctx: _Ctx, b: S.Buffer, where: Any, tid: Any, lo: Any, hi: Any) -> None:
        w = ctx.writer[b][where]
        r = ctx.reader[b][where]
        bad_w = (w != -1) & ((w < lo) | (w > hi))
        bad_r = (r == -2) | ((r != -1) & ((r < lo) | (r > hi)))
        if np.any(bad_w) or np.any(bad_r):
            kind = "writes over a write" if np.any(bad_w) else "overwrites data read"
            i = int(np.argmax(np.broadcast_to(bad_w | bad_r, np.shape(where))))
            el = np.broadcast_to(where, np.shape(bad_w))[i] % b.size
            raise EmulatorRaceError(
                f"{self.func.name}: shared-memory race on {b.name}: a thread {kind} by another "
                f"thread at element {el} with no barrier in between")
        ctx.writer[b][where] = tid

    def store(self, s: S.BufferStore) -> StmtFn:
        b = s.buffer
        fi = self.flat_index(b, s.indices)
        vf = self.expr(s.value)
        t = sem.dtype(b.dtype)
        dt = t.np
        shared = b.scope == "shared"
        tracked_global = b in self.rw_globals

        def run(ctx: _Ctx, m: Any) -> None:
            val = vf(ctx, m)
            where = self._where(b, "store to", fi(ctx, m), ctx, m)
            arr = self.storage(ctx, b)
            if not _is_vec(where) and (_is_vec(val) or m is not None):
                where = np.full(ctx.L, where, np.int64)
            if m is not None:
                where = where[m]
                if _is_vec(val):
                    val = val[m]
            val = sem.cast(val, t)
            if not _is_vec(val):
                val = np.array(val, dt)
            if self.profile is not None and not self._quiet:
                full = where if m is None else np.zeros(ctx.L, np.int64)
                if m is not None:
                    full[m] = where
                self.observe(ctx, b, full, m, t.bytes, True)
            if shared and ctx.inflight:
                self.check_inflight(ctx, b, where, None, "writes")
            if self.check_races and shared:
                tid = ctx.tid if m is None else ctx.tid[m]
                if not _is_vec(where):
                    where = np.full(tid.shape, where, np.int64)
                self.check_write(ctx, b, where, tid, tid, tid)
            elif tracked_global:
                blk = ctx.blk + ctx.first_block
                ctx.writer[b][where] = blk if m is None else blk[m]
            arr[where] = val
        return run

    # ------------------------------------------------------------------ statements
    def stmt(self, s: S.Stmt) -> StmtFn:
        return STMT_RULES(s, self)

    def seq(self, s: S.SeqStmt) -> StmtFn:
        fns = [self.stmt(x) for x in s.stmts]

        def seq(ctx: _Ctx, m: Any) -> None:
            for fn in fns:
                fn(ctx, m)
        return seq

    def let(self, s: S.LetStmt) -> StmtFn:
        val, body, var = self.expr(s.value), self.stmt(s.body), s.var

        def let(ctx: _Ctx, m: Any) -> None:
            ctx.env[var] = val(ctx, m)
            body(ctx, m)
        return let

    def attr(self, s: S.AttrStmt) -> StmtFn:
        if s.key is WARP_ROLES:
            return self.warp_roles(s)
        if s.key is WMMA_FRAGMENT and isinstance(s.body, S.Allocate):
            self.frags[s.body.buffer] = s.value
        return self.stmt(s.body)

    def warp_roles(self, s: S.AttrStmt) -> StmtFn:
        """The branches of a ``warp_roles`` split run as concurrent roles
        (``vta.gpu.emulator_roles``): role ``r`` on the lanes whose first true condition is its
        own; each condition must be uniform over a warp."""
        roles = role_branches(s)
        conds = [self.expr(c) if c is not None else None for c, _ in roles]
        bodies = [self.stmt(b) for _, b in roles]
        name = self.func.name

        def run(ctx: _Ctx, m: Any) -> None:
            if ROLES_STATE in ctx.dialect:
                raise EmulatorError(f"{name}: warp roles nested inside a warp role")
            rest = np.ones(ctx.L, bool) if m is None else m.copy()
            masks = []
            for c in conds:
                take = rest.copy() if c is None else \
                    rest & np.broadcast_to(np.asarray(c(ctx, m), bool), (ctx.L,))
                if ctx.T % ctx.W == 0:
                    tw, rw = take.reshape(-1, ctx.W), rest.reshape(-1, ctx.W)
                    if np.any(tw.any(axis=1) & (tw != rw).any(axis=1)):
                        raise EmulatorError(f"{name}: a warp-role condition differs between "
                                            f"the lanes of a warp")
                masks.append(take)
                rest = rest & ~take
            live = [(r, mk) for r, mk in enumerate(masks) if mk.any()]
            sched = RoleScheduler(ctx, [f"role {r}" for r, _ in live])
            ctx.dialect[ROLES_STATE] = sched
            try:
                sched.run([functools.partial(bodies[r], ctx, mk) for r, mk in live])
            finally:
                del ctx.dialect[ROLES_STATE]
        return run

    def other(self, s: S.Stmt) -> StmtFn:
        raise EmulatorError(f"{self.func.name}: cannot emulate statement {type(s).__name__} "
                            f"(a GPU intrinsic's statement runs once its module registered it: "
                            f"vta.gpu.intrinsic.register_gpu_intrinsic)")

    def _counted_stmt(self, fn: StmtFn, kind: str) -> StmtFn:
        """``fn`` that also counts one ``kind`` instruction per active warp when profiling."""
        prof = self.profile
        if prof is None:
            return fn

        def run(ctx: _Ctx, m: Any) -> None:
            fn(ctx, m)
            prof.count(kind, ctx.warps(m))
        return run

    def loop(self, s: S.For) -> StmtFn:
        if s.kind is S.ForKind.THREAD_BINDING:
            raise EmulatorError(f"loop {s.var.name} is still bound to {s.thread}; run "
                                f"lower_for_gpu first")
        if self.profile is not None:
            vc = vector_copy_parts(s)
            if vc is not None:
                return self.vector_copy(s, vc)
        return self._plain_loop(s)

    def _plain_loop(self, s: S.For) -> StmtFn:
        lo_f, ext_f, body, var = self.expr(s.min), self.expr(s.extent), self.stmt(s.body), s.var

        def run(ctx: _Ctx, m: Any) -> None:
            lo, ext = lo_f(ctx, m), ext_f(ctx, m)
            if not _is_vec(lo) and not _is_vec(ext):
                lo, ext = int(lo), int(ext)
                env = ctx.env
                for i in range(lo, lo + ext):
                    env[var] = i
                    body(ctx, m)
                return
            hi = lo + ext
            act_lo = lo if not _is_vec(lo) else (lo if m is None else lo[m])
            act_hi = hi if not _is_vec(hi) else (hi if m is None else hi[m])
            if np.size(act_lo) == 0:
                return
            for i in range(int(np.min(act_lo)), int(np.max(act_hi))):
                mi = (i >= lo) & (i < hi)
                if m is not None:
                    mi = mi & m
                if mi.any():
                    ctx.env[var] = i
                    body(ctx, mi)
        return run

    def vector_copy(self, s: S.For, vc: Any) -> StmtFn:
        """A vectorized loop the renderer turns into one wide move: run element by element
        (bounds and races checked as usual) but profile it as one access of ``vc.nbytes``
        bytes per lane on each side, the load skipped where the vector's guard is false."""
        inner = self._plain_loop(s)
        dst0, src0 = self.expr(vc.dst0), self.expr(vc.src0)
        cond = self.expr(vc.cond) if vc.cond is not None else None
        dst, src = vc.store.buffer, vc.load.buffer

        def run(ctx: _Ctx, m: Any) -> None:
            self._quiet += 1
            try:
                inner(ctx, m)
            finally:
                self._quiet -= 1
            if self._quiet:
                return
            ctx.env[s.var] = 0
            lm = m
            if cond is not None:
                c = np.broadcast_to(cond(ctx, m), (ctx.L,))
                lm = c if m is None else (m & c)
            for b, fn, mask, store in ((src, src0, lm, False), (dst, dst0, m, True)):
                base = np.broadcast_to(fn(ctx, m), (ctx.L,))
                if self.scope_of.get(b, b.scope) != "global":
                    base = base + ctx.base(self.scope_of.get(b, b.scope), b.size)
                self.observe(ctx, b, base, mask, vc.nbytes, store)
        return run

    def branch(self, s: S.IfThenElse) -> StmtFn:
        c = self.expr(s.cond)
        t = self.stmt(s.then_case)
        f = self.stmt(s.else_case) if s.else_case is not None else None

        def run(ctx: _Ctx, m: Any) -> None:
            cond = c(ctx, m)
            if not _is_vec(cond):
                if cond:
                    t(ctx, m)
                elif f is not None:
                    f(ctx, m)
                return
            tm = cond if m is None else (m & cond)
            if tm.all():
                t(ctx, None if m is None else m)
            elif tm.any():
                t(ctx, tm)
            if f is not None:
                fm = ~cond if m is None else (m & ~cond)
                if fm.any():
                    f(ctx, fm)
        return run

    def allocate(self, b: S.Buffer, body_stmt: S.Stmt) -> StmtFn:
        self.scope_of[b] = b.scope
        body = self.stmt(body_stmt)  # compiles fragment uses; self.frags is filled by now
        dt = NP_DTYPES[b.dtype]

        def run(ctx: _Ctx, m: Any) -> None:
            if b not in ctx.mem:
                if b in self.frags:
                    ctx.mem[b] = np.zeros((ctx.B * ctx.wpb, *b.shape), dt)
                elif b.scope == "shared":
                    ctx.mem[b] = np.zeros(ctx.B * b.size, dt)
                    ctx.writer[b] = np.full(ctx.B * b.size, -1, np.int32)
                    ctx.reader[b] = np.full(ctx.B * b.size, -1, np.int32)
                elif b.scope == "local":
                    ctx.mem[b] = np.zeros(ctx.L * b.size, dt)
                else:
                    raise EmulatorError(f"{self.func.name}: cannot allocate {b.name} in scope "
                                        f"{b.scope} inside a kernel")
            body(ctx, m)
        return run

    def barrier(self) -> StmtFn:
        prof = self.profile

        def run(ctx: _Ctx, m: Any) -> None:
            if m is not None and not m.all():
                raise EmulatorError(f"{self.func.name}: __syncthreads() reached by only some "
                                    f"threads of a block (divergent barrier)")
            if prof is not None:
                prof.barrier(ctx.B)
                prof.count("bar.sync", ctx.warps(None))
            for b, w in ctx.writer.items():
                if b.scope == "shared":
                    w.fill(-1)
                    ctx.reader[b].fill(-1)
        return run

    # ------------------------------------------------------------------ warp-wide statements
    # (helpers for the emulate rules of warp-wide GPU intrinsics: vta.gpu.wmma, vta.gpu.mma)
    def warp_uniform(self, ctx: _Ctx, fns: Sequence[ExprFn], m: Any, what: str) -> list[Any]:
        out = []
        for fn in fns:
            v = fn(ctx, m)
            if _is_vec(v):
                lead = v[ctx.leaders]
                if np.any(v != lead[ctx.warp_of_lane]):
                    raise EmulatorError(f"{self.func.name}: {what}: an operand differs between "
                                        f"the lanes of a warp (WMMA operands must be warp-uniform)")
                v = lead
            out.append(v)
        return out

    def active_warps(self, ctx: _Ctx, m: Any, what: str) -> np.ndarray:
        nw = ctx.B * ctx.wpb
        if m is None:
            return np.arange(nw)
        mw = m.reshape(nw, ctx.W) if ctx.T % ctx.W == 0 else None
        if mw is None or np.any(mw.any(axis=1) != mw.all(axis=1)):
            raise EmulatorError(f"{self.func.name}: {what} executed by part of a warp")
        return np.nonzero(mw[:, 0])[0]

    @staticmethod
    def _pick(v: Any, warps: np.ndarray) -> Any:
        return v[warps] if _is_vec(v) else v

    def _frag_sel(self, ctx: _Ctx, b: S.Buffer, idx: list[Any], warps: np.ndarray) -> tuple:
        return (warps, *[self._pick(i, warps) for i in idx])


def emulate(func: S.PrimFunc, *arrays: np.ndarray, check_races: bool = True) -> None:
    """Run a lowered kernel on numpy arrays (outputs are written in place)."""
    Emulator(func, check_races=check_races).run(*arrays)


#: how each expression node is compiled to a closure over the lanes (rules get the emulator)
_EXPR: Dispatch[ExprFn] = Dispatch("SIMT emulator", {
    E.Var: lambda e, em: em.var(e),
    E.IntImm: lambda e, em: em.const(e),
    E.FloatImm: lambda e, em: em.const(e),
    ThreadIndex: lambda e, em: em.thread_index(e),
    S.BufferLoad: lambda e, em: em.load(e),
    E.BinOp: lambda e, em: em.binop(e),
    E.Cmp: lambda e, em: em.compare(e),
    E.And: lambda e, em: em.logic(np.logical_and, e.a, e.b),
    E.Or: lambda e, em: em.logic(np.logical_or, e.a, e.b),
    E.Not: lambda e, em: em.logic(np.logical_not, e.a),
    E.Select: lambda e, em: em.select(e),
    E.Cast: lambda e, em: em.cast(e),
    E.Call: lambda e, em: em.call(e),
    E.Math: lambda e, em: em.math(e),
}, default=lambda e, em: em.unknown(e))

#: how each statement node is compiled: the core statements here; each GPU intrinsic's statement
#: is added by ``vta.gpu.intrinsic.register_gpu_intrinsic`` (its emulate rule)
STMT_RULES: Dispatch[StmtFn] = Dispatch("SIMT emulator", {
    S.SeqStmt: lambda s, em: em.seq(s),
    S.BufferStore: lambda s, em: em.store(s),
    S.For: lambda s, em: em.loop(s),
    S.LetStmt: lambda s, em: em.let(s),
    S.IfThenElse: lambda s, em: em.branch(s),
    S.Allocate: lambda s, em: em.allocate(s.buffer, s.body),
    S.AttrStmt: lambda s, em: em.attr(s),
    S.Barrier: lambda s, em: em.barrier(),
    S.Evaluate: lambda s, em: (lambda ctx, m: None),
}, default=lambda s, em: em.other(s))

#: call name -> its scalar GPU intrinsic (its numpy semantics), from
#: ``vta.gpu.intrinsic.register_gpu_call``
CALLS: dict[str, GpuCall] = {}

#: statement classes a whole warp executes (``GpuIntrinsic.warp_wide``, from
#: ``register_gpu_intrinsic``): a launch that is not whole warps is refused
WARP_WIDE: set[type] = set()
