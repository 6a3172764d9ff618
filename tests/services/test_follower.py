"""The follower: sinks that fail, an index removed or damaged while serving, the worker process,
waits that hold no thread, and waits for versions that are not on main."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from kbserver.core.errors import NotFound
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.following.follower import WATCHED_POLL_SECONDS, Delta
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.store.watch import FolderWatch
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, LiveServer, state

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


class FileSink:
    """A real sink: `{folder}/{slug}.json` holds the version it covers and the files it saw."""

    def __init__(self, folder: Path, name: str = "files") -> None:
        self.name = name
        self.folder = folder
        self.failing = False
        self.attempts = 0
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, slug: str) -> Path:
        return self.folder / f"{slug}.json"

    def load(self, slug: str) -> dict[str, object]:
        path = self._path(slug)
        return json.loads(path.read_text()) if path.exists() else {"version": None, "files": {}}

    def covered(self, slug: str) -> str | None:
        version = self.load(slug)["version"]
        return str(version) if version else None

    def apply(self, delta: Delta) -> None:
        self.attempts += 1
        if self.failing:
            raise OSError("the disk of this sink is full")
        state = self.load(delta.slug) if delta.base is not None else {"files": {}}
        files = dict(state["files"])  # type: ignore[call-overload]
        for change in delta.changes:
            if change.new_blob is None:
                files.pop(change.path, None)
            else:
                files[change.path] = delta.read(change.new_blob).decode()
        self._path(delta.slug).write_text(json.dumps({"version": delta.version, "files": files}))

    def reset(self, slug: str) -> None:
        self._path(slug).unlink(missing_ok=True)

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        pass

    def close(self) -> None:
        pass


def _write(services: Services, slug: str, path: str, text: str) -> str:
    req = WriteRequest(files=[Create(path=path, mode="create", content=text)])
    return writes.submit(services, ADMIN, slug, req).version


@pytest.fixture
def with_sink(tmp_path: Path) -> Iterator[tuple[Services, FileSink]]:
    sink = FileSink(tmp_path / "files-sink")
    services = open_services(tmp_path / "data", sinks=[sink])
    services.start()
    yield services, sink
    services.close()


def test_a_failing_sink_is_retried_and_reported_while_the_index_keeps_going(
    with_sink: tuple[Services, FileSink],
) -> None:
    services, sink = with_sink
    kbs.create(services, ADMIN, "notes")
    v1 = _write(services, "notes", "a.md", "albatross")
    assert services.progress.wait_blocking("notes", v1, 60)
    files = sink.load("notes")["files"]
    assert isinstance(files, dict) and set(files) == {"README.md", "a.md"} and files["a.md"] == "albatross"

    sink.failing = True
    v2 = _write(services, "notes", "b.md", "bittern")
    assert services.progress.wait_blocking("notes", v2, 60, ["index"])  # the index is not held up
    assert [h.path for h in services.search_index.search("notes", "bittern").hits] == ["b.md"]
    assert not services.progress.covers("notes", v2, ["files"])
    deadline = time.monotonic() + 60
    while services.progress.error("files", "notes") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "disk of this sink is full" in str(services.progress.error("files", "notes"))
    assert sink.covered("notes") == v1
    status = search.status(services, ADMIN, "notes")
    assert status.indexed_version == v2 and status.index_error is None

    failed_attempts = sink.attempts
    sink.failing = False  # retried after its pause, without a new commit
    assert services.progress.wait_blocking("notes", v2, 60, ["files"])
    assert sink.attempts > failed_attempts
    assert sink.load("notes")["files"]["b.md"] == "bittern"  # type: ignore[index]
    assert services.progress.error("files", "notes") is None


class SlowSink(FileSink):
    """A FileSink whose `apply` waits for `release` (a model taking its time over embeddings)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, name="slow")
        self.release = threading.Event()
        self.started = threading.Event()

    def apply(self, delta: Delta) -> None:
        self.started.set()
        assert self.release.wait(120), "the test never released the slow sink"
        super().apply(delta)


