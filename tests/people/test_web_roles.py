"""People in the web admin: sign-in with Email and Password, the page says who is signed in, the
login limiter per account and address, and every admin route walked for each role (allowed pages
answer, the rest 403 and change nothing)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from kbserver.services import Services
from kbserver.services.access import connections, people
from kbserver.services.access.auth import ADMIN
from kbserver.web.session import LoginLimiter
from tests.helpers import ADMIN_TOKEN, git_fsck, make_agent
from tests.people.conftest import PASSWORD, ROLES, allowed, count, new_agent, proposal, snapshot, write
from tests.web.session import csrf_of

EMAILS = {"owner": "owen@example.org", "reviewer": "rita@example.org", "viewer": "vic@example.org"}


def sign_in(client: TestClient, email: str, password: str = PASSWORD) -> str:
    """Sign `client` in as a person; returns the session's CSRF token."""
    page = client.get("/admin/login")
    r = client.post(
        "/admin/login",
        data={"csrf": csrf_of(page.text), "email": email, "password": password, "next": "/admin/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return csrf_of(client.get("/admin/").text)


def _admin_app(client: TestClient) -> Any:
    return next(r.app for r in client.app.routes if getattr(r, "path", "") == "/admin")  # type: ignore[attr-defined]


def test_a_person_signs_in_with_email_and_password_and_the_pages_say_who(
    client: TestClient, persons: dict[str, dict[str, str]]
) -> None:
    page = client.get("/admin/login").text
    for label in (
        '<label for="email">Email</label>',
        '<label for="password">Password</label>',
        '<label for="token">Token</label>',
    ):
        assert label in page
    sign_in(client, "RITA@example.org")  # the email in any case
    home = client.get("/admin/").text
    assert "Signed in as <strong>rita</strong> (reviewer)" in home
    assert "Signed in as" in client.get("/admin/kbs/mine").text
    csrf = csrf_of(home)
    client.post("/admin/logout", data={"csrf": csrf}, follow_redirects=False)
    assert client.get("/admin/", follow_redirects=False).status_code == 303  # signed out


def test_wrong_or_unknown_credentials_get_one_message(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]]
) -> None:
    _admin_app(client).state.login_limiter = LoginLimiter(services, step=0.0)
    csrf = csrf_of(client.get("/admin/login").text)
    texts = set()
    for email, password in (
        ("rita@example.org", "wrong password"),
        ("nobody@example.org", PASSWORD),
        ("rita@example.org", ""),
    ):
        r = client.post("/admin/login", data={"csrf": csrf, "email": email, "password": password})
        assert r.status_code == 401 and "Signed in as" not in r.text
        texts.add(r.text.split('role="alert">')[1].split("<")[0])
    assert len(texts) == 1 and "do not match" in texts.pop()
    people.set_password(services, ADMIN, "vic", None)  # a person without a password cannot sign in
    r = client.post("/admin/login", data={"csrf": csrf, "email": "vic@example.org", "password": PASSWORD})
    assert r.status_code == 401


def test_the_admin_token_still_signs_in_as_admin(client: TestClient) -> None:
    from tests.web.session import log_in

    log_in(client)
    assert "Signed in as <strong>admin</strong> (admin token)" in client.get("/admin/").text


