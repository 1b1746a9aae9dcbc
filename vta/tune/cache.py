"""The persistent compilation cache: SQLite in WAL mode, safe under concurrent writers.

A tuning *key* names what a schedule is for: the canonical op with its shapes and epilogue,
the dtypes, the target, the hardware's content hash (``tuner.hw_digest``: every field of the
``HwConfig`` but its name and board; a GPU's device name) and the compiler's version
(``compiler_version``: vta's version and a digest of the sources a program or its cycles depend
on, so a changed compiler never reuses a stale number). Tables:

* ``ops``: one row per key with its readable parts;
* ``trials``: every point measured for a key: its cost (cycles; milliseconds on a GPU), or why
  it did not compile, how it was measured (``method``) and when (``measured_at``, Unix time),
  and how long it took; committed one trial at a time, so a process killed while tuning loses
  at most the trials it had in flight, and a rerun reuses every trial already measured;
* ``tunings``: one row per finished tuning job (search, seed, budget, best and default).

The best schedule of a key is its cheapest trial (``best``); ``vta run`` compiles it when
present. Concurrency: every write is one ``BEGIN IMMEDIATE`` transaction and readers never
block writers (WAL); a busy database is retried for ``BUSY_TIMEOUT_S``. Processes opening one
new file at once: each reads its header (application id and tables) in one snapshot, and the
one that finds it empty makes it a cache under the write lock (checked again there). A file
that is not an SQLite database, or one that is not a vta cache (another application's, or a
newer schema), is a ``CacheError`` naming the file, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from vta.errors import CacheError
from vta.version import __version__

__all__ = ["CacheError", "TuneKey", "Trial", "Tuning", "Cache", "default_cache_path",
           "compiler_version", "open_cache", "CACHE_ENV", "SCHEMA_VERSION"]

#: The environment variable naming the cache file (``vta`` commands read it; ``--cache`` wins).
CACHE_ENV = "VTA_CACHE"
#: ``PRAGMA application_id`` of a vta cache ("vtaT")
APPLICATION_ID = 0x76746154
SCHEMA_VERSION = 1
#: seconds a writer waits for another writer's transaction
BUSY_TIMEOUT_S = 60.0

#: SQLite's primary result codes for "another connection holds the database" (sqlite3.h:
#: SQLITE_BUSY 5, SQLITE_LOCKED 6); an extended code keeps its primary code in the low byte
_BUSY_CODES = (5, 6)


def _busy(e: sqlite3.OperationalError) -> bool:
    """Whether ``e`` means the database is held by another connection, so the call may be
    retried. Python 3.11+ carries SQLite's result code on the exception; Python 3.10 (the
    oldest we support) has only the message, whose text SQLite fixes ("database is locked")."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(e)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ops (
    key TEXT PRIMARY KEY, op TEXT NOT NULL, dtypes TEXT NOT NULL, target TEXT NOT NULL,
    hw_hash TEXT NOT NULL, hw_name TEXT NOT NULL, compiler TEXT NOT NULL, space TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    key TEXT NOT NULL REFERENCES ops(key), point TEXT NOT NULL, cost REAL, refused TEXT,
    method TEXT NOT NULL, measured_at REAL NOT NULL, seconds REAL NOT NULL, host TEXT NOT NULL,
    PRIMARY KEY (key, point));
CREATE INDEX IF NOT EXISTS trials_by_cost ON trials (key, cost);
CREATE TABLE IF NOT EXISTS tunings (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL REFERENCES ops(key), search TEXT NOT NULL,
    seed INTEGER NOT NULL, budget INTEGER NOT NULL, evaluated INTEGER NOT NULL,
    best_point TEXT, best_cost REAL, default_point TEXT, default_cost REAL,
    seconds REAL NOT NULL, finished_at REAL NOT NULL, host TEXT NOT NULL);
"""
_TABLES = {"ops", "trials", "tunings"}


@lru_cache(maxsize=1)
def compiler_version() -> str:
    """vta's version and a digest of the sources that make a program and time it (compiler,
    ISA, simulator, GPU backend, the config schema and the intrinsics registry)."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(p for sub in ("compiler", "isa", "sim", "gpu")
                   for p in (root / sub).rglob("*.py"))
    files += [root / "config.py", root / "intrinsics.py"]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"


@dataclass(frozen=True)
class TuneKey:
    """What a tuned schedule is for (module docstring). ``digest`` is the cache's key."""

    op: str
    dtypes: str
    target: str
    hw_hash: str
    hw_name: str
    compiler: str
    space: str

    @property
    def digest(self) -> str:
        parts = [self.op, self.dtypes, self.target, self.hw_hash, self.compiler, self.space]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Trial:
    """One measured point of a key."""

    key: str
    point: str
    cost: float | None
    refused: str | None
    method: str
    measured_at: float
    seconds: float
    host: str