def test_the_index_never_waits_for_a_slow_sink(tmp_path: Path) -> None:
    slow = SlowSink(tmp_path / "slow-sink")
    services = open_services(tmp_path / "data", sinks=[slow])
    services.start()
    try:
        kbs.create(services, ADMIN, "notes")
        assert slow.started.wait(60)  # the slow sink is busy with the first version...
        versions = [_write(services, "notes", f"n{i}.md", f"kittiwake number{i}") for i in range(3)]
        # ...while the index follows every write, in its own thread.
        assert services.progress.wait_blocking("notes", versions[-1], 60, ["index"])
        found = services.search_index.search("notes", "kittiwake", limit=10).hits
        assert sorted(h.path for h in found) == ["n0.md", "n1.md", "n2.md"]
        assert not services.progress.covers("notes", versions[-1], ["slow"])
        assert slow.covered("notes") is None
        slow.release.set()
        assert services.progress.wait_blocking("notes", versions[-1], 60, ["slow"])
        assert set(slow.load("notes")["files"]) == {"README.md", "n0.md", "n1.md", "n2.md"}  # type: ignore[arg-type]
    finally:
        slow.release.set()
        services.close()


def test_sinks_resume_from_what_they_recorded(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "files-sink")
    first = open_services(tmp_path / "data", sinks=[sink])
    first.start()
    kbs.create(first, ADMIN, "notes")
    v1 = _write(first, "notes", "a.md", "avocet")
    assert first.progress.wait_blocking("notes", v1, 60)
    first.close()
    writer = open_services(tmp_path / "data")  # not started: nobody follows while it writes
    v2 = _write(writer, "notes", "b.md", "brent goose")
    writer.close()
    again_sink = FileSink(tmp_path / "files-sink")
    again = open_services(tmp_path / "data", sinks=[again_sink])
    again.start()
    try:
        assert again.progress.wait_blocking("notes", v2, 60)
        assert again_sink.attempts == 1  # one delta v1 -> v2, not a rebuild per commit
        assert set(again_sink.load("notes")["files"]) == {"README.md", "a.md", "b.md"}  # type: ignore[arg-type]
    finally:
        again.close()


