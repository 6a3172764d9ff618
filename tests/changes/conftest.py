"""Fixtures for the write engine: an in-memory tree (Tree is a pure protocol) and change builders."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import TypeAdapter

from kbserver.core.model import FileChange
from tests.helpers import DictTree

_CHANGE: TypeAdapter[FileChange] = TypeAdapter(FileChange)


@pytest.fixture
def tree() -> Callable[..., DictTree]:
    """`tree({"a.md": "text", "b.bin": b"\\xff"})`: a DictTree holding those files (str as UTF-8)."""

    def make(files: dict[str, bytes | str] | None = None) -> DictTree:
        return DictTree({p: c.encode() if isinstance(c, str) else c for p, c in (files or {}).items()})

    return make


@pytest.fixture
def change() -> Callable[..., FileChange]:
    """`change(path="a.md", mode="create", content="x")`: a FileChange validated as requests are."""

    def make(**fields: object) -> FileChange:
        return _CHANGE.validate_python(fields)

    return make
