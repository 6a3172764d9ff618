"""Pages that stay bounded in a big KB: a folder lists its first files and pages through the rest,
and a file's history looks at the newest versions of main, with a link that looks further."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.writing import writes
from kbserver.web import browse
from tests.helpers import make_agent


def _write(services: Services, kb: str, *paths: str) -> str:
    bob = caller_for(services, "bob")
    files = [Create(mode="create", path=p, content=f"{p}\n") for p in paths]
    return writes.submit(services, bob, kb, WriteRequest(files=files)).version  # type: ignore[union-attr,arg-type]


def _listed(html: str) -> list[str]:
    return re.findall(r'<li class="file"><a href="/admin/kbs/notes/files/([^"]+)"', html)


def test_a_big_folder_lists_its_first_files_and_pages_through_the_rest(
    web: tuple[TestClient, str], services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = web
    make_agent(services, "bob", {kb: "read_write"})
    _write(services, kb, *[f"notes/{n}.md" for n in range(7)], "top.md")
    monkeypatch.setattr(browse, "PER_FOLDER", 3)
    page = client.get("/admin/kbs/notes").text
    assert _listed(page) == ["notes/0.md", "notes/1.md", "notes/2.md", "README.md", "top.md"]
    assert "4 more files in notes/" in page and "Files <span" in page and "(9, at" in page
    nxt = re.search(r'href="(/admin/kbs/notes\?folder=notes/&amp;start=3)">the next 3<', page)
    assert nxt, page
    page = client.get(nxt.group(1).replace("&amp;", "&")).text
    assert _listed(page) == ["notes/3.md", "notes/4.md", "notes/5.md", "README.md", "top.md"]
    assert "1 more file in notes/" in page and "The previous 3 files of notes/" in page
    last = client.get("/admin/kbs/notes?folder=notes/&start=6").text
    assert _listed(last) == ["notes/6.md", "README.md", "top.md"] and "more file" not in last
    assert client.get("/admin/kbs/notes?start=-1").status_code == 400
    assert client.get("/admin/kbs/notes?start=x").status_code == 400


def test_a_files_history_looks_at_the_newest_versions_and_links_further(
    web: tuple[TestClient, str], services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = web
    make_agent(services, "bob", {kb: "read_write"})
    made = _write(services, kb, "old.md")
    for n in range(4):
        _write(services, kb, f"other-{n}.md")
    monkeypatch.setattr(browse, "FILE_SCAN", 3)
    page = client.get("/admin/kbs/notes/files/old.md").text
    assert (
        "No change to this file among the newest 3 versions" in page and made not in page.split("History")[1]
    )
    older = re.search(r'href="(/admin/kbs/notes/versions\?path=old.md&amp;cursor=[0-9a-f]{40})"', page)
    assert older, page
    further = client.get(older.group(1).replace("&amp;", "&")).text
    assert f"/admin/kbs/notes/versions/{made}" in further
    monkeypatch.setattr(browse, "FILE_SCAN", 10)
    page = client.get("/admin/kbs/notes/files/old.md").text
    assert f"/admin/kbs/notes/versions/{made}" in page and "Older versions of this file" not in page


def test_a_week_lists_its_first_files_of_each_kind_and_says_how_many_more(
    web: tuple[TestClient, str], services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbserver.services.reviewing import activity

    client, _ = web
    make_agent(services, "bob", {kb: "read_write"})
    _write(services, kb, "a.md", "b.md", "c.md")
    monkeypatch.setattr(activity, "MAX_LISTED", 2)
    page = client.get("/admin/kbs/notes/week").text
    assert re.findall(r'<li data-path="([^"]+)"', page) == ["README.md", "a.md"]
    assert 'Files added <span class="small">(4)</span>' in page
    assert "2 more not listed; the KB began this week" in page