def test_the_limiter_keys_by_account_and_address_and_by_address(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]]
) -> None:
    app = client.app  # started by `client`; these clients only come from other addresses
    attacker = TestClient(app, client=("10.0.0.66", 4000))
    rita_at_home = TestClient(app, client=("10.0.0.7", 4000))
    if True:
        _admin_app(attacker).state.login_limiter = LoginLimiter(services, cap=6, account_cap=3, step=0.0)
        csrf = csrf_of(attacker.get("/admin/login").text)
        for _ in range(3):
            r = attacker.post(
                "/admin/login", data={"csrf": csrf, "email": "rita@example.org", "password": "guess"}
            )
            assert r.status_code == 401
        # the account is locked from that address, even with the right password ...
        r = attacker.post(
            "/admin/login", data={"csrf": csrf, "email": "rita@example.org", "password": PASSWORD}
        )
        assert r.status_code == 401 and "too many attempts" in r.text
        # ... but rita, from her own address, is not locked out by someone else's wrong passwords
        sign_in(rita_at_home, "rita@example.org")
        assert "Signed in as <strong>rita</strong>" in rita_at_home.get("/admin/").text
        # and the address is capped over every account it tries (vic's is fine elsewhere)
        for email in ("vic@example.org", "owen@example.org"):
            attacker.post("/admin/login", data={"csrf": csrf, "email": email, "password": "guess"})
        assert services.control.login_failures("10.0.0.66", 1e12 - 1, 1e12) == 6
        r = attacker.post(
            "/admin/login", data={"csrf": csrf, "email": "vic@example.org", "password": PASSWORD}
        )
        assert r.status_code == 401
        r = attacker.post("/admin/login", data={"csrf": csrf, "token": "anything"})
        assert r.status_code == 401
        sign_in(TestClient(app, client=("10.0.0.8", 4000)), "vic@example.org")


Setup = Callable[[Services, str], tuple[str, dict[str, str] | None]]  # -> (path, form or None for GET)


def _file(services: Services, slug: str) -> str:
    write(services, slug)
    return next(
        p
        for p, _ in services.repos.repo(slug).view(services.repos.repo(slug).head()).walk()
        if p.startswith("f")
    )


ROUTES: dict[tuple[str, str], tuple[str, Setup]] = {
    ("GET", "/"): ("read", lambda s, k: ("/", None)),
    ("GET", "/agents"): ("owner", lambda s, k: ("/agents", None)),
    ("POST", "/agents"): ("owner", lambda s, k: ("/agents", {"name": f"web{next(count)}"})),
    ("POST", "/agents/{name}/token"): ("owner", lambda s, k: (f"/agents/{new_agent(s)}/token", {})),
    ("POST", "/agents/{name}/delete"): ("owner", lambda s, k: (f"/agents/{new_agent(s)}/delete", {})),
    ("POST", "/agents/{name}/links"): (
        "owner",
        lambda s, k: (f"/agents/{new_agent(s)}/links", {"kb": k, "permission": "read"}),
    ),
    ("POST", "/agents/{name}/links/{slug}/delete"): (
        "owner",
        lambda s, k: (f"/agents/{new_agent(s, k)}/links/{k}/delete", {}),
    ),
    ("GET", "/kbs/{slug}"): ("read", lambda s, k: (f"/kbs/{k}", None)),
    ("GET", "/kbs/{slug}/files/{path:path}"): ("read", lambda s, k: (f"/kbs/{k}/files/README.md", None)),
    ("GET", "/kbs/{slug}/search"): ("read", lambda s, k: (f"/kbs/{k}/search?q=kb", None)),
    ("GET", "/kbs/{slug}/week"): ("read", lambda s, k: (f"/kbs/{k}/week", None)),
    ("GET", "/kbs/{slug}/memories"): ("read", lambda s, k: (f"/kbs/{k}/memories", None)),
    ("GET", "/kbs/{slug}/edit/{path:path}"): ("decide", lambda s, k: (f"/kbs/{k}/edit/README.md", None)),
    ("GET", "/kbs/{slug}/new"): ("decide", lambda s, k: (f"/kbs/{k}/new", None)),
    ("POST", "/kbs/{slug}/publish"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/publish", {"path": f"web{next(count)}.md", "content": "by hand\n"}),
    ),
    ("GET", "/kbs/{slug}/delete/{path:path}"): ("decide", lambda s, k: (f"/kbs/{k}/delete/README.md", None)),
    ("POST", "/kbs/{slug}/delete"): ("decide", lambda s, k: (f"/kbs/{k}/delete", {"path": _file(s, k)})),
    ("GET", "/kbs/{slug}/versions"): ("read", lambda s, k: (f"/kbs/{k}/versions", None)),
    ("GET", "/kbs/{slug}/compare"): (
        "read",
        lambda s, k: (f"/kbs/{k}/compare?a={write(s, k)}&b={write(s, k)}", None),
    ),
    ("GET", "/kbs/{slug}/versions/{version}"): (
        "read",
        lambda s, k: (f"/kbs/{k}/versions/{write(s, k)}", None),
    ),
    ("POST", "/kbs/{slug}/versions/{version}/revert"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/versions/{(write(s, k), write(s, k))[0]}/revert", {"confirm": "yes"}),
    ),
    ("POST", "/kbs/{slug}/versions/{version}/undo"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/versions/{write(s, k)}/undo", {}),
    ),
    ("GET", "/kbs/{slug}/review"): ("read", lambda s, k: (f"/kbs/{k}/review", None)),
    ("POST", "/kbs/{slug}/review"): ("decide", lambda s, k: (f"/kbs/{k}/review", {"version": write(s, k)})),
    ("GET", "/kbs/{slug}/proposals"): ("read", lambda s, k: (f"/kbs/{k}/proposals", None)),
    ("POST", "/kbs/{slug}/proposals/{proposal}/approve"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/proposals/{proposal(s, k)}/approve", {}),
    ),
    ("POST", "/kbs/{slug}/proposals/{proposal}/reject"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/proposals/{proposal(s, k)}/reject", {"reason": "no"}),
    ),
}


