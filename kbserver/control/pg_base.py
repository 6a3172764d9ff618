"""PostgreSQL plumbing of the control store: the connection pool, errors without secrets, the schema.

A database that cannot be reached is `Unavailable` (503) with a one-line message that names the
server without its password; the pool replaces broken connections, so the store works again as soon
as PostgreSQL is back. Every transaction has a budget (`TX_SECONDS`, the wait for a pooled
connection included) that the watchdog of `pg_watch` enforces, so a silent network costs a request
seconds, not minutes; while the store fails, the next transactions get `FAILING_SECONDS`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from kbserver.control.pg_migrations import applied_postgres, migrate_postgres
from kbserver.control.pg_watch import CONNECT_SECONDS, Watchdog, connection_kwargs
from kbserver.core.errors import Busy, InvalidRequest, Unavailable
from kbserver.core.inputs import UNSTORABLE

__all__ = ["FAILING_SECONDS", "TX_SECONDS", "Conn", "PostgresBase", "safe_url"]

Conn = psycopg.Connection[DictRow]

TX_SECONDS = 6.0  # one transaction, from asking the pool to COMMIT (the server's statement_timeout: 4 s)
FAILING_SECONDS = 3.0  # the budget while the last transaction failed: a request's next calls fail sooner
MIGRATE_SECONDS = 120.0  # migrations (and the wait for another node's) may take longer
_RETRY_AFTER = 5
# The server ended a session that sat in its transaction past the idle limit (this process paused:
# SIGSTOPped, a VM paused): psycopg classes it InternalError (SQLSTATE 25P03), yet the store was only
# out of this process's reach, like a lost connection (and so is PostgreSQL 17's transaction_timeout).
_SESSION_ENDED = (psycopg.errors.IdleInTransactionSessionTimeout, psycopg.errors.TransactionTimeout)


def safe_url(url: str) -> str:
    """`url` without its password (for logs and errors): postgresql://USER@HOST:PORT/DB."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable URL)"
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{info.get('host', '')}{port}/{info.get('dbname', '')}"


class PostgresBase:
    """A pool of connections to one PostgreSQL database, migrated on open."""

    def __init__(
        self, url: str, *, max_connections: int = 10, wait_seconds: float = TX_SECONDS, migrate: bool = True
    ) -> None:
        self.where = safe_url(url)
        self._password = str(psycopg.conninfo.conninfo_to_dict(url).get("password") or "")
        self._budget = wait_seconds
        self._failing = False  # the last transaction could not reach the database
        self._deadline = threading.local()  # the monotonic deadline of this thread's transaction
        self.watchdog = Watchdog()
        self.connect_kwargs = connection_kwargs(url)
        try:  # one plain connection first: its error says why (the pool's would only say "timed out")
            psycopg.connect(url, **self.connect_kwargs).close()
        except psycopg.Error as err:
            raise self._unreachable(err) from None
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            timeout=wait_seconds,
            open=False,
            check=self._check,  # a connection that died with the server is replaced
            kwargs={**self.connect_kwargs, "row_factory": dict_row},
            reconnect_timeout=2 * CONNECT_SECONDS,  # then a slot is given up and grown again on demand
            name="kbserver-control",
        )
        try:
            self._pool.open(wait=True, timeout=wait_seconds)
        except PoolTimeout as err:
            self._pool.close()
            raise self._unreachable(err) from None
        try:
            self._version = self.migrate() if migrate else self.applied_version()
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------------
    def _unreachable(self, err: Exception) -> Unavailable:
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if self._password:
            text = text.replace(self._password, "***")
        return Unavailable(
            f"the control store {self.where} is unreachable ({text}); check that PostgreSQL runs and "
            "accepts this node, then retry",
            retry_after=_RETRY_AFTER,
        )

    def _busy(self, err: Exception) -> Busy:
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return Busy(f"the control store {self.where} is busy ({text}); retry in a moment", retry_after=1)

    def _check(self, conn: Conn) -> None:
        """The pool's check of a connection before it is handed out, within this transaction's budget."""
        left = getattr(self._deadline, "at", time.monotonic() + FAILING_SECONDS) - time.monotonic()
        with self.watchdog.bounded(conn, max(0.5, left)):
            ConnectionPool.check_connection(conn)

    @contextmanager
    def _tx(self, seconds: float | None = None) -> Iterator[Conn]:
        """One transaction on a pooled connection: committed on success, rolled back on error; the
        whole of it (pool, check, statements, COMMIT) within `seconds`, else Unavailable."""
        budget = (
            seconds
            if seconds is not None
            else min(FAILING_SECONDS, self._budget)
            if self._failing
            else self._budget
        )
        self._deadline.at = time.monotonic() + budget
        conn: Conn | None = None
        try:
            conn = self._pool.getconn(timeout=budget)
            with self.watchdog.bounded(conn, max(0.1, self._deadline.at - time.monotonic())), conn:
                yield conn
        except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as err:
            raise self._busy(err) from None  # reachable, but a limit of the session ran out
        except (psycopg.OperationalError, *_SESSION_ENDED, PoolTimeout) as err:
            self._failing = True
            cut = conn is not None and self.watchdog.cut(conn)
            raise self._unreachable(
                TimeoutError(f"no answer within {budget:.0f} s") if cut else err
            ) from None
        except (psycopg.DataError, UnicodeEncodeError):  # NUL, a lone surrogate: what no edge let by
            raise InvalidRequest(UNSTORABLE) from None
        finally:
            if conn is not None:
                self._pool.putconn(conn)
        self._failing = False

    def transaction(self) -> contextlib.AbstractContextManager[Conn]:
        """One transaction on a pooled connection (for the parts built on this store). Raises Unavailable."""
        return self._tx()

    def ping(self, timeout: float = 2.0) -> None:
        """Raises Unavailable unless the database answers within about `timeout` seconds."""
        with self._tx(timeout) as conn:
            conn.execute("SELECT 1")

    def _all(self, sql: str, args: Sequence[object] = ()) -> list[DictRow]:
        with self._tx() as db:
            return db.execute(sql, args).fetchall()

    def _one(self, sql: str, args: Sequence[object] = ()) -> DictRow | None:
        with self._tx() as db:
            return db.execute(sql, args).fetchone()

    def _count(self, sql: str, args: Sequence[object] = ()) -> int:
        with self._tx() as db:
            return db.execute(sql, args).rowcount

    def close(self) -> None:
        self._pool.close()
        self.watchdog.close()

    # -- schema -------------------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply the migrations the database lacks (one node at a time); returns the schema version.

        Raises Unavailable when the database's schema is newer than this kbserver knows.
        """
        with self._tx(MIGRATE_SECONDS) as db:
            db.execute("SET LOCAL statement_timeout = 0")  # DDL on a big table, another node's turn
            db.execute("SET LOCAL lock_timeout = '100s'")
            migrate_postgres(db, self.where)
        return self.applied_version()

    def applied_version(self) -> int:
        """The last migration recorded in the database (0 before the first); refuses a newer schema."""
        with self._tx() as db:
            return applied_postgres(db, self.where)

    def schema_version(self) -> int:
        return self._version
