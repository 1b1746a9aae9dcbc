"""One way to give IR nodes a meaning: a table from node type to rule.

Every consumer of the IR states what each kind of node means to it as a table (tinygrad's
renderers are op tables): the printer, the loop-nest interpreter, the integer evaluator, the
affine analysis, the isl text, the CUDA renderer, the SIMT emulator. ``Dispatch`` looks a
node's rule up by its class along the MRO (a rule for ``BinOp`` covers ``Add``, ``Sub``, ...),
caches the lookup per class, and calls ``rule(node, *args)``; a node the table has no rule for
goes to ``default`` or raises naming the table and the node. A rule recurses by calling the
dispatch again. Tables can grow (``register``), so a dialect adds its nodes without editing the
consumer.

The one rewriter (``vta.compiler.ir.expr.substitute``) shares ``child_fields``: the names of a node
class's fields, computed once per class instead of reflecting over ``dataclasses.fields`` at
every node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Generic, TypeVar

from vta._dataclass_code import code_of
from vta.errors import NoRule

__all__ = ["Dispatch", "NoRule", "child_fields", "child_slots", "evolve", "is_node",
           "node_fields", "slot_setters"]

T = TypeVar("T")


class Dispatch(Generic[T]):
    """A function over IR nodes defined by ``rules`` (type -> ``rule(node, *args)``)."""

    def __init__(self, name: str, rules: Mapping[type, Callable[..., T]],
                 default: Callable[..., T] | None = None) -> None:
        self.name = name
        self.rules: dict[type, Callable[..., T]] = dict(rules)
        self.default = default
        self._cache: dict[type, Callable[..., T]] = {}

    def register(self, cls: type) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator adding (or replacing) the rule for ``cls``."""
        def add(rule: Callable[..., T]) -> Callable[..., T]:
            self.rules[cls] = rule
            self._cache.clear()
            return rule
        return add

    def rule(self, cls: type) -> Callable[..., T]:
        hit = self._cache.get(cls)
        if hit is not None:
            return hit
        for base in cls.__mro__:
            r = self.rules.get(base)
            if r is not None:
                self._cache[cls] = r
                return r
        if self.default is None:
            raise NoRule(f"{self.name}: no rule for {cls.__name__}")
        self._cache[cls] = self.default
        return self.default

    def __call__(self, node: Any, *args: Any) -> T:
        # the cache read here, ``rule`` only on a class's first sight: a rule's recursion
        # calls the dispatch once per node, and ``rule``'s own frame was a third of it
        r = self._cache.get(type(node))
        if r is None:
            r = self.rule(type(node))
        return r(node, *args)


_NODE_FIELDS: dict[type, tuple[str, ...] | None] = {}


def node_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of node class ``cls`` (where its children may be), in order; None when
    instances of ``cls`` are not IR nodes to traverse (not dataclasses, or marked
    ``_ir_opaque``: a tensor referenced by a read, an intrinsic in an annotation are leaves).
    Computed once per class."""
    try:
        return _NODE_FIELDS[cls]
    except KeyError:
        node = hasattr(cls, "__dataclass_fields__") and not getattr(cls, "_ir_opaque", False)
        names = tuple(f.name for f in fields(cls)) if node else None
        _NODE_FIELDS[cls] = names
        return names


_SCALAR_TYPES = frozenset({"str", "int", "float", "bool", str, int, float, bool})
_CHILD_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _scalar_only(annotation: Any) -> bool:
    """Whether a field annotated ``annotation`` holds no IR node: a plain ``str``, ``int``,
    ``float`` or ``bool``, such a type or ``None`` (``str | None``), or a tuple of such
    (``tuple[int, ...]``: a buffer's shape, a nest's operand names). Annotations are read as
    the text ``from __future__ import annotations`` leaves; anything else may hold a node."""
    if annotation in _SCALAR_TYPES:
        return True
    if not isinstance(annotation, str):
        return False
    text = annotation.replace(" ", "")
    if text.startswith("tuple[") and text.endswith(",...]"):
        return _scalar_only(text[len("tuple["):-len(",...]")])
    parts = text.split("|")
    return (len(parts) > 1 and "None" in parts
            and all(p == "None" or p in _SCALAR_TYPES for p in parts))


def child_slots(cls: type) -> tuple[str, ...] | None:
    """The fields of node class ``cls`` that can hold IR nodes: ``node_fields`` without those
    whose annotation holds only scalars (``_scalar_only``: a name, a dtype, a constant's value,
    a comparison's operator, a buffer's shape), in order; None when ``cls`` is not a node
    class. A ``Var``, an ``IntImm`` or a ``Buffer`` has none: a traversal that only looks for
    nodes stops there without reading its fields. Computed once per class."""
    try:
        return _CHILD_FIELDS[cls]
    except KeyError:
        names = node_fields(cls)
        if names is not None:
            types = {f.name: f.type for f in fields(cls)}
            names = tuple(n for n in names if not _scalar_only(types[n]))
        _CHILD_FIELDS[cls] = names
        return names


def is_node(cls: type) -> bool:
    """Whether instances of ``cls`` are IR nodes to traverse."""
    return node_fields(cls) is not None


def child_fields(cls: type) -> tuple[str, ...]:
    """The field names of node class ``cls``."""
    return node_fields(cls) or ()


#: per (dataclass, names of the changed fields in the call's order): its ``evolve`` copier, or
#: None where ``dataclasses.replace`` must run
_EVOLVERS: dict[tuple[type, tuple[str, ...]], Callable[[Any, dict[str, Any]], Any] | None] = {}


def evolve(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace(obj, **changes)``, several times faster for the frozen dataclasses
    the compiler rebuilds by the hundred thousand (instructions, ``Insn``, expression nodes):
    the copy is made field by field, as the generated ``__init__`` does, without going through
    ``__init__``'s keyword handling, by a copier made once per class and set of changed fields
    (each field read from ``obj`` or from ``changes``, decided when the copier is made).
    A class with a ``__post_init__`` or its own ``__new__`` is copied by calling it with every
    field by keyword, which is what ``dataclasses.replace`` does (its checks run), without
    ``replace``'s walk over the fields. Classes for which neither is the same thing (an
    ``InitVar`` or ``init=False`` field, a custom ``__init__``) and unknown field names go to
    ``dataclasses.replace`` itself, which also raises its own errors."""
    key = (type(obj), tuple(changes))
    try:
        fn = _EVOLVERS[key]
    except KeyError:
        fn = _EVOLVERS[key] = _make_evolver(*key)
    if fn is None:
        return dataclasses.replace(obj, **changes)
    return fn(obj, changes)


