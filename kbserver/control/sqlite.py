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
from kbserver.core.errors import Busy, InvalidRequest
from kbserver.core.inputs import UNSTORABLE

__all__ = ["BUSY_SECONDS", "SqliteControlStore"]

BUSY_SECONDS = 5.0
"""How long a statement waits for another process's lock on control.db before it is 503 `busy`."""
MIGRATE_BUSY_SECONDS = 60.0


@contextmanager
def _busy_is_busy() -> Iterator[None]:
    """SQLite's `database is locked` (another process's transaction outlasted BUSY_SECONDS) as Busy."""
    try:
        yield
    except UnicodeEncodeError:  # a lone surrogate, which no edge let by: SQLite cannot encode it
        raise InvalidRequest(UNSTORABLE) from None
    except sqlite3.OperationalError as err:
        text = str(err)
        if "locked" not in text and "busy" not in text:
            raise
        raise Busy(
            f"the control database is locked by another process for more than {BUSY_SECONDS:g} s; "
            "retry in a moment",
            retry_after=2,
        ) from None


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
            db = self._db()
            # Opening waits longer: several processes starting at once each run the migrations.
            db.execute(f"PRAGMA busy_timeout = {int(MIGRATE_BUSY_SECONDS * 1000)}")
            try:
                self._version = migrate(db)
            finally:
                db.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
        except BaseException:
            self.close()
            raise

    def schema_version(self) -> int:
        return self._version

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path,
                timeout=BUSY_SECONDS,
                isolation_level=None,
                check_same_thread=False,
                factory=_Connection,
            )
            with self._open_lock:
                self._open.add(db)
            db.row_factory = sqlite3.Row
            with _busy_is_busy():
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        with _busy_is_busy():
            db.execute("BEGIN IMMEDIATE")
        try:
            with _busy_is_busy():
                yield db
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        with _busy_is_busy():
            try:
                db.execute("COMMIT")
            except sqlite3.OperationalError:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        """Close the connection of every thread (a thread that goes on would open a new one)."""
        with self._open_lock:
            opened, self._open = list(self._open), weakref.WeakSet()
        for db in opened:
            db.close()
        self._local = threading.local()

    def ping(self, timeout: float = 2.0) -> None:
        with _busy_is_busy():
            self._db().execute("SELECT 1").fetchone()

    def _select(self, sql: str, args: Sequence[object]) -> list[Any]:
        with _busy_is_busy():  # autocommit: a read takes no write lock (but may meet a checkpoint's)
            return self._db().execute(sql, args).fetchall()

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
