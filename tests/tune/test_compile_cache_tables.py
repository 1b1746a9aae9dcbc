"""The compile cache asks the file whether it has its tables until it has them
(``CompileCache._table``): a warm ``vta run resnet18`` asked SQLite's schema once per kernel;
a read-only cache written before the table existed still answers every request a miss."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from vta.config import HwConfig
from vta.tune.cache import Cache
from vta.tune.compile_cache import CompileCache

ROOT = Path(__file__).resolve().parents[2]


class _Counting:
    """A connection that counts the statements reading SQLite's schema table."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db, self.schema_reads = db, 0

    def execute(self, sql: str, *a: Any) -> Any:
        self.schema_reads += "sqlite_master" in sql
        return self.db.execute(sql, *a)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_the_schema_is_read_once_for_many_requests(tmp_path: Path) -> None:
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    with Cache(tmp_path / "c.sqlite") as cache:
        memo = CompileCache(cache, hw)
        counting = _Counting(cache.db)
        cache._db = counting  # type: ignore[assignment]
        for k in range(5):
            assert memo.get(f"request {k}") is None
        assert memo.count() == 0
        assert counting.schema_reads == 1
        assert memo.stats["misses"] == 5


def test_a_file_without_the_table_is_asked_again(tmp_path: Path) -> None:
    """A table not there (a read-only file from before it) is not remembered as there."""
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    with Cache(tmp_path / "c.sqlite") as cache:
        memo = CompileCache(cache, hw)
        cache.db.execute("DROP TABLE compiled")
        counting = _Counting(cache.db)
        cache._db = counting  # type: ignore[assignment]
        assert memo.get("a") is None and memo.get("b") is None
        assert counting.schema_reads == 2
