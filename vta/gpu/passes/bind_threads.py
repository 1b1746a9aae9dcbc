"""Pass: replace thread-bound loops by thread-index builtins and record the launch shape.

Before: loops with ``For.kind == THREAD_BINDING`` and ``For.thread`` in THREAD_TAGS, constant
extents; a loop nested in another loop bound to the same tag has the same extent (both are the
same hardware index).
After: no THREAD_BINDING loop is left. Each became ``let v = min + <tag>`` (a ``ThreadIndex``),
guarded by ``if <tag> < extent`` where the loop is shorter than the launch dimension (the
largest extent bound to that tag). ``func.attr(LAUNCH)`` is set (a ``LaunchConfig``).
Refused (``GpuLoweringError``): more threads per block than the target allows
(``GpuTarget.max_threads``; naming the loop and stage that bind each index) or more static
shared memory than ``GpuTarget.static_shared`` (naming every shared buffer with its size). The
target is ``target_of(func)``.
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.errors import GpuLoweringError
from vta.gpu.dialect import LAUNCH, THREAD_TAGS, LaunchConfig, ThreadIndex
from vta.gpu.target import GpuTarget, target_of

__all__ = ["bind_threads", "GpuLoweringError"]


def _collect(s: S.Stmt, extents: dict[str, int], open_tags: dict[str, int], fname: str,
             where: dict[str, str], stage: str = "?") -> None:
    if isinstance(s, S.AttrStmt) and s.key is S.STAGE:
        stage = str(s.value)
    if isinstance(s, S.For) and s.kind is S.ForKind.THREAD_BINDING:
        tag = s.thread
        if tag not in THREAD_TAGS:
            raise GpuLoweringError(f"{fname}: loop {s.var.name} is bound to {tag!r} "
                                   f"(expected one of {', '.join(THREAD_TAGS)})")
        if not isinstance(s.extent, E.IntImm):
            raise GpuLoweringError(f"{fname}: loop {s.var.name} bound to {tag} has a "
                                   f"non-constant extent {s.extent}")
        ext = s.extent.value
        if tag in open_tags and open_tags[tag] != ext:
            raise GpuLoweringError(
                f"{fname}: loop {s.var.name} binds {tag} with extent {ext} inside a loop "
                f"binding it with extent {open_tags[tag]}: nested bindings of one index must agree")
        if ext > extents.get(tag, 0):
            extents[tag] = ext
            where[tag] = f"loop {s.var.name} of stage {stage}"
        inner = dict(open_tags)
        inner[tag] = ext
        _collect(s.body, extents, inner, fname, where, stage)
        return
    for c in E.children(s):
        if isinstance(c, S.Stmt):
            _collect(c, extents, open_tags, fname, where, stage)


def _rewrite(s: S.Stmt, launch: dict[str, int]) -> S.Stmt | None:
    if isinstance(s, S.For) and s.kind is S.ForKind.THREAD_BINDING:
        assert s.thread is not None and isinstance(s.extent, E.IntImm)
        body = E.substitute(s.body, lambda n: _rewrite(n, launch)
                            if isinstance(n, S.Stmt) else None)
        idx = ThreadIndex(s.thread)
        if s.extent.value < launch[s.thread]:
            body = S.IfThenElse(E.Cmp("<", idx, s.extent), body)
        return S.LetStmt(s.var, E.Add(s.min, idx) if not E.is_const(s.min, 0) else idx, body)
    return None


def bind_threads(func: S.PrimFunc) -> S.PrimFunc:
    """Lower THREAD_BINDING loops to thread-index lets; add the launch configuration."""
    extents: dict[str, int] = {}
    where: dict[str, str] = {}
    _collect(func.body, extents, {}, func.name, where)
    body = E.substitute(func.body, lambda n: _rewrite(n, extents)
                        if isinstance(n, S.Stmt) else None)
    grid = (extents.get("blockIdx.x", 1), extents.get("blockIdx.y", 1),
            extents.get("blockIdx.z", 1))
    block = (extents.get("threadIdx.x", 1), extents.get("threadIdx.y", 1),
             extents.get("threadIdx.z", 1))
    threads = block[0] * block[1] * block[2]
    target = target_of(func)
    if threads > target.max_threads:
        why = "; ".join(f"{t} = {extents[t]} ({where[t]})" for t in sorted(where)
                        if t.startswith("threadIdx"))
        raise GpuLoweringError(f"{func.name}: {block[0]}x{block[1]}x{block[2]} = {threads} "
                               f"threads per block exceed the CUDA limit of "
                               f"{target.max_threads} on {target} "
                               f"({why})")
    launch = LaunchConfig(grid, block, _shared_bytes(body, func.name, target))
    return func.with_body(body).with_attr(LAUNCH, launch)


def _shared_bytes(body: S.Stmt, fname: str, target: GpuTarget) -> int:
    """Static shared memory of one block; refused above ``target.static_shared`` (schedules
    get static shared memory only; the hand-mapped kernels of vta.gpu.kernels use dynamic
    shared memory), naming each shared buffer with its shape and size."""
    total = 0
    parts = []
    for n in E.walk(body):
        if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            b = n.buffer
            size = b.size * max(1, DTYPES[b.dtype] // 8)
            total += size
            parts.append(f"{b.name}{list(b.shape)} {b.dtype} = {size} B")
    if total > target.static_shared:
        raise GpuLoweringError(f"{fname}: shared memory of {total} B per block exceeds the "
                               f"static limit of {target.static_shared} B on {target} "
                               f"({'; '.join(parts)}); "
                               f"use smaller tiles for the cache_read shared stages")
    return total
