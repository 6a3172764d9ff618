"""PostgreSQL control store only: unreachable databases, recovery, migrations, newer schemas, the CLI."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from kbserver.control import PostgresControlStore, SqliteControlStore, safe_url
from kbserver.control.pg_migrations import PG_MIGRATIONS
from kbserver.core.errors import Unavailable
from tests.helpers import free_port
from tests.pg import PASSWORD, PostgresServer


def test_safe_url_drops_the_password() -> None:
    assert safe_url("postgresql://kb:s3cret@db.example:5433/kbs") == "postgresql://kb@db.example:5433/kbs"
    assert "s3cret" not in safe_url("postgresql://kb:s3cret@/kbs?host=/run/pg")


def test_an_unreachable_database_is_one_line_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    url = f"postgresql://kb:{PASSWORD}@127.0.0.1:{free_port()}/kbs"
    with caplog.at_level(logging.DEBUG), pytest.raises(Unavailable) as err:
        PostgresControlStore(url, wait_seconds=2)
    message = err.value.message
    assert "\n" not in message and PASSWORD not in message
    assert f"postgresql://kb@127.0.0.1:{url.split(':')[3].split('/')[0]}/kbs" in message
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)


def test_a_wrong_password_is_refused_without_echoing_it(postgres_url: str) -> None:
    wrong = postgres_url.replace(PASSWORD, "not-the-password-123")
    with pytest.raises(Unavailable) as err:
        PostgresControlStore(wrong, wait_seconds=3)
    assert "not-the-password-123" not in err.value.message and "\n" not in err.value.message


def test_the_store_answers_again_once_postgres_is_back(
    own_postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = own_postgres.database()
    store = PostgresControlStore(url, wait_seconds=2)
    try:
        assert store.add_kb("notes", "Team notes")
        own_postgres.pause()
        with caplog.at_level(logging.DEBUG), pytest.raises(Unavailable) as err:
            store.kb("notes")
        assert "unreachable" in err.value.message and PASSWORD not in err.value.message
        assert "\n" not in err.value.message
        assert all(PASSWORD not in r.getMessage() for r in caplog.records)
        own_postgres.resume()
        for _ in range(50):  # the pool replaces its dead connections; bounded
            try:
                row = store.kb("notes")
                break
            except Unavailable:
                continue
        assert row is not None and row.description == "Team notes"
        assert store.add_kb("more", "") and [r.slug for r in store.kbs()] == ["more", "notes"]
    finally:
        store.close()


def test_nodes_starting_together_migrate_once(postgres_url: str) -> None:
    opened: list[PostgresControlStore] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresControlStore(postgres_url, max_connections=2))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert errors == [] and len(opened) == 4
        assert {s.schema_version() for s in opened} == {PG_MIGRATIONS[-1][0]}
        with psycopg.connect(postgres_url) as db:
            rows = db.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [n for n, _ in PG_MIGRATIONS]
        assert opened[0].integrity_errors() == []
    finally:
        for s in opened:
            s.close()


def test_a_newer_schema_is_refused(postgres_url: str, tmp_path: Path) -> None:
    PostgresControlStore(postgres_url).close()
    with psycopg.connect(postgres_url) as db:
        db.execute("INSERT INTO schema_migrations (version, applied) VALUES (999, 0)")
    with pytest.raises(Unavailable, match="schema version 999, newer than this kbserver knows"):
        PostgresControlStore(postgres_url)
    SqliteControlStore(tmp_path / "control.db").close()  # and the same for SQLite
    import sqlite3

    db = sqlite3.connect(tmp_path / "control.db")
    db.execute("INSERT INTO schema_migrations (version, applied) VALUES (999, 0)")
    db.commit()
    db.close()
    with pytest.raises(Unavailable, match="schema version 999, newer than this kbserver knows"):
        SqliteControlStore(tmp_path / "control.db")


def _kbserver(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_migrate_command_and_its_errors(postgres_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    env |= {"KBSERVER_CONTROL_URL": postgres_url}
    done = _kbserver("migrate", "--data", str(data), env=env)
    assert done.returncode == 0, done.stderr
    assert f"schema version {PG_MIGRATIONS[-1][0]}" in done.stdout and PASSWORD not in done.stdout
    assert not (data / "control.db").exists()  # nothing local
    # serve on a schema newer than it knows: one line, nothing served
    with psycopg.connect(postgres_url) as db:
        db.execute("INSERT INTO schema_migrations (version, applied) VALUES (999, 0)")
    refused = _kbserver("serve", "--data", str(data), "--port", str(free_port()), env=env)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: unavailable: ") and refused.stderr.count("\n") == 1
    assert "newer than this kbserver knows" in refused.stderr
    # an unreachable server: one line without the password
    env["KBSERVER_CONTROL_URL"] = f"postgresql://kb:{PASSWORD}@127.0.0.1:{free_port()}/kbs"
    down = _kbserver("migrate", "--data", str(data), env=env)
    assert down.returncode == 1 and down.stderr.startswith("error: unavailable: the control store ")
    assert down.stderr.count("\n") == 1 and PASSWORD not in down.stderr + down.stdout
    # a URL that is no PostgreSQL URL: named, not echoed
    env["KBSERVER_CONTROL_URL"] = f"mysql://kb:{PASSWORD}@127.0.0.1/kbs"
    bad = _kbserver("migrate", "--data", str(data), env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("error: invalid_request: KBSERVER_CONTROL_URL: ")
    assert PASSWORD not in bad.stderr
