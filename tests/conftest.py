"""Shared fixtures: real data folders, real services, the real app over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, LiveServer, make_agent


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data=tmp_path / "data", admin_token=ADMIN_TOKEN, sample=False, index_poll_seconds=0.2)


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
