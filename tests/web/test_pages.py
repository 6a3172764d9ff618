"""The admin over plain HTTP: redirects without a session, status codes, 404 pages, CSRF, headers."""

from __future__ import annotations

import re
import time

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.core.model import Create, Overwrite, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.writing import writes
from kbserver.web import admin_app
from kbserver.web import session as web_session
from kbserver.web.inbox import SHOWN
from tests.helpers import ADMIN_TOKEN, make_agent, state
from tests.web.session import csrf_of, log_in

PAGES = [
    "/admin/",
    "/admin/agents",
    "/admin/kbs/notes",
    "/admin/kbs/notes/files/README.md",
    "/admin/kbs/notes/search?q=x",
    "/admin/kbs/notes/edit/README.md",
    "/admin/kbs/notes/new?folder=a/",
    "/admin/kbs/notes/delete/README.md",
    "/admin/kbs/notes/versions",
    "/admin/kbs/notes/versions/{head}",
    "/admin/kbs/notes/versions/{head}...{head}",
    "/admin/kbs/notes/review",
    "/admin/kbs/notes/proposals",
    "/admin/kbs/notes/week",
    "/admin/kbs/notes/memories",
    "/admin/kbs/notes/memories?q=x",
]
POSTS = [
    "/admin/logout",
    "/admin/agents",
    "/admin/agents/bob/token",
    "/admin/agents/bob/delete",
    "/admin/agents/bob/links",
    "/admin/agents/bob/links/notes/delete",
    "/admin/kbs/notes/publish",
    "/admin/kbs/notes/delete",
    "/admin/kbs/notes/versions/{head}/revert",
    "/admin/kbs/notes/versions/{head}/undo",
    "/admin/kbs/notes/review",
    "/admin/kbs/notes/proposals/prop_x/approve",
    "/admin/kbs/notes/proposals/prop_x/reject",
]


def _head(services: Services, kb: str) -> str:
    head = services.repos.repo(kb).head()
    assert head
    return head


