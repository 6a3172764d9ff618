"""A keyed write whose process dies between its commit and recording its result: a repeat with the
key answers the version (or proposal) that landed, and nothing lands twice, on both control stores.

The write runs in a child process that SIGKILLs itself at the seam (the control store call that
records the result, or the fence check just before main moves), so the death is a real one: no
`finally`, no release of the key, the reservation left as a dead node leaves it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.core.errors import KBError
from kbserver.core.model import Append, Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.context import Options
from kbserver.services.models import ProposalAccepted, WriteResult
from kbserver.services.reading import runs
from kbserver.services.writing import idempotency, proposals, writes
from kbserver.wiring import open_services
from tests.helpers import git_fsck

# argv: data folder, control URL ("" for SQLite), agent, the control store method to die in, request
_DIE_AT = """
import os, signal, sys
from pathlib import Path
from kbserver.core.errors import KBError
from kbserver.core.model import WriteRequest
from kbserver.services.writing import writes
from kbserver.services.access.auth import caller_for
from kbserver.services.context import Options
from kbserver.wiring import open_services

data, url, agent, seam, body = sys.argv[1:]
services = open_services(Path(data), Options(embedder=None, control_url=url or None))
setattr(services.control, seam, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))
writes.submit(services, caller_for(services, agent), "kb", WriteRequest.model_validate_json(body),
              idempotency_key="key-1")
