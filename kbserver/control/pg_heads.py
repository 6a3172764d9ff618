"""The shared log of new heads in PostgreSQL: a row per new version plus NOTIFY, for every node.

A node's follower hears of another node's commits by LISTEN (at once) and reads them from the
`heads` table, which it also reads every second or so: a notification lost while a connection was
down is caught up from the table. Rows older than an hour are trimmed; the follower's reconcile
(every KB's head against every sink, every minute) covers whatever a node missed beyond that.

Publishing takes no lock shared by nodes: ids come from the table's sequence, so a row may commit
after a row with a higher id. Readers ask for the ids they have not seen below the highest they
have (`since(after, missing)`) for as long as a publisher's transaction can last (`GAP_SECONDS`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from typing import Any

import psycopg

from kbserver.control.pg_base import TX_SECONDS, PostgresBase
from kbserver.control.pg_watch import Watchdog
from kbserver.core.errors import Unavailable

__all__ = ["CHANNEL", "GAP_SECONDS", "HeadListener", "PostgresHeads"]

log = logging.getLogger(__name__)

CHANNEL = "kbserver_heads"
KEEP_SECONDS = 3600.0
# An id allocated and not committed after this long never will be (the transaction that took it is
# past its budget and the server's idle limit): a reader stops asking for it.
GAP_SECONDS = 4 * TX_SECONDS
_RECONNECT_SECONDS = 1.0
_CHECK_SECONDS = 3.0


class PostgresHeads:
    """New heads of every node (`heads` table + NOTIFY on `kbserver_heads`)."""

    gap_seconds = GAP_SECONDS

    def __init__(self, base: PostgresBase, url: str) -> None:
        self._base, self._url = base, url

    def publish(self, slug: str, version: str) -> None:
        """Record `version` as the new head of `slug` and wake every listening node (no lock: a
        reader of `since` asks again for the ids it has not seen)."""
        now = time.time()
        with self._base.transaction() as db:
            row = db.execute(
                "INSERT INTO heads (slug, version, at) VALUES (%s, %s, %s) RETURNING id", (slug, version, now)
            ).fetchone()
            assert row is not None
            db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(row["id"])))
            if int(row["id"]) % 1000 == 0:
                db.execute("DELETE FROM heads WHERE at < %s", (now - KEEP_SECONDS,))

    def since(
        self, after: int, missing: Collection[int] = (), limit: int = 1000
    ) -> list[tuple[int, str, str]]:
        """(id, slug, version) of the heads recorded after id `after` or with an id in `missing`,
        by id, at most `limit`."""
        with self._base.transaction() as db:
            rows = db.execute(
                "SELECT id, slug, version FROM heads WHERE id > %s OR id = ANY(%s) ORDER BY id LIMIT %s",
                (after, list(missing), limit),
            ).fetchall()
        return [(int(r["id"]), str(r["slug"]), str(r["version"])) for r in rows]

    def last(self) -> int:
        """The id of the newest head recorded (0 before the first)."""
        with self._base.transaction() as db:
            row = db.execute("SELECT coalesce(max(id), 0) AS last FROM heads").fetchone()
        return int(row["last"]) if row else 0

    def listen(self) -> HeadListener:
        return HeadListener(self._url, self._base.where, self._base.watchdog, self._base.connect_kwargs)


class HeadListener:
    """A connection of its own that LISTENs; `woken()` says whether a head was published since.

    Every wait on it is bounded: the connection has the pool's keepalives and limits, and `check()`
    is cut by the watchdog when the server does not answer, after which `woken()` connects again."""

    def __init__(self, url: str, where: str, watchdog: Watchdog, kwargs: dict[str, Any]) -> None:
        self._url, self._where, self._watchdog, self._kwargs = url, where, watchdog, kwargs
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._next_try = 0.0
        self._connect()

    def _connect(self) -> bool:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        try:
            conn = psycopg.connect(self._url, autocommit=True, **self._kwargs)
            with self._watchdog.bounded(conn, _CHECK_SECONDS):
                conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            if conn is not None:
                conn.close()
            self._next_try = time.monotonic() + _RECONNECT_SECONDS
            return False
        self._conn = conn
        return True

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for a notification; True when one came (or listening started
        again, see `woken`). Returns at once while not connected and not yet due to try again."""
        if self._conn is None or self._conn.broken:
            return self.woken()
        try:
            return any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1))
        except psycopg.Error:
            log.warning("lost the LISTEN connection to the control store %s; listening again", self._where)
            self.close()
            return False

    def woken(self) -> bool:
        """True when a notification arrived, or when listening started again after a lost connection
        (notifications may have been missed: read the table)."""
        if self._conn is None or self._conn.broken:
            self.close()
            if time.monotonic() < self._next_try:
                return False
            return self._connect()
        try:
            return any(True for _ in self._conn.notifies(timeout=0))
        except psycopg.Error:
            log.warning("lost the LISTEN connection to the control store %s; listening again", self._where)
            self.close()
            return False

    def check(self) -> None:
        """Ask the server something, so a connection that died silently is noticed. Raises Unavailable."""
        if self._conn is None:
            raise Unavailable(f"not listening to the control store {self._where}")
        try:
            with self._watchdog.bounded(self._conn, _CHECK_SECONDS):
                self._conn.execute("SELECT 1")
        except psycopg.Error:
            self.close()
            raise Unavailable(f"lost the LISTEN connection to the control store {self._where}") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