def test_every_page_without_a_session_goes_to_login_and_back(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    head = _head(services, kb)
    before = state(services, kb), services.control.agent("bob")
    for url in [u.format(head=head) for u in PAGES]:
        r = client.get(url, follow_redirects=False)
        assert r.status_code == 303, url
        assert r.headers["location"].startswith("/admin/login?next=/admin"), url
    for url in [u.format(head=head) for u in POSTS]:
        r = client.post(url, data={"path": "README.md", "content": "x"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/admin/login"), url
    assert (state(services, kb), services.control.agent("bob")) == before
    # After login, the login page sends the browser back where it was going.
    page = client.get("/admin/login?next=/admin/kbs/notes/versions")
    assert 'value="/admin/kbs/notes/versions"' in page.text
    r = client.post(
        "/admin/login",
        data={"csrf": csrf_of(page.text), "token": ADMIN_TOKEN, "next": "/admin/kbs/notes/versions"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/admin/kbs/notes/versions"
    for url in [u.format(head=head) for u in PAGES]:
        r = client.get(url, follow_redirects=False)
        assert r.status_code == 200, (url, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
    assert client.get("/admin", follow_redirects=True).url.path == "/admin/"
    compared = client.get(f"/admin/kbs/notes/compare?a={head}&b={head}")
    assert compared.status_code == 200 and compared.url.path == f"/admin/kbs/notes/versions/{head}...{head}"
    assert client.get("/admin/kbs/notes/compare?a=x&b=zz").status_code == 400


def test_login_cookie_failures_and_logout(client: TestClient, services: Services, kb: str) -> None:
    page = client.get("/admin/login")
    assert page.status_code == 200 and re.search(r'<label for="token">Token</label>', page.text)
    csrf = csrf_of(page.text)
    messages = set()
    for token in ("wrong", "", make_agent(services, "bob", {kb: "read"})["Authorization"][7:]):
        r = client.post("/admin/login", data={"csrf": csrf, "token": token}, follow_redirects=False)
        assert r.status_code == 401
        messages.add(re.search(r'<p class="error" role="alert">(.*?)</p>', r.text).group(1))  # type: ignore[union-attr]
        assert token not in r.text or not token
    assert len(messages) == 1  # one message for every failure
    assert client.post("/admin/login", data={"token": ADMIN_TOKEN}).status_code == 403  # no CSRF
    r = client.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/admin/"
    cookie = r.headers["set-cookie"]
    for flag in ("httponly", "samesite=strict", "max-age=43200", "path=/admin"):
        assert flag in cookie.lower(), cookie
    assert ADMIN_TOKEN not in cookie
    stolen = client.cookies.get("kbserver_admin")
    csrf = csrf_of(client.get("/admin/").text)
    r = client.post("/admin/logout", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/admin/login"
    assert client.get("/admin/", follow_redirects=False).status_code == 303
    client.cookies.set("kbserver_admin", stolen or "", path="/admin")  # a copied cookie died with Logout
    assert client.get("/admin/", follow_redirects=False).status_code == 303


def test_next_never_leaves_the_admin(client: TestClient) -> None:
    for bad in ("https://evil.example/", "//evil.example/admin", "/api/v1/kbs", "/admin\\@evil"):
        page = client.get("/admin/login", params={"next": bad})
        r = client.post(
            "/admin/login",
            data={"csrf": csrf_of(page.text), "token": ADMIN_TOKEN, "next": bad},
            follow_redirects=False,
        )
        assert r.headers["location"] == "/admin/", bad
        client.cookies.clear()


def test_login_attempts_are_limited_per_address(client: TestClient) -> None:
    from kbserver.web.session import LoginLimiter

    admin_app = next(r.app for r in client.app.routes if getattr(r, "path", "") == "/admin")  # type: ignore[attr-defined]
    admin_app.state.login_limiter = LoginLimiter(admin_app.state.services, cap=2, step=0.0)
    csrf = csrf_of(client.get("/admin/login").text)
    for _ in range(2):
        assert client.post("/admin/login", data={"csrf": csrf, "token": "guess"}).status_code == 401
    # Past the cap even the right token is refused, with the same message, until the window passes.
    r = client.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN}, follow_redirects=False)
    assert r.status_code == 401 and "too many attempts" in r.text


def test_security_headers(web: tuple[TestClient, str], kb: str) -> None:
    client, _ = web
    for url in ("/admin/login", "/admin/", "/admin/kbs/notes", "/admin/kbs/nope", "/admin/no/such/page"):
        r = client.get(url)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
        assert "<script" not in r.text
    css = client.get("/admin/static/admin.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_unknown_kbs_versions_paths_are_404_pages(
    web: tuple[TestClient, str], services: Services, kb: str
) -> None:
    client, csrf = web
    head = _head(services, kb)
    blob = services.repos.repo(kb).view(head).blob_id("README.md")  # an object, but no version
    assert blob
    for url, status in (
        (f"/admin/kbs/notes/versions/{blob[:10]}", 404),
        (f"/admin/kbs/notes/versions/{blob}", 404),
        (f"/admin/kbs/notes/versions/{head[:7]}...{blob[:7]}", 404),
        (f"/admin/kbs/notes/compare?a={head[:7]}&b={blob[:7]}", 404),
        (f"/admin/kbs/notes/compare?a={head[:7]}&b=", 400),
        ("/admin/kbs/notes/compare", 400),
        (f"/admin/kbs/notes/versions/{head[:6]}", 400),
        ("/admin/kbs/nope", 404),
        ("/admin/kbs/nope/versions", 404),
        ("/admin/kbs/nope/review", 404),
        ("/admin/kbs/nope/proposals", 404),
        ("/admin/kbs/nope/search?q=x", 404),
        ("/admin/kbs/nope/new", 404),
        ("/admin/kbs/nope/files/README.md", 404),
        ("/admin/kbs/notes/files/missing.md", 404),
        ("/admin/kbs/notes/edit/missing.md", 404),
        ("/admin/kbs/notes/delete/missing.md", 404),
        (f"/admin/kbs/notes/files/README.md?version={'0' * 40}", 404),
        (f"/admin/kbs/notes/versions/{'0' * 40}", 404),
        (f"/admin/kbs/notes/versions/{'0' * 40}...{head}", 404),
        ("/admin/kbs/notes/versions/abc", 400),
        ("/admin/kbs/notes/versions/abc...def", 400),
        ("/admin/kbs/notes/versions?kind=bogus", 400),
        ("/admin/kbs/notes/versions?cursor=zz", 400),
        ("/admin/kbs/notes/versions?path=../x", 400),
        ("/admin/kbs/notes/files/../README.md", 404),
        ("/admin/kbs/notes/files/a//b", 400),
        ("/admin/kbs/notes/files/README.md?version=zz", 400),
        ("/admin/kbs/Bad%20Slug", 404),
        ("/admin/nothing-here", 404),
    ):
        r = client.get(url)
        assert r.status_code == status, (url, r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("text/html"), url
    for url, data, status in (
        (f"/admin/kbs/nope/versions/{head}/revert", {}, 404),
        (f"/admin/kbs/notes/versions/{'0' * 40}/undo", {}, 404),
        ("/admin/kbs/notes/proposals/prop_nope/approve", {}, 404),
        ("/admin/kbs/notes/proposals/prop_nope/reject", {}, 404),
        ("/admin/agents/nobody/token", {}, 404),
        ("/admin/agents/nobody/delete", {}, 404),
        ("/admin/kbs/notes/review", {"version": "abc"}, 400),
        ("/admin/kbs/notes/review", {"version": blob[:8]}, 404),
        (f"/admin/kbs/notes/versions/{blob[:8]}/revert", {}, 404),
        (f"/admin/kbs/notes/versions/{blob[:8]}/undo", {}, 404),
        ("/admin/kbs/notes/publish", {"path": "../x", "content": "x"}, 400),
        ("/admin/kbs/notes/publish", {"path": "README.md", "content": "x", "expected_sha256": "zz"}, 400),
        ("/admin/kbs/notes/delete", {"path": "missing.md"}, 404),
        ("/admin/agents", {"name": "Bad Name"}, 400),
    ):
        before = state(services, kb)
        r = client.post(url, data={"csrf": csrf, **data}, follow_redirects=False)
        assert r.status_code == status, (url, data, r.status_code, r.text[:300])
        assert state(services, kb) == before
    r = client.put("/admin/kbs/notes")
    assert r.status_code == 405


def test_post_without_or_with_another_sessions_csrf_changes_nothing(
    client: TestClient, services: Services, kb: str
) -> None:
    other = TestClient(client.app)
    theirs = log_in(other)
    log_in(client)
    head = _head(services, kb)
    before = state(services, kb)
    found = client.get("/admin/kbs/notes/edit/README.md").text
    expected = re.search(r'name="expected_sha256" value="([0-9a-f]{64})"', found).group(1)  # type: ignore[union-attr]
    form = {"path": "README.md", "content": "defaced", "expected_sha256": expected}
    for data in (form, {**form, "csrf": ""}, {**form, "csrf": theirs}, {**form, "csrf": "x" * 43}):
        r = client.post("/admin/kbs/notes/publish", data=data, follow_redirects=False)
        assert r.status_code == 403, data
        assert "reload the page" in r.text
    for url in (f"/admin/kbs/notes/versions/{head}/revert", "/admin/agents"):
        assert client.post(url, data={"name": "mallory"}, follow_redirects=False).status_code == 403
    assert state(services, kb) == before and services.control.agent("mallory") is None
    other.close()


def test_a_human_edit_through_the_form(web: tuple[TestClient, str], services: Services, kb: str) -> None:
    client, csrf = web
    page = client.get("/admin/kbs/notes/edit/README.md").text
    expected = re.search(r'name="expected_sha256" value="([0-9a-f]{64})"', page).group(1)  # type: ignore[union-attr]
    r = client.post(
        "/admin/kbs/notes/publish",
        data={
            "csrf": csrf,
            "path": "README.md",
            "content": "# notes\r\nby hand\r\n",
            "expected_sha256": expected,
        },
        follow_redirects=False,
    )
    assert r.status_code == 303
    version = r.headers["location"].rsplit("/", 1)[1]
    page = client.get(r.headers["location"])
    assert "human edit" in page.text
    content = services.repos.repo(kb).view(version).read("README.md")
    assert content == b"# notes\nby hand\n"  # the browser's CRLF became the file's LF
    # The same form again (the page's sha256 is now stale): a conflict page that keeps the typed text.
    before = state(services, kb)
    typed = "typed <b>again</b>\r\n"
    r = client.post(
        "/admin/kbs/notes/publish",
        data={"csrf": csrf, "path": "README.md", "content": typed, "expected_sha256": expected},
    )
    assert r.status_code == 409 and "typed &lt;b&gt;again&lt;/b&gt;\n</textarea>" in r.text
    assert "by hand" in r.text and state(services, kb) == before


def test_a_session_expires(
    settings: Settings, services: Services, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's own clock is moved instead of sleeping: a real wait against a lifetime of a few
    # seconds failed on a loaded machine (the first request took longer than the lifetime). The
    # signed cookie's max_age (an hour, real time) does not run out while the test runs.
    class Clock:
        now = time.time()

        def time(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(web_session, "time", clock)
    app = Starlette(routes=[Mount("/admin", app=admin_app(services, ADMIN_TOKEN, session_seconds=3600))])
    with TestClient(app) as client:
        log_in(client)
        assert client.get("/admin/kbs/notes", follow_redirects=False).status_code == 200
        clock.now += 3599
        assert client.get("/admin/kbs/notes", follow_redirects=False).status_code == 200
        clock.now += 2  # past the session's lifetime
        r = client.get("/admin/kbs/notes", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/admin/login?next=/admin/kbs/notes"
        log_in(client)  # a new login starts a new lifetime from the clock's now
        assert client.get("/admin/kbs/notes", follow_redirects=False).status_code == 200


def test_a_long_review_goes_page_by_page(
    web: tuple[TestClient, str], services: Services, kb: str, agent: dict[str, str]
) -> None:
    client, csrf = web
    bob = caller_for(services, "bob")
    made = []
    for i in range(SHOWN + 2):
        change = Create(mode="create", path=f"n/{i}.md", content=f"note {i}\n")
        made.append(writes.submit(services, bob, kb, WriteRequest(files=[change])).version)  # type: ignore[union-attr]
    page = client.get("/admin/kbs/notes/review").text
    assert page.count('<li class="write') == SHOWN and "the 50 oldest" in page
    up_to = re.search(r'name="version" value="([0-9a-f]{40})"', page).group(1)  # type: ignore[union-attr]
    assert up_to == made[SHOWN - 1]  # the newest write shown, not the head
    r = client.post("/admin/kbs/notes/review", data={"csrf": csrf, "version": up_to}, follow_redirects=False)
    assert r.status_code == 303
    page = client.get("/admin/kbs/notes/review").text
    assert page.count('<li class="write') == 2
    up_to = re.search(r'name="version" value="([0-9a-f]{40})"', page).group(1)  # type: ignore[union-attr]
    assert up_to == made[-1]


def test_delete_asks_first_and_never_deletes_a_changed_file(
    web: tuple[TestClient, str], services: Services, kb: str, agent: dict[str, str]
) -> None:
    client, csrf = web
    bob = caller_for(services, "bob")
    created = Create(mode="create", path="a.md", content="one\n")
    writes.submit(services, bob, kb, WriteRequest(files=[created]))
    page = client.get("/admin/kbs/notes/delete/a.md").text
    assert "Delete the file" in page
    expected = re.search(r'name="expected_sha256" value="([0-9a-f]{64})"', page).group(1)  # type: ignore[union-attr]
    change = Overwrite(mode="overwrite", path="a.md", content="two\n")
    writes.submit(services, bob, kb, WriteRequest(files=[change]))  # meanwhile, an agent changes it
    before = state(services, kb)
    form = {"csrf": csrf, "path": "a.md", "expected_sha256": expected}
    r = client.post("/admin/kbs/notes/delete", data=form, follow_redirects=False)
    assert r.status_code == 409 and "stale" in r.text and state(services, kb) == before
    fresh = re.search(r'name="expected_sha256" value="([0-9a-f]{64})"', r.text).group(1)  # type: ignore[union-attr]
    form["expected_sha256"] = fresh
    r = client.post("/admin/kbs/notes/delete", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/admin/kbs/notes"
    head = services.repos.repo(kb).head()
    assert head and services.repos.repo(kb).view(head).read("a.md") is None
    assert "human edit" in client.get(f"/admin/kbs/notes/versions/{head}").text


def test_undo_asks_first_and_the_way_back_stays_in_the_review(
    web: tuple[TestClient, str], services: Services, kb: str, agent: dict[str, str]
) -> None:
    client, csrf = web
    bob = caller_for(services, "bob")
    change = Create(mode="create", path="undo-me.md", content="x\n")
    made = writes.submit(services, bob, kb, WriteRequest(files=[change])).version  # type: ignore[union-attr]
    before = state(services, kb)
    r = client.post(f"/admin/kbs/notes/versions/{made}/undo", data={"csrf": csrf, "confirm": "ask"})
    assert r.status_code == 200 and "Undo version" in r.text and state(services, kb) == before
    for back in ("https://evil.invalid/", "//evil.invalid/admin/kbs/notes/review", "/admin/agents"):
        form = {"csrf": csrf, "version": made, "back": back}
        r = client.post("/admin/kbs/notes/review", data=form, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/admin/kbs/notes/review", back
    r = client.post(
        f"/admin/kbs/notes/versions/{made[:10]}/undo",
        data={"csrf": csrf, "back": "/admin/kbs/notes/review?agent=agent%3Abob"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/admin/kbs/notes/review?agent=agent%3Abob"
    assert services.repos.repo(kb).view(services.repos.repo(kb).head()).read("undo-me.md") is None
    assert "Undid version" in client.get(r.headers["location"]).text


def test_a_proposal_link_keeps_its_anchor_through_signing_in(client: TestClient, kb: str) -> None:
    r = client.get("/admin/kbs/notes/proposals?p=prop_abc", follow_redirects=False)
    assert r.status_code == 303 and "/admin/login" in r.headers["location"]
    assert "p%3Dprop_abc" in r.headers["location"] or "p=prop_abc" in r.headers["location"]
    log_in(client)
    r = client.get("/admin/kbs/notes/proposals?p=prop_abc", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/admin/kbs/notes/proposals#p-prop_abc"
    assert client.get("/admin/kbs/notes/proposals?p=bad%20id").status_code == 200  # no anchor, the page
