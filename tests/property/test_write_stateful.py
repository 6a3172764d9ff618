"""Stateful property test of the whole write path (services → changes → store) against a dict model.

Random sequences of the five modes, with fresh and stale expected_sha256, multi-file calls and
concurrent pairs; after every step main holds exactly the model's files, and C git fsck is clean.
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

from kbserver.core.errors import KBError
from kbserver.core.model import WriteRequest
from kbserver.services import Services, kbs, writes
from kbserver.services.auth import ADMIN
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
        self.services = Services(self.tmp / "data")
        kbs.create(self.services, ADMIN, SLUG)
        self.model: dict[str, str] = {"README.md": self._read("README.md") or ""}
        self.versions = 1

    def _read(self, path: str) -> str | None:
        repo = self.services.repos.repo(SLUG)
        data = repo.view(repo.head()).read(path)
        return data.decode() if data is not None else None

    def _write(self, *files: dict[str, Any]) -> bool:
        try:
            writes.submit(self.services, ADMIN, SLUG, WriteRequest.model_validate({"files": list(files)}))
        except KBError:
            return False
        self.versions += 1
        return True

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

    @invariant()
    def main_equals_model(self) -> None:
        repo = self.services.repos.repo(SLUG)
        head = repo.head()
        files = {p: (repo.view(head).read(p) or b"").decode() for p, _ in repo.view(head).walk()}
        assert files == self.model
        assert len(list(repo.first_parents(head or ""))) == self.versions

    def teardown(self) -> None:
        try:
            git_fsck(self.services.repos.path(SLUG))
        finally:
            self.services.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


WritePath.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
test_write_path = WritePath.TestCase
