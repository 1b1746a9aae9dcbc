"""The persistent compile cache: compiled programs in the tuning cache's SQLite store.

``vta run`` compiles a layer by ranking its schedule space and timing the model's best
candidates on the simulator (``driver.compile_workload``); the same request on the same
hardware with the same compiler always gives the same program, so it is kept: a warm run
compiles nothing. The rows live in a table of their own, ``compiled``, in the file of the
tuning cache (``vta.tune.cache``: opened by its ``Cache``, so the file's checks — an SQLite
file of vta's, the schema it reads — and its WAL, busy-retry and write-lock rules are the same),
created on first use. The key follows the tuning cache's: the request (``driver.compile_key``:
the op with its shapes, epilogue, fused chain and forced schedule knobs), the hardware's
content hash (``tuner.hw_digest``) and the compiler's version (``cache.compiler_version``: vta's
version and a digest of the compiler, ISA and simulator sources), so a changed compiler or
hardware never reuses a program. The row also names the schedule chosen, readable.

A row holds the ``Compiled`` pickled with the SHA-256 of the bytes (left out: its fused
chain, functions the caller passes again, and the IR after each pass, which only ``--dump-ir``
reads and which bypasses the cache). A row whose bytes do not match, or that no longer
unpickles, is not used (it is compiled again and replaced), never a wrong program. A cache file
is the user's own, trusted like the tuning cache's schedules: unpickling runs the classes it
names.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import replace
from typing import Any

from vta.compiler.accel.driver import Compiled
from vta.compiler.accel.ops.window_packed import CompiledWindow
from vta.config import HwConfig
from vta.tune.cache import Cache, compiler_version
from vta.tune.tuner import hw_digest

__all__ = ["CompileCache", "compiled_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS compiled (
    key TEXT PRIMARY KEY, request TEXT NOT NULL, hw_hash TEXT NOT NULL, hw_name TEXT NOT NULL,
    compiler TEXT NOT NULL, schedule TEXT NOT NULL, blob BLOB NOT NULL, sha256 TEXT NOT NULL,
    seconds REAL NOT NULL, created REAL NOT NULL)
"""


def compiled_key(request: str, hw: HwConfig) -> str:
    """The row key of ``request`` (``driver.compile_key``) on ``hw`` with this compiler."""
    parts = [request, hw_digest(hw), compiler_version()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _schedule_text(c: Any) -> str:
    """The schedule a compiled object (``Compiled``, ``CompiledWindow``) was built with, as
    text for the row (readable in the file; not a key)."""
    fold = getattr(c, "fold_kind", None)
    return repr(c.schedule) + (f" fold={fold}" if fold is not None else "")


class CompileCache:
    """``driver.CompileMemo`` over a tuning cache's file, for one hardware config. Counts its
    hits, misses and rejected rows (``stats``) so a run can say what it compiled."""

    def __init__(self, cache: Cache, hw: HwConfig) -> None:
        self.cache, self.hw = cache, hw
        self.hits = self.misses = self.rejected = 0
        # the tuning cache's own connection, integrity checks and write rules (one
        # transaction per write); nothing is created in a read-only cache
        cache.ensure_tables(_SCHEMA)

    def get(self, key: str) -> Any:
        """What was kept for ``key`` (a ``driver.compile_key``, an ``ops.window_packed.
        window_key``): a ``Compiled`` or a ``CompiledWindow``; None when there is none or the
        row is damaged."""
        row_key = compiled_key(key, self.hw)
        if not self._table():
            self.misses += 1
            return None
        with self.cache.errors("read"):
            row = self.cache.db.execute("SELECT blob, sha256 FROM compiled WHERE key=?",
                                        (row_key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        blob, digest = bytes(row[0]), str(row[1])
        c: Any = None
        if hashlib.sha256(blob).hexdigest() == digest:
            try:
                c = pickle.loads(blob)
            except Exception:  # any unpickling failure: the row is unusable
                c = None
        if not isinstance(c, (Compiled, CompiledWindow)):
            self.rejected += 1
            self.misses += 1
            return None
        self.hits += 1
        return c

    def put(self, key: str, compiled: Any) -> None:
        """Keep ``compiled`` for ``key`` (replacing any row there); nothing in a read-only
        cache (the run still compiles, it only cannot keep the result)."""
        if self.cache.readonly:
            return
        kept = replace(compiled, chain=None, result=replace(compiled.result, ir={}))
        blob = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
        row = (compiled_key(key, self.hw), key, hw_digest(self.hw), self.hw.name,
               compiler_version(), _schedule_text(compiled), blob,
               hashlib.sha256(blob).hexdigest(), compiled.result.seconds, time.time())
        with self.cache.errors("write"), self.cache.write():
            self.cache.db.execute(
                "INSERT OR REPLACE INTO compiled VALUES (?,?,?,?,?,?,?,?,?,?)", row)

    def count(self) -> int:
        """Rows in the table (every hardware and compiler version)."""
        if not self._table():
            return 0
        with self.cache.errors("read"):
            return int(self.cache.db.execute("SELECT COUNT(*) FROM compiled").fetchone()[0])

    def _table(self) -> bool:
        """Whether the file has the table (a read-only cache written before it may not)."""
        with self.cache.errors("read"):
            return self.cache.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                                         "name='compiled'").fetchone() is not None

    @property
    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "rejected": self.rejected}