def _until(check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("damage", ["remove", "garbage"])
def test_index_removed_or_damaged_while_serving_is_rebuilt_by_the_follower(
    client: TestClient, services: Services, kb: str, damage: str
) -> None:
    v = _write(services, kb, "heron.md", "a grey heron stood in the reeds")
    w = client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": v, "timeout": 30}, headers=AUTH)
    assert w.status_code == 200 and w.json()["covered"] is True
    folder = services.data / "index" / kb
    if damage == "remove":
        shutil.rmtree(folder)
    else:
        for f in folder.rglob("*"):
            if f.is_file() and f.name != "LOCK":
                f.write_bytes(b"garbage")
    seen = set()
    for _ in range(3):  # the first search finds the damage; later ones may come during the rebuild
        r = client.get(f"/api/v1/kbs/{kb}/search", params={"q": "heron"}, headers=AUTH)
        assert r.status_code in (200, 503), r.text
        if r.status_code == 503:
            assert r.json()["error"]["code"] == "unavailable"
        seen.add(r.status_code)
        for path in (f"/api/v1/kbs/{kb}", f"/api/v1/kbs/{kb}/index"):
            assert client.get(path, headers=AUTH).status_code == 200, path

    def found() -> bool:
        r = client.get(f"/api/v1/kbs/{kb}/search", params={"q": "heron"}, headers=AUTH)
        assert r.status_code in (200, 503), r.text
        return r.status_code == 200 and [h["path"] for h in r.json()["hits"]] == ["heron.md"]

    _until(found)
    _until(lambda: client.get(f"/api/v1/kbs/{kb}", headers=AUTH).json()["indexed_version"] == v)


def test_wait_for_a_version_not_on_main_is_not_found_at_once(
    client: TestClient, services: Services, kb: str
) -> None:
    repo_path = services.repos.path(kb)
    head = services.repos.repo(kb).head()
    side = subprocess.run(
        ["git", "commit-tree", f"{head}^{{tree}}", "-p", str(head), "-m", "not on main"],
        cwd=repo_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    before = state(services, kb)
    for version in ("0" * 40, side):
        r = client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": version, "timeout": 60}, headers=AUTH)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), version
        with pytest.raises(NotFound):
            asyncio.run(search.wait_for(services, ADMIN, kb, version, 60))
    r = client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": "xyz"}, headers=AUTH)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    assert state(services, kb) == before


def test_search_total_counts_every_match_beyond_the_page(services: Services, kb: str) -> None:
    req = WriteRequest(files=[Create(path=f"n{i}.md", mode="create", content=f"kiwi {i}") for i in range(15)])
    v = writes.submit(services, ADMIN, kb, req).version
    assert services.progress.wait_blocking(kb, v, 60)
    first = search.query(services, ADMIN, kb, "kiwi", limit=5)
    last = search.query(services, ADMIN, kb, "kiwi", limit=5, offset=10)
    assert (first.total, len(first.hits)) == (last.total, len(last.hits)) == (15, 5)
    assert {h.path for h in first.hits}.isdisjoint(h.path for h in last.hits)


@pytest.mark.slow
def test_worker_process_follows_for_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = LiveServer(data, env={"KBSERVER_FOLLOWER": "worker", "KBSERVER_SAMPLE": "false"}).start()
    worker: subprocess.Popen[bytes] | None = None
    try:
        with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as c:
            assert c.post("/kbs", json={"slug": "birds"}).status_code == 201
            r = c.post(
                "/kbs/birds/write", json={"files": [{"path": "k.md", "mode": "create", "content": "kestrel"}]}
            )
            v = r.json()["version"]
            # serve does not index: nothing covers the write, however long we wait
            assert c.get("/kbs/birds/index", params={"wait_for": v, "timeout": 1}).json()["covered"] is False
            worker = subprocess.Popen(
                [sys.executable, "-m", "kbserver.cli", "worker", "--data", str(data)],
                env=server.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            w = c.get("/kbs/birds/index", params={"wait_for": v, "timeout": 60})
            assert w.status_code == 200 and w.json()["covered"] is True, w.text
            assert [
                h["path"] for h in c.get("/kbs/birds/search", params={"q": "kestrel"}).json()["hits"]
            ] == ["k.md"]
            r = c.post(
                "/kbs/birds/write", json={"files": [{"path": "o.md", "mode": "create", "content": "osprey"}]}
            )
            w = c.get("/kbs/birds/index", params={"wait_for": r.json()["version"], "timeout": 60})
            assert w.json()["covered"] is True
            assert [h["path"] for h in c.get("/kbs/birds/search", params={"q": "osprey"}).json()["hits"]] == [
                "o.md"
            ]
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        server.stop()
    assert worker.returncode == 0


@pytest.mark.slow
def test_many_waiters_do_not_stall_other_requests(tmp_path: Path) -> None:
    # No follower runs (worker mode, no worker), so every waiter waits its whole timeout.
    server = LiveServer(
        tmp_path / "data", env={"KBSERVER_FOLLOWER": "worker", "KBSERVER_SAMPLE": "false"}
    ).start()
    try:
        with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as c:
            assert c.post("/kbs", json={"slug": "owls"}).status_code == 201
            r = c.post(
                "/kbs/owls/write", json={"files": [{"path": "o.md", "mode": "create", "content": "owl"}]}
            )
            version = r.json()["version"]

        async def run() -> tuple[list[int], int, int, int]:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=120, limits=limits) as ac:
                waiters = [
                    asyncio.create_task(
                        ac.get("/api/v1/kbs/owls/index", params={"wait_for": version, "timeout": 20})
                    )
                    for _ in range(60)
                ]
                await asyncio.sleep(1.0)  # let them all arrive and start waiting
                health = await ac.get("/healthz", timeout=15)
                listing = await ac.get("/api/v1/kbs", timeout=15)
                outstanding = sum(not w.done() for w in waiters)
                answers = await asyncio.gather(*waiters)
                return [a.status_code for a in answers], health.status_code, listing.status_code, outstanding

        statuses, health, listing, outstanding = asyncio.run(run())
        assert health == 200 and listing == 200
        assert outstanding == 60  # the other requests were answered while all 60 waited
        assert statuses == [200] * 60
    finally:
        server.stop()


def test_reindex_swaps_in_a_new_index_while_searches_go_on(services: Services, kb: str) -> None:
    v = _write(services, kb, "wren.md", "a wren sang in the hedge")
    assert services.progress.wait_blocking(kb, v, 60)
    problems: list[object] = []
    searches = [0]
    stop = threading.Event()

    def searching() -> None:
        while not stop.is_set() or searches[0] == 0:
            searches[0] += 1
            try:
                found = search.query(services, ADMIN, kb, "wren")
                if [h.path for h in found.hits] != ["wren.md"]:
                    problems.append(found)
            except Exception as e:
                problems.append(e)

    reader = threading.Thread(target=searching)
    reader.start()
    try:
        for _ in range(3):
            assert services.follower.catch_up(kb, rebuild=True) == v
    finally:
        stop.set()
        reader.join(timeout=60)
    assert problems == [] and searches[0] > 0
    assert services.progress.covered("index", kb) == v


@contextmanager
def _leader_and_standby(
    data: Path, leader_poll: float = 0.01, standby_poll: float = 0.01
) -> Iterator[tuple[Services, Services]]:
    """Two processes' services on one data folder, started: one leads, the other stands by."""
    leader = open_services(data, Options(embedder=None, index_poll_seconds=leader_poll))
    standby = open_services(data, Options(embedder=None, follow=False, index_poll_seconds=standby_poll))
    leader.start()
    standby.start()
    try:
        yield leader, standby
    finally:
        standby.close()
        leader.close()


def test_a_standby_follower_is_not_woken_by_this_process_s_commits(tmp_path: Path) -> None:
    # The serving process stands by while its child follows: every commit woke its loop for nothing.
    with _leader_and_standby(tmp_path / "data") as (leader, standby):
        kbs.create(standby, ADMIN, "notes")
        req = WriteRequest(files=[Create(path="a.md", mode="create", content="avocet")])
        version = writes.submit(standby, ADMIN, "notes", req).version  # type: ignore[union-attr]
        assert not standby.follower.leading and not standby.follower._pending  # nothing handed over
        assert leader.progress.wait_blocking("notes", version, 60)  # the leader learns it from the feed
        assert standby.progress.wait_blocking("notes", version, 60)  # and the standby what it covered
        assert [h.path for h in search.query(standby, ADMIN, "notes", "avocet", limit=5).hits] == ["a.md"]


def _watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "kbserver-follower-watch" and t.is_alive()}


def _standby_write_is_found(standby: Services, path: str, word: str, timeout: float) -> None:
    """A standby's write: its wait ends within `timeout`, and its own search finds it."""
    kbs.create(standby, ADMIN, "notes")
    req = WriteRequest(files=[Create(path=path, mode="create", content=word)])
    version = writes.submit(standby, ADMIN, "notes", req).version  # type: ignore[union-attr]
    assert standby.progress.wait_blocking("notes", version, timeout)
    assert [h.path for h in search.query(standby, ADMIN, "notes", word, limit=5).hits] == [path]


def test_the_leader_hears_another_s_feed_lines_as_they_come_not_at_its_next_poll(tmp_path: Path) -> None:
    # The leader looks at the feed only every 30 s: the wait below ends sooner only because the
    # feed's watch wakes it for the standby's commit and W line. The standby is not watched: it
    # reads the feed every index_poll_seconds while somebody in its process waits.
    before = _watch_threads()
    with _leader_and_standby(tmp_path / "data", leader_poll=30.0) as (_, standby):
        _standby_write_is_found(standby, "a.md", "avocet", 20)
        assert len(_watch_threads() - before) == 1  # the leader's
    assert not _watch_threads() - before  # stopped with their followers


def test_without_a_watch_the_followers_poll_the_feed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FolderWatch, "open", classmethod(lambda cls, folder, names: None))
    before = _watch_threads()
    with _leader_and_standby(tmp_path / "data") as (_, standby):
        _standby_write_is_found(standby, "b.md", "bittern", 60)
        assert not _watch_threads() - before


def test_how_often_each_follower_reads_the_feed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _leader_and_standby(tmp_path / "data") as (leader, standby):
        _until(lambda: leader.follower._watch is not None)
        later = time.monotonic() + 60
        assert leader.follower._pause(later) == WATCHED_POLL_SECONDS  # rung by the watch meanwhile
        assert standby.follower._pause(later) == WATCHED_POLL_SECONDS  # nobody here waits
        monkeypatch.setattr(standby.progress, "waited", lambda: True)
        assert standby.follower._pause(later) == 0.01  # index_poll_seconds: the C line comes there
    # A standby that may lead looks again at its next try.
    again = open_services(tmp_path / "data", Options(embedder=None))
    try:
        assert not again.follower.leading
        assert again.follower._pause(time.monotonic() + 0.2) <= 0.2
        assert again.follower._pause(time.monotonic() - 1) == 0.0
    finally:
        again.close()
