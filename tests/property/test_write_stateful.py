"""Stateful property test of the whole write path (services → changes → store) against a dict model.

Random sequences of the five modes, with fresh and stale expected_sha256, multi-file calls,
concurrent pairs, reverts, and proposals that are approved or rejected; after every step main holds
exactly the model's files, after a revert they equal the model at that version, a proposal is
approved exactly when main carries its Kb-Proposal trailer, after waiting for the index it holds
exactly main's paths and sha256s, and C git fsck is clean.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kbserver.core.errors import InvalidRequest, KBError
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.services import kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs, search
from kbserver.services.reviewing import versions
from kbserver.services.writing import proposals, writes
from kbserver.wiring import open_services
from tests.helpers import git_fsck

PATHS = ["a.md", "b/c.md", "b/d.md", "e/f/g.md", "日志/2026-11.md"]
TEXT = st.text(alphabet=st.sampled_from("ab \nxyz咖啡"), max_size=12)
SLUG = "prop"


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


class WritePath(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kb-stateful-"))
        self.services = open_services(self.tmp / "data")
        self.services.start()  # the follower indexes every version, as in `kbserver serve`
        kbs.create(self.services, ADMIN, SLUG)
        self.model: dict[str, str] = {"README.md": self._read("README.md") or ""}
        self.versions = 1
        # (version, the model's files at it) for every version, oldest first
        self.history: list[tuple[str, dict[str, str]]] = [
            (self.services.repos.repo(SLUG).head() or "", dict(self.model))
        ]
        agents.create(self.services, ADMIN, "asker")
        agents.link(self.services, ADMIN, "asker", SLUG, "read_write_ask")
        self.asker = caller_for(self.services, "asker")
        self.run_id = runs.start(self.services, self.asker, interactive=True).id
        self.pending: list[tuple[str, dict[str, Any]]] = []  # (proposal id, its one file change)
        self.decided: dict[str, str] = {}  # proposal id -> approved | rejected
        self._lock = threading.Lock()

    def _read(self, path: str) -> str | None:
        repo = self.services.repos.repo(SLUG)
        data = repo.view(repo.head()).read(path)
        return data.decode() if data is not None else None

    def _write(self, *files: dict[str, Any]) -> bool:
        try:
            writes.submit(self.services, ADMIN, SLUG, WriteRequest.model_validate({"files": list(files)}))
        except KBError:
            return False
        with self._lock:
            self.versions += 1
        return True

    def _committed(self, version: str) -> None:
        """Record the version just made (after the model was updated)."""
        self.versions += 1
        self.history.append((version, dict(self.model)))

    @rule(path=st.sampled_from(PATHS), content=TEXT)
    def create(self, path: str, content: str) -> None:
        ok = self._write({"path": path, "mode": "create", "content": content})
        assert ok == (path not in self.model)
        self.model.setdefault(path, content)

    @rule(path=st.sampled_from(PATHS), content=TEXT, stale=st.booleans())
    def append(self, path: str, content: str, stale: bool) -> None:
        current = self.model.get(path)
        expected = sha("stale" + (current or "")) if stale else sha(current or "")
        ok = self._write({"path": path, "mode": "append", "content": content, "expected_sha256": expected})
        assert ok == (current is not None and not stale)
        if ok:
            self.model[path] = (current or "") + content

    @rule(path=st.sampled_from(PATHS), old=TEXT, new=TEXT)
    def edit(self, path: str, old: str, new: str) -> None:
        current = self.model.get(path)
        ok = (
            self._write({"path": path, "mode": "edit", "old_string": old, "new_string": new}) if old else None
        )
        if ok is None:
            return
        expect = (
            current is not None
            and current.count(old) == 1
            and (current.find(old, current.find(old) + 1) == -1)
        )
        assert ok == expect
        if ok and current is not None:
            self.model[path] = current.replace(old, new, 1)

    @rule(path=st.sampled_from(PATHS), content=TEXT, stale=st.booleans())
    def overwrite(self, path: str, content: str, stale: bool) -> None:
        current = self.model.get(path)
        change: dict[str, Any] = {"path": path, "mode": "overwrite", "content": content}
        if stale:
            change["expected_sha256"] = "0" * 64
        ok = self._write(change)
        assert ok == (current is not None and not stale)
        if ok:
            self.model[path] = content

    @rule(path=st.sampled_from(PATHS))
    def delete(self, path: str) -> None:
        ok = self._write({"path": path, "mode": "delete"})
        assert ok == (path in self.model)
        self.model.pop(path, None)

    @rule(first=st.sampled_from(PATHS), second=st.sampled_from(PATHS), content=TEXT)
    def two_files_all_or_nothing(self, first: str, second: str, content: str) -> None:
        files = [
            {"path": first, "mode": "overwrite", "content": content},
            {"path": second, "mode": "create", "content": content},
        ]
        ok = self._write(*files)
        assert ok == (first != second and first in self.model and second not in self.model)
        if ok:
            self.model[first] = content
            self.model[second] = content

    @rule(content=TEXT)
    def concurrent_pair(self, content: str) -> None:
        """Two callers at once: appends to one file and creates of different files all succeed."""
        target = next((p for p in PATHS if p in self.model), None)
        fresh = [p for p in PATHS if p not in self.model][:2]
        calls: list[dict[str, Any]] = [{"path": p, "mode": "create", "content": content} for p in fresh]
        if target is not None:
            calls += [{"path": target, "mode": "append", "content": "+"}] * 2
        results: list[bool] = []
        threads = [threading.Thread(target=lambda c=c: results.append(self._write(c))) for c in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert results == [True] * len(calls)
        for p in fresh:
            self.model[p] = content
        if target is not None:
            self.model[target] += "++"

    @rule(back=st.integers(min_value=0, max_value=40))
    def revert(self, back: int) -> None:
        target, files = self.history[-1 - back % len(self.history)]
        try:
            out = versions.revert(self.services, ADMIN, SLUG, target)
        except InvalidRequest:
            assert files == self.model  # only "nothing to revert" is refused
            return
        assert files != self.model and isinstance(out, WriteResult)
        self.model = dict(files)
        self._committed(out.version)
        repo = self.services.repos.repo(SLUG)
        at = {p: (repo.view(out.version).read(p) or b"").decode() for p, _ in repo.view(out.version).walk()}
        assert at == files  # the files equal the model at that version

    @rule(path=st.sampled_from(PATHS), content=TEXT, append=st.booleans())
    def propose(self, path: str, content: str, append: bool) -> None:
        change = {"path": path, "mode": "append" if append else "create", "content": content}
        req = WriteRequest.model_validate({"files": [change], "run_id": self.run_id})
        head = self.services.repos.repo(SLUG).head()
        try:
            out = writes.submit(self.services, self.asker, SLUG, req)
        except KBError:
            assert (path in self.model) != append  # refused at once exactly when it cannot apply now
            return
        assert isinstance(out, ProposalAccepted) and self.services.repos.repo(SLUG).head() == head
        self.pending.append((out.proposal.id, change))  # main unchanged until an approval

    @rule(pick=st.integers(min_value=0, max_value=40), approve=st.booleans())
    def decide(self, pick: int, approve: bool) -> None:
        if not self.pending:
            return
        pid, change = self.pending[pick % len(self.pending)]
        if not approve:
            proposals.reject(self.services, ADMIN, SLUG, pid)
            self.pending.remove((pid, change))
            self.decided[pid] = "rejected"
            return
        applies = (change["path"] in self.model) == (change["mode"] == "append")
        try:
            out = proposals.approve(self.services, ADMIN, SLUG, pid)
        except KBError:
            assert not applies  # stays pending, with the reason
            row = self.services.control.proposal(SLUG, pid)
            assert row is not None and row.status == "pending" and row.reason
            return
        assert applies
        path = change["path"]
        self.model[path] = self.model.get(path, "") + change["content"]
        self._committed(out.version)
        self.pending.remove((pid, change))
        self.decided[pid] = "approved"

    @rule()
    def wait_for_the_index(self) -> None:
        head = self.services.repos.repo(SLUG).head()
        status = search.status(self.services, ADMIN, SLUG, wait_for=head, timeout=60)
        assert status.covered and status.indexed_version == head
        assert self.services.search_index.paths(SLUG) == {p: sha(text) for p, text in self.model.items()}

    @invariant()
    def a_proposal_is_approved_exactly_when_main_carries_its_trailer(self) -> None:
        repo = self.services.repos.repo(SLUG)
        carried = [
            repo.commit_info(v).trailers.get("Kb-Proposal") for v in repo.first_parents(repo.head() or "")
        ]
        for pid, _ in self.pending:
            row = self.services.control.proposal(SLUG, pid)
            assert row is not None and row.status == "pending" and pid not in carried
        for pid, status in self.decided.items():
            row = self.services.control.proposal(SLUG, pid)
            assert row is not None and row.status == status
            assert carried.count(pid) == (1 if status == "approved" else 0)

    @invariant()
    def main_equals_model(self) -> None:
        repo = self.services.repos.repo(SLUG)
        head = repo.head()
        files = {p: (repo.view(head).read(p) or b"").decode() for p, _ in repo.view(head).walk()}
        assert files == self.model
        assert len(list(repo.first_parents(head or ""))) == self.versions
        if head != self.history[-1][0]:  # a plain write moved main: remember the version
            self.history.append((head or "", dict(self.model)))

    def teardown(self) -> None:
        try:
            git_fsck(self.services.repos.path(SLUG))
        finally:
            self.services.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


WritePath.TestCase.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
test_write_path = WritePath.TestCase
