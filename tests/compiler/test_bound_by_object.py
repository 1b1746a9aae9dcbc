"""``cost.program_bound`` finds a repeated instruction object by identity before its value:
the same bound, each object's fields hashed once or twice however many places hold it (a
compiled program holds one object at many places; hashing a dataclass's fields costs more
than the lookup)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.cost import program_bound
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.isa import Program

PYNQ = HwConfig.load(Path(__file__).resolve().parents[2] / "hwconfigs" / "pynq.yaml")


@pytest.fixture(scope="module")
def program() -> Program:
    w = resolve("resnet18:C11", [], height=14, in_channels=64, out_channels=64)
    return driver.compile_workload(w, PYNQ).program


def test_each_object_is_hashed_at_most_twice_and_the_bound_is_unchanged(
        program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same program with every instruction a fresh copy (no object shared) and as
    compiled (objects shared, some at four places): equal bounds; in the shared one, each
    object's fields are hashed at most twice, looked up and kept (fails when every place is
    looked up by value)."""
    fresh = replace(program, instructions=tuple(replace(x) for x in program.instructions))
    want = program_bound(fresh, PYNQ)
    hashed: list[int] = []
    for cls in {type(x) for x in program.instructions}:
        real = cls.__hash__

        def counted(self: Any, real: Any = real) -> int:
            hashed.append(id(self))
            return int(real(self))

        monkeypatch.setattr(cls, "__hash__", counted)
    assert program_bound(program, PYNQ) == want
    objects = {id(x) for x in program.instructions}
    assert set(hashed) <= objects and len(objects) < len(program.instructions)
    # looked up, then kept when new (``_bound_facts`` keys by plain values: none is hashed)
    assert max(Counter(hashed).values(), default=0) <= 2
