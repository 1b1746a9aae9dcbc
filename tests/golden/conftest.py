"""Golden-file fixtures: ``golden(name, text)`` compares ``text`` with ``data/<name>``.

``pytest --update-golden`` (or ``pytest tests/golden --update-golden``) rewrites the files
instead of comparing (review the diff with ``git diff tests/golden/data`` before committing
it). Without the option a missing
or different file fails the test with a unified diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
#: registered in tests/conftest.py, so it also works from the repository root
OPTION = "--update-golden"
#: Keep golden files small enough to review in a diff.
MAX_BYTES = 40_000


def _diff(want: str, got: str, name: str) -> str:
    lines = difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                 f"tests/golden/data/{name} (golden)", f"{name} (generated)")
    return "".join(lines)


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)``: assert ``text`` equals the golden file ``data/<name>``, or
    rewrite the file when pytest runs with ``--update-golden``."""
    update = bool(request.config.getoption(OPTION, default=False))

    def check(name: str, text: str) -> None:
        __tracebackhide__ = True  # the failure is the diff, not this helper's frame
        if not text.endswith("\n"):
            text += "\n"
        size = len(text.encode("utf-8"))
        assert size <= MAX_BYTES, f"{name}: {size} bytes; pick a smaller shape (golden files " \
                                  f"stay under {MAX_BYTES} bytes)"
        path = DATA / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8", newline="")
            return
        if not path.exists():
            raise AssertionError(f"golden file tests/golden/data/{name} is missing; generate "
                                 f"it with `pytest tests/golden {OPTION}`")
        want = path.read_text(encoding="utf-8")
        if want != text:
            raise AssertionError(f"generated text differs from tests/golden/data/{name}:\n"
                                 f"{_diff(want, text, name)}\n"
                                 f"If the change is intended, review the diff and rerun with "
                                 f"`pytest tests/golden {OPTION}` to refresh the golden files.")

    return check
