"""Loading a bench/ script as a module in a test (they are scripts, not a package): with
bench/ on the import path while it loads, for the helpers the scripts import beside them
(``callgrind``, ``c2_program``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` executed as the module ``name``."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod
