"""`resources/list` pages lazily: each page reads only the files it shows, across every KB."""

from __future__ import annotations

import pytest

from kbserver.core.model import WriteRequest
from kbserver.mcp import resources
from kbserver.mcp.resources import resource_page
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.writing import writes


def _fill(services: Services, slug: str, n: int) -> None:
    kbs.create(services, ADMIN, slug, "")
    files = [{"path": f"f/{i:02}.md", "mode": "create", "content": f"{slug} {i}\n"} for i in range(n)]
    writes.submit(services, ADMIN, slug, WriteRequest.model_validate({"files": files}))


def test_pages_cover_every_kb_once_and_read_only_their_files(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "PAGE_SIZE", 3)
    for slug in ("a-kb", "b-kb", "c-kb"):
        _fill(services, slug, 5)
    services.repos.close()  # forget every cached digest: what a page reads shows below
    names = ["README.md"] + [f"f/{i:02}.md" for i in range(5)]
    expected = [f"kb://{s}/{p}" for s in ("a-kb", "b-kb", "c-kb") for p in names]
    uris: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = resource_page(services, ADMIN, None, None, cursor)
        pages += 1
        assert len(page) <= 3
        uris += [str(r.uri) for r in page]
        # only the KBs this page touched have read any file, and no more files than it shows
        read = sum(len(services.repos.repo(s)._digests) for s in ("a-kb", "b-kb", "c-kb"))
        assert read <= len(uris)
        if cursor is None:
            break
    assert uris == expected and pages == 6


def test_a_cursor_of_a_kb_gone_since_goes_on_with_the_next(services: Services) -> None:
    _fill(services, "b-kb", 1)
    page, cursor = resource_page(services, ADMIN, None, None, "a-kb/7")  # no such KB any more
    assert [str(r.uri) for r in page] == ["kb://b-kb/README.md", "kb://b-kb/f/00.md"] and cursor is None
