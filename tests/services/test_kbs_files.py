"""KBs and files at the service layer: create, see, describe, limits, read, list, export, archive, fsck."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from kbserver.config import Settings
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest, NotFound, SecretDetected, TooLarge
from kbserver.core.model import WriteRequest, WriteResult
from kbserver.services import Services, health, kbs
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import files
from kbserver.services.writing import writes
from tests.helpers import git_fsck, make_agent, state


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def _write(services: Services, slug: str, *changes: dict[str, str]) -> str:
    out = writes.submit(services, ADMIN, slug, WriteRequest.model_validate({"files": list(changes)}))
    assert isinstance(out, WriteResult)
    return out.version


def test_a_new_kb_has_one_version_with_its_readme(services: Services) -> None:
    made = kbs.create(services, ADMIN, "team", "Shared notes")
    assert (made.slug, made.description, made.file_count, made.permission) == (
        "team",
        "Shared notes",
        1,
        "admin",
    )
    assert made.head == services.repos.repo("team").head()
    readme = files.read(services, ADMIN, "team", "README.md")
    assert "Shared notes" in readme.content and readme.version == made.head
    git_fsck(services.repos.path("team"))


def test_refused_creates_make_nothing(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    before = services.repos.slugs()
    with pytest.raises(Forbidden):
        kbs.create(services, caller_for(services, "bob"), "mine")
    with pytest.raises(InvalidRequest):
        kbs.create(services, ADMIN, "Not A Slug")
    with pytest.raises(AlreadyExists):
        kbs.create(services, ADMIN, kb)
    with pytest.raises(SecretDetected):
        kbs.create(services, ADMIN, "leak", "key AKIAIOSFODNN7EXAMPLE and more")
    assert services.repos.slugs() == before and services.control.kb("leak") is None


def test_agents_see_only_their_linked_kbs_with_their_permission(services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "hidden")
    make_agent(services, "bob", {kb: "read"})
    bob = caller_for(services, "bob")
    assert [(k.slug, k.permission) for k in kbs.visible(services, bob)] == [(kb, "read")]
    assert kbs.slugs(services, ADMIN) == ["hidden", kb]
    with pytest.raises(NotFound):
        kbs.describe(services, bob, "hidden")
    with pytest.raises(NotFound):
        kbs.repository(services, bob, "hidden")
    assert kbs.repository(services, bob, kb) == services.repos.path(kb)


def test_limits_are_the_admins_and_hold_for_writes(services: Services, kb: str) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    with pytest.raises(Forbidden):
        kbs.set_limits(services, caller_for(services, "bob"), kb, max_files=1)
    with pytest.raises(InvalidRequest):
        kbs.set_limits(services, ADMIN, kb, max_file_bytes=0)
    info = kbs.set_limits(services, ADMIN, kb, max_files=1)
    assert info.limits.max_files == 1 and kbs.describe(services, ADMIN, kb).limits.max_files == 1
    before = state(services, kb)
    with pytest.raises(TooLarge):
        _write(
            services,
            kb,
            {"path": "a.md", "mode": "create", "content": "a"},
            {"path": "b.md", "mode": "create", "content": "b"},
        )
    assert state(services, kb) == before


def test_files_are_listed_and_read_at_any_version_on_main(services: Services, kb: str) -> None:
    first = _write(services, kb, {"path": "n/a.md", "mode": "create", "content": "alpha"})
    second = _write(services, kb, {"path": "n/a.md", "mode": "overwrite", "content": "beta"})
    listing = files.listing(services, ADMIN, kb, "n/")
    assert listing.version == second and [(f.path, f.size) for f in listing.files] == [("n/a.md", 4)]
    assert files.read(services, ADMIN, kb, "n/a.md", first).content == "alpha"
    assert files.read(services, ADMIN, kb, "n/a.md").content == "beta"
    with pytest.raises(NotFound):
        files.read(services, ADMIN, kb, "n/missing.md")
    with pytest.raises(InvalidRequest):
        files.read(services, ADMIN, kb, "n/a.md", "not-a-version")
    with pytest.raises(NotFound):
        files.read(services, ADMIN, kb, "n/a.md", "0" * 40)


def test_export_writes_a_read_only_copy_of_a_version(services: Services, kb: str, tmp_path: Path) -> None:
    first = _write(services, kb, {"path": "d/a.md", "mode": "create", "content": "alpha"})
    _write(services, kb, {"path": "d/a.md", "mode": "delete"})
    out = files.export(services, ADMIN, kb, tmp_path / "copy", first)
    assert (out.version, out.files) == (first, 2)
    copy = tmp_path / "copy" / "d" / "a.md"
    assert copy.read_text() == "alpha" and not copy.stat().st_mode & 0o222
    with pytest.raises(InvalidRequest):
        files.export(services, ADMIN, kb, tmp_path / "copy", first)  # not empty: nothing overwritten
    assert copy.read_text() == "alpha"


def test_the_archive_holds_the_files_at_the_version_with_its_time(services: Services, kb: str) -> None:
    version = _write(services, kb, {"path": "x/y.md", "mode": "create", "content": "咖啡"})
    resolved, chunks = files.archive(services, ADMIN, kb)
    assert resolved == version
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == [f"{kb}/README.md", f"{kb}/x/y.md"]
        data = tar.extractfile(members[f"{kb}/x/y.md"])
        assert data is not None and data.read() == "咖啡".encode()
    when = subprocess.run(
        ["git", "log", "-1", "--format=%ct", version],
        cwd=services.repos.path(kb),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert members[f"{kb}/x/y.md"].mtime == int(when)  # the commit's time, as C git reads it


def test_fsck_finds_a_damaged_repository_and_a_kb_without_a_record(services: Services, kb: str) -> None:
    assert health.fsck(services, report=lambda _line: None) == []
    kbs.create(services, ADMIN, "other")
    objects = services.repos.path("other") / "objects"
    for loose in objects.glob("[0-9a-f][0-9a-f]/*"):
        loose.chmod(0o644)
        loose.write_bytes(b"not a git object")
    lines: list[str] = []
    problems = health.fsck(services, report=lines.append)
    assert problems and all(p.startswith("other: ") for p in problems)
    assert f"{kb}: ok" in lines and any(line.startswith("other: ") and "problem" in line for line in lines)
