"""Fuzz the admin: no URL, query or form produces a 5xx, and a rejected form changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import state
from tests.web.session import log_in

texts = st.text(max_size=40) | st.sampled_from(["", "../x", "a//b", "0" * 40, "%00", "README.md", "..."])
pages = st.sampled_from(
    [
        "files/",
        "edit/",
        "delete/",
        "versions/",
        "versions?kind=",
        "versions?cursor=",
        "versions?path=",
        "files/README.md?version=",
        "search?q=",
        "new?folder=",
        "review?",
        "proposals?",
        "memories?q=",
    ]
)
posts = st.sampled_from(
    [
        "publish",
        "delete",
        "review",
        "versions/{x}/revert",
        "versions/{x}/undo",
        "proposals/{x}/approve",
        "proposals/{x}/reject",
    ]
)
fields = st.dictionaries(
    st.sampled_from(["path", "content", "expected_sha256", "message", "version", "reason", "x"]),
    texts,
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page=pages, value=texts)
def test_no_url_makes_a_5xx(web: tuple[TestClient, str], kb: str, page: str, value: str) -> None:
    client, _ = web
    r = client.get(f"/admin/kbs/{kb}/{page}{quote(value, safe='')}")
    assert r.status_code < 500, (page, value, r.text[:300])
    # Starlette's routes never match a path with a line break (`.` in their patterns), so such a URL
    # misses /admin altogether and gets the server's JSON 404.
    if not (r.status_code == 404 and any(c in value for c in "\n\r")):
        assert r.headers["content-type"].startswith("text/html"), (page, value, r.status_code, r.text[:200])


@pytest.fixture
def unindexed(settings: Settings) -> Iterator[tuple[TestClient, str, Services]]:
    """A logged-in client on services that do not follow main into the index: Hypothesis seeds `random`
    alike for every example, and Whoosh names its segments with it, so examples that write would make
    the index reuse a segment name (an assertion inside Whoosh), which is not what this test is about."""
    svc = open_services(settings.data, replace(settings.options(), follow=False))
    kbs.create(svc, ADMIN, "notes", "Team notes")
    with TestClient(create_app(settings, svc), raise_server_exceptions=False) as client:
        yield client, log_in(client), svc
    svc.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=posts, x=texts, form=fields)
def test_no_form_makes_a_5xx(
    unindexed: tuple[TestClient, str, Services], target: str, x: str, form: dict[str, str]
) -> None:
    client, csrf, services = unindexed
    kb = "notes"
    before = state(services, kb)
    url = f"/admin/kbs/{kb}/" + target.replace("{x}", quote(x, safe="") or "x")
    r = client.post(url, data={**form, "csrf": csrf}, follow_redirects=False)
    assert r.status_code < 500, (url, form, r.text[:300])
    if r.status_code != 303:
        assert state(services, kb) == before
