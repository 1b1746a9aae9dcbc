"""Flatten: evaluate the remaining tile loops into the concrete instruction stream.

Pre:  virtual threads are expanded; every statement left is a loop, a sequence, an
      allocation, an attribute, or a dialect statement (DMA, ``ComputeInsn``).
Post: ``Allocate``s hoisted to the top (their SRAM addresses are fixed) around one flat
      ``SeqStmt`` of ``Insn``s, each wrapping one ``vta.isa`` instruction with concrete fields
      (DRAM offsets still relative to the global buffer; micro-ops concrete, their uop-buffer
      position left to the emitter) and no dependency flags. A micro-op instruction is built
      from its definition (factors, fields, function); for an operand with a base field (an
      instruction field added to every index of it), the base is the smallest index its micro-ops
      use and the micro-ops keep the offsets. DMAs whose tile lies entirely outside the tensor
      (only possible for padded, discarded output tiles) are dropped.

The body is built once into nested functions (``build``: a statement's dispatch, its fields'
compiled forms and its free variables settled per statement) and then run: a statement runs
once per iteration of the loops around it (C1-C11's 33 candidates on pynq: 56,000 statement
executions for 3,000 statements), as an interpreter would run it, so a statement the loops
never reach is never executed (nor refused).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from vta.compiler.accel.passes._common import IntFn, compile_int
from vta.compiler.accel.vta_ir import (
    VTHREAD,
    ComputeInsn,
    DmaLoad,
    DmaStore,
    Insn,
    Offsets,
    make_uops,
    maker,
)
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import Load, MemType, Store, Uop
from vta.isa.defs import instance
from vta.isa.insn import NO_DEPS

__all__ = ["flatten"]

#: ``Insn``, ``Load`` and ``Store`` constructors taking every field in order (``maker``)
_INSN, _LOAD, _STORE = maker(Insn), maker(Load), maker(Store)


def _free_vars(node: object) -> set[E.Var]:
    """The variables under ``node``, each shared subtree visited once (a micro-op list shares
    its base expression among thousands of entries)."""
    seen: set[int] = set()
    out: set[E.Var] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, E.Var):
            out.add(n)
        elif isinstance(n, tuple):
            stack.extend(n)
        else:
            stack.extend(E.children(n))
    return out


#: a statement compiled for execution: called once per time the loops around it reach it
Run = Callable[[], None]


def flatten(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    out: list[S.Stmt] = []
    #: in first-execution order (a ``Buffer`` hashes by identity, in C: no ``id`` per run)
    allocs: dict[S.Buffer, None] = {}
    env: dict[E.Var, int] = {}
    uop_cache: dict[tuple, tuple[Uop, ...]] = {}
    #: (statement, micro-op tuple) -> (instruction, micro-ops): the same instruction recurs in
    #: every tile whose micro-ops evaluate alike (and in every thread)
    insn_cache: dict[tuple[int, int], tuple[Any, tuple[Uop, ...]]] = {}

    def dma_load(s: DmaLoad, thread: int) -> Run:
        return _dma_run(_LOAD, MemType[s.mem.upper()], s.exprs(), s.dram, thread, out.append,
                        env)

    def dma_store(s: DmaStore, thread: int) -> Run:
        return _dma_run(_STORE, MemType.OUT, s.exprs(), s.dram, thread, out.append, env)

    def compute(s: ComputeInsn, thread: int) -> Run:
        u, add = s.uops, out.append
        base = tuple(_field_fn(e) for e in u.base)

        def made_for(values: tuple[int, ...]) -> tuple[Any, tuple[Uop, ...]]:
            """The instruction and micro-ops for the base's variables' ``values`` (bound in
            ``env``), from the tables shared by every statement and thread."""
            key = (id(u), values)
            made_uops = uop_cache.get(key)
            if made_uops is None:
                made_uops = uop_cache[key] = _block(u.offsets, base[0](env), base[1](env),
                                                    base[2](env))
            k = (id(s), id(made_uops))  # both kept alive by the function and ``uop_cache``
            made = insn_cache.get(k)
            if made is None:
                made = insn_cache[k] = _compute(s, made_uops)
            return made

        if all(type(e) is E.IntImm for e in u.base):
            return _fixed_compute(made_for, add, thread)
        fv = tuple(sorted(_free_vars(u.base), key=lambda v: v.name + str(id(v))))
        get = env.get
        #: this statement's instruction and micro-ops by its base's variables' values: what
        #: the tables below give for them, found with one lookup (the tiles repeat a few
        #: values: C1-C11's 33 candidates on pynq run 8,282 micro-op instructions, 584 made)
        mine: dict[tuple[int, ...], tuple[Any, tuple[Uop, ...]]] = {}

        def run() -> None:
            values = tuple([get(v, 0) for v in fv])
            made = mine.get(values)
            if made is None:
                made = mine[values] = made_for(values)
            add(_INSN(made[0], None, made[1], thread, ""))
        return run

    def build(s: S.Stmt, thread: int) -> Run:
        """``s`` (under virtual thread ``thread``) as a function appending its instructions to
        ``out`` under the loop values in ``env``: each statement's dispatch and its fields'
        compiled forms made once, however many times the loops around it run it."""
        if isinstance(s, S.SeqStmt):
            body = tuple(build(c, thread) for c in s.stmts)

            def seq() -> None:
                for c in body:
                    c()
            return seq
        if isinstance(s, S.For):
            lo_f, n_f, var, inner = _field_fn(s.min), _field_fn(s.extent), s.var, \
                build(s.body, thread)

            def loop() -> None:
                lo = lo_f(env)
                for i in range(lo, lo + n_f(env)):
                    env[var] = i
                    inner()
                env.pop(var, None)
            return loop
        if isinstance(s, S.Allocate):
            buffer, inner = s.buffer, build(s.body, thread)

            def allocate() -> None:
                allocs[buffer] = None
                inner()
            return allocate
        if isinstance(s, S.AttrStmt):
            return build(s.body, s.value if s.key is VTHREAD else thread)
        if isinstance(s, DmaLoad):
            return dma_load(s, thread)
        if isinstance(s, DmaStore):
            return dma_store(s, thread)
        if isinstance(s, ComputeInsn):
            return compute(s, thread)
        if isinstance(s, Insn):
            return lambda: out.append(s)

        def refuse() -> None:  # only where the loops reach it, as an interpreter would
            raise CompileError(f"{func.name}: flatten cannot execute {type(s).__name__} (a pass "
                               f"before it left an unlowered statement: {s})")
        return refuse

    build(func.body, 0)()
    body: S.Stmt = S.SeqStmt(tuple(out)) if len(out) != 1 else out[0]
    for b in reversed(allocs):
        body = S.Allocate(b, body)
    return func.with_body(body)


def _fixed_compute(made_for: Callable[[tuple[int, ...]], tuple[Any, tuple[Uop, ...]]],
                   add: Callable[[Insn], None], thread: int) -> Run:
    """The run of a micro-op instruction whose three bases are constants (most of them, once
    the threads are expanded: ResNet-18's cold run flattens 1,159 of 1,227 so): the same
    instruction at every execution, so ``made_for(())`` (what the general run finds for no
    variables) is called at the first one and kept, without the general run's walk for
    free variables and its per-execution lookup by their values."""
    made: tuple[Any, tuple[Uop, ...]] | None = None

    def run() -> None:
        nonlocal made
        if made is None:
            made = made_for(())
        add(_INSN(made[0], None, made[1], thread, ""))
    return run


#: ``_block``'s micro-ops by (offsets, the three bases), across flatten calls: the
#: instructions of an epilogue (and a GEMM's copies) share their offsets (``uop_gen``) and
#: mostly their bases, and a layer's candidates share offsets objects (``uop_gen``'s
#: ``_table_offsets`` memo), so most blocks are micro-ops made before. Each entry holds its
#: offsets object, whose id is the key's (a dead object's id may be another's later); the
#: table is emptied when it holds more than ``_MADE_UOPS`` micro-ops.
_MADE: dict[tuple[int, int, int, int], tuple[Offsets, tuple[Uop, ...]]] = {}
_MADE_UOPS = 200_000
_made_count = [0]  # micro-ops held by ``_MADE``


def _block(offsets: Offsets, d: int, s: int, w: int) -> tuple[Uop, ...]:
    """``make_uops(d, s, w, offsets)`` as a tuple of its own, its ``Uop``s those of a block
    made before from the same offsets object and bases (``_MADE``, added to): a micro-op is
    immutable, so sharing one changes nothing, and copying a tuple is a C loop where making a
    ``Uop`` is a few Python steps (C1-C11's 33 candidates on pynq: 356 blocks made, 214
    distinct, 74,340 micro-ops of which 27,622 made before in another candidate). Each block
    stays its own tuple: the emitter tells blocks apart by identity, an instruction's block
    from another's."""
    key = (id(offsets), d, s, w)
    hit = _MADE.get(key)
    if hit is None or hit[0] is not offsets:
        made = make_uops(d, s, w, offsets)
        if _made_count[0] + len(made) > _MADE_UOPS:
            _MADE.clear()
            _made_count[0] = 0
        _MADE[key] = (offsets, made)
        _made_count[0] += len(made)
        return made
    return tuple(list(hit[1]))


def _dma_run(make: Callable[..., Any], mem: MemType, exprs: tuple[E.Expr, ...],
             dram: S.Buffer, thread: int, add: Callable[[Insn], None],
             env: dict[E.Var, int]) -> Run:
    """A DMA statement's run: evaluate its fields (``exprs``: sram, dram, y and x sizes, then
    the rest, in ``make``'s order after ``mem``) under ``env`` and, when both sizes are
    positive, ``add`` its instruction (``make(mem, *fields, NO_DEPS)``) in an ``Insn``. A
    constant field is its value, not a call (most of a DMA's fields are constants: C1-C11's 33
    candidates on pynq run 9,653 loads calling 71,607 constant functions)."""
    consts = tuple(e.value if isinstance(e, E.IntImm) else None for e in exprs)
    factory = _dma_factory(tuple(c is None for c in consts))
    return factory(add, _INSN, make, mem, dram, thread, env, NO_DEPS,
                   *(_compiled(e) if c is None else c for e, c in zip(exprs, consts,
                                                                       strict=True)))


@functools.lru_cache(maxsize=64)
def _dma_factory(varying: tuple[bool, ...]) -> Callable[..., Run]:
    """The maker of ``_dma_run``'s functions for DMAs whose fields vary (are compiled
    functions called on ``env``) where ``varying`` says, and are values elsewhere: the call
    ``dma_load``'s loop made for every field, spelt out per pattern (generated from the pattern
    alone, as ``maker`` generates a constructor from a slot count). The sizes are read first
    and the rest only for a DMA that moves something, as an interpreter would, each field in
    order. The instruction is made once per distinct values of the varying fields and kept
    (``kept``): an instruction is immutable, and a statement's executions repeat values (the
    tiles reload a weight or an input block: 9,252 of the 20,060 DMAs a cold ``vta run
    resnet18`` flattens are one made before by their statement), as a compute statement's
    instruction is kept (``flatten``'s ``insn_cache``); each execution keeps its own ``Insn``."""
    val = [f"f{k}" if v else f"a{k}" for k, v in enumerate(varying)]
    val[2:4] = ["y", "x"]
    params = ", ".join(f"a{k}" for k in range(len(varying)))
    reads = "".join(f"            f{k} = a{k}(env)\n" for k, v in enumerate(varying)
                    if v and k not in (2, 3))
    key = "".join(f"{val[k]}, " for k, v in enumerate(varying) if v)
    src = (f"def factory(add, insn, make, mem, dram, thread, env, deps, {params}):\n"
           f"    kept = {{}}\n"
           f"    get = kept.get\n"
           f"    def run():\n"
           f"        y = {'a2(env)' if varying[2] else 'a2'}\n"
           f"        x = {'a3(env)' if varying[3] else 'a3'}\n"
           f"        if y > 0 and x > 0:\n"
           f"{reads}"
           f"            key = ({key})\n"
           f"            made = get(key)\n"
           f"            if made is None:\n"
           f"                made = kept[key] = make(mem, {', '.join(val)}, deps)\n"
           f"            add(insn(made, dram, (), thread, ''))\n"
           f"    return run\n")
    scope: dict[str, Any] = {}
    exec(src, scope)  # generated from the pattern alone (names and indices)
    made: Callable[..., Run] = scope["factory"]
    return made


def _field_fn(e: E.Expr) -> IntFn:
    """``e`` compiled (``compile_int``); a constant's value as written, as ``ev`` reads it."""
    if isinstance(e, E.IntImm):
        v = e.value
        return lambda env: v
    return _compiled(e)


#: ``compile_int``'s function of each expression compiled before, across flatten calls: a
#: layer's candidates, a thread's copies and a statement's fields repeat expressions (C1-C11's
#: 33 candidates on pynq: 692 DMA fields not constant, 271 of them equal to one compiled
#: before). Equal expressions read the same variables (a variable is its object) and compute
#: the same; each entry's key holds its variables alive, so their identity stays theirs. The
#: table is emptied when it holds ``_COMPILED_MAX`` functions.
_COMPILED: dict[E.Expr, IntFn] = {}
_COMPILED_MAX = 4096


def _compiled(e: E.Expr) -> IntFn:
    """``compile_int(e)``, the function compiled before for an equal expression if any."""
    fn = _COMPILED.get(e)
    if fn is None:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        fn = _COMPILED[e] = compile_int(e)
    return fn


def _compute(s: ComputeInsn, u: tuple[Uop, ...]) -> tuple[Any, tuple[Uop, ...]]:
    """The instruction of a ``ComputeInsn`` with concrete micro-ops, and the micro-ops it keeps
    (see the module docstring for operands with a base field)."""
    d = s.instruction
    fields: dict[str, object] = dict(s.params)
    fields.update(reset=s.reset, uop_bgn=0, uop_end=len(u), iter_out=s.iter_out,
                  iter_in=s.iter_in)
    by_name = {o.name: o for o in d.operands}
    for name, fo, fi in s.factors:
        factors = by_name[name].factors
        assert factors is not None
        fields[factors[0]], fields[factors[1]] = fo, fi
    for o in d.operands:
        if o.base is not None and not o.base_steps and u:
            base = min(getattr(x, o.name) for x in u)
            fields[o.base] = base
            u = tuple(Uop(**{**{k: getattr(x, k) for k in ("dst", "src", "wgt")},
                             o.name: getattr(x, o.name) - base}) for x in u)
    return instance(d, **fields), u
