"""Instruction counts of a fresh interpreter under valgrind's callgrind, for the benches'
``--callgrind`` modes (``sim_speed.py``: one bit-exact C1-C11 pass; ``compile_speed.py``:
compiling C1-C11): deterministic to a few parts in 10,000 where CPU seconds on a shared
machine swing by tens of percent. Each measured process is run twice, once doing the work and
once doing all but the work (imports, setup); the difference is the figure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["available", "child_env", "count", "totals"]


def available() -> bool:
    """Whether valgrind is on the PATH."""
    return shutil.which("valgrind") is not None


def totals(text: str) -> int:
    """The total instruction count (Ir) of a callgrind output file's text."""
    for line in text.splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit("callgrind: no totals in callgrind's output")


def child_env(root: str) -> dict[str, str]:
    """The environment of a measured child: vta from ``root``, string hashing fixed
    (``PYTHONHASHSEED=0``: the same dict and set orders, hence the same instructions, run to
    run), bytecode written (a user's machine imports from ``.pyc``; the caller warms it
    first, so no measured process compiles sources), and numpy's BLAS on one thread
    (``BLAS_THREAD_VARIABLES``, as every ``vta`` command runs it: callgrind counts every
    thread's instructions, and OpenBLAS's idle threads spin for as long as the work happens
    to let them: two passes of one tree read 2,869M and 3,303M that way)."""
    from vta.run.pool import BLAS_THREAD_VARIABLES  # (this tree's: only the parent asks)

    env = {**os.environ, "PYTHONPATH": root, "PYTHONHASHSEED": "0"}
    env.update(dict.fromkeys(BLAS_THREAD_VARIABLES, "1"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def count(cmd: list[str], env: dict[str, str], out: Path,
          cwd: Path | None = None) -> tuple[int, str]:
    """Instructions (Ir) of ``cmd`` run under callgrind (its output file at ``out``; in
    ``cwd``, else here) and its standard output; SystemExit with its error output when it
    fails."""
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                           *cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"callgrind: {' '.join(cmd)} failed:\n{done.stderr}")
    return totals(out.read_text()), done.stdout
