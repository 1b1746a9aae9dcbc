"""vta._dataclass_code: vta's dataclass methods compiled once, their code read from a file
beside vta's bytecode by the next process (the same code as compiling the text again)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vta import _dataclass_code as dc

ROOT = Path(__file__).resolve().parent.parent

#: run in a fresh process: import a module of dataclasses, report the use and check every
#: code read from the file against the text compiled again
_PROBE = """
import json
import vta.graph.ir
from vta import _dataclass_code as dc
same = all(code == compile(txt, "<string>", "exec", dont_inherit=True)
           for txt, code in dc._codes.items())
print(json.dumps({**dc.STATS, "path": str(dc.code_path()), "same": same}))
"""


def _probe(prefix: Path, write: bool = True) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(prefix)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def test_the_next_process_reads_the_methods_it_would_compile(tmp_path: Path) -> None:
    """A first process compiles the methods and writes the file at exit; the next compiles
    none, reads them all, and each is the code compiling its text gives."""
    if not dc._known(dc._original):
        pytest.skip("this Python's dataclasses build their methods otherwise")
    first = _probe(tmp_path)
    assert first["compiled"] > 100 and Path(str(first["path"])).is_file()
    assert str(first["path"]).startswith(str(tmp_path))  # where Python keeps the bytecode
    second = _probe(tmp_path)
    assert second["compiled"] == 0 and second["hits"] == first["hits"] + first["compiled"]
    assert second["same"]


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    if not dc._known(dc._original):
        pytest.skip("this Python's dataclasses build their methods otherwise")
    got = _probe(tmp_path, write=False)
    assert got["compiled"] > 0 and not Path(str(got["path"])).exists()


def test_another_modules_dataclass_is_made_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only vta's classes go through the cache; a user's class is dataclasses' own work, and
    equal either way."""
    monkeypatch.setattr(dc, "STATS", {"hits": 0, "compiled": 0})

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 2

    assert dc.STATS == {"hits": 0, "compiled": 0}
    assert Point(1) == Point(1, 2) and repr(Point(1)) == "test_another_modules_dataclass_is_" \
        "made_as_before.<locals>.Point(x=1, y=2)"


def test_a_damaged_or_foreign_file_counts_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "methods.marshal"
    assert dc._load(None) == {} and dc._load(path) == {}  # missing
    path.write_bytes(b"not marshal")
    assert dc._load(path) == {}
    code = compile("x = 1", "<string>", "exec")
    path.write_bytes(marshal.dumps((b"\0\0\r\n", {"x = 1": code})))  # another interpreter's
    assert dc._load(path) == {}
    path.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, {"x = 1": "text"})))
    assert dc._load(path) == {}
    path.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, {"x = 1": code})))
    assert dc._load(path) == {"x = 1": code}