def _make_evolver(cls: type, changed: tuple[str, ...]
                  ) -> Callable[[Any, dict[str, Any]], Any] | None:
    """A function ``(obj, changes) -> copy`` setting every field of ``cls`` in order (those
    named in ``changed`` from ``changes``), or None when that would differ from
    ``dataclasses.replace`` or a name is not a field (``evolve``). Its code is kept across
    processes with vta's dataclass methods (``vta._dataclass_code.code_of``). A slotted class's
    fields are filled through its slots' own setters (``slot_setters``: no
    ``object.__setattr__`` lookup per field, about twice as fast); any other through
    ``object.__setattr__``, as the generated ``__init__`` of a frozen class does. A class
    whose construction does more (a ``__post_init__``, a ``__new__`` of its own) is called
    with every field by keyword, as ``dataclasses.replace`` calls it."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.init:
        return None
    init = getattr(vars(cls).get("__init__"), "__code__", None)
    if init is None or init.co_filename != "<string>":
        return None  # an __init__ dataclasses did not generate
    names = [f.name for f in fields(cls)]
    if _init_params(init) != names:
        return None  # an InitVar, or a field __init__ does not set
    if not all(n.isidentifier() for n in names) or not set(changed) <= set(names):
        return None
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_set": object.__setattr__}
    if hasattr(cls, "__post_init__") or cls.__new__ is not object.__new__:
        args = ", ".join(f"{n}=ch[{n!r}]" if n in changed else f"{n}=obj.{n}" for n in names)
        exec(code_of(f"def evolve(obj, ch):\n    return _cls({args})\n"), scope)
        called: Callable[[Any, dict[str, Any]], Any] = scope["evolve"]
        return called
    setters = slot_setters(cls)
    if setters is None:
        sets = [f"    _set(new, {n!r}, " for n in names]
    else:
        scope.update({f"_s{k}": f for k, f in enumerate(setters)})
        sets = [f"    _s{k}(new, " for k in range(len(names))]
    body = "".join(f"{head}ch[{n!r}])\n" if n in changed else f"{head}obj.{n})\n"
                   for head, n in zip(sets, names, strict=True))
    src = f"def evolve(obj, ch):\n    new = _new(_cls)\n{body}    return new\n"
    exec(code_of(src), scope)  # field names only (identifiers), as dataclasses itself does
    fn: Callable[[Any, dict[str, Any]], Any] = scope["evolve"]
    return fn


def _init_params(code: Any) -> list[str]:
    """The parameter names (``self`` aside) of a function's ``code``: a generated dataclass
    ``__init__`` takes exactly the fields it sets, in field order (an ``InitVar`` among them,
    a field with ``init=False`` not)."""
    names: list[str] = list(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount])
    return names


def slot_setters(cls: type, *, checked: bool = False
                 ) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The setters of ``cls``'s slots, in field order, when filling them on ``object.__new__(cls)``
    is what ``cls(*fields)`` does: a frozen, slotted dataclass whose slots (its own and its
    bases', as ``Add``'s are ``BinOp``'s) are exactly its fields, every one set by its generated
    ``__init__``, with no ``__post_init__`` (but with ``checked``, where the caller fills them
    with values its ``__post_init__`` has accepted already) and no ``__new__`` of its own; else
    None (call ``cls`` itself)."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in vars(cls):
        return None
    slots = {n: vars(k)[n] for k in reversed(cls.__mro__[:-1])
             for n in vars(k).get("__slots__", ())}
    names = [f.name for f in fields(cls)]
    init = getattr(vars(cls).get("__init__"), "__code__", None)
    if (list(slots) != names or (hasattr(cls, "__post_init__") and not checked)
            or cls.__new__ is not object.__new__ or init is None
            or init.co_filename != "<string>" or _init_params(init) != names):
        return None
    return tuple(slots[n].__set__ for n in names)
