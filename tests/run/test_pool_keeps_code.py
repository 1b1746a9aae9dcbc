"""A ``ForkPool`` worker that ends as told keeps the code it compiled of vta's generated source
(``vta.run.pool._keep_code``: ``vta._dataclass_code.save``, which a forked worker's
``os._exit`` would skip): a cold run's compile workers make most of its rebuilders, copiers
and integer evaluators, and the next process reads them from the table instead of compiling
them again."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from vta import _dataclass_code as dc
from vta.run.pool import ForkPool

#: source texts no other test compiles (the pid: not in any table written before)
_TEXTS = tuple(f"def _kept_{os.getpid()}_{k}(x):\n return x + {k}\n" for k in range(2))


def _compile_both(x: int) -> int:
    """Every item compiles both texts: whichever worker writes the table last, both are in it."""
    for txt in _TEXTS:
        dc.code_of(txt)
    return x


def _run_pool() -> None:
    """Four items on two workers (skipped where none start)."""
    with ForkPool(_compile_both, None, 2, 4) as p:
        for x in range(4):
            p.submit(x)
        p.end_input()
        assert p.results() == [0, 1, 2, 3]
    if p.workers < 2:
        pytest.skip("no worker processes here (no fork, or one core)")


def _table(path: Path, wait_s: float = 30.0) -> dict[str, object]:
    """The table at ``path`` once it holds both texts (the workers write it as they exit,
    after the pool has closed), or as it is after ``wait_s``."""
    end = time.monotonic() + wait_s
    while True:
        table = dc._load(path)
        if all(t in table for t in _TEXTS) or time.monotonic() > end:
            return dict(table)
        time.sleep(0.05)


def test_workers_keep_the_code_they_compiled(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "methods.marshal"
    monkeypatch.setattr(dc, "code_path", lambda: path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert not any(t in dc._codes for t in _TEXTS)
    _run_pool()
    assert not any(t in dc._codes for t in _TEXTS)  # compiled in the workers only
    table = _table(path)
    for txt in _TEXTS:
        assert table.get(txt) == compile(txt, "<string>", "exec", dont_inherit=True)


def test_nothing_is_kept_where_python_writes_no_bytecode(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "methods.marshal"
    monkeypatch.setattr(dc, "code_path", lambda: path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _run_pool()
    time.sleep(0.5)  # (the workers' exits: nothing may appear)
    assert not path.exists()
