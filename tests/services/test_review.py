"""Review at the service layer: the KB overview, what a stale edit ran into, undo and the marker."""

from __future__ import annotations

import pytest

from kbserver.config import Settings
from kbserver.core.errors import ApprovalUnavailable, Forbidden, InvalidRequest, NotFound, Stale
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import EditConflict, KBOverview, ProposalAccepted
from kbserver.services.reading import files, runs
from kbserver.services.reviewing import inbox, review
from kbserver.services.writing import writes
from tests.helpers import git_fsck, make_agent, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def _write(services: Services, slug: str, who: str | None, *changes: dict[str, str]) -> str:
    caller = caller_for(services, who) if who else ADMIN
    out = writes.submit(services, caller, slug, WriteRequest.model_validate({"files": list(changes)}))
    assert isinstance(out, WriteResult)
    return out.version


def test_the_overview_counts_what_awaits_review(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    make_agent(services, "asker", {kb: "read_write_ask"})
    _write(services, kb, "bob", {"path": "a.md", "mode": "create", "content": "one\n"})
    head = _write(services, kb, "bob", {"path": "a.md", "mode": "append", "content": "two\n"})
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    change = {"path": "b.md", "mode": "create", "content": "x"}
    asked = writes.submit(
        services, asker, kb, WriteRequest.model_validate({"files": [change], "run_id": run.id})
    )
    assert isinstance(asked, ProposalAccepted)
    [row] = review.overview(services, ADMIN)
    assert isinstance(row, KBOverview)
    assert (row.slug, row.description, row.head, row.last_writer) == (kb, "Team notes", head, "agent:bob")
    assert (row.file_count, row.pending, row.unreviewed, row.unreviewed_more) == (2, 1, 2, False)
    assert row.time is not None and row.time.startswith("20")
    review.mark(services, ADMIN, kb, head)
    [after] = review.overview(services, ADMIN)
    assert (after.unreviewed, after.pending) == (0, 1)


def test_only_the_admin_sees_the_overview(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    with pytest.raises(Forbidden):
        review.overview(services, caller_for(services, "bob"))


def test_a_conflict_shows_the_file_now_who_changed_it_and_the_diff_to_the_typed_text(
    services: Services, kb: str
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    _write(services, kb, None, {"path": "a.md", "mode": "create", "content": "mine\n"})
    theirs = _write(services, kb, "bob", {"path": "a.md", "mode": "overwrite", "content": "theirs\n"})
    before = state(services, kb)
    found = review.conflict(services, ADMIN, kb, "a.md", "typed\n")
    assert isinstance(found, EditConflict)
    assert found.current is not None
    assert (found.current.content, found.current.version) == ("theirs\n", theirs)
    assert found.current.sha256 == files.read(services, ADMIN, kb, "a.md").sha256
    assert found.changed_by is not None
    assert (found.changed_by.version, found.changed_by.author) == (theirs, "agent:bob")
    [entry] = found.diff
    assert (entry.path, entry.change) == ("a.md", "modified")
    assert "-theirs" in entry.patch and "+typed" in entry.patch
    assert state(services, kb) == before  # looking changes nothing


def test_a_conflict_on_a_deleted_file_has_no_current_file(services: Services, kb: str) -> None:
    _write(services, kb, None, {"path": "a.md", "mode": "create", "content": "x\n"})
    gone = _write(services, kb, None, {"path": "a.md", "mode": "delete"})
    found = review.conflict(services, ADMIN, kb, "a.md", "typed\n")
    assert found.current is None
    assert found.changed_by is not None and found.changed_by.version == gone
    assert [(d.path, d.change) for d in found.diff] == [("a.md", "added")]


def test_a_conflict_refuses_a_bad_path_and_a_hidden_kb(services: Services, kb: str) -> None:
    make_agent(services, "stranger", {})
    with pytest.raises(InvalidRequest):
        review.conflict(services, ADMIN, kb, "../x.md", "t")
    with pytest.raises(NotFound):
        review.conflict(services, caller_for(services, "stranger"), kb, "README.md", "t")


def test_undo_puts_the_files_back_and_refuses_what_changed_again(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    make_agent(services, "asker", {kb: "read_write_ask"})
    first = _write(services, kb, "bob", {"path": "a.md", "mode": "create", "content": "one\n"})
    second = _write(services, kb, "bob", {"path": "a.md", "mode": "append", "content": "two\n"})
    before = state(services, kb)
    with pytest.raises(Stale) as stale:
        review.undo(services, ADMIN, kb, first)
    assert stale.value.details["path"] == "a.md" and stale.value.details["changed_in"] == second
    assert stale.value.details["changed_in_all"] == [second]
    with pytest.raises(ApprovalUnavailable):
        review.undo(services, caller_for(services, "asker"), kb, second)
    assert state(services, kb) == before
    undone = review.undo(services, caller_for(services, "bob"), kb, second)
    assert files.read(services, ADMIN, kb, "a.md").content == "one\n"
    assert services.repos.repo(kb).commit_info(undone.version).trailers["Kb-Undo"] == second
    git_fsck(services.repos.path(kb))


def test_the_marker_is_the_admins_and_moves_to_any_version_on_main(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    first = _write(services, kb, "bob", {"path": "a.md", "mode": "create", "content": "one\n"})
    second = _write(services, kb, "bob", {"path": "b.md", "mode": "create", "content": "two\n"})
    assert [v.version for v in review.status(services, ADMIN, kb).unreviewed] == [second, first]
    assert review.mark(services, ADMIN, kb, second).unreviewed == []
    back = review.mark(services, ADMIN, kb, first)  # backwards too
    assert (back.reviewed, [v.version for v in back.unreviewed]) == (first, [second])
    with pytest.raises(Forbidden):
        review.mark(services, caller_for(services, "bob"), kb, second)
    with pytest.raises(NotFound):
        review.mark(services, ADMIN, kb, "0" * 40)
    assert review.status(services, ADMIN, kb).reviewed == first


@pytest.mark.parametrize(("limit", "scan"), [(5, 200), (30, 200), (7, 40), (1, 3)])
def test_a_path_s_history_pages_through_every_change_once(
    services: Services, kb: str, limit: int, scan: int
) -> None:
    def put(path: str, n: int) -> str:
        mode = "create" if n == 0 else "overwrite"
        req = WriteRequest.model_validate({"files": [{"path": path, "mode": mode, "content": f"{n}\n"}]})
        out = writes.submit(services, ADMIN, kb, req)
        assert isinstance(out, WriteResult)
        return out.version

    made = [put("a.md", 0)]
    put("b.md", 0)
    for n in range(1, 90):  # runs of changes of a.md between runs of versions that leave it alone
        if n % 10 < 6:
            made.append(put("a.md", n))
        else:
            put("b.md", n)
    repo = services.repos.repo(kb)
    want = list(repo.path_history(str(repo.head()), "a.md"))
    assert want[::-1] == made
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(200):
        page = review.history(services, ADMIN, kb, "a.md", None, None, limit, cursor, scan)
        assert len(page.versions) <= limit
        seen += [v.version for v in page.versions]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == want


def test_an_undo_refusal_names_every_later_version_that_changed_the_file(services: Services, kb: str) -> None:
    first = _write(services, kb, None, {"path": "a.md", "mode": "create", "content": "one\n"})
    later = [
        _write(services, kb, None, {"path": "a.md", "mode": "append", "content": f"{n}\n"}) for n in range(7)
    ]
    _write(services, kb, None, {"path": "other.md", "mode": "create", "content": "x\n"})
    before = state(services, kb)
    with pytest.raises(Stale) as stale:
        review.undo(services, ADMIN, kb, first)
    assert stale.value.details["changed_in_all"] == later[::-1]  # newest first, the other file's left out
    assert stale.value.details["changed_in"] == later[-1]
    assert "in 7 later versions" in stale.value.message and later[-1][:12] in stale.value.message
    assert "and 2 older" in stale.value.message
    assert state(services, kb) == before


def test_a_group_marked_reviewed_leaves_the_marker_and_the_others(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    make_agent(services, "ann", {kb: "read_write"})
    b1 = _write(services, kb, "bob", {"path": "b1.md", "mode": "create", "content": "1\n"})
    a1 = _write(services, kb, "ann", {"path": "a1.md", "mode": "create", "content": "1\n"})
    b2 = _write(services, kb, "bob", {"path": "b2.md", "mode": "create", "content": "2\n"})
    left = review.mark_each(services, ADMIN, kb, [b1, b2])
    assert [v.version for v in left.unreviewed] == [a1] and left.reviewed is None
    assert [o.unreviewed for o in review.overview(services, ADMIN) if o.slug == kb] == [1]
    found = inbox.inbox(services, ADMIN, kb)
    assert [i.version.version for g in found.groups for i in g.items] == [a1]
    before = state(services, kb)
    for bad, error in (([], InvalidRequest), (["0" * 40], NotFound), (["zz"], InvalidRequest)):
        with pytest.raises(error):
            review.mark_each(services, ADMIN, kb, bad)
    with pytest.raises(Forbidden):
        review.mark_each(services, caller_for(services, "bob"), kb, [a1])
    assert state(services, kb) == before and review.status(services, ADMIN, kb).unreviewed[0].version == a1


def test_a_run_s_label_names_its_task_in_the_inbox(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    labelled = runs.start(services, bob, label="  triage open issues ")
    plain = runs.start(services, bob)

    def write(run_id: str, path: str, message: str) -> None:
        req = WriteRequest.model_validate(
            {
                "run_id": run_id,
                "message": message,
                "files": [{"path": path, "mode": "create", "content": "x\n"}],
            }
        )
        writes.submit(services, bob, kb, req)

    write(labelled.id, "a.md", "first note")
    write(plain.id, "b.md", "sorted the backlog")
    tasks = {g.run: g.task for g in inbox.inbox(services, ADMIN, kb).groups}
    assert tasks == {labelled.id: "triage open issues", plain.id: "sorted the backlog"}
    assert services.control.run(labelled.id).label == "triage open issues"  # type: ignore[union-attr]
    before = state(services, kb)
    for bad in ("two\nlines", "x" * 201):
        with pytest.raises(InvalidRequest):
            runs.start(services, bob, label=bad)
    assert state(services, kb) == before
