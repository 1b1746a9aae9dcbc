"""``visitor.evolve``: the fast ``dataclasses.replace`` the passes use gives what
``dataclasses.replace`` gives, and defers to it wherever skipping ``__init__`` would differ."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir.visitor import evolve, slot_setters
from vta.isa import Deps, Uop
from vta.isa.insn import Alu, AluOp, Gemm, Load, MemType


@dataclass(frozen=True)
class _Checked:
    x: int
    doubled: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "doubled", 2 * self.x)


@dataclass(frozen=True)
class _Derived:
    x: int
    y: int = field(init=False, default=7)


def _instructions() -> list[object]:
    return [Alu(AluOp.ADD, False, 0, 0, 1, 1, 0, 0, 0, 0, True, 3),
            Gemm(False, 0, 4, 2, 3, 1, 0, 1, 0, 0, 0),
            Load(MemType.INP, 1, 2, 3, 4, 5, 0, 1, 0, 1)]


@pytest.mark.parametrize("insn", _instructions(), ids=lambda i: type(i).__name__)
def test_same_as_replace_on_instructions(insn: object) -> None:
    changes = {"deps": Deps(pop_prev=True)}
    new = evolve(insn, **changes)
    assert new == dataclasses.replace(insn, **changes)  # type: ignore[type-var]
    assert type(new) is type(insn) and new is not insn
    assert evolve(insn) == insn


def test_same_as_replace_on_insn_wrapper() -> None:
    ins = Insn(_instructions()[0], None, (Uop(1, 2, 3),), 1, note="n")
    new = evolve(ins, thread=0, note="m")
    assert (new.insn, new.dram, new.uops, new.thread, new.note) == \
        (ins.insn, None, ins.uops, 0, "m")


def test_post_init_and_init_false_go_through_replace() -> None:
    assert evolve(_Checked(2), x=5).doubled == 10  # __post_init__ ran
    assert evolve(_Derived(1), x=4) == dataclasses.replace(_Derived(1), x=4)


def test_unknown_field_is_replace_s_error() -> None:
    with pytest.raises(TypeError):
        evolve(_instructions()[0], nonsense=1)


@dataclass(frozen=True, slots=True)
class _Base:
    a: int
    b: int = 0


@dataclass(frozen=True, slots=True)
class _Sub(_Base):
    c: int = 0


@dataclass(frozen=True, slots=True)
class _WithInitVar:
    x: int
    scale: dataclasses.InitVar[int] = 1


def test_slots_filled_through_their_setters_inherited_ones_too() -> None:
    """A slotted class's copy is made by its slots' setters, a base's slots included (every
    ``BinOp`` keeps its operands in ``BinOp``'s slots); the copy is what ``replace`` makes."""
    setters = slot_setters(_Sub)
    assert setters is not None and len(setters) == 3
    new = evolve(_Sub(1, 2, 3), c=9)
    assert new == dataclasses.replace(_Sub(1, 2, 3), c=9) and type(new) is _Sub
    e = E.Add(E.Var("i"), E.IntImm(1))
    assert slot_setters(E.Add) is not None
    assert evolve(e, b=E.IntImm(2)) == dataclasses.replace(e, b=E.IntImm(2))


def test_initvar_is_not_a_slot_to_fill() -> None:
    """An ``InitVar`` is an ``__init__`` parameter but no field: no setters, and the copy is
    ``replace``'s (``__init__`` run with the ``InitVar``'s default)."""
    assert slot_setters(_WithInitVar) is None
    assert evolve(_WithInitVar(1), x=2) == dataclasses.replace(_WithInitVar(1), x=2)
