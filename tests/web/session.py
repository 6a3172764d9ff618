"""Logging a TestClient in to the admin, and reading the CSRF token of a page."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from tests.helpers import ADMIN_TOKEN

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    m = _CSRF.search(html)
    assert m, "the page has no CSRF field"
    return m.group(1)


def log_in(client: TestClient) -> str:
    """Log `client` in as the admin; returns the session's CSRF token."""
    page = client.get("/admin/login")
    r = client.post(
        "/admin/login",
        data={"csrf": csrf_of(page.text), "token": ADMIN_TOKEN, "next": "/admin/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return csrf_of(client.get("/admin/").text)
