"""Following only the KBs a node serves (`follow=served`): a KB nobody searched is not indexed, its
first search waits for the catch-up and sees every write, and a KB unused for the idle bound is no
longer followed, then comes back correct at its next search."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.reading import search
from kbserver.wiring import open_services
from tests.services.test_follower import FileSink, _write

IDLE = 1.0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Services, FileSink, Path]]:
    sink = FileSink(tmp_path / "files-sink")
    cache = tmp_path / "cache"
    options = Options(embedder=None, cache_dir=cache, follow_served=True, follow_idle_seconds=IDLE)
    services = open_services(tmp_path / "data", options, sinks=[sink])
    services.start()
    yield services, sink, cache
    services.close()


def _found(services: Services, slug: str, word: str) -> list[str]:
    return [h.path for h in search.query(services, ADMIN, slug, word).hits]


def _settle(services: Services) -> None:
    """Write to and search another KB: once that search answers, the follower's loop has taken
    (and, for a cold KB, passed over) every commit made before it."""
    if not services.repos.exists("other"):
        kbs.create(services, ADMIN, "other")
    word = f"w{time.monotonic_ns()}"
    _write(services, "other", f"{word}.md", word)
    assert _found(services, "other", word) == [f"{word}.md"]


def test_a_kb_never_searched_is_not_indexed_and_its_first_search_sees_every_write(
    served: tuple[Services, FileSink, Path],
) -> None:
    services, sink, cache = served
    kbs.create(services, ADMIN, "notes")
    versions = [_write(services, "notes", f"n{n}.md", f"kestrel{n}") for n in range(5)]
    _settle(services)
    assert not (cache / "index" / "notes").exists()  # never built here
    assert sink.covered("notes") is None  # no sink applied a delta of it

    for n in range(5):  # the first search waits for the catch-up: every write is found
        assert _found(services, "notes", f"kestrel{n}") == [f"n{n}.md"]
    assert services.progress.wait_blocking("notes", versions[-1], 60, ["files"])  # all its sinks follow
    assert sink.covered("notes") == versions[-1]
    assert services.search_index.search("notes", "kestrel0").version == versions[-1]


def test_a_kb_unused_for_the_idle_bound_goes_cold_and_comes_back_correct(
    served: tuple[Services, FileSink, Path],
) -> None:
    services, sink, _cache = served
    kbs.create(services, ADMIN, "notes")
    first = _write(services, "notes", "a.md", "albatross")
    assert _found(services, "notes", "albatross") == ["a.md"]
    assert services.progress.wait_blocking("notes", first, 60, ["files"])

    time.sleep(IDLE * 1.5)  # unused past the bound
    later = [_write(services, "notes", f"b{n}.md", f"bittern{n}") for n in range(3)]
    _settle(services)
    assert sink.covered("notes") == first  # cold: its commits are passed over, its index kept

    assert _found(services, "notes", "bittern2") == ["b2.md"]  # used again: caught up first
    assert _found(services, "notes", "albatross") == ["a.md"]
    assert services.search_index.search("notes", "bittern0").version == later[-1]
    assert services.progress.wait_blocking("notes", later[-1], 60, ["files"])
    assert sink.load("notes")["files"] == {
        "README.md": sink.load("notes")["files"]["README.md"],  # type: ignore[index]
        "a.md": "albatross",
        **{f"b{n}.md": f"bittern{n}" for n in range(3)},
    }


def test_an_index_wait_keeps_a_kb_followed(served: tuple[Services, FileSink, Path]) -> None:
    """A wait is a use: a KB only ever waited on is followed like a searched one."""
    services, sink, _cache = served
    kbs.create(services, ADMIN, "notes")
    version = _write(services, "notes", "a.md", "albatross")
    assert search.status(services, ADMIN, "notes", wait_for=version, timeout=60).covered
    assert services.progress.wait_blocking("notes", version, 60, ["files"])
    assert sink.covered("notes") == version


def test_follow_is_served_with_a_control_url_and_all_without(tmp_path: Path) -> None:
    url = "postgresql://kb@127.0.0.1/kb"
    assert not Settings(data=tmp_path).options().follow_served  # one node serves every KB: follow all
    assert Settings(data=tmp_path, control_url=url).options().follow_served  # type: ignore[arg-type]
    assert not Settings(data=tmp_path, control_url=url, follow="all").options().follow_served  # type: ignore[arg-type]
    assert Settings.from_env(data=tmp_path, follow="served").options().follow_served


def test_a_follower_that_starts_late_follows_the_kbs_used_before(tmp_path: Path) -> None:
    """The serving process may tell of a use before its follower reads the feed (a child starting
    or restarting): the follower takes the KBs named in the feed's `W` lines as used when it leads."""
    cache = tmp_path / "cache"
    options = Options(embedder=None, cache_dir=cache, follow_served=True, follow_idle_seconds=600)
    server = open_services(tmp_path / "data", dataclasses.replace(options, follow=False))
    server.start()
    try:
        kbs.create(server, ADMIN, "notes")
        version = _write(server, "notes", "a.md", "albatross")
        waited: list[bool] = []
        waiter = threading.Thread(
            target=lambda: waited.append(server.progress.wait_blocking("notes", version, 60))
        )
        waiter.start()  # told once, at its first look, while nobody follows
        deadline = time.monotonic() + 60
        while b"W index notes" not in (cache / "feed.log").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        worker = open_services(tmp_path / "data", options)
        worker.start()
        try:
            waiter.join(timeout=90)
            assert waited == [True]
            assert _found(server, "notes", "albatross") == ["a.md"]
        finally:
            worker.close()
    finally:
        server.close()
