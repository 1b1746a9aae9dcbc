"""Pass: replace thread-bound loops by thread-index builtins and record the launch shape.

Before: loops with ``For.kind == THREAD_BINDING`` and ``For.thread`` in THREAD_TAGS, constant
extents; a loop nested in another loop bound to the same tag has the same extent (both are the
same hardware index).
After: no THREAD_BINDING loop is left. Each became ``let v = min + <tag>`` (a ``ThreadIndex``),
guarded by ``if <tag> < extent`` where the loop is shorter than the launch dimension (the
largest extent bound to that tag). ``func.attrs`` gains ``("launch", LaunchConfig)``.
"""

from __future__ import annotations

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.errors import VtaError
from vta.gpu.dialect import THREAD_TAGS, LaunchConfig, ThreadIndex

__all__ = ["bind_threads", "GpuLoweringError"]


class GpuLoweringError(VtaError):
    """The IR cannot be lowered to a GPU kernel; the message names the loop or buffer."""


def _collect(s: S.Stmt, extents: dict[str, int], open_tags: dict[str, int], fname: str) -> None:
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
        extents[tag] = max(extents.get(tag, 0), ext)
        inner = dict(open_tags)
        inner[tag] = ext
        _collect(s.body, extents, inner, fname)
        return
    for c in E.children(s):
        if isinstance(c, S.Stmt):
            _collect(c, extents, open_tags, fname)


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
    _collect(func.body, extents, {}, func.name)
    body = E.substitute(func.body, lambda n: _rewrite(n, extents)
                        if isinstance(n, S.Stmt) else None)
    grid = tuple(extents.get(f"blockIdx.{a}", 1) for a in "xyz")
    block = tuple(extents.get(f"threadIdx.{a}", 1) for a in "xyz")
    if block[0] * block[1] * block[2] > 1024:
        raise GpuLoweringError(f"{func.name}: {block[0]}x{block[1]}x{block[2]} threads per "
                               f"block exceed the CUDA limit of 1024")
    launch = LaunchConfig(grid, block, _shared_bytes(body))  # type: ignore[arg-type]
    attrs = (*tuple((k, v) for k, v in func.attrs if k != "launch"), ("launch", launch))
    return S.PrimFunc(func.name, func.params, body, attrs)


def _shared_bytes(body: S.Stmt) -> int:
    from vta.compiler.expr import DTYPES

    total = 0
    for n in E.walk(body):
        if isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            total += n.buffer.size * max(1, DTYPES[n.buffer.dtype] // 8)
    return total
