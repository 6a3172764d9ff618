"""`Services` holds interfaces: another implementation of a part slots in at the composition root alone."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest

from kbserver.control import ControlStore
from kbserver.services import Services
from kbserver.services.parts import (
    Events,
    Files,
    Following,
    Repositories,
    Repository,
    TextSearch,
    VectorSearch,
    Writer,
)

_INTERFACES = {
    "repos": Repositories,
    "control": ControlStore,
    "search_index": TextSearch,
    "follower": Following,
    "feed": Events,
    "vectors": VectorSearch,
}


def _members(protocol: type) -> set[str]:
    """The public methods and attributes of `protocol` and of the protocols it extends."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if getattr(cls, "_is_protocol", False) and cls is not typing.Protocol:
            names |= {n for n in vars(cls) if not n.startswith("_")} | set(
                vars(cls).get("__annotations__", {})
            )
    return names


def test_the_parts_of_services_are_typed_by_protocols() -> None:
    hints = typing.get_type_hints(Services)
    for field, protocol in _INTERFACES.items():
        hint = hints[field]
        if isinstance(hint, types.UnionType):  # `vectors` is optional
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        assert hint is protocol, field
        assert getattr(protocol, "_is_protocol", False), f"{protocol.__name__} is not a typing.Protocol"


def _missing(part: object, protocol: type) -> list[str]:
    return sorted(name for name in _members(protocol) if not hasattr(part, name))


def test_the_composition_roots_parts_have_every_member_of_their_interface(
    services: Services, kb: str
) -> None:
    # mypy --strict checks this where open_services builds Services; this says it in the test report too.
    for field, protocol in _INTERFACES.items():
        part = getattr(services, field)
        assert part is not None, field
        assert _missing(part, protocol) == [], f"{type(part).__name__} of {field}"
    repo, writer = services.repos.get(kb)
    assert _missing(repo, Repository) == [] and _missing(writer, Writer) == []
    assert _missing(repo.view(repo.head()), Files) == []
    assert {"version", "read", "case_twins", "walk", "resolve", "submit", "verify"} <= (
        _members(Files) | _members(Repository) | _members(Writer) | _members(Repositories)
    )  # the member listing itself sees annotations and methods


def test_services_are_built_by_the_composition_root_not_from_a_folder(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="open_services"):
        Services(tmp_path, *([None] * 7))  # type: ignore[arg-type]  # the old Services(data) call
