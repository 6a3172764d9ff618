"""The store owns the rule that a slug names `{root}/{slug}.git` and nothing else (issue 10 item 25).

Services also look a KB up in the control plane first, so this is the layer that holds even when a
caller skips that lookup: a real repository right outside the KB folder is never opened, created
or recovered through a name that is not a slug.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbserver.core.errors import NotFound
from kbserver.store import Repos

BAD_SLUGS = ["../outside", "../kbs/a", "a/../../outside", "..", "/etc", "A", "a\n", "", "a.git", ".a"]


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    store = Repos(tmp_path / "kbs", fsync=False)
    store.create("a", b"# a\n", "admin", "create KB a")
    shutil.copytree(tmp_path / "kbs" / "a.git", tmp_path / "outside.git")  # a real repository outside
    return store


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("slug", BAD_SLUGS)
def test_a_name_that_is_not_a_slug_opens_nothing(repos: Repos, tmp_path: Path, slug: str) -> None:
    before = _tree(tmp_path)
    with pytest.raises(NotFound):
        repos.path(slug)
    assert repos.exists(slug) is False
    with pytest.raises(NotFound):
        repos.repo(slug)
    with pytest.raises(NotFound):
        repos.create(slug, b"# x\n", "admin", "create")
    with pytest.raises(NotFound):
        repos.recover(slug)
    assert _tree(tmp_path) == before
    assert repos.slugs() == ["a"]
    repos.close()
