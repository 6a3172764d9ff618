"""The ControlStore implementations every test in tests/control runs against: SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kbserver.control import ControlStore, PostgresControlStore, SqliteControlStore

OpenStore = Callable[[], ControlStore]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """Opens another connection to one store, as another thread or process would."""
    opened: list[ControlStore] = []
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")  # a fresh database of the session's server

    def open_one() -> ControlStore:
        store: ControlStore
        if request.param == "postgres":
            store = PostgresControlStore(url, max_connections=4)
        else:
            store = SqliteControlStore(tmp_path / "control.db")
        opened.append(store)
        return store

    request.addfinalizer(lambda: [s.close() for s in opened])
    return open_one


@pytest.fixture
def store(open_store: OpenStore) -> ControlStore:
    return open_store()
