"""Pass: place ``warp``-scope buffers in shared memory, one copy per warp.

A stage cached into scope ``warp`` (``cache_read(T, "warp", ...)``) is shared by the lanes of
a warp: bound inference relaxed only ``threadIdx.x`` for it, so its box (and base) may depend on
``threadIdx.y``/``threadIdx.z`` - the warp. This pass gives each warp its own slice of one
shared array: the buffer gains one leading dimension per enclosing ``threadIdx.y``/``z`` loop,
indexed by that loop's variable.

Before: ``Allocate`` of ``warp`` buffers inside the thread-bound loops that select the warp;
every ``threadIdx.x`` binding has extent ``warp_size`` (a warp is one ``(y, z)`` pair). Thread
loops not yet
lowered (runs before ``bind_threads``). After: no ``warp`` buffer is left; each became a
``shared`` buffer of shape ``(ext_z, ext_y, *shape)`` (the enclosing loops, outer first).
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import GpuLoweringError
from vta.gpu.target import target_of

__all__ = ["lower_warp_buffers"]


def _lane_extents(body: S.Stmt) -> set[int]:
    return {n.extent.value for n in E.walk(body)
            if isinstance(n, S.For) and n.kind is S.ForKind.THREAD_BINDING
            and n.thread == "threadIdx.x" and isinstance(n.extent, E.IntImm)}


def lower_warp_buffers(func: S.PrimFunc) -> S.PrimFunc:
    """Warp-scope buffers become per-warp slices of a shared array (module docstring)."""
    if not any(isinstance(n, S.Allocate) and n.buffer.scope == "warp" for n in E.walk(func.body)):
        return func
    lanes = target_of(func).warp_size
    if _lane_extents(func.body) - {lanes}:
        raise GpuLoweringError(f"{func.name}: warp-scope buffers need threadIdx.x bound to "
                               f"exactly {lanes} lanes (found {sorted(_lane_extents(func.body))})")

    def rewrite(s: S.Stmt, warp_loops: tuple[S.For, ...],
                moved: dict[S.Buffer, tuple[S.Buffer, tuple[E.Expr, ...]]]) -> S.Stmt:
        def fn(n: object) -> object:
            if isinstance(n, S.For) and n.kind is S.ForKind.THREAD_BINDING \
                    and n.thread in ("threadIdx.y", "threadIdx.z"):
                return S.For(n.var, n.min, n.extent, rewrite(n.body, (*warp_loops, n), moved),
                             n.kind, n.thread)
            if isinstance(n, S.Allocate) and n.buffer.scope == "warp":
                b = n.buffer
                ext = tuple(lp.extent.value for lp in warp_loops
                            if isinstance(lp.extent, E.IntImm))
                nb = S.Buffer(b.name, (*ext, *b.shape), b.dtype, "shared")
                inner = dict(moved)
                inner[b] = (nb, tuple(lp.var for lp in warp_loops))
                return S.Allocate(nb, rewrite(n.body, warp_loops, inner))
            if isinstance(n, S.BufferLoad) and n.buffer in moved:
                nb, pre = moved[n.buffer]
                return S.BufferLoad(nb, (*pre, *n.indices), n.dtype)
            if isinstance(n, S.BufferStore) and n.buffer in moved:
                nb, pre = moved[n.buffer]
                return S.BufferStore(nb, E.substitute(n.value, fn), (*pre, *n.indices))
            return None

        return E.substitute(s, fn)

    return func.with_body(rewrite(func.body, (), {}))
