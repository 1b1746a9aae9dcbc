"""vta._dataclass_code: a frozen, slotted vta dataclass's ``__init__`` fills each field
through its slot's setter (bound once the class exists) instead of ``object.__setattr__``;
the instances are the same (fields, equality, hash, repr, frozenness, ``__post_init__``)."""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import vta.cli  # loads the vta classes a run makes
import vta.compiler.accel.pipeline  # noqa: F401
from vta import _dataclass_code as dc

_SOURCE = """
from __future__ import annotations
from dataclasses import dataclass, field

@dataclass(frozen=True, slots=True)
class Node:
    a: object
    b: object = 2
    tags: tuple = field(default_factory=tuple)
    hidden: int = field(default=7, init=False)

@dataclass(frozen=True, slots=True)
class Sub(Node):
    c: int = 3

@dataclass(frozen=True, slots=True)
class Checked:
    self: int
    seen: list = field(default_factory=list, compare=False)

    def __post_init__(self_) -> None:
        if self_.self < 0:
            raise ValueError("negative")
        self_.seen.append(self_.self)

@dataclass(frozen=True)
class Unslotted:
    a: int

@dataclass(slots=True)
class Mutable:
    a: int
"""

_NAMES = ("Node", "Sub", "Checked", "Unslotted", "Mutable")


def _module(name: str) -> types.ModuleType:
    """``_SOURCE``'s classes made in a module called ``name`` (registered while they are
    made, as an import registers a module)."""
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    try:
        exec(_SOURCE, mod.__dict__)
    finally:
        del sys.modules[name]
    return mod


def _rewritten(cls: type) -> bool:
    init = vars(cls).get("__init__")
    return any(dc._setter_field(v) for v in init.__code__.co_freevars)


@pytest.fixture(scope="module")
def both() -> tuple[types.ModuleType, types.ModuleType]:
    if dc._original_process is None:
        pytest.skip("this Python's dataclasses are made without the wrapped _process_class")
    return _module("vta._slot_init_probe"), _module("slot_init_probe")


def test_only_a_vta_class_frozen_and_slotted_is_rewritten(both: Any) -> None:
    ours, theirs = both
    assert [n for n in _NAMES if _rewritten(getattr(ours, n))] == ["Node", "Sub", "Checked"]
    assert not any(_rewritten(getattr(theirs, n)) for n in _NAMES)


def test_the_setters_are_the_slots_own(both: Any) -> None:
    """Each setter variable holds the ``__set__`` of the member descriptor the type lookup
    finds for its field (``Sub``'s ``a`` is ``Node``'s slot)."""
    ours, _ = both
    for cls in (ours.Node, ours.Sub, ours.Checked):
        init = vars(cls).get("__init__")
        for var, cell in zip(init.__code__.co_freevars, init.__closure__, strict=True):
            name = dc._setter_field(var)
            if name:
                desc = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
                assert cell.cell_contents == desc.__set__


def _state(x: Any) -> tuple[Any, ...]:
    return (type(x).__name__, repr(x), tuple(getattr(x, f.name) for f in
                                             dataclasses.fields(x)))


def test_the_instances_are_the_same(both: Any) -> None:
    """Every field, default, factory and ``init=False`` field, equality, hash, repr and
    frozenness as ``dataclasses`` makes them."""
    ours, theirs = both
    for args in [(1,), (1, "b"), ("x", None, (1, 2))]:
        for name in ("Node", "Sub"):
            a, b = getattr(ours, name)(*args), getattr(theirs, name)(*args)
            assert _state(a) == _state(b)
            assert hash(a) == hash(b) and a == getattr(ours, name)(*args)
            with pytest.raises(dataclasses.FrozenInstanceError):
                a.a = 5  # type: ignore[misc]
    assert _state(ours.Sub(1, c=9)) == _state(theirs.Sub(1, c=9))


def test_post_init_and_a_field_named_self(both: Any) -> None:
    ours, theirs = both
    a, b = ours.Checked(4), theirs.Checked(4)
    assert _state(a) == _state(b) and a.seen == [4]
    assert ours.Checked(1).seen is not ours.Checked(1).seen  # a factory's value per instance
    with pytest.raises(ValueError, match="negative"):
        ours.Checked(-1)


def _vta_classes() -> Iterator[type]:
    """Every class of a vta module loaded now (subclasses of ``object``, transitively)."""
    seen: set[type] = set()
    todo: list[type] = [object]
    while todo:
        for k in type.__subclasses__(todo.pop()):
            if k not in seen:
                seen.add(k)
                todo.append(k)
                module = vars(k).get("__module__")
                if isinstance(module, str) and module.startswith("vta."):
                    yield k


def test_every_vta_class_sets_through_the_descriptor_setattr_finds() -> None:
    """Over every loaded vta class (a subclass inheriting a rewritten ``__init__`` included):
    each setter is the ``__set__`` of the member descriptor ``object.__setattr__`` would use
    for that field on that class."""
    checked = 0
    for cls in _vta_classes():
        init = getattr(cls, "__init__", None)
        code = getattr(init, "__code__", None)
        if code is None or init.__closure__ is None:
            continue
        if "__init__" in vars(cls) and "__slots__" not in vars(cls):
            continue  # the class as written, which ``dataclasses`` replaced by a slotted copy
        for var, cell in zip(code.co_freevars, init.__closure__, strict=True):
            name = dc._setter_field(var)
            if name:
                desc = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
                assert cell.cell_contents == desc.__set__, (cls, name)
                checked += 1
    assert checked > 100 or dc._original_process is None
