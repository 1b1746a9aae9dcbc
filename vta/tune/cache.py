"""The persistent compilation cache: SQLite in WAL mode, safe under concurrent writers.

A tuning *key* names what a schedule is for: the canonical op with its shapes and epilogue,
the dtypes, the target, the hardware's content hash (``hw_digest``: every field of the
``HwConfig`` but its name and board; a GPU's device name) and the compiler's version
(``compiler_version``: vta's version and a digest of the sources a program or its cycles depend
on, so a changed compiler never reuses a stale number). Tables:

* ``ops``: one row per key with its readable parts;
* ``trials``: every point measured for a key: its cost (cycles; milliseconds on a GPU), or why
  it did not compile, how it was measured (``method``) and when (``measured_at``, Unix time),
  and how long it took; committed one trial at a time, so a process killed while tuning loses
  at most the trials it had in flight, and a rerun reuses every trial already measured;
* ``tunings``: one row per finished tuning job (search, seed, budget, best and default);
* ``leases``: which process is measuring which point right now (``holder``: host and pid,
  ``expires``: Unix time), so that two tunes of one key at once measure each point once: a
  process measures a point only under its lease, taken in the same transaction that finds no
  trial of it; a lease whose holder has died (on this host) or expired is taken over.

The best schedule of a key is its cheapest trial (``best``); ``vta run`` compiles it when
present. Concurrency: every write is one ``BEGIN IMMEDIATE`` transaction and readers never
block writers (WAL); a busy database is retried for ``BUSY_TIMEOUT_S``. Processes opening one
new file at once: each reads its header (application id and tables) in one snapshot, and the
one that finds it empty makes it a cache under the write lock (checked again there). A file
that is not an SQLite database, or one that is not a vta cache (another application's, or a
newer schema), is a ``CacheError`` naming the file, never a traceback.

Integrity: SQLite's ``PRAGMA quick_check`` runs on every open of a file that changed since it
last passed (a file with a damaged page is a ``CacheError`` saying so, for every command
alike; ``_check_integrity`` says how an unchanged file is known), and every record is checked
before use
(``vta.tune.tuner.lookup``: a point that is not JSON or not a point of the space is skipped
with a warning). A cache opened ``readonly`` (``vta run``'s lookups; a file this process may
not write) is read through SQLite's read-only mode, or as immutable when the directory is
read-only too (SQLite cannot make the WAL index there); a write to it is a ``CacheError``.

Other stores in the same file (a compile cache, issue 22) open it with ``Cache(path)`` and
add their tables with ``Cache.ensure_tables`` and their writes inside ``Cache.write()``:
integrity, the header checks, busy retries and error naming are then shared.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vta.config import HwConfig
from vta.errors import CacheError
from vta.version import __version__

__all__ = ["CacheError", "TuneKey", "Trial", "Tuning", "Cache", "default_cache_path",
           "compiler_version", "graph_version", "sources_version", "hw_digest", "open_cache",
           "lease_holder", "CACHE_ENV", "SCHEMA_VERSION", "LEASE_S", "CHECKED_SUFFIX",
           "SETTLED_S"]

#: The environment variable naming the cache file (``vta`` commands read it; ``--cache`` wins).
CACHE_ENV = "VTA_CACHE"
#: ``PRAGMA application_id`` of a vta cache ("vtaT")
APPLICATION_ID = 0x76746154
SCHEMA_VERSION = 1
#: seconds a writer waits for another writer's transaction
BUSY_TIMEOUT_S = 60.0

#: beside the cache file ``F``, ``F-checked``: the file's ``_stamp`` when its last ``quick_check``
#: passed (``Cache._check_integrity``)
CHECKED_SUFFIX = "-checked"
#: seconds since a file's last change (its ``ctime``) before a passing check is recorded: the
#: filesystem's clock ticks coarsely (a few milliseconds), so a write within the same tick as a
#: recorded change could leave the stamp as it was; past this, any write moves the ``ctime``
SETTLED_S = 1.0

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
#: added to a schema-1 cache when it is opened for writing (older files lack it: reading
#: needs no lease)
_LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    key TEXT NOT NULL, point TEXT NOT NULL, holder TEXT NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (key, point));
"""
#: seconds a lease on a point lasts when its holder cannot be checked (another host): longer
#: than any one trial takes; a holder on this host that has died loses its lease at once
LEASE_S = 900.0


