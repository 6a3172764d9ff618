"""A throwaway PostgreSQL server for the tests: initdb in a temp folder, pg_ctl on a free port.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user (runuser),
as any other user it runs as that user. `PostgresServer.database()` makes a fresh database for one
test, reached as a role with a password (so tests can check that no password leaks). The session
fixture `postgres` in tests/conftest.py starts one server for the whole run.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.helpers import free_port

__all__ = ["PostgresServer", "find_bindir"]

USER, PASSWORD = "kbtest", "pw-" + secrets.token_hex(8)


def find_bindir() -> Path | None:
    """The folder of initdb and pg_ctl (Debian keeps them off PATH), or None when not installed."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True):
        return Path(found).parent
    return None


class PostgresServer:
    """One PostgreSQL cluster in a temp folder, on 127.0.0.1 and a free port; `stop()` removes it."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.folder = Path(tempfile.mkdtemp(prefix="kbserver-pg-"))
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres", "postgres")
        self._n = 0

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=120)

    @property
    def pgdata(self) -> str:
        return str(self.folder / "pgdata")

    def start(self) -> PostgresServer:
        if not (self.folder / "pgdata").exists():
            pw = self.folder / "pw"
            pw.write_text("unused\n")
            if self._as:
                shutil.chown(pw, "postgres", "postgres")
            self._run(
                str(self.bindir / "initdb"), "-D", self.pgdata, "-U", "postgres", "--no-sync",
                "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pw}", "-E", "UTF8",
            )  # fmt: skip
        self.resume()
        with self.admin() as db:
            db.execute(f"CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        return self

    def resume(self) -> None:
        """Start the server (again) on the same port and data."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"), "-D", self.pgdata, "-o", options, "-l", str(self.folder / "log"),
            "-w", "-t", "60", "start",
        )  # fmt: skip

    def pause(self) -> None:
        """Stop the server, keeping its data (to test what a node does without its database)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", self.pgdata, "-m", "fast", "-w", "stop")

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """A superuser connection over the server's Unix socket (autocommit)."""
        return psycopg.connect(
            host=str(self.folder), port=self.port, user="postgres", dbname="postgres", autocommit=True
        )

    def database(self) -> str:
        """A fresh, empty database owned by the test role; returns its URL (with the password)."""
        self._n += 1
        name = f"kb_{os.getpid()}_{self._n}_{int(time.time() * 1000) % 100000}"
        with self.admin() as db:
            db.execute(f"CREATE DATABASE {name} OWNER {USER}")
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{name}"

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin() as db:
            db.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        try:
            self.pause()
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(self.folder, ignore_errors=True)
