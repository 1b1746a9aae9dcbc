"""The persistent compile cache: compiled programs in the tuning cache's SQLite store.

``vta run`` compiles a layer by ranking its schedule space and timing the model's best
candidates on the simulator (``driver.compile_workload``); the same request on the same
hardware with the same compiler always gives the same program, so it is kept: a warm run
compiles nothing. The rows live in a table of their own, ``compiled``, in the file of the
tuning cache (``vta.tune.cache``: opened by its ``Cache``, so the file's checks — an SQLite
file of vta's, the schema it reads — and its WAL, busy-retry and write-lock rules are the same),
created on first use. The key follows the tuning cache's: the request (``driver.compile_key``:
the op with its shapes, epilogue, fused chain and forced schedule knobs), the hardware's
content hash (``cache.hw_digest``) and the compiler's version (``cache.compiler_version``: vta's
version and a digest of the compiler, ISA and simulator sources), so a changed compiler or
hardware never reuses a program. The row also names the schedule chosen, readable.

A row holds the program compactly (format ``FORMAT``, part of the key): its instructions as
the 128-bit words the hardware fetches (``isa.encoding.encode_program``) and each micro-op
buffer as its 32-bit words (``encode_uops``), beside the small metadata needed to run and
report it (the ``Compiled`` or ``CompiledWindow`` with its program emptied to the DRAM map,
pickled: a few small dataclasses), all with the SHA-256 of the bytes. Left out: the fused
chain, the workload's name and the hardware (the caller passes them again), and the IR after
each pass, which only ``--dump-ir`` reads and which bypasses the cache. A warm ``vta run
resnet18`` reads 23 programs; a pickled ``Compiled`` took about 0.8 s to unpickle (a
dataclass ``__setstate__`` per instruction and micro-op), the words decode with numpy a
definition at a time (``decode_program``). A program whose words do not decode back to it is
not kept (it is compiled again next time, never answered wrongly). A row whose bytes do not
match, that no longer unpickles or decodes, is not used (it is compiled again and replaced),
never a wrong program; a row of another format has another key. A cache file is the user's
own, trusted like the tuning cache's schedules: unpickling the metadata runs the classes it
names.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from vta.config import HwConfig
from vta.graph.ir import Graph
from vta.run.codec import pack_compiled, unpack_compiled
from vta.tune.cache import Cache, compiler_version, graph_version, hw_digest

__all__ = ["CompileCache", "compiled_key", "graph_key", "FORMAT", "pack_compiled",
           "unpack_compiled"]

#: how a row stores its program (part of the key: a row of another format is never read):
#: 1 the pickled ``Compiled``; 2 encoded instruction and micro-op words beside the metadata
FORMAT = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS compiled (
    key TEXT PRIMARY KEY, request TEXT NOT NULL, hw_hash TEXT NOT NULL, hw_name TEXT NOT NULL,
    compiler TEXT NOT NULL, schedule TEXT NOT NULL, blob BLOB NOT NULL, sha256 TEXT NOT NULL,
    seconds REAL NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS graphs (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, params TEXT NOT NULL, version TEXT NOT NULL,
    blob BLOB NOT NULL, sha256 TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS inputs (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, params TEXT NOT NULL, version TEXT NOT NULL,
    blob BLOB NOT NULL, sha256 TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL)
"""


def compiled_key(request: str, hw: HwConfig) -> str:
    """The row key of ``request`` (``driver.compile_key``) on ``hw`` with this compiler."""
    parts = [request, hw_digest(hw), compiler_version(), f"format {FORMAT}"]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def graph_key(model: str, params: dict[str, Any]) -> str:
    """The row key of a built model: its builder (``module.name``), the parameters it was
    built with, the graph layer's and compiler's sources (``cache.graph_version``: the
    weights' and calibration's code) and numpy's version (its random streams draw the
    weights)."""
    parts = [model, json.dumps(params, sort_keys=True), graph_version(), np.__version__,
             f"format {FORMAT}"]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _schedule_text(c: Any) -> str:
    """The schedule a compiled object (``Compiled``, ``CompiledWindow``) was built with, as
    text for the row (readable in the file; not a key)."""
    fold = getattr(c, "fold_kind", None)
    return repr(c.schedule) + (f" fold={fold}" if fold is not None else "")


def _unpickle_graph(blob: bytes, digest: str, kind: type = Graph) -> Any:
    """What a ``graphs`` row holds (a graph; an ``inputs`` row's seeded array,
    ``CompileCache.array``); None when its bytes do not match their digest or do not
    unpickle to a ``kind``."""
    if hashlib.sha256(blob).hexdigest() != digest:
        return None
    try:
        g = pickle.loads(blob)
    except Exception:  # any failure: the row is unusable
        return None
    return g if isinstance(g, kind) else None


