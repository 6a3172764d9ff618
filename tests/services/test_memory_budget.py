"""The memory budget: open repositories and indexes share one LRU pool; eviction changes nothing."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kbserver.core.model import Append, Create, WriteRequest
from kbserver.index import SearchIndex
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.reading import files, search
from kbserver.services.writing import writes
from kbserver.store.repo import KBRepo
from kbserver.wiring import open_services
from tests.helpers import git_fsck


@contextmanager
def _tiny_budget(tmp_path: Path) -> Iterator[Services]:
    """Started services whose memory budget is 1 MB: nearly every use of another KB evicts one."""
    services = open_services(tmp_path / "data", Options(fsync=False, memory_budget_mb=1))
    services.start()
    try:
        yield services
    finally:
        services.close()


def test_many_kbs_under_a_tiny_budget_stay_correct(tmp_path: Path) -> None:
    slugs = [f"kb{n}" for n in range(8)]
    with _tiny_budget(tmp_path) as services:
        for slug in slugs:
            kbs.create(services, ADMIN, slug)
            notes = [
                Create(path=f"notes/{i}.md", mode="create", content=f"{slug} crane {i}\n") for i in range(20)
            ]
            writes.submit(services, ADMIN, slug, WriteRequest(files=notes))
        for rounds in (1, 2):  # every KB twice, round robin: each use evicts another
            for slug in slugs:
                req = WriteRequest(files=[Append(path="notes/0.md", mode="append", content="heron\n")])
                version = writes.submit(services, ADMIN, slug, req).version
                assert services.progress.wait_blocking(slug, version, 60)
                found = search.query(services, ADMIN, slug, "crane", limit=100)
                assert found.total == 20 and found.version == version
                content = files.read(services, ADMIN, slug, "notes/0.md").content
                assert content == f"{slug} crane 0\n" + "heron\n" * rounds
        assert len(services.pool) < 2 * len(slugs)  # repositories and indexes were closed on the way
        # Over the budget only with the values of the KB used last, kept open together (pool.py).
        assert services.pool.weight() <= 1024 * 1024 or {name for _, name in services.pool.held()} == {
            slugs[-1]
        }
    for slug in slugs:
        git_fsck(tmp_path / "data" / "kbs" / f"{slug}.git")


def _open_segments(folder: Path) -> set[str]:
    """The KBs (index folder names) whose segment files this process holds open."""
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = Path(os.readlink(fd))
        except OSError:
            continue
        if target.suffix == ".seg" and folder in target.parents:
            found.add(target.relative_to(folder).parts[0])
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")
def test_what_the_pool_evicts_is_closed_whatever_the_number_of_kbs(tmp_path: Path) -> None:
    """Open repositories, searchers and segment files are those of the KBs the pool holds, however
    many KBs were read: an evicted value is closed, not left for the garbage collector."""
    slugs = [f"kb{n}" for n in range(24)]
    with _tiny_budget(tmp_path) as services:
        for slug in slugs:
            kbs.create(services, ADMIN, slug)
            notes = [Create(path=f"n/{i}.md", mode="create", content=f"{slug} wren {i}\n") for i in range(10)]
            version = writes.submit(services, ADMIN, slug, WriteRequest(files=notes)).version
            assert services.progress.wait_blocking(slug, version, 60)
        for slug in slugs:
            kbs.describe(services, ADMIN, slug)
            assert files.read(services, ADMIN, slug, "n/1.md").content == f"{slug} wren 1\n"
            assert search.query(services, ADMIN, slug, "wren", limit=100).total == 10
        gc.collect()
        held = {kind: {name for k, name in services.pool.held() if k == kind} for kind in ("repo", "index")}
        assert len(held["index"]) < len(slugs) and len(held["repo"]) < len(slugs)
        assert _open_segments(tmp_path / "data" / "index") <= held["index"]
        assert sum(isinstance(o, SearchIndex) for o in gc.get_objects()) <= len(held["index"])
        repos = {Path(o.path).name[: -len(".git")] for o in gc.get_objects() if isinstance(o, KBRepo)}
        assert repos <= held["repo"]
    assert _open_segments(tmp_path / "data" / "index") == set()


def test_the_kb_pages_listings_are_charged_to_the_budget(tmp_path: Path) -> None:
    """Each KB page keeps its version's listing (services.reading.folders) in the pool: however many
    KBs the admin looks at, only the listings of the KBs the pool holds stay, weighed with them."""
    slugs = [f"kb{n}" for n in range(16)]
    with _tiny_budget(tmp_path) as services:
        for slug in slugs:
            kbs.create(services, ADMIN, slug)
            for start in range(0, 200, 20):
                notes = [
                    Create(path=f"n/{i:03}.md", mode="create", content=f"{i}\n")
                    for i in range(start, start + 20)
                ]
                writes.submit(services, ADMIN, slug, WriteRequest(files=notes))
        for slug in slugs:
            page = files.folder_page(services, ADMIN, slug, 5)
            assert page.total == 201 and page.more == {"n/": 195}
        listed = {name for kind, name in services.pool.held() if kind == "listings"}
        assert slugs[-1] in listed and len(listed) < len(slugs)
        assert services.pool.weight() <= 1024 * 1024 or {name for _, name in services.pool.held()} == {
            slugs[-1]
        }
        again = files.folder_page(services, ADMIN, slugs[0], 5, "n/", 190)  # evicted: walked afresh
        assert [f.path for f in again.files if f.path.startswith("n/")] == [
            f"n/{i}.md" for i in range(190, 195)
        ]
