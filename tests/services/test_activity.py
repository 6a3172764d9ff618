"""A KB at a glance from its real history: versions per author per day, the week's net changes from
the files at its start, the walk bounded by the window and moved forward with the head."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from kbserver.core.model import Create, Delete, Overwrite, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reviewing import activity
from kbserver.services.writing import writes
from tests.helpers import git_fsck, make_agent

DAY = 86400


def _git(cwd: Path, *args: str, days_ago: float = 0) -> str:
    when = f"@{int(time.time() - days_ago * DAY)} +0000"
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    env.update(
        GIT_AUTHOR_NAME="admin", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="admin", GIT_COMMITTER_EMAIL="a@x"
    )
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _older_history(services: Services, slug: str, tmp_path: Path) -> str:
    """Make main a history C git dated 10 and 9 days ago (README, then old.md and gone.md); its head."""
    bare = services.repos.path(slug)
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True)
    _git(work, "checkout", "-q", "--orphan", "older")
    _git(work, "commit", "-q", "-m", "the KB begins", days_ago=10)
    (work / "old.md").write_text("old\n")
    (work / "gone.md").write_text("gone\n")
    _git(work, "add", "old.md", "gone.md")
    _git(work, "commit", "-q", "-m", "two files", days_ago=9)
    _git(work, "push", "-q", "-f", "origin", "older:main")
    return _git(work, "rev-parse", "HEAD").strip()


def test_the_week_counts_from_its_start_and_the_chart_by_day(
    services: Services, kb: str, tmp_path: Path
) -> None:
    base = _older_history(services, kb, tmp_path)
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    for files in (
        [Overwrite(mode="overwrite", path="old.md", content="new text\n")],
        [Delete(mode="delete", path="gone.md")],
        [Create(mode="create", path="new.md", content="new\n")],
        [Create(mode="create", path="tmp.md", content="brief\n")],
        [Delete(mode="delete", path="tmp.md")],
    ):
        writes.submit(services, bob, kb, WriteRequest(files=files))  # type: ignore[arg-type]
    week = activity.week(services, ADMIN, kb)
    assert week.base == base and week.versions == 5 and week.complete
    assert {k: [f.path for f in v] for k, v in week.files.items()} == {
        "added": ["new.md"],  # tmp.md came and went: in no list
        "modified": ["old.md"],
        "deleted": ["gone.md"],
    }
    assert week.counts == {"added": 1, "modified": 1, "deleted": 1}
    [bob_week] = week.authors
    assert (bob_week.author, bob_week.versions, bob_week.added, bob_week.modified, bob_week.deleted) == (
        "agent:bob",
        5,
        2,
        1,
        2,
    )
    glance = activity.glance(services, ADMIN, kb)
    assert glance.counts["agent:bob"][-1] == 5 and sum(glance.counts["agent:bob"]) == 5
    assert glance.counts["admin"][29 - 10] == 1 and glance.counts["admin"][29 - 9] == 1
    assert sum(glance.totals) == 7 and glance.days[-1] == time.strftime("%Y-%m-%d", time.gmtime())
    # Twenty days on, the commit of ten days ago is out of the 30-day window and the week is empty.
    later = activity.glance(services, ADMIN, kb, now=time.time() + 20 * DAY)
    assert sum(later.totals) == 6 and later.counts["admin"][0] == 1  # the one of nine days ago
    assert activity.week(services, ADMIN, kb, now=time.time() + 20 * DAY).versions == 0
    git_fsck(services.repos.path(kb))


def test_the_walk_moves_forward_with_the_head_and_stops_at_its_bound(
    services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    for n in range(4):
        writes.submit(
            services, bob, kb, WriteRequest(files=[Create(mode="create", path=f"{n}.md", content="x\n")])
        )
    first = activity.glance(services, ADMIN, kb)
    assert first.counts["agent:bob"][-1] == 4 and first.unreviewed == 4
    writes.submit(services, bob, kb, WriteRequest(files=[Create(mode="create", path="5.md", content="x\n")]))
    again = activity.glance(services, ADMIN, kb)  # walks one version, down to the head it had
    assert again.counts["agent:bob"][-1] == 5 and again.unreviewed == 5 and again.head != first.head
    assert activity.week(services, ADMIN, kb).counts["added"] == 6  # README.md and five files
    monkeypatch.setattr(activity, "MAX_WALK", 3)
    writes.submit(services, bob, kb, WriteRequest(files=[Create(mode="create", path="6.md", content="x\n")]))
    cut = activity.glance(services, ADMIN, kb)
    assert not cut.complete and sum(cut.totals) == 3
    assert cut.unreviewed == 6  # counted from the versions themselves past the walk's end


def test_the_lag_of_each_sink_counts_the_versions_it_has_not_covered(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    head = writes.submit(
        services, bob, kb, WriteRequest(files=[Create(mode="create", path="a.md", content="a\n")])
    )
    services.follower.catch_up(kb)
    lags = {lag.sink: lag for lag in activity.glance(services, ADMIN, kb).lags}
    assert lags["index"].covered == head.version and lags["index"].versions == 0  # type: ignore[union-attr]
    services.progress.record("index", kb, services.repos.repo(kb).commit_info(head.version).parent)  # type: ignore[union-attr]
    lags = {lag.sink: lag for lag in activity.glance(services, ADMIN, kb).lags}
    assert lags["index"].versions == 1 and lags["index"].seconds is not None and lags["index"].seconds >= 0
    services.follower.catch_up(kb)


def test_only_the_admin_sees_a_kbs_activity(services: Services, kb: str) -> None:
    from kbserver.core.errors import Forbidden, NotFound

    make_agent(services, "bob", {kb: "read_write"})
    bob = caller_for(services, "bob")
    with pytest.raises(Forbidden):
        activity.glance(services, bob, kb)
    with pytest.raises(Forbidden):
        activity.week(services, bob, kb)
    with pytest.raises(NotFound):
        activity.glance(services, ADMIN, "no-such-kb")
