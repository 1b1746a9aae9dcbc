"""bench/warm_run.py's ``--callgrind`` mode without running valgrind: it skips cleanly when
valgrind is missing (exit 0, a message saying so, nothing written)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from _bench import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("warm_run")


def test_callgrind_skips_without_valgrind(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(bench.callgrind.shutil, "which", lambda name: None)
    out = tmp_path / "cg.json"
    assert bench.callgrind_compare(None, str(out)) == 0
    assert "valgrind is not installed" in capsys.readouterr().out
    assert not out.exists()
