"""Shared helpers of the GPU benchmarks: CuPy check, CUDA-event timing, result files."""

from __future__ import annotations

import json
import platform
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def cupy_or_exit() -> Any:
    """CuPy with a GPU, or exit with a clear message (status 2: nothing was measured)."""
    from vta.gpu.runtime import GpuUnavailableError, require_cupy

    try:
        return require_cupy()
    except GpuUnavailableError as e:
        print(f"{Path(sys.argv[0]).name}: no GPU benchmark run: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def time_ms(cp: Any, fn: Callable[[], None], warmup: int = 3, reps: int = 20) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs, each timed with CUDA events."""
    for _ in range(warmup):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def write_results(kind: str, gpu: str, rows: list[dict[str, Any]], extra: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower()
    path = RESULTS / f"{kind}_{slug}.json"
    payload = {"gpu": gpu, "host": platform.node(), **extra, "rows": rows}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cols = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) for h, w in zip(headers, cols, strict=False))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, cols, strict=False)))
