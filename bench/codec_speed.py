"""How long shipping a compiled kernel as bytes takes (``vta.run.codec``): ResNet-18's 23
kernels, as ``vta run --hw hwconfigs/pynq.yaml resnet18`` compiles them, packed and unpacked.

``pack`` is ``codec.pack_compiled`` (the words made with numpy, checked by decoding the
instructions: what the compile workers and the compile cache do cold); ``pack (encode_program)``
is the same packing done with ``isa.encoding.encode_program`` and ``encode_uops`` and a full
decode for the check (the previous round's ``pack_compiled``, kept here as the before);
``unpack`` is ``codec.unpack_compiled`` (a compile cache hit, or the parent receiving a
worker's kernel). The programs come from a compile cache file (``--cache``, filled by
``vta run`` first when empty). Both packings give the same bytes (checked).

    python bench/codec_speed.py [--runs 5] [--cache FILE]

Prints a table (medians of wall and CPU seconds) and writes bench/results/codec_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from vta.config import HwConfig
from vta.isa import Program
from vta.isa.encoding import decode_program, decode_uops, encode_program, encode_uops
from vta.run.codec import pack_compiled, unpack_compiled

ROOT = Path(__file__).resolve().parents[1]
HW = ROOT / "hwconfigs" / "pynq.yaml"


def pack_before(compiled: Any, hw: HwConfig) -> bytes | None:
    """``pack_compiled`` as it was: ``encode_program`` (each instruction's fields checked),
    ``encode_uops``, and the whole program decoded and compared."""
    prog = compiled.result.program
    insns = encode_program(prog.instructions, hw)
    uops = {name: encode_uops(u, hw) for name, u in prog.uops.items()}
    back = Program(tuple(decode_program(insns, hw)), tuple(prog.allocations),
                   {name: tuple(decode_uops(u, hw)) for name, u in uops.items()})
    if back != prog:
        return None
    meta = replace(compiled, hw=None, chain=None, result=replace(
        compiled.result, ir={}, program=Program((), prog.allocations, {})))
    words = (insns.tobytes(), {name: u.tobytes() for name, u in uops.items()})
    return pickle.dumps((meta, words), protocol=pickle.HIGHEST_PROTOCOL)


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    """Medians of ``fn``'s wall and CPU (this process) seconds over ``runs`` calls."""
    walls, cpus = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": round(statistics.median(walls), 4),
            "cpu_s": round(statistics.median(cpus), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cache", default=None, help="a compile cache holding resnet18's kernels")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "codec_speed.json"))
    a = ap.parse_args()
    hw = HwConfig.load(HW)
    with tempfile.TemporaryDirectory() as d:
        cache = Path(a.cache) if a.cache else Path(d) / "c.sqlite"
        if not cache.exists():
            subprocess.run([sys.executable, "-m", "vta.cli", "run", "--hw", str(HW), "resnet18",
                            "--cache", str(cache)], check=True, stdout=subprocess.DEVNULL)
        db = sqlite3.connect(cache)
        blobs = [bytes(r[0]) for r in db.execute("SELECT blob FROM compiled")]
        db.close()
    kernels = [unpack_compiled(b, hw) for b in blobs]
    assert kernels and all(k is not None for k in kernels)
    assert all(pack_compiled(k, hw) == pack_before(k, hw) for k in kernels)
    insns = sum(len(k.result.program.instructions) for k in kernels)
    uops = sum(len(u) for k in kernels for u in k.result.program.uops.values())
    rows = {"pack": timed(lambda: [pack_compiled(k, hw) for k in kernels], a.runs),
            "pack (encode_program)": timed(lambda: [pack_before(k, hw) for k in kernels],
                                           a.runs),
            "unpack": timed(lambda: [unpack_compiled(b, hw) for b in blobs], a.runs)}
    print(f"{len(kernels)} kernels, {insns:,} instructions, {uops:,} micro-ops")
    print(f"{'':24} {'wall s':>8} {'CPU s':>8}")
    for name, r in rows.items():
        print(f"{name:24} {r['wall_s']:>8.3f} {r['cpu_s']:>8.3f}")
    Path(a.out).write_text(json.dumps({
        "command": "python bench/codec_speed.py" + (f" --runs {a.runs}" if a.runs != 5 else ""),
        "what": "vta run --hw hwconfigs/pynq.yaml resnet18's 23 kernels packed and unpacked "
                "(vta.run.codec); medians",
        "kernels": len(kernels), "instructions": insns, "micro_ops": uops,
        "load_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "results": rows}, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