class CompileCache:
    """``driver.CompileMemo`` over a tuning cache's file, for one hardware config. Counts its
    hits, misses and rejected rows (``stats``) so a run can say what it compiled."""

    def __init__(self, cache: Cache, hw: HwConfig) -> None:
        self.cache, self.hw = cache, hw
        self.hits = self.misses = self.rejected = 0
        self.graph_hits = self.graph_rejected = 0
        #: a built model's row not written yet (``graph_later``; ``write_pending`` writes it)
        self.pending: tuple[Any, ...] | None = None
        #: seeded inputs' rows not written yet (``array``; ``write_pending`` writes them)
        self.pending_inputs: list[tuple[Any, ...]] = []
        #: the tables ``_table`` found in the file
        self._tables: set[str] = set()
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
        c = unpack_compiled(blob, self.hw) if hashlib.sha256(blob).hexdigest() == digest \
            else None
        if c is None:
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
        blob = pack_compiled(compiled, self.hw)
        if blob is not None:
            self.put_packed(key, blob, compiled)

    def put_packed(self, key: str, blob: bytes, compiled: Any) -> None:
        """``put`` with ``compiled``'s bytes already made (``pack_compiled``'s for this
        hardware: a worker process's, ``vta.run.compile_pool``), not packed again."""
        if self.cache.readonly:
            return
        row = (compiled_key(key, self.hw), key, hw_digest(self.hw), self.hw.name,
               compiler_version(), _schedule_text(compiled), blob,
               hashlib.sha256(blob).hexdigest(), compiled.result.seconds, time.time())
        with self.cache.errors("write"), self.cache.write():
            self.cache.db.execute(
                "INSERT OR REPLACE INTO compiled VALUES (?,?,?,?,?,?,?,?,?,?)", row)

    def graph(self, build: Callable[..., Graph], **params: Any) -> Graph:
        """``graph_later``, its row (when it built the graph) written at once."""
        g = self.graph_later(build, **params)
        self.write_pending()
        return g

    def graph_later(self, build: Callable[..., Graph], **params: Any) -> Graph:
        """``build(**params)`` (a built-in model: seeded weights, calibrated scales), kept in
        the ``graphs`` table: a warm ``vta run resnet18`` reads the graph instead of drawing
        11.7 M weights and calibrating its scales through the interpreter (about 1 s). The row
        is the pickled graph (a few hundred small objects and the constants' arrays) with the
        SHA-256 of its bytes; a damaged row is built again and replaced (counted in
        ``graph_hits`` and ``graph_rejected``). A graph built here is kept by
        ``write_pending``, which its caller calls when this process would wait anyway
        (``vta run``: while the workers compile; pickling, hashing and writing ResNet-18's 11.7
        MB took 0.07 s of CPU and 0.1 s of the graph phase's wall)."""
        g, found, row = self._built_later(build, Graph, params, "graphs")
        self.graph_hits += found == "hit"
        self.graph_rejected += found == "rejected"
        self.pending = row or self.pending
        assert isinstance(g, Graph)
        return g

    def array(self, build: Callable[..., np.ndarray], **params: Any) -> np.ndarray:
        """``build(**params)`` (a seeded input: ``graph.models.random_image``), kept in the
        ``inputs`` table as ``graph_later`` keeps a model in ``graphs`` (the same key: the
        builder, its parameters, the graph layer's sources and numpy's version) and written by
        ``write_pending``: a warm ``vta run resnet18`` reads its 150 KB image instead of
        importing ``numpy.random`` (15-24 ms) to draw it again."""
        a, _, row = self._built_later(build, np.ndarray, params, "inputs")
        if row is not None:
            self.pending_inputs.append(row)
        assert isinstance(a, np.ndarray)
        return a

    def _built_later(self, build: Callable[..., Any], kind: type, params: dict[str, Any],
                     table: str) -> tuple[Any, str, tuple[Any, ...] | None]:
        """The ``kind`` the row of ``build(**params)`` in ``table`` holds, else built; with
        how it was found (``"hit"``, ``"rejected"``: a damaged row, ``"built"``: none) and
        the row to write (None when found, or in a read-only cache)."""
        name = f"{build.__module__}.{build.__qualname__}"
        key = graph_key(name, params)
        row = None
        if self._table(table):
            with self.cache.errors("read"):
                row = self.cache.db.execute(f"SELECT blob, sha256 FROM {table} WHERE key=?",
                                            (key,)).fetchone()
        if row is not None:
            g = _unpickle_graph(bytes(row[0]), str(row[1]), kind)
            if g is not None:
                return g, "hit", None
        t0 = time.perf_counter()
        g = build(**params)
        secs = time.perf_counter() - t0
        pending = None if self.cache.readonly else (key, name, params, g, secs)
        return g, "built" if row is None else "rejected", pending

    def write_pending(self) -> None:
        """Write the rows ``graph_later`` and ``array`` left (nothing when there are none)."""
        rows = [("inputs", r) for r in self.pending_inputs]
        if self.pending is not None:
            rows.insert(0, ("graphs", self.pending))
        self.pending, self.pending_inputs = None, []
        for table, (key, name, params, g, secs) in rows:
            # a fresh Graph: no cache of the original's object ids (``Graph._producers``)
            kept = Graph(g.name, g.inputs, g.outputs, g.nodes) if isinstance(g, Graph) else g
            blob = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
            row = (key, name, json.dumps(params, sort_keys=True), graph_version(), blob,
                   hashlib.sha256(blob).hexdigest(), secs, time.time())
            with self.cache.errors("write"), self.cache.write():
                self.cache.db.execute(f"INSERT OR REPLACE INTO {table} VALUES "
                                      f"(?,?,?,?,?,?,?,?)", row)

    def count(self) -> int:
        """Rows in the table (every hardware and compiler version)."""
        if not self._table():
            return 0
        with self.cache.errors("read"):
            return int(self.cache.db.execute("SELECT COUNT(*) FROM compiled").fetchone()[0])

    def _table(self, name: str = "compiled") -> bool:
        """Whether the file has the table (a read-only cache written before it may not);
        asked of the file until it has it (a table is never dropped: a warm ``vta run
        resnet18`` asked it once per kernel)."""
        if name in self._tables:
            return True
        with self.cache.errors("read"):
            found = self.cache.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                                          "name=?", (name,)).fetchone() is not None
        if found:
            self._tables.add(name)
        return found

    @property
    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "rejected": self.rejected}
