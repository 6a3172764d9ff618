"""Shared fixtures: real data folders, real services, the real app over HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, LiveServer, make_agent
from tests.pg import PostgresServer, find_bindir

# Registered here, before any test module imports it (tests/cluster does, ahead of tests/mcp).
pytest.register_assert_rewrite("tests.mcp.clients")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, index_poll_seconds=0.2)


@pytest.fixture(params=["sqlite", "postgres"])
def settings_on_both_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """`settings`, once with the SQLite control store and once with PostgreSQL (a fresh database).

    A test module runs on both by overriding `settings` with this fixture (tests/services/test_auth.py).
    """
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    return Settings(
        data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, index_poll_seconds=0.2, control_url=url
    )


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    svc = open_services(settings.data, settings.options())
    svc.start()
    yield svc
    svc.close()


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def kb(services: Services) -> str:
    kbs.create(services, ADMIN, "notes", "Team notes")
    return "notes"


@pytest.fixture
def agent(services: Services, kb: str) -> dict[str, str]:
    return make_agent(services, "bob", {kb: "read_write"})


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path / "live").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the whole run (tests/pg.py); each test takes a database."""
    bindir = find_bindir()
    if bindir is None:
        missing = "PostgreSQL server binaries (initdb, pg_ctl): apt-get install -y postgresql"
        if os.environ.get("CI"):
            pytest.fail(f"CI must install {missing} (scripts/test does)")
        pytest.skip(f"needs {missing}")
    server = PostgresServer(bindir).start()
    yield server
    server.stop()


@pytest.fixture
def own_postgres(postgres: PostgresServer) -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, so it may stop and start it (the session's keeps going)."""
    server = PostgresServer(postgres.bindir).start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    """A fresh PostgreSQL database for this test: its URL (with a password), dropped afterwards."""
    url = postgres.database()
    yield url
    postgres.drop(url)
