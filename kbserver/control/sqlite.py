"""The SQLite ControlStore: one connection per thread, WAL, short BEGIN IMMEDIATE transactions (the
data methods are `SqlStore`'s, shared with PostgreSQL)."""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kbserver.control.migrations import migrate
from kbserver.control.rows import (
    MemoryAccessRow,
    access_row,
)
from kbserver.control.sql import SqlStore

__all__ = ["SqliteControlStore"]


class _Connection(sqlite3.Connection):
    """A connection that can be referenced weakly (sqlite3.Connection itself cannot)."""


class SqliteControlStore(SqlStore):
    """The control database in one SQLite file. Safe to share between threads and between processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # Every thread's connection, to close them all; weak, so a finished thread's goes with it.
        self._open: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._open_lock = threading.Lock()
        try:
            self._version = migrate(self._db())
        except BaseException:
            self.close()
            raise

    def schema_version(self) -> int:
        return self._version

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False, factory=_Connection
            )
            with self._open_lock:
                self._open.add(db)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection of every thread (a thread that goes on would open a new one)."""
        with self._open_lock:
            opened, self._open = list(self._open), weakref.WeakSet()
        for db in opened:
            db.close()
        self._local = threading.local()

    def ping(self, timeout: float = 2.0) -> None:
        self._db().execute("SELECT 1").fetchone()

    def _select(self, sql: str, args: Sequence[object]) -> list[Any]:
        return self._db().execute(sql, args).fetchall()  # autocommit: a read takes no write lock

    def integrity_errors(self) -> list[str]:
        rows = self._db().execute("PRAGMA integrity_check").fetchall()
        problems = [r[0] for r in rows if r[0] != "ok"]
        problems += [f"foreign key: {tuple(r)}" for r in self._db().execute("PRAGMA foreign_key_check")]
        return problems

    # -- retrievals of memories ---------------------------------------------------------------------
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        found: dict[str, MemoryAccessRow] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 500):  # SQLite caps the number of parameters
            chunk = wanted[start : start + 500]
            rows = self._rows(
                f"SELECT * FROM memory_access WHERE slug = ? AND id IN ({','.join('?' * len(chunk))})",
                (slug, *chunk),
            )
            found.update((r["id"], access_row(r)) for r in rows)
        return found
