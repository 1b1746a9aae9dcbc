"""docs/python_api.md runs: its Python code blocks, in order, in one namespace (each block's
``assert``s are the checks), from the repository root (the blocks read hwconfigs/)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "python_api.md"


def code_blocks(text: str) -> list[str]:
    """The ```python blocks of a markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_page_has_the_promised_examples() -> None:
    blocks = code_blocks(DOC.read_text())
    joined = "\n".join(blocks)
    for needle in ('"vta", hw=hw', "tensorize(", '"cuda-emu"', "tensorcore(", "schedule_packed(",
                   "assert_same_on_targets(", "@given("):
        assert needle in joined, needle
    test = next(b for b in blocks if "@given(" in b)
    lines = [ln for ln in test.splitlines() if ln.strip() and not ln.startswith(("import",
                                                                                 "from"))]
    assert len(lines) <= 15, f"the differential test takes {len(lines)} lines"


def test_code_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "python_api_doc"}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for k, block in enumerate(code_blocks(DOC.read_text())):
            try:
                exec(compile(block, f"{DOC.name}[block {k}]", "exec"), namespace)
            except Exception as e:  # name the block that failed
                raise AssertionError(f"docs/python_api.md block {k} failed: "
                                     f"{type(e).__name__}: {e}\n{block}") from e
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "cycles" in out and "grid" in out
    # the page's quoted cycle counts are what its own code prints (tests/test_doc_figures.py)
    quoted = re.findall(r'print\(res\.cycles, "cycles"\)\s+# ([\d,]+) on pynq', DOC.read_text())
    assert quoted
    for figure in quoted:
        assert f"{figure.replace(',', '')} cycles" in out, f"docs quote {figure} cycles"
