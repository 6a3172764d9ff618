"""A version's files folder by folder, kept per version and carried forward by tree diffs: always
what a fresh walk of the version gives, for the admin and for an agent who may not see a memory."""

from __future__ import annotations

from kbserver.core.model import Caller, WriteRequest, WriteResult
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import files, folders
from kbserver.services.reading.privacy import hidden
from kbserver.services.writing import writes
from tests.helpers import make_agent


def _private(owner: str, n: int) -> str:
    return f"---\nid: m{n}\nagentId: {owner}\n---\n\nMemory {n} of {owner}.\n"


def _write(services: Services, kb: str, *changes: dict[str, str]) -> str:
    out = writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": list(changes)}))
    assert isinstance(out, WriteResult)
    return out.version


def _walked(services: Services, kb: str, caller: Caller, version: str) -> dict[str, list[str]]:
    repo = services.repos.repo(kb)
    out: dict[str, list[str]] = {}
    for path, blob in repo.view(version).walk():
        if not hidden(caller, repo, path, blob):
            out.setdefault(path.rsplit("/", 1)[0] + "/" if "/" in path else "", []).append(path)
    return out


def test_a_kept_listing_carried_through_writes_equals_a_fresh_walk(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    repo = services.repos.repo(kb)
    steps: list[list[dict[str, str]]] = [
        [{"path": f"a/{n}.md", "mode": "create", "content": f"{n}\n"} for n in (3, 1, 2)],
        [{"path": "a/b/deep.md", "mode": "create", "content": "deep\n"}],
        [
            {"path": "memories/m1.md", "mode": "create", "content": _private("alice", 1)},
            {"path": "memories/m2.md", "mode": "create", "content": _private("bob", 2)},
        ],
        [{"path": "a/0.md", "mode": "create", "content": "0\n"}, {"path": "a/2.md", "mode": "delete"}],
        [{"path": "a/b/deep.md", "mode": "delete"}],  # the folder goes with its last file
        [{"path": "memories/m2.md", "mode": "overwrite", "content": _private("alice", 2)}],  # no longer bob's
        [{"path": "top.md", "mode": "create", "content": "top\n"}],
    ]
    for step in steps:
        version = _write(services, kb, *step)
        for who in (ADMIN, bob):
            got = folders.listing(who, repo, kb, version, services.pool)
            assert got.folders == _walked(services, kb, who, version)
            assert set(got.blobs) == {p for ps in got.folders.values() for p in ps}
            # kept: a version never changes
            assert folders.listing(who, repo, kb, version, services.pool) is got
    last = folders.listing(bob, repo, kb, repo.head(), services.pool)
    assert "memories/" not in last.folders and "a/b/" not in last.folders
    assert last.folders["a/"] == ["a/0.md", "a/1.md", "a/3.md"]


def test_the_kb_page_counts_each_folder_after_every_write(services: Services, kb: str) -> None:
    _write(
        services, kb, *({"path": f"big/{n:03}.md", "mode": "create", "content": f"{n}\n"} for n in range(15))
    )
    first = files.folder_page(services, ADMIN, kb, 4)
    assert first.more == {"big/": 11} and [f.path for f in first.files][-4:] == [
        f"big/{n:03}.md" for n in range(4)
    ]
    _write(
        services,
        kb,
        {"path": "big/000.md", "mode": "delete"},
        {"path": "big/100.md", "mode": "create", "content": "x\n"},
    )
    _write(services, kb, {"path": "big/001.md", "mode": "delete"})
    after = files.folder_page(services, ADMIN, kb, 4, "big/", 10)
    assert after.total == first.total - 1
    shown = [f.path for f in after.files if f.path.startswith("big/")]
    assert shown == ["big/012.md", "big/013.md", "big/014.md", "big/100.md"] and after.more == {}
    tail = files.folder_page(services, ADMIN, kb, 4, "big/", 8)
    assert [f.path for f in tail.files if f.path.startswith("big/")] == [
        f"big/0{n}.md" for n in (10, 11, 12, 13)
    ]
    assert tail.more == {"big/": 2}