@dataclass(frozen=True)
class Tuning:
    """A finished tuning job of a key."""

    key: str
    search: str
    seed: int
    budget: int
    evaluated: int
    best_point: str | None
    best_cost: float | None
    default_point: str | None
    default_cost: float | None
    seconds: float
    finished_at: float
    host: str


def default_cache_path(env: Mapping[str, str]) -> Path:
    """``$VTA_CACHE``, else ``$XDG_CACHE_HOME/vta/tune.sqlite``, else
    ``~/.cache/vta/tune.sqlite`` (``env``: the process environment, read by the caller)."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else \
        Path.home() / ".cache"
    return base / "vta" / "tune.sqlite"


class Cache:
    """The cache in one SQLite file (module docstring); one connection per process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CacheError(f"{self.path}: cannot create its directory: {e.strerror or e}") \
                from None
        if self.path.is_dir():
            raise CacheError(f"{self.path}: is a directory; the cache is one SQLite file")
        with self._errors("open"):
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            deadline = time.monotonic() + BUSY_TIMEOUT_S
            while True:  # processes opening a new file at once: SQLite may answer "locked"
                try:     # at once (a journal-mode change, a WAL recovery), without waiting
                    self._check_and_init()
                    break
                except sqlite3.OperationalError as e:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    if not _busy(e) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

    # ------------------------------------------------------------------ setup and errors

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as e:
            what = str(e)
            if "not a database" in what or "malformed" in what:
                raise CacheError(f"{self.path}: not a vta tuning cache (SQLite says: {what}); "
                                 f"remove it or give another file with --cache") from None
            raise CacheError(f"{self.path}: cannot {doing} the tuning cache: {what}") from None
        except OSError as e:
            raise CacheError(f"{self.path}: cannot {doing} the tuning cache: "
                             f"{e.strerror or e}") from None

    def _header(self) -> tuple[int, set[str]]:
        """The file's application id and tables, read in one transaction (one snapshot: another
        process creating the cache commits both at once, never one without the other)."""
        db = self._db
        own = not db.in_transaction
        if own:
            db.execute("BEGIN")
        try:
            app = db.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            if own:
                db.execute("COMMIT")
        return app, tables

    def _check_and_init(self) -> None:
        db = self._db
        app, tables = self._header()
        if app == 0 and not tables:  # a new (or empty) file: make it a vta cache
            db.execute("PRAGMA journal_mode=WAL")
            with self._write():
                app, tables = self._header()  # again, under the lock: another process may
                if app == 0 and not tables:   # have made it a cache since
                    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)
                    return
        if app != APPLICATION_ID or not _TABLES <= tables:
            have = ", ".join(sorted(tables)) or "no tables"
            raise CacheError(f"{self.path}: an SQLite database of another application "
                             f"(application id {app:#x}, {have}), not a vta tuning cache; "
                             f"give another file with --cache or {CACHE_ENV}")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise CacheError(f"{self.path}: a vta tuning cache of schema {version}; this vta "
                             f"reads schema {SCHEMA_VERSION} (the vta that wrote it reads it; give "
                             f"this one another file with --cache or {CACHE_ENV}, or delete "
                             f"the file)")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``: no deadlock between two
        readers upgrading), retried while another process holds the database."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as e:
                if not _busy(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes

    def add_key(self, key: TuneKey) -> str:
        """Record ``key`` (once) and return its digest."""
        with self._errors("write"), self._write():
            self._db.execute(
                "INSERT OR IGNORE INTO ops VALUES (?,?,?,?,?,?,?,?,?)",
                (key.digest, key.op, key.dtypes, key.target, key.hw_hash, key.hw_name,
                 key.compiler, key.space, time.time()))
        return key.digest

    def add_trial(self, key: str, point: str, cost: float | None, *, refused: str | None = None,
                  method: str, seconds: float, measured_at: float | None = None) -> None:
        """Commit one measured point (a later measurement of the same point replaces it)."""
        with self._errors("write"), self._write():
            self._db.execute(
                "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?)",
                (key, point, cost, refused, method,
                 time.time() if measured_at is None else measured_at, seconds, _host()))

    def add_tuning(self, t: Tuning) -> None:
        """Record a finished tuning job."""
        with self._errors("write"), self._write():
            self._db.execute(
                "INSERT INTO tunings (key, search, seed, budget, evaluated, best_point, "
                "best_cost, default_point, default_cost, seconds, finished_at, host) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (t.key, t.search, t.seed, t.budget, t.evaluated, t.best_point, t.best_cost,
                 t.default_point, t.default_cost, t.seconds, t.finished_at, t.host))

    def clear(self, key: str | None = None) -> int:
        """Delete every record (or those of keys starting with ``key``); the number of trials
        deleted."""
        like = (key or "") + "%"
        with self._errors("clear"), self._write():
            n = self._db.execute("DELETE FROM trials WHERE key LIKE ?", (like,)).rowcount
            self._db.execute("DELETE FROM tunings WHERE key LIKE ?", (like,))
            self._db.execute("DELETE FROM ops WHERE key LIKE ?", (like,))
        return int(n)

    # ------------------------------------------------------------------ reads

    def trials(self, key: str) -> dict[str, Trial]:
        """Every trial of ``key``, by point."""
        with self._errors("read"):
            rows = self._db.execute("SELECT * FROM trials WHERE key=?", (key,)).fetchall()
        return {r[1]: Trial(*r) for r in rows}

    def best(self, key: str) -> Trial | None:
        """The cheapest measured trial of ``key`` (None when it has none)."""
        with self._errors("read"):
            row = self._db.execute("SELECT * FROM trials WHERE key=? AND cost IS NOT NULL "
                                   "ORDER BY cost, measured_at LIMIT 1", (key,)).fetchone()
        return Trial(*row) if row else None

    def tuning(self, key: str, search: str, seed: int, budget: int) -> Tuning | None:
        """The latest finished tuning of ``key`` by ``search`` with ``seed`` and at least
        ``budget`` trials (a cache hit: the job need not run again)."""
        with self._errors("read"):
            row = self._db.execute(
                "SELECT key, search, seed, budget, evaluated, best_point, best_cost, "
                "default_point, default_cost, seconds, finished_at, host FROM tunings WHERE "
                "key=? AND search=? AND seed=? AND budget>=? ORDER BY finished_at DESC LIMIT 1",
                (key, search, seed, budget)).fetchone()
        return Tuning(*row) if row else None

    def keys(self) -> list[dict[str, Any]]:
        """One summary per key: its parts, trials, best cost and when it was last measured."""
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT o.key, o.op, o.dtypes, o.target, o.hw_name, o.hw_hash, o.compiler, "
                "o.space, COUNT(t.point), MIN(t.cost), MAX(t.measured_at), "
                "(SELECT method FROM trials m WHERE m.key = o.key ORDER BY m.measured_at DESC "
                "LIMIT 1) FROM ops o LEFT JOIN trials t ON t.key = o.key GROUP BY o.key "
                "ORDER BY o.created").fetchall()
        names = ("key", "op", "dtypes", "target", "hw_name", "hw_hash", "compiler", "space",
                 "trials", "best_cost", "last_measured", "method")
        return [dict(zip(names, r, strict=True)) for r in rows]

    def find(self, prefix: str) -> str:
        """The one key starting with ``prefix`` (a ``CacheError`` naming the candidates)."""
        with self._errors("read"):
            rows = [r[0] for r in self._db.execute("SELECT key FROM ops WHERE key LIKE ?",
                                                   (prefix + "%",))]
        if len(rows) == 1:
            return str(rows[0])
        if not rows:
            raise CacheError(f"{self.path}: no key starts with {prefix!r} ('vta cache list' "
                             f"shows the keys)")
        raise CacheError(f"{self.path}: {len(rows)} keys start with {prefix!r} "
                         f"({', '.join(rows[:4])}{', ...' if len(rows) > 4 else ''}); give more "
                         f"of the key")

    def export(self) -> Iterator[dict[str, Any]]:
        """Every trial with its key's parts, as JSON-able records (``vta cache export``)."""
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT t.key, o.op, o.dtypes, o.target, o.hw_name, o.hw_hash, o.compiler, "
                "o.space, t.point, t.cost, t.refused, t.method, t.measured_at, t.seconds, "
                "t.host FROM trials t JOIN ops o ON o.key = t.key ORDER BY t.key, t.measured_at"
            ).fetchall()
        names = ("key", "op", "dtypes", "target", "hw_name", "hw_hash", "compiler", "space",
                 "point", "cost", "refused", "method", "measured_at", "seconds", "host")
        for r in rows:
            rec = dict(zip(names, r, strict=True))
            rec["point"] = json.loads(rec["point"])
            yield rec

    def integrity(self) -> str:
        """SQLite's integrity check ("ok" for a sound file)."""
        with self._errors("check"):
            return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])


@lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


@contextmanager
def open_cache(path: Path | None, *, create: bool) -> Iterator[Cache | None]:
    """The cache at ``path`` for the duration of a ``with``; None when ``path`` is None (no
    cache) or, unless ``create``, when no file is there (a lookup never creates one)."""
    if path is None or (not create and not path.exists()):
        yield None
        return
    with Cache(path) as c:
        yield c