def _pending(services: Services) -> str:
    """A signed authorization request of a registered client (what /authorize sends to /connect)."""
    callback = "http://127.0.0.1:9/cb"
    connections.register(
        services, {"client_id": "roles-chat", "client_name": "Chat", "redirect_uris": [callback]}
    )
    pending = connections.Pending(
        "roles-chat", callback, True, "c", None, "http://h/mcp", (), time.time() + 600
    )
    return connections.start(connections.request_key(ADMIN_TOKEN), pending)


def _connection(services: Services) -> str:
    """A connection the admin allowed: the path of its Revoke."""
    blob = _pending(services)
    pending = connections.pending(connections.request_key(ADMIN_TOKEN), blob)
    connections.allow(services, ADMIN, pending, "http://h", None, f"chat-{next(count)}", {})
    return f"/connections/{services.control.grants()[-1].id}/revoke"


ROUTES.update(
    {
        # any signed-in person may connect a chat, within what their role may grant (tests/mcp)
        ("GET", "/connect"): ("read", lambda s, k: (f"/connect?request={_pending(s)}", None)),
        ("POST", "/connect"): (
            "read",
            lambda s, k: ("/connect", {"request": _pending(s), "decision": "deny"}),
        ),
        ("POST", "/connections/{id}/revoke"): ("owner", lambda s, k: (_connection(s), {})),
    }
)
SIGN_IN = {  # tested above and in test_sso.py, for everyone
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/oidc/start"),
    ("GET", "/oidc/callback"),
}


def test_the_matrix_names_every_admin_route(client: TestClient) -> None:
    routes = {
        (method, r.path)
        for r in _admin_app(client).routes
        if isinstance(r, Route)
        for method in (r.methods or ())
        if method != "HEAD"
    }
    assert routes == set(ROUTES) | SIGN_IN


@pytest.mark.parametrize("role", ROLES)
def test_every_admin_route_answers_each_role_by_its_rules(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]], role: str
) -> None:
    make_agent(services, "asker", {"mine": "read_write_ask", "other": "read_write_ask"})
    csrf = sign_in(client, EMAILS[role])
    for (method, route), (rule, setup) in ROUTES.items():
        for slug in ("mine", "other") if "{slug}" in route else ("mine",):
            path, form = setup(services, slug)
            before = snapshot(services)
            if method == "GET":
                r = client.get("/admin" + path, follow_redirects=False)
            else:
                r = client.post("/admin" + path, data={**(form or {}), "csrf": csrf}, follow_redirects=False)
            where = f"{role} {method} {path}: {r.status_code} {r.text[:300]}"
            assert r.status_code != 500 and "/admin/login" not in r.headers.get("location", ""), where
            if allowed(rule, role, slug):
                assert r.status_code in (200, 201, 303), where
            else:
                assert r.status_code == 403, where
                assert snapshot(services) == before, where  # nothing changed
    for slug in ("mine", "other"):
        git_fsck(services.repos.path(slug))
