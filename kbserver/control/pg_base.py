"""PostgreSQL plumbing of the control store: the connection pool, errors without secrets, the schema.

A database that cannot be reached is `Unavailable` (503) with a one-line message that names the
server without its password; the pool replaces broken connections, so the store works again as soon
as PostgreSQL is back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from kbserver.control.pg_migrations import applied_postgres, migrate_postgres
from kbserver.core.errors import Unavailable

__all__ = ["Conn", "PostgresBase", "safe_url"]

Conn = psycopg.Connection[DictRow]


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
        self, url: str, *, max_connections: int = 10, wait_seconds: float = 10.0, migrate: bool = True
    ) -> None:
        self.where = safe_url(url)
        self._password = str(psycopg.conninfo.conninfo_to_dict(url).get("password") or "")
        timeout = max(1, int(wait_seconds))
        try:  # one plain connection first: its error says why (the pool's would only say "timed out")
            psycopg.connect(url, connect_timeout=timeout).close()
        except psycopg.Error as err:
            raise self._unreachable(err) from None
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            timeout=wait_seconds,
            open=False,
            check=ConnectionPool.check_connection,  # a connection that died with the server is replaced
            kwargs={"connect_timeout": timeout, "row_factory": dict_row},
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
            retry_after=5,
        )

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction on a pooled connection: committed on success, rolled back on error."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as err:
            raise self._unreachable(err) from None

    def transaction(self) -> contextlib.AbstractContextManager[Conn]:
        """One transaction on a pooled connection (for the parts built on this store). Raises Unavailable."""
        return self._tx()

    def ping(self, timeout: float = 2.0) -> None:
        """Raises Unavailable unless the database answers within about `timeout` seconds."""
        try:
            with self._pool.connection(timeout=timeout) as conn:
                conn.execute("SELECT 1")
        except (psycopg.OperationalError, PoolTimeout) as err:
            raise self._unreachable(err) from None

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

    # -- schema -------------------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply the migrations the database lacks (one node at a time); returns the schema version.

        Raises Unavailable when the database's schema is newer than this kbserver knows.
        """
        with self._tx() as db:
            migrate_postgres(db, self.where)
        return self.applied_version()

    def applied_version(self) -> int:
        """The last migration recorded in the database (0 before the first); refuses a newer schema."""
        with self._tx() as db:
            return applied_postgres(db, self.where)

    def schema_version(self) -> int:
        return self._version
