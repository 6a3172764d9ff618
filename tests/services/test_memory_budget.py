"""The memory budget: open repositories and indexes share one LRU pool; eviction changes nothing."""

from __future__ import annotations

from pathlib import Path

from kbserver.core.model import Append, Create, WriteRequest
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.reading import files, search
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.helpers import git_fsck


def test_many_kbs_under_a_tiny_budget_stay_correct(tmp_path: Path) -> None:
    services = open_services(tmp_path / "data", Options(fsync=False, memory_budget_mb=1))
    services.start()
    slugs = [f"kb{n}" for n in range(8)]
    try:
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
    finally:
        services.close()
    for slug in slugs:
        git_fsck(tmp_path / "data" / "kbs" / f"{slug}.git")
