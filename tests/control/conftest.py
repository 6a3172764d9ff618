"""The ControlStore implementations every test in tests/control runs against (SQLite today)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kbserver.control import ControlStore, SqliteControlStore

# name -> how to open a store on a data folder; a second call opens a second connection to the same data
IMPLEMENTATIONS: dict[str, Callable[[Path], ControlStore]] = {
    "sqlite": lambda folder: SqliteControlStore(folder / "control.db"),
}

OpenStore = Callable[[], ControlStore]


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """Opens another connection to one store, as another thread or process would."""
    opened: list[ControlStore] = []

    def open_one() -> ControlStore:
        store = IMPLEMENTATIONS[request.param](tmp_path)
        opened.append(store)
        return store

    request.addfinalizer(lambda: [s.close() for s in opened])
    return open_one


@pytest.fixture
def store(open_store: OpenStore) -> ControlStore:
    return open_store()
