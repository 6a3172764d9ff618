"""Bounds on every wait for PostgreSQL: connection parameters, session limits, and a watchdog.

The server's own limits (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`)
bound what PostgreSQL does; TCP keepalives and `tcp_user_timeout` make the kernel give up on a peer
that went silent. Neither helps while a middlebox keeps the socket open and forwards nothing (the
server never sees the query, the kernel sees acknowledgements), so the `Watchdog` shuts down the
socket of a connection whose transaction outlived its deadline: libpq then fails at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

__all__ = ["CONNECT_SECONDS", "LIMITS", "Watchdog", "connection_kwargs"]

CONNECT_SECONDS = 5  # libpq's connect_timeout: the whole handshake, TLS and authentication included
# The server-side limits of every session (milliseconds). A statement is cancelled by the server
# before the watchdog would cut its connection; a node that vanished mid-transaction releases its
# row locks after the idle limit.
LIMITS = {
    "statement_timeout": 4000,
    "lock_timeout": 3000,
    "idle_in_transaction_session_timeout": 10000,
}
KEEPALIVES = {  # a silent peer found in about idle + interval * count = 9 s, even between requests
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 6000,  # ms: data sent and not acknowledged this long fails the connection
}


def connection_kwargs(url: str) -> dict[str, Any]:
    """libpq parameters for a connection to `url`: keepalives, the connect timeout and the session
    limits (appended to the URL's own `options`, so an operator's settings are kept)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    limits = " ".join(f"-c {name}={value}" for name, value in LIMITS.items())
    options = f"{info.get('options') or ''} {limits}".strip()
    return {**KEEPALIVES, "connect_timeout": CONNECT_SECONDS, "options": options}


class Watchdog:
    """Cuts the connections whose bounded section (`bounded`) outlived its deadline.

    One daemon thread per store, started with the first bounded section; it looks every 0.2 s, so a
    deadline holds within that much. A cut connection raises `psycopg.OperationalError` in the
    thread that used it, and `cut()` says so afterwards (for an error that names the cause)."""

    TICK = 0.2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._cut: set[int] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @contextlib.contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
        """The section in the `with` block fails within about `seconds` (its connection is cut)."""
        key = id(conn)
        with self._lock:
            self._due[key] = (time.monotonic() + seconds, conn)
            self._cut.discard(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kbserver-pg-watchdog", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._due.pop(key, None)

    def cut(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the watchdog cut `conn` in its last bounded section."""
        with self._lock:
            return id(conn) in self._cut

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.TICK):
            now = time.monotonic()
            with self._lock:
                late = [(key, conn) for key, (due, conn) in self._due.items() if due <= now]
                for key, conn in late:  # under the lock: the section cannot end and reuse it meanwhile
                    del self._due[key]
                    self._cut.add(key)
                    _shut(conn)


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down (both ways): a read or write blocked on it returns at once."""
    try:
        fd = conn.pgconn.socket
    except psycopg.Error:
        return  # closed already
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