@lru_cache(maxsize=1)
def compiler_version() -> str:
    """vta's version and a digest of the sources that make a program and time it (compiler,
    ISA, simulator, GPU backend, the config schema and the intrinsics registry)."""
    return sources_version(("compiler", "isa", "sim", "gpu"), ("config.py", "intrinsics.py"))


@lru_cache(maxsize=1)
def graph_version() -> str:
    """``compiler_version`` and a digest of the graph layer's sources (the built-in models,
    their calibration, the IR): what a built model depends on (a compile cache keeps built
    models under it, ``vta.tune.compile_cache.CompileCache.graph``)."""
    return f"{compiler_version()}+{sources_version(('graph',), ()).split('+')[1]}"


@lru_cache(maxsize=256)
def hw_digest(hw: HwConfig) -> str:
    """The content hash of what in ``hw`` makes a program and its cycles: every field but the
    name (a label), the claim to be stock VTA (``stock``: validated, it changes nothing) and
    the board (its clock and resources change neither) and the energy model's technology (it
    prices a run, it changes no program), so a sweep over clocks, boards or nodes, or a
    renamed copy, reuses the measurements (the tuning cache's and the compile cache's keys;
    ``vta.tune.tuner`` re-exports it). Remembered per config (equal configs, equal digests:
    the fields ``to_dict`` reads are those ``HwConfig`` compares and hashes): a warm ``vta run
    resnet18`` keys 23 kernels on one config, each digest a ``to_dict``, JSON and SHA-256."""
    d = hw.to_dict()
    d.pop("name")
    d.pop("stock")
    d.pop("board")
    d.pop("energy")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def sources_version(packages: tuple[str, ...], files: tuple[str, ...]) -> str:
    """vta's version and a digest of the ``.py`` files under the ``packages`` of ``vta/`` and
    of its ``files``, by relative path and content."""
    root = Path(__file__).resolve().parent.parent
    paths = sorted(p for sub in packages for p in (root / sub).rglob("*.py"))
    paths += [root / f for f in files]
    h = hashlib.sha256()
    for p in paths:
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

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise CacheError(f"{self.path}: is a directory; the cache is one SQLite file")
        if not readonly and self.path.exists() and not os.access(self.path, os.W_OK):
            raise CacheError(f"{self.path}: the tuning cache is read-only and this command "
                             f"writes to it; give a writable file with --cache or {CACHE_ENV} "
                             f"('vta run' reads a read-only cache)")
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                raise CacheError(f"{self.path}: no tuning cache there")
            self._db = self._connect_readonly()
            with self._errors("read"):
                self._check_header()
                self._check_integrity()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CacheError(f"{self.path}: cannot create its directory: {e.strerror or e}") \
                from None
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
            self._check_integrity()
            self.ensure_tables(_LEASES)

    def _connect_readonly(self) -> sqlite3.Connection:
        """The file opened read-only: SQLite's ``mode=ro`` (it still needs to create the WAL
        index beside a WAL file), else, when the directory forbids that too, ``immutable``
        (no locks: nothing else may be writing a file nobody can write)."""
        uri = f"file:{quote(str(self.path.resolve()))}"
        last = ""
        for mode in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=BUSY_TIMEOUT_S,
                                     isolation_level=None)
                db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.DatabaseError as e:
                last = str(e)
                if "not a database" in last or "malformed" in last:
                    break
        with self._errors("read"):
            raise sqlite3.DatabaseError(last)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ setup and errors

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as e:
            what = str(e)
            if "not a database" in what:
                raise CacheError(f"{self.path}: not a vta tuning cache (SQLite says: {what}); "
                                 f"remove it or give another file with --cache") from None
            if "malformed" in what:
                raise CacheError(f"{self.path}: the tuning cache is damaged (SQLite says: "
                                 f"{what}); remove it or give another file with --cache") \
                    from None
            if "readonly" in what or "read-only" in what:
                raise CacheError(f"{self.path}: the tuning cache is read-only and this "
                                 f"command writes to it (SQLite says: {what}); give a writable "
                                 f"file with --cache or {CACHE_ENV}") from None
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
            with self.write():
                app, tables = self._header()  # again, under the lock: another process may
                if app == 0 and not tables:   # have made it a cache since
                    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)
                    return
        self._check_header(app, tables)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")

    def _check_header(self, app: int | None = None, tables: set[str] | None = None) -> None:
        """A vta cache of this schema (``CacheError`` naming what the file is instead)."""
        if app is None or tables is None:
            app, tables = self._header()
        db = self._db
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

    def _check_integrity(self) -> None:
        """SQLite's ``quick_check`` (every page and index readable and consistent): a damaged
        file is a ``CacheError`` on open, not a wrong answer later. It is linear in the file's
        size (0.04 s for a 25 MB cache holding ResNet-18's programs and model, on every warm
        ``vta run``), so a file that has not changed since it last passed is not checked again:
        its ``_stamp`` (device, inode, size, modification and change times of the file and of
        its WAL) was recorded beside it then (``CHECKED_SUFFIX``). Whatever writes to the file
        afterwards, SQLite or a stray process, moves its change time (which no process can set
        back), so a file damaged after its check is checked, and named, at its next open; a
        verdict is recorded only for a file whose last change is ``SETTLED_S`` old (a write in
        the same tick of the filesystem's clock would not move it). Damage that no write makes
        (a failing disk) is not caught here, as it was not between two opens before: SQLite
        reports a page it cannot read as malformed (``_errors``: the same named error), and the
        compile cache's rows carry their SHA-256. The stamp is taken before the check (a write
        meanwhile leaves it stale: checked again next time); where it cannot be written (a
        read-only directory) every open checks."""
        stamp = _stamp(self.path)
        seal = self.path.with_name(self.path.name + CHECKED_SUFFIX)
        if stamp is not None and _read_seal(seal) == stamp[0]:
            return
        rows = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(3)")]
        if rows != ["ok"]:
            raise CacheError(f"{self.path}: the tuning cache is damaged (SQLite's quick_check: "
                             f"{'; '.join(rows)}); remove it or give another file with "
                             f"--cache")
        if stamp is not None and time.time() - stamp[1] >= SETTLED_S:
            try:
                seal.write_text(stamp[0])
            except OSError:  # a read-only directory: checked at every open
                pass

    #: SQLite and OS errors inside the block become one named ``CacheError`` (what another store
    #: in this file wraps its reads and writes in)
    errors = _errors

    def ensure_tables(self, ddl: str) -> None:
        """Run ``ddl`` (``CREATE TABLE IF NOT EXISTS ...`` statements) under the write lock: how
        another store in this file adds its tables. Nothing on a read-only cache."""
        if self.readonly:
            return
        with self._errors("write"), self.write():
            for stmt in ddl.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)

    @property
    def db(self) -> sqlite3.Connection:
        """The connection (for another store's reads, and its writes inside ``write()``)."""
        return self._db

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``: no deadlock between two
        readers upgrading), retried while another process holds the database."""
        if self.readonly:
            raise CacheError(f"{self.path}: the tuning cache was opened read-only; this "
                             f"command writes to it")
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
        with self._errors("write"), self.write():
            self._db.execute(
                "INSERT OR IGNORE INTO ops VALUES (?,?,?,?,?,?,?,?,?)",
                (key.digest, key.op, key.dtypes, key.target, key.hw_hash, key.hw_name,
                 key.compiler, key.space, time.time()))
        return key.digest

    def add_trial(self, key: str, point: str, cost: float | None, *, refused: str | None = None,
                  method: str, seconds: float, measured_at: float | None = None) -> None:
        """Commit one measured point (a later measurement of the same point replaces it) and
        end its lease."""
        with self._errors("write"), self.write():
            self._db.execute(
                "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?)",
                (key, point, cost, refused, method,
                 time.time() if measured_at is None else measured_at, seconds, _host()))
            self._db.execute("DELETE FROM leases WHERE key=? AND point=?", (key, point))

    def lease(self, key: str, points: list[str], holder: str | None = None
              ) -> tuple[set[str], dict[str, Trial]]:
        """Claim ``points`` of ``key`` for measuring, in one transaction: the points this
        process may measure now (no trial, and no live lease of another holder: taken), and
        the trials already committed for any of them (by another process since this one read
        the cache). The rest are being measured elsewhere: ask again later (``lease`` takes
        over a point whose holder died or whose lease expired)."""
        me = holder or lease_holder()
        now = time.time()
        got: set[str] = set()
        done: dict[str, Trial] = {}
        with self._errors("write"), self.write():
            for p in points:
                row = self._db.execute("SELECT * FROM trials WHERE key=? AND point=?",
                                       (key, p)).fetchone()
                if row is not None:
                    done[p] = Trial(*row)
                    continue
                held = self._db.execute("SELECT holder, expires FROM leases WHERE key=? AND "
                                        "point=?", (key, p)).fetchone()
                if held is None or held[0] == me or held[1] < now or not _alive(held[0]):
                    self._db.execute("INSERT OR REPLACE INTO leases VALUES (?,?,?,?)",
                                     (key, p, me, now + LEASE_S))
                    got.add(p)
        return got, done

    def release(self, key: str, points: list[str], holder: str | None = None) -> None:
        """End this process's leases on ``points`` of ``key`` (a job that stops early)."""
        me = holder or lease_holder()
        with self._errors("write"), self.write():
            self._db.executemany("DELETE FROM leases WHERE key=? AND point=? AND holder=?",
                                 [(key, p, me) for p in points])

    def add_tuning(self, t: Tuning) -> None:
        """Record a finished tuning job."""
        with self._errors("write"), self.write():
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
        with self._errors("clear"), self.write():
            n = self._db.execute("DELETE FROM trials WHERE key LIKE ?", (like,)).rowcount
            self._db.execute("DELETE FROM leases WHERE key LIKE ?", (like,))
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
            try:
                rec["point"] = json.loads(rec["point"])
            except (TypeError, ValueError) as e:  # a damaged record is exported as it is
                rec["point_error"] = f"not JSON: {e}"
            yield rec

    def integrity(self) -> str:
        """SQLite's integrity check ("ok" for a sound file)."""
        with self._errors("check"):
            return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])


