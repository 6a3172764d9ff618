"""Versions at the service layer: history pages, one version's diff, revert."""

from __future__ import annotations

import pytest

from kbserver.core.errors import ApprovalUnavailable, InvalidRequest, NotFound
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import runs
from kbserver.services.reviewing import versions
from kbserver.services.writing import writes
from tests.helpers import git_fsck, state


def _write(services: Services, kb: str, *files: dict[str, str]) -> str:
    out = writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": list(files)}))
    assert isinstance(out, WriteResult)
    return out.version


def test_history_pages_newest_first_and_by_path(services: Services, kb: str) -> None:
    created = versions.listing(services, ADMIN, kb).versions[-1].version
    v1 = _write(services, kb, {"path": "a.md", "mode": "create", "content": "one\n"})
    v2 = _write(services, kb, {"path": "b.md", "mode": "create", "content": "two\n"})
    v3 = _write(services, kb, {"path": "a.md", "mode": "append", "content": "three\n"})
    page = versions.listing(services, ADMIN, kb, limit=2)
    assert [v.version for v in page.versions] == [v3, v2] and page.next_cursor == v1
    rest = versions.listing(services, ADMIN, kb, limit=2, cursor=page.next_cursor)
    assert [v.version for v in rest.versions] == [v1, created] and rest.next_cursor is None
    assert [v.version for v in versions.listing(services, ADMIN, kb, path="a.md").versions] == [v3, v1]
    assert versions.listing(services, ADMIN, kb, path="nothing.md").versions == []
    for bad in (0, versions.MAX_LIMIT + 1):
        with pytest.raises(InvalidRequest):
            versions.listing(services, ADMIN, kb, limit=bad)


def test_one_version_has_its_diff(services: Services, kb: str) -> None:
    _write(services, kb, {"path": "a.md", "mode": "create", "content": "one\n"})
    v = _write(
        services,
        kb,
        {"path": "a.md", "mode": "edit", "old_string": "one", "new_string": "uno"},
        {"path": "b.md", "mode": "create", "content": "two\n"},
    )
    detail = versions.get(services, ADMIN, kb, v)
    assert detail.version == v and detail.paths == ["a.md", "b.md"]
    assert [(d.path, d.change) for d in detail.diff] == [("a.md", "modified"), ("b.md", "added")]
    assert "-one" in detail.diff[0].patch and "+uno" in detail.diff[0].patch
    with pytest.raises(NotFound):
        versions.get(services, ADMIN, kb, "0" * 40)


def test_revert_makes_the_files_equal_that_version(services: Services, kb: str) -> None:
    v1 = _write(services, kb, {"path": "a.md", "mode": "create", "content": "one\n"})
    _write(
        services,
        kb,
        {"path": "a.md", "mode": "overwrite", "content": "changed\n"},
        {"path": "b.md", "mode": "create", "content": "new\n"},
    )
    out = versions.revert(services, ADMIN, kb, v1)
    repo = services.repos.repo(kb)
    assert dict(repo.view(out.version).walk()) == dict(repo.view(v1).walk())  # same blobs, same paths
    assert versions.get(services, ADMIN, kb, out.version).kind == "revert"
    before = state(services, kb)
    with pytest.raises(InvalidRequest):  # nothing to revert any more
        versions.revert(services, ADMIN, kb, v1)
    assert state(services, kb) == before
    git_fsck(repo.path)


def test_only_read_write_may_revert(services: Services, kb: str) -> None:
    v1 = _write(services, kb, {"path": "a.md", "mode": "create", "content": "one\n"})
    _write(services, kb, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    agents.create(services, ADMIN, "asker")
    agents.link(services, ADMIN, "asker", kb, "read_write_ask")
    asker = caller_for(services, "asker")
    runs.start(services, asker, interactive=True)
    before = state(services, kb)
    with pytest.raises(ApprovalUnavailable):
        versions.revert(services, asker, kb, v1)
    assert state(services, kb) == before


def test_a_revert_plan_says_what_it_would_change_and_writes_nothing(services: Services, kb: str) -> None:
    v1 = _write(
        services,
        kb,
        {"path": "a.md", "mode": "create", "content": "one\n"},
        {"path": "gone.md", "mode": "create", "content": "soon deleted\n"},
    )
    v2 = _write(services, kb, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    v3 = _write(services, kb, {"path": "b.md", "mode": "create", "content": "new\n"})
    v4 = _write(services, kb, {"path": "gone.md", "mode": "delete"})
    before = state(services, kb)
    plan = versions.revert_plan(services, ADMIN, kb, v1)
    assert state(services, kb) == before  # a plan writes nothing
    assert (plan.restored, plan.recreated, plan.removed) == (["a.md"], ["gone.md"], ["b.md"])
    assert plan.files == 3 and plan.later_count == 3
    assert [v.version for v in plan.later] == [v4, v3, v2] and plan.target.version == v1
    same = versions.revert_plan(services, ADMIN, kb, v4)  # the head: nothing to change
    assert same.files == 0 and same.later_count == 0
    agents.create(services, ADMIN, "asker")
    agents.link(services, ADMIN, "asker", kb, "read_write_ask")
    with pytest.raises(ApprovalUnavailable):
        versions.revert_plan(services, caller_for(services, "asker"), kb, v1)
    with pytest.raises(NotFound):
        versions.revert_plan(services, ADMIN, kb, "0" * 40)
