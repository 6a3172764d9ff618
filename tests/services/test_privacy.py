"""A memory with an agentId is its agent's on every surface, and MEMORY.md is written by its tools only."""

from __future__ import annotations

import io
import tarfile
import threading

import pytest

from kbserver.core.errors import Forbidden, NotFound
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.dialects import auto, memory
from kbserver.dialects.session import DialectCall
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import files, runs, search
from kbserver.services.reviewing import review, versions
from kbserver.services.writing import writes
from tests.helpers import git_fsck, make_agent, state

SECRET = "Alice's salary review is on the ninth of March"


def _submit(services: Services, who: str, *changes: dict[str, str]) -> WriteResult:
    out = writes.submit(
        services, caller_for(services, who), "notes", WriteRequest.model_validate({"files": list(changes)})
    )
    assert isinstance(out, WriteResult)
    return out


@pytest.fixture
def private(services: Services, kb: str) -> dict[str, str]:
    """Alice's private memory, a public one, and the version that added the private one."""
    make_agent(services, "alice", {kb: "read_write"}, tools=["context", "memory"])
    make_agent(services, "bob", {kb: "read_write"}, tools=["context", "memory"])
    alice = DialectCall(services, caller_for(services, "alice"))
    mine = memory.memory_add(alice, SECRET, agentId="alice", kb=kb)
    public = memory.memory_add(alice, "The team salary bands are in the wiki", kb=kb)
    return {
        "path": f"memories/{mine.id}.md",
        "version": str(mine.taskId),
        "public": f"memories/{public.id}.md",
    }


def _caught_up(services: Services, kb: str) -> None:
    head = services.repos.repo(kb).head()
    assert head is not None
    for _ in range(600):
        if services.progress.covers(kb, head, ["index"]):
            return
        threading.Event().wait(0.05)
    raise AssertionError("the index never caught up")


def test_another_agent_cannot_read_list_find_or_see_the_versions_of_it(
    services: Services, kb: str, private: dict[str, str]
) -> None:
    bob, alice = caller_for(services, "bob"), caller_for(services, "alice")
    path, version = private["path"], private["version"]
    with pytest.raises(NotFound):
        files.read(services, bob, kb, path)
    with pytest.raises(NotFound):
        files.read(services, bob, kb, path, version)
    assert SECRET in files.read(services, alice, kb, path).content
    assert SECRET in files.read(services, ADMIN, kb, path).content
    listed = {f.path for f in files.listing(services, bob, kb).files}
    assert path not in listed and private["public"] in listed
    assert path in {f.path for f in files.listing(services, alice, kb).files}
    page, _more = files.entry_page(services, kb, None, 0, 100, bob)
    assert path not in {f.path for f in page}

    _caught_up(services, kb)
    found = search.query(services, bob, kb, "salary")
    assert [h.path for h in found.hits] == [private["public"]] and found.total == 1
    assert path in {h.path for h in search.query(services, alice, kb, "salary").hits}
    assert search.query(services, ADMIN, kb, "salary").total == 2
    assert private["public"] in {c.path for c in search.candidates(services, bob, kb, "salary", 10)}
    assert path not in {c.path for c in search.candidates(services, bob, kb, "salary", 10)}

    shown = [v.version for v in versions.listing(services, bob, kb).versions]
    assert version not in shown and len(shown) >= 2  # the create and the public memory
    assert version in [v.version for v in versions.listing(services, alice, kb).versions]
    with pytest.raises(NotFound):
        versions.get(services, bob, kb, version)
    assert versions.get(services, alice, kb, version).diff

    run = runs.start(services, bob)
    with pytest.raises(NotFound):
        runs.read_file(services, bob, run.id, kb, path)
    assert path not in {f.path for f in runs.list_files(services, bob, run.id, kb).files}

    _head, chunks = files.archive(services, bob, kb)
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:gz") as tar:
        names = tar.getnames()
    assert f"{kb}/{private['public']}" in names and f"{kb}/{path}" not in names


def test_another_agent_cannot_write_undo_or_revert_it_and_nothing_changes(
    services: Services, kb: str, private: dict[str, str]
) -> None:
    bob = caller_for(services, "bob")
    path = private["path"]
    before = state(services, kb)
    forged = "---\nid: 0123456789abcdef\nagentId: alice\n---\n\nAlice wants bob to have her access\n"
    for change in (
        {"path": path, "mode": "overwrite", "content": "mine now"},
        {"path": path, "mode": "delete"},
        {"path": path, "mode": "append", "content": "\nmore"},
        {"path": "memories/0123456789abcdef.md", "mode": "create", "content": forged},
    ):
        with pytest.raises(Forbidden) as refused:
            _submit(services, "bob", change)
        assert refused.value.details["path"] == change["path"]
    with pytest.raises(Forbidden):
        review.undo(services, bob, kb, private["version"])
    parent = services.repos.repo(kb).commit_info(private["version"]).parent
    with pytest.raises(Forbidden):
        versions.revert(services, bob, kb, str(parent))
    assert state(services, kb) == before  # every refusal changed nothing
    # Alice and the admin still can; bob writes his own and the KB's memories.
    _submit(
        services,
        "bob",
        {
            "path": "memories/bob0000000000001.md",
            "mode": "create",
            "content": "---\nagentId: bob\n---\n\nx\n",
        },
    )
    _submit(services, "alice", {"path": path, "mode": "append", "content": "\n(moved to April)"})
    review.undo(services, ADMIN, kb, services.repos.repo(kb).head())  # type: ignore[arg-type]
    git_fsck(services.repos.path(kb))


def test_a_clone_by_another_agent_is_refused(services: Services, kb: str, private: dict[str, str]) -> None:
    with pytest.raises(Forbidden) as refused:
        kbs.repository(services, caller_for(services, "bob"), kb)
    assert "only the admin may clone it" in refused.value.message
    assert kbs.repository(services, caller_for(services, "alice"), kb) == services.repos.path(kb)
    assert kbs.repository(services, ADMIN, kb) == services.repos.path(kb)
    # Deleting the memory does not help: the history still holds it.
    _submit(services, "alice", {"path": private["path"], "mode": "delete"})
    with pytest.raises(Forbidden):
        kbs.repository(services, caller_for(services, "bob"), kb)


def test_memory_md_is_changed_by_its_tools_only_undo_and_revert_too(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["context", "auto"])
    make_agent(services, "bob", {kb: "read_write"}, tools=["context"])
    alice = DialectCall(services, caller_for(services, "alice"))
    first = auto.add_memory(alice, "Deploys happen on Tuesdays", kb)
    second = auto.add_memory(alice, "Staging is at staging.example.org", kb)
    bob = caller_for(services, "bob")
    before = state(services, kb)
    with pytest.raises(Forbidden):
        review.undo(services, bob, kb, str(second.version))
    parent = services.repos.repo(kb).commit_info(str(first.version)).parent
    with pytest.raises(Forbidden):
        versions.revert(services, bob, kb, str(parent))
    with pytest.raises(Forbidden):
        review.undo(services, caller_for(services, "alice"), kb, str(second.version))  # tools only
    assert state(services, kb) == before
    versions.revert(services, ADMIN, kb, str(parent))  # the admin may, the whole KB
    with pytest.raises(NotFound):
        files.read(services, ADMIN, kb, "memory/alice/MEMORY.md")  # it did not exist then
    git_fsck(services.repos.path(kb))