def _stamp(path: Path) -> tuple[str, float] | None:
    """What the filesystem says of the cache file at ``path`` and of its WAL (``-wal``; an
    empty or absent one holds nothing): device, inode, size, modification and change times
    (ns), as one line; and the latest change time (Unix seconds). None when the file cannot
    be read so."""
    parts: list[str] = []
    changed = 0.0
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = p.stat()
        except FileNotFoundError:
            if p == path:
                return None
            st = None
        except OSError:
            return None
        if st is None or (p != path and st.st_size == 0):
            parts.append("-")
            continue
        parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
        changed = max(changed, st.st_ctime_ns / 1e9, st.st_mtime_ns / 1e9)
    return " ".join(parts), changed


def _read_seal(seal: Path) -> str | None:
    """The stamp recorded at ``seal`` (``Cache._check_integrity``); None when there is none."""
    try:
        return seal.read_text()
    except (OSError, UnicodeDecodeError):
        return None


@lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


def lease_holder() -> str:
    """This process as a lease holder: ``host:pid``."""
    return f"{_host()}:{os.getpid()}"


def _alive(holder: str) -> bool:
    """Whether the process holding a lease still runs (a holder on another host is taken to
    run until its lease expires)."""
    host, _, pid = holder.rpartition(":")
    if host != _host() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@contextmanager
def open_cache(path: Path | None, *, create: bool) -> Iterator[Cache | None]:
    """The cache at ``path`` for the duration of a ``with``; None when ``path`` is None (no
    cache) or, unless ``create``, when no file is there (a lookup never creates one, and
    reads the file read-only: a cache this process may not write is still used)."""
    if path is None or (not create and not path.exists()):
        yield None
        return
    with Cache(path, readonly=not create) as c:
        yield c
