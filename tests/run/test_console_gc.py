"""The ``vta`` command imports its module (and everything below it) without the cycle collector
(``vta._collector.collector_paused`` in ``vta.cli._command``): what the imports make lives as
long as the process, so it is moved to the oldest generation unwalked instead of being walked
by young collections to promote it; the command itself runs with the collector on. ``import
vta`` does the same for vta's own imports."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vta.cli as cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_command_module_is_imported_without_the_collector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    got: dict[str, Any] = {}

    def handler(name: str) -> Callable[[Any], int]:
        got["importing"] = gc.isenabled()
        made = [[] for _ in range(100)]  # tracked objects an import makes and keeps

        def run(args: Any) -> int:
            got["running"] = gc.isenabled()
            young = {id(x) for x in gc.get_objects(0)} | {id(x) for x in gc.get_objects(1)}
            got["young"] = sum(id(x) in young for x in made)
            return 0
        return run

    monkeypatch.setattr(cli, "_handler", handler)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert cli.main(["info", "--hw", "pynq"]) == 0
    assert got == {"importing": False, "running": True, "young": 0}
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_import_vta_pauses_the_collector_and_restores_it() -> None:
    """A fresh process: ``import vta`` (numpy, the ISA's tables, ...) runs at most one
    collection (before its pause begins; 49 without it), and after it the collector is as it
    was (on, or off where the caller turned it off: then nothing is moved either), nothing
    frozen; with it on, the imports' objects are out of the young generation."""
    code = ("import gc, sys\n"
            "off = sys.argv[1] == 'off'\n"
            "if off: gc.disable()\n"
            "before = sum(s['collections'] for s in gc.get_stats())\n"
            "import vta, vta.isa\n"
            "ran = sum(s['collections'] for s in gc.get_stats()) - before\n"
            "young = {id(x) for x in gc.get_objects(0)}\n"
            "print(ran, gc.isenabled(), gc.get_freeze_count(), id(vta.isa.Program) in young)\n")
    got = {state: subprocess.run([sys.executable, "-c", code, state], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout.split()
           for state in ("on", "off")}
    assert {k: [int(v[0]) <= 1, *v[1:]] for k, v in got.items()} == {
        "on": [True, "True", "0", "False"], "off": [True, "False", "0", "True"]}
