"""The change feed over both control stores: a commit on one node reaches the other node's follower
(SQLite: the shared feed.log; PostgreSQL: the heads table and LISTEN/NOTIFY, with separate caches),
and a notification missed while a connection was down is caught up from the table."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kbserver.control import PostgresControlStore
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.following.feeds import SharedFeed
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.store.feed import Feed, Head
from kbserver.wiring import open_services
from tests.pg import PostgresServer


def _write(services: Services, slug: str, path: str, text: str) -> str:
    req = WriteRequest(files=[Create(path=path, mode="create", content=text)])
    return writes.submit(services, ADMIN, slug, req).version


@pytest.fixture(params=["sqlite", "postgres"])
def two_nodes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Services, Services]]:
    """Two nodes on one data folder: with PostgreSQL each has its own cache (index, feed)."""
    nodes: list[Services] = []
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    try:
        for n in range(2):
            cache = tmp_path / f"cache-{n}" if url else None
            options = Options(embedder=None, control_url=url, cache_dir=cache, index_poll_seconds=0.05)
            nodes.append(open_services(tmp_path / "data", options))
            nodes[-1].start()
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.close()


def test_a_commit_on_one_node_is_indexed_by_the_other(two_nodes: tuple[Services, Services]) -> None:
    a, b = two_nodes
    kbs.create(a, ADMIN, "notes", "Team notes")
    for n in range(3):
        version = _write(a, "notes", f"n{n}.md", f"the zebra number {n}\n")
        # well within the follower's 60 s reconcile: the feed brought it
        covered = asyncio.run(search.wait_for(b, ADMIN, "notes", version, 20))
        assert covered, f"node B's index did not cover {version} within 20 s"
    hits = search.query(b, ADMIN, "notes", "zebra", limit=10)
    assert sorted(h.path for h in hits.hits) == ["n0.md", "n1.md", "n2.md"]
    if isinstance(b.feed, SharedFeed):  # each node indexed into its own cache
        assert (b.data is not None) and not (b.data / "index").exists()


def test_missed_notifications_are_caught_up_from_the_table(postgres_url: str, tmp_path: Path) -> None:
    store = PostgresControlStore(postgres_url)
    feed = SharedFeed(Feed(tmp_path), store.heads, catch_up_seconds=0.2)
    reader = feed.reader()
    try:
        feed.head("notes", "a" * 40)  # from the local feed, and from the shared log (by notification)
        assert set(_heads(reader, want=2)) == {Head("notes", "a" * 40)}
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # the LISTEN connection dies
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
                " AND pid <> pg_backend_pid()"
            )
        store.heads.publish("notes", "b" * 40)  # another node's commit, while nobody listens here
        store.heads.publish("other", "c" * 40)
        assert _heads(reader) == [Head("notes", "b" * 40), Head("other", "c" * 40)]
    finally:
        reader.close()
        store.close()


def test_a_control_store_down_and_back_makes_the_follower_reconcile(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    url = own_postgres.database()
    store = PostgresControlStore(url, wait_seconds=2)
    feed = SharedFeed(Feed(tmp_path), store.heads, catch_up_seconds=0.1)
    reader = feed.reader()
    try:
        own_postgres.pause()
        feed.head("notes", "a" * 40)  # the commit stands; publishing it fails with a warning only
        time.sleep(5)  # long enough for the reader's thread to fail a read (each waits 2 s at most)
        records, _ = reader.poll()  # no exception, no wait: the heads cannot be read just now
        assert records == [Head("notes", "a" * 40)]  # from the local feed
        own_postgres.resume()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records, rotated = reader.poll()
            if rotated:
                break
            time.sleep(0.1)
        assert rotated  # back: heads may have been missed meanwhile, so the follower reconciles all
    finally:
        reader.close()
        store.close()


def _heads(reader: object, want: int | None = None) -> list[Head]:
    """Poll until records come (bounded): the heads among them."""
    deadline = time.monotonic() + 30
    found: list[Head] = []
    while time.monotonic() < deadline:
        records, _ = reader.poll()  # type: ignore[attr-defined]
        found += [r for r in records if isinstance(r, Head)]
        if found and (want is None or len(found) >= want):
            time.sleep(0.3)  # and whatever else comes with them
            records, _ = reader.poll()  # type: ignore[attr-defined]
            return found + [r for r in records if isinstance(r, Head)]
        time.sleep(0.05)
    return found


def test_a_head_that_commits_after_a_later_one_is_not_skipped(postgres_url: str, tmp_path: Path) -> None:
    store = PostgresControlStore(postgres_url)
    feed = SharedFeed(Feed(tmp_path), store.heads, catch_up_seconds=0.1)
    reader = feed.reader()
    try:
        with psycopg.connect(postgres_url) as slow:  # a node's publish, its transaction still open
            slow.execute(
                "INSERT INTO heads (slug, version, at) VALUES ('slow', %s, %s)", ("a" * 40, time.time())
            )
            store.heads.publish("fast", "b" * 40)  # a higher id, committed first
            assert _heads(reader) == [Head("fast", "b" * 40)]
            slow.commit()
        assert _heads(reader) == [Head("slow", "a" * 40)]  # its lower id was asked for again
    finally:
        reader.close()
        store.close()


def test_a_node_stuck_in_its_publish_holds_no_other_node(postgres_url: str, tmp_path: Path) -> None:
    """Another node's transaction in the heads table that never ends (its network went silent with
    the old cluster-wide lock, "kbhd", held) does not make this node's publish wait."""
    store = PostgresControlStore(postgres_url)
    done = threading.Event()
    try:
        with psycopg.connect(postgres_url) as stuck:
            stuck.execute("SELECT pg_advisory_xact_lock(%s)", (0x6B626864,))
            stuck.execute(
                "INSERT INTO heads (slug, version, at) VALUES ('x', %s, %s)", ("c" * 40, time.time())
            )
            publisher = threading.Thread(target=lambda: (store.heads.publish("y", "d" * 40), done.set()))
            publisher.start()
            publisher.join(timeout=20)  # generous: the publish takes milliseconds
            assert done.is_set(), "the publish waited for another node's transaction"
            stuck.rollback()
        assert [slug for _, slug, _ in store.heads.since(0)] == ["y"]
    finally:
        store.close()


def test_an_unforeseen_error_reading_the_heads_does_not_end_the_reading(
    postgres_url: str, tmp_path: Path
) -> None:
    """The thread that reads other nodes' heads lives on through an error the store does not map
    (here the table gone for a while: psycopg's UndefinedTable); once it reads again, the follower
    reconciles. It used to die, and the node heard of other nodes' commits only by its reconcile."""
    store = PostgresControlStore(postgres_url)
    feed = SharedFeed(Feed(tmp_path), store.heads, catch_up_seconds=0.1)
    reader = feed.reader()
    try:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("ALTER TABLE heads RENAME TO heads_away")
            time.sleep(1)  # several reads fail meanwhile (one every 0.1 s)
            admin.execute("ALTER TABLE heads_away RENAME TO heads")
        store.heads.publish("notes", "b" * 40)  # another node's commit
        heads, rotated, deadline = [], False, time.monotonic() + 30
        while Head("notes", "b" * 40) not in heads and time.monotonic() < deadline:
            records, lost = reader.poll()
            heads += [r for r in records if isinstance(r, Head)]
            rotated = rotated or lost
            time.sleep(0.05)
        assert heads == [Head("notes", "b" * 40)]
        assert rotated  # heads may have been missed meanwhile: the follower reconciles every KB
    finally:
        reader.close()
        store.close()
