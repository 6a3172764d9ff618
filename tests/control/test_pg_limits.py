"""Every PostgreSQL connection a node opens carries its bounds: the pool's connections and the LISTEN
connection (also once it reconnected) run their sessions with `statement_timeout`, `lock_timeout` and
`idle_in_transaction_session_timeout`, and their sockets have TCP keepalives and `tcp_user_timeout`
set in the kernel. The fault tests (tests/cluster/test_faults.py) show the bounds hold; this shows
each limit is in place, read back from the server and from the socket itself."""

from __future__ import annotations

import socket
import time
from typing import Any

import psycopg
import pytest
from psycopg.rows import tuple_row

from kbserver.control import PostgresControlStore
from kbserver.control.pg_watch import KEEPALIVES, LIMITS
from kbserver.core.errors import Unavailable


def _session_limits(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """The session's limits in milliseconds, as the server applies them."""
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(LIMITS),))
        return {str(name): int(setting) for name, setting in rows.fetchall()}


def _socket_options(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """The TCP options of the connection's socket, read from the kernel."""
    sock = socket.socket(fileno=conn.pgconn.socket)
    try:
        return {
            "keepalives": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "keepalives_interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "keepalives_count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "tcp_user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }
    finally:
        sock.detach()  # the descriptor stays libpq's


def _assert_bounded(conn: psycopg.Connection[Any]) -> None:
    limits = _session_limits(conn)
    assert limits == LIMITS, limits
    assert all(0 < ms <= 10_000 for ms in limits.values()), limits  # bounds, not "no limit" (0)
    options = _socket_options(conn)
    assert options == {name: int(value) for name, value in KEEPALIVES.items()}, options
    assert options["keepalives"] == 1 and 0 < options["tcp_user_timeout"] <= 10_000


def test_every_pooled_connection_is_bounded(postgres_url: str) -> None:
    store = PostgresControlStore(postgres_url, max_connections=2)
    try:
        with store.transaction() as first, store.transaction() as second:  # two of the pool's connections
            assert first is not second
            for conn in (first, second):
                _assert_bounded(conn)
    finally:
        store.close()


def test_the_listen_connection_is_bounded_and_again_once_it_reconnected(postgres_url: str) -> None:
    store = PostgresControlStore(postgres_url)
    listener = store.heads.listen()
    try:
        assert listener._conn is not None
        _assert_bounded(listener._conn)
        backend = listener._conn.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # noticed, then listening again on a new connection
            listener.wait(0.2)
            conn = listener._conn
            if conn is not None and not conn.broken and conn.info.backend_pid != backend:
                break
            time.sleep(0.1)
        assert listener._conn is not None and listener._conn.info.backend_pid != backend
        _assert_bounded(listener._conn)
    finally:
        listener.close()
        store.close()


def test_a_transaction_ended_by_the_idle_limit_is_unavailable_and_the_next_one_works(
    postgres_url: str,
) -> None:
    """A node paused in a transaction (SIGSTOPped, a VM paused, a long GC) past the server's idle
    limit finds its session ended when it runs again: that is the store out of reach (503, retry),
    not an internal error. psycopg classes the server's error as InternalError (SQLSTATE 25P03)."""
    store = PostgresControlStore(postgres_url, max_connections=2)
    try:
        with pytest.raises(Unavailable) as raised, store.transaction() as db:
            backend = db.info.backend_pid
            db.execute("SET idle_in_transaction_session_timeout = 100")  # the limit, shortened for the test
            with psycopg.connect(postgres_url, autocommit=True) as admin:  # until the server ended it
                deadline = time.monotonic() + 60
                while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,)).fetchone():
                    assert time.monotonic() < deadline, "the server never ended the idle transaction"
                    time.sleep(0.05)
            db.execute("SELECT 1")  # today: IdleInTransactionSessionTimeout, a 500
        assert "idle-in-transaction" in raised.value.message, raised.value.message
        with store.transaction() as db:  # the pool replaced the ended connection
            assert db.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    finally:
        store.close()