print("the write returned: the seam was never reached", flush=True)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Services, str]]:
    """The services of a node on a fresh data folder, and the control URL its peers use ("" = SQLite)."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else ""
    services = open_services(tmp_path / "data", Options(embedder=None, control_url=url or None))
    kbs.create(services, ADMIN, "kb")
    for name, permission in (("bob", "read_write"), ("asker", "read_write_ask")):
        agents.create(services, ADMIN, name)
        agents.link(services, ADMIN, name, "kb", permission)
    writes.submit(
        services, ADMIN, "kb", WriteRequest(files=[Create(path="log.md", mode="create", content="")])
    )
    yield services, url
    services.close()


def _append(line: str, run_id: str | None = None) -> WriteRequest:
    """An append applies again without a conflict: only the key can keep it from landing twice."""
    return WriteRequest(files=[Append(path="log.md", mode="append", content=line)], run_id=run_id)


def _die_writing(services: Services, url: str, agent: str, seam: str, req: WriteRequest) -> str:
    """Run `req` as `agent` in a child process that dies at `seam`; main's head before it."""
    before = services.repos.repo("kb").head()
    assert before is not None
    data = services.repos.path("kb").parent.parent
    child = subprocess.run(
        [sys.executable, "-c", _DIE_AT, str(data), url, agent, seam, req.model_dump_json()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, (child.returncode, child.stdout, child.stderr)
    return before


def _since(services: Services, version: str) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--format=%H", f"{version}..main"],
        cwd=services.repos.path("kb"),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def _pending_key(services: Services) -> bool:
    """Whether the dead write left its reservation without a result (as a dead node would)."""
    held = services.control.reserve_key(
        "agent:bob", "kb", "key-1", "", 0.0, float("inf"), float("inf")
    )  # another body: never reserves, only shows the row
    return not isinstance(held, int) and held.result is None


@pytest.mark.parametrize("abandon", [None, 0.0])  # the real bound, or at once
def test_a_repeat_after_dying_between_commit_and_record_answers_the_committed_version(
    node: tuple[Services, str], monkeypatch: pytest.MonkeyPatch, abandon: float | None
) -> None:
    services, url = node
    repo = services.repos.repo("kb")
    before = _die_writing(services, url, "bob", "finish_key", _append("once\n"))
    landed = _since(services, before)
    assert len(landed) == 1 and repo.view(landed[0]).read("log.md") == b"once\n"
    assert _pending_key(services)
    # At once, or after the reservation counts as abandoned (a takeover that would write again):
    if abandon is not None:
        monkeypatch.setattr(idempotency, "abandon_seconds", lambda services: abandon)
    bob = caller_for(services, "bob")
    again = writes.submit(services, bob, "kb", _append("once\n"), idempotency_key="key-1")
    assert isinstance(again, WriteResult)
    assert again.version == landed[0] and again.parent == before
    assert [(f.path, f.mode) for f in again.files] == [("log.md", "append")]
    assert again.files[0].sha256 == hashlib.sha256(b"once\n").hexdigest()
    assert _since(services, before) == landed  # nothing written twice
    assert not _pending_key(services)  # the result is recorded now: later repeats read it
    third = writes.submit(services, bob, "kb", _append("once\n"), idempotency_key="key-1")
    assert third == again
    git_fsck(services.repos.path("kb"))


def test_the_key_of_another_caller_or_body_is_not_confused_with_the_dead_write(
    node: tuple[Services, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    services, url = node
    before = _die_writing(services, url, "bob", "finish_key", _append("bob's\n"))
    agents.create(services, ADMIN, "carol")
    agents.link(services, ADMIN, "carol", "kb", "read_write")
    carol = caller_for(services, "carol")
    mine = writes.submit(services, carol, "kb", _append("bob's\n"), idempotency_key="key-1")
    assert isinstance(mine, WriteResult) and len(_since(services, before)) == 2  # her own write
    monkeypatch.setattr(idempotency, "_wait_seconds", lambda services: 0.3)
    with pytest.raises(KBError) as refused:  # bob's key with another body
        writes.submit(
            services, caller_for(services, "bob"), "kb", _append("other\n"), idempotency_key="key-1"
        )
    assert refused.value.code == "invalid_request"
    assert len(_since(services, before)) == 2


def test_a_repeat_after_dying_before_the_commit_writes_once(
    node: tuple[Services, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    services, url = node
    repo = services.repos.repo("kb")
    before = _die_writing(
        services, url, "bob", "key_fence_current", _append("late\n")
    )  # under the lock, pre-commit
    assert _since(services, before) == []
    bob = caller_for(services, "bob")
    monkeypatch.setattr(idempotency, "_wait_seconds", lambda services: 0.3)
    with pytest.raises(KBError) as waiting:  # not abandoned yet: the key is still held
        writes.submit(services, bob, "kb", _append("late\n"), idempotency_key="key-1")
    assert waiting.value.code == "busy" and _since(services, before) == []
    monkeypatch.setattr(idempotency, "abandon_seconds", lambda services: 0.0)
    written = writes.submit(services, bob, "kb", _append("late\n"), idempotency_key="key-1")
    assert isinstance(written, WriteResult) and _since(services, before) == [written.version]
    assert repo.view(written.version).read("log.md") == b"late\n"
    again = writes.submit(services, bob, "kb", _append("late\n"), idempotency_key="key-1")
    assert again == written and _since(services, before) == [written.version]
    git_fsck(services.repos.path("kb"))


@pytest.mark.parametrize("abandon", [None, 0.0])  # the real bound, or at once
def test_a_repeat_after_a_proposal_died_unrecorded_answers_that_proposal(
    node: tuple[Services, str], monkeypatch: pytest.MonkeyPatch, abandon: float | None
) -> None:
    services, url = node
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    req = _append("asked\n", run.id)
    _die_writing(services, url, "asker", "finish_key", req)
    pending = proposals.listing(services, ADMIN, "kb", "pending")
    assert len(pending.proposals) == 1
    if abandon is not None:
        monkeypatch.setattr(idempotency, "abandon_seconds", lambda services: abandon)
    again = writes.submit(services, asker, "kb", req, idempotency_key="key-1")
    assert isinstance(again, ProposalAccepted)
    assert again.proposal.id == pending.proposals[0].id
    assert len(proposals.listing(services, ADMIN, "kb", "pending").proposals) == 1
    third = writes.submit(services, asker, "kb", req, idempotency_key="key-1")
    assert third == again and json.loads(third.model_dump_json())["proposal"]["status"] == "pending"


def test_a_repeat_after_dying_before_the_commit_is_served_within_the_writer_s_bound(
    node: tuple[Services, str],
) -> None:
    services, url = node
    before = _die_writing(services, url, "bob", "key_fence_current", _append("late\n"))
    assert _pending_key(services) and _since(services, before) == []
    # Another node whose writer gives up after 0.5 s: a live write holds a key 2 x 0.5 + 5 s at most.
    data = services.repos.path("kb").parent.parent
    quick = open_services(data, Options(embedder=None, control_url=url or None, write_wait_seconds=0.5))
    try:
        assert idempotency.abandon_seconds(quick) == 6.0
        bob = caller_for(quick, "bob")
        written = writes.submit(quick, bob, "kb", _append("late\n"), idempotency_key="key-1")
        assert isinstance(written, WriteResult) and _since(services, before) == [written.version]
        again = writes.submit(
            services, caller_for(services, "bob"), "kb", _append("late\n"), idempotency_key="key-1"
        )
        assert again == written and _since(services, before) == [written.version]
    finally:
        quick.close()
    git_fsck(services.repos.path("kb"))


def test_a_proposal_that_records_itself_after_its_key_was_taken_over_is_refused(
    node: tuple[Services, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    services, _ = node
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    req = _append("asked\n", run.id)
    reached, go = threading.Event(), threading.Event()
    add = services.control.add_proposal

    def slow_add(*args: object, **kwargs: object) -> bool:
        if not reached.is_set():  # the first write: its proposal is committed, not yet recorded
            reached.set()
            go.wait(60)
        return add(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(services.control, "add_proposal", slow_add)
    outcome: list[object] = []

    def first() -> None:
        try:
            outcome.append(writes.submit(services, asker, "kb", req, idempotency_key="key-1"))
        except KBError as err:
            outcome.append(err.code)

    thread = threading.Thread(target=first)
    thread.start()
    assert reached.wait(60)
    monkeypatch.setattr(idempotency, "abandon_seconds", lambda services: 0.0)  # it looks dead
    repeat = writes.submit(services, asker, "kb", req, idempotency_key="key-1")
    assert isinstance(repeat, ProposalAccepted)
    go.set()
    thread.join(60)
    assert outcome == ["busy"]  # told to send again, not acknowledged with a second proposal
    pending = proposals.listing(services, ADMIN, "kb", "pending").proposals
    assert [p.id for p in pending] == [repeat.proposal.id]
    assert writes.submit(services, asker, "kb", req, idempotency_key="key-1") == repeat
