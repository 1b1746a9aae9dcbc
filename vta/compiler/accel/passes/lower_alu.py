"""ALU lowering: element-wise epilogue stages on acc buffers become instructions, chosen by
instruction selection over the hardware's element-wise instructions.

Pre:  tensorize has run. An epilogue stage is a perfect loop nest storing into an acc buffer an
      expression of the same element: ``acc[i] = f(acc[i], ...)`` with ``f`` built from
      operations some element-wise instruction of the hardware computes (the ALU's ``>> k``,
      ``<< k``, ``+ c``, ``+ acc2[j]`` (the bias after its LOAD into acc), ``* c``, ``max``,
      ``min``; or a user's fused instruction). The innermost two indices are the entry (one
      vector).
Post: each such stage is a sequence of ``ComputeNest``s, one per selected instruction, in
      evaluation order (``vta.compiler.accel.select.cover``: the cheapest cover of ``f`` by the
      patterns of the instructions ``hw`` implements), each binding loop variables of its own.
      An expression no instruction covers is a ``CompileError`` naming the stage, the
      expression and what was refused (an op not in the config's ALU, an immediate too wide for
      its field). The narrowing cast stays with the out copy (the STORE of the out scratchpad).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vta.compiler.accel.passes._common import flat_entry, loop_nest, map_stmt, sram_map, strip_cast
from vta.compiler.accel.select import Selected, candidates, canonical, cover
from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.intrin import TensorIntrinsic
from vta.compiler.ir.visitor import child_slots, node_fields
from vta.config import HwConfig
from vta.errors import CompileError

__all__ = ["lower_alu"]


def lower_alu(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)
    cands = candidates(hw)

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key is S.STAGE and isinstance(s.body, S.For):
            r = _alu(func, str(s.value), s.body, bases, hw, cands)
            return None if r is None else S.AttrStmt(S.STAGE, s.value, r)
        return None

    return func.with_body(map_stmt(func.body, rewrite))


def _alu(func: S.PrimFunc, name: str, nest: S.Stmt, bases: dict[S.Buffer, E.Expr],
         hw: HwConfig, cands: list) -> S.Stmt | None:  # type: ignore[type-arg]
    try:
        loops, body = loop_nest(nest)
    except CompileError:
        return None
    if not isinstance(body, S.BufferStore) or body.buffer.scope != "acc":
        return None
    acc = body.buffer
    me = S.BufferLoad(acc, body.indices, acc.dtype)
    reads_me = any(isinstance(n, S.BufferLoad) and n.buffer is acc and n.indices == body.indices
                   for n in E.walk(body.value))
    if not reads_me or strip_cast(body.value) == me:
        return None  # not an update of the entry itself (or a bare copy): not the ALU's
    why: list[str] = []
    lanes = tuple(body.indices[-2:])

    def register(e: E.Expr) -> bool:
        return (isinstance(e, S.BufferLoad) and e.buffer.scope == "acc"
                and tuple(e.indices[-2:]) == lanes)

    chosen = _cover(body.value, me, register, hw, cands, why)
    where = f"{func.name}: stage {name}"
    if chosen is None:
        have = sorted({c.instruction.name for c in cands if c.instruction is not None})
        detail = f" ({why[0]})" if why else ""
        raise CompileError(f"{where}: no instruction of {hw.name} computes {body.value} in "
                           f"place{detail}; available: {', '.join(have)} (alu.ops: "
                           f"{', '.join(hw.alu.ops)})")
    entry = set(body.indices[-2:])
    outer = tuple((v, n) for v, n in loops if v not in entry)
    dst = bases[acc] + flat_entry(acc, body.indices)
    out: list[S.Stmt] = []
    for k, sel in enumerate(chosen):
        defn = sel.intrin.instruction
        assert defn is not None
        ops, idx, bufs = ["dst"], [dst], [acc]
        for role, ld in sel.operands.items():
            assert isinstance(ld, S.BufferLoad)
            ops.append(role)
            idx.append(bases[ld.buffer] + flat_entry(ld.buffer, ld.indices))
            bufs.append(ld.buffer)
        nest_loops = outer
        if k:  # a nest binds its loop variables: each after the first gets its own
            fresh = {v: E.Var(v.name, v.dtype) for v, _n in outer}
            nest_loops = tuple((fresh[v], n) for v, n in outer)
            idx = [E.substitute(x, fresh) for x in idx]
        out.append(ComputeNest(defn, False, nest_loops, tuple(ops), tuple(idx),
                               tuple(sorted(sel.fields.items())), tuple(bufs)))
    return S.seq(*out)


#: a cover as ``_COVERS`` keeps it: per selected instruction, its intrinsic, its register
#: operands as load classes (``_shape``) and its fields; None where nothing covers it
Plan = list[tuple[TensorIntrinsic, dict[str, int], dict[str, Any]]] | None
#: ``_cover``'s memo: (shape of the value, class of the entry, configuration, ids of the
#: candidate patterns) -> (those patterns, the plan, the reasons candidates were refused);
#: the patterns are held so that their ids stay their own. Bounded.
_COVERS: dict[tuple[Any, ...], tuple[tuple[TensorIntrinsic, ...], Plan, tuple[str, ...]]] = {}
_COVERS_MAX = 1024


def _cover(value: E.Expr, me: E.Expr, register: Callable[[E.Expr], bool], hw: HwConfig,
           cands: Sequence[TensorIntrinsic], why: list[str]) -> list[Selected] | None:
    """``select.cover(value, me, register, hw, cands, why)``, memoised by the shape of the
    expression it covers (``_shape``): a layer's candidates, and layers alike, run the same
    epilogue over buffers and indices of their own (C1-C11's 59 candidates of a ResNet-18
    run on pynq: 176 covers, a handful of shapes). The cover reads the accumulator loads of
    its (canonical) expression only by which of them are equal, which one is the entry and
    which may be register operands; a plan found is kept with its operands as load classes
    and given back with this expression's loads of those classes."""
    loads: dict[E.Expr, int] = {}
    shape = (_shape(canonical(value), loads, register), _shape(canonical(me), loads, register))
    key = (shape, hw, tuple(map(id, cands)))
    hit = _COVERS.get(key)
    if hit is None or not all(a is b for a, b in zip(hit[0], cands, strict=True)):
        found: list[str] = []
        chosen = cover(value, me, register, hw, cands, found)
        plan = None if chosen is None else [
            (sel.intrin, {role: loads[e] for role, e in sel.operands.items()}, sel.fields)
            for sel in chosen]
        if len(_COVERS) >= _COVERS_MAX:
            _COVERS.clear()
        hit = _COVERS[key] = (tuple(cands), plan, tuple(found))
    why.extend(hit[2])
    if hit[1] is None:
        return None
    by_class = list(loads)
    return [Selected(intrin, {role: by_class[k] for role, k in ops.items()}, dict(fields))
            for intrin, ops, fields in hit[1]]


def _shape(e: Any, loads: dict[E.Expr, int], register: Callable[[E.Expr], bool]) -> Any:
    """What ``select.cover`` reads of expression ``e``: every node's class and scalar fields,
    its children's shapes in order; a buffer load as its class (equal loads: one class,
    numbered in order of appearance, recorded in ``loads``) and whether it may be a register
    operand; a node compared by identity (a variable) as itself."""
    cls = type(e)
    if cls is S.BufferLoad:
        k = loads.setdefault(e, len(loads))
        return (cls, k, register(e))
    names = node_fields(cls)
    if names is None or cls.__eq__ is object.__eq__:
        return e  # not a node, or a node equal only to itself
    kids = child_slots(cls) or ()
    out: list[Any] = [cls]
    for name in names:
        v = getattr(e, name)
        if name not in kids:
            out.append(v)
        elif type(v) is tuple:
            out.append(tuple(_shape(x, loads, register) for x in v))
        else:
            out.append(_shape(v, loads, register))
    return tuple(out)
