"""The role of a person's token on every /api/v1 route (CONTRACT.md section 8), walked from the
route table: what each role may do answers 2xx; what it may not answers 403 (or 404 where nothing
of the kind is theirs) and changes nothing."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.api.routes import ENDPOINTS
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from tests.helpers import git_fsck, make_agent
from tests.people.conftest import ROLES, allowed, count, new_agent, proposal, run_of, snapshot, write

Setup = Callable[[Services, str], tuple[str, Any]]  # (services, slug) -> (path, JSON body or None)


# (method, route) -> how to make a valid call of it, and the rule: "read" (every person), "decide"
# (owner, and a reviewer on their KB), "owner", or "agent" (runs: no person; 403, or 404 for a run).
ROUTES: dict[tuple[str, str], tuple[str, Setup]] = {
    ("GET", "/kbs"): ("read", lambda s, k: ("/kbs", None)),
    ("POST", "/kbs"): ("owner", lambda s, k: ("/kbs", {"slug": f"new-{next(count)}"})),
    ("GET", "/kbs/{slug}"): ("read", lambda s, k: (f"/kbs/{k}", None)),
    ("GET", "/kbs/{slug}/files"): ("read", lambda s, k: (f"/kbs/{k}/files", None)),
    ("GET", "/kbs/{slug}/files/{path:path}"): ("read", lambda s, k: (f"/kbs/{k}/files/README.md", None)),
    ("POST", "/kbs/{slug}/write"): (
        "decide",
        lambda s, k: (
            f"/kbs/{k}/write",
            {"files": [{"path": f"w{next(count)}.md", "mode": "create", "content": "x"}]},
        ),
    ),
    ("GET", "/kbs/{slug}/archive"): ("read", lambda s, k: (f"/kbs/{k}/archive", None)),
    ("GET", "/kbs/{slug}/versions"): ("read", lambda s, k: (f"/kbs/{k}/versions", None)),
    ("GET", "/kbs/{slug}/versions/{version}"): (
        "read",
        lambda s, k: (f"/kbs/{k}/versions/{write(s, k)}", None),
    ),
    ("POST", "/kbs/{slug}/revert"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/revert", {"version": (write(s, k), write(s, k))[0]}),
    ),
    ("POST", "/kbs/{slug}/versions/{version}/undo"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/versions/{write(s, k)}/undo", {}),
    ),
    ("GET", "/kbs/{slug}/review"): ("read", lambda s, k: (f"/kbs/{k}/review", None)),
    ("POST", "/kbs/{slug}/review"): ("decide", lambda s, k: (f"/kbs/{k}/review", {"version": write(s, k)})),
    ("GET", "/kbs/{slug}/search"): ("read", lambda s, k: (f"/kbs/{k}/search?q=kb", None)),
    ("GET", "/kbs/{slug}/index"): ("read", lambda s, k: (f"/kbs/{k}/index", None)),
    ("GET", "/kbs/{slug}/proposals"): ("read", lambda s, k: (f"/kbs/{k}/proposals", None)),
    ("GET", "/kbs/{slug}/proposals/{proposal}"): (
        "read",
        lambda s, k: (f"/kbs/{k}/proposals/{proposal(s, k)}", None),
    ),
    ("POST", "/kbs/{slug}/proposals/{proposal}/approve"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/proposals/{proposal(s, k)}/approve", None),
    ),
    ("POST", "/kbs/{slug}/proposals/{proposal}/reject"): (
        "decide",
        lambda s, k: (f"/kbs/{k}/proposals/{proposal(s, k)}/reject", {"reason": "no"}),
    ),
    ("POST", "/runs"): ("agent", lambda s, k: ("/runs", {})),
    ("GET", "/runs/{run}"): ("agent", lambda s, k: (f"/runs/{run_of(s, k)}", None)),
    ("POST", "/runs/{run}/end"): ("agent", lambda s, k: (f"/runs/{run_of(s, k)}/end", {})),
    ("GET", "/runs/{run}/kbs/{slug}/files"): (
        "agent",
        lambda s, k: (f"/runs/{run_of(s, k)}/kbs/mine/files", None),
    ),
    ("GET", "/runs/{run}/kbs/{slug}/files/{path:path}"): (
        "agent",
        lambda s, k: (f"/runs/{run_of(s, k)}/kbs/mine/files/README.md", None),
    ),
    ("GET", "/agents"): ("owner", lambda s, k: ("/agents", None)),
    ("POST", "/agents"): ("owner", lambda s, k: ("/agents", {"name": f"made-{next(count)}"})),
    ("GET", "/agents/{name}"): ("owner", lambda s, k: ("/agents/asker", None)),
    ("DELETE", "/agents/{name}"): ("owner", lambda s, k: (f"/agents/{new_agent(s)}", None)),
    ("POST", "/agents/{name}/token"): ("owner", lambda s, k: (f"/agents/{new_agent(s)}/token", None)),
    ("GET", "/agents/{name}/links"): ("owner", lambda s, k: ("/agents/asker/links", None)),
    ("POST", "/agents/{name}/links"): (
        "owner",
        lambda s, k: (f"/agents/{new_agent(s)}/links", {"kb": k, "permission": "read"}),
    ),
    ("DELETE", "/agents/{name}/links/{slug}"): (
        "owner",
        lambda s, k: (f"/agents/{new_agent(s, k)}/links/{k}", None),
    ),
}


def test_the_matrix_names_every_api_route() -> None:
    assert set(ROUTES) == {(e.method, e.path) for e in ENDPOINTS}


@pytest.mark.parametrize("role", ROLES)
def test_every_api_route_answers_each_role_by_its_rules(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]], role: str
) -> None:
    make_agent(services, "asker", {"mine": "read_write_ask", "other": "read_write_ask"})
    headers = persons[role]
    checked = 0
    for (method, route), (rule, setup) in ROUTES.items():
        for slug in ("mine", "other") if "{slug}" in route else ("mine",):
            path, body = setup(services, slug)
            before = snapshot(services)
            r = client.request(method, "/api/v1" + path, json=body, headers=headers)
            where = f"{role} {method} {path}: {r.status_code} {r.text[:300]}"
            if allowed(rule, role, slug):
                assert 200 <= r.status_code < 300, where
            else:
                expected = 404 if route.startswith("/runs/") else 403
                assert r.status_code == expected, where
                assert r.json()["error"]["code"] == ("not_found" if expected == 404 else "forbidden"), where
                assert snapshot(services) == before, where  # nothing changed
            checked += 1
    assert checked > len(ROUTES)
    for slug in ("mine", "other"):
        git_fsck(services.repos.path(slug))


def test_a_persons_versions_and_decisions_name_them(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]]
) -> None:
    make_agent(services, "asker", {"mine": "read_write_ask"})
    rita = persons["reviewer"]
    pid = proposal(services, "mine")
    r = client.post(f"/api/v1/kbs/mine/proposals/{pid}/approve", headers=rita)
    assert r.status_code == 200, r.text
    approved = r.json()["version"]
    r = client.post(
        "/api/v1/kbs/mine/write",
        json={"files": [{"path": "by-rita.md", "mode": "create", "content": "x\n"}]},
        headers=rita,
    )
    assert r.status_code == 200, r.text
    edit = r.json()["version"]
    undo = client.post(f"/api/v1/kbs/mine/versions/{edit}/undo", json={}, headers=rita).json()["version"]
    revert = client.post("/api/v1/kbs/mine/revert", json={"version": edit}, headers=rita).json()["version"]
    rejected = proposal(services, "mine")
    assert (
        client.post(f"/api/v1/kbs/mine/proposals/{rejected}/reject", json={}, headers=rita).status_code == 200
    )
    assert client.post("/api/v1/kbs/mine/review", json={"version": revert}, headers=rita).status_code == 200

    repo = services.repos.path("mine")

    def trailers(version: str) -> str:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%(trailers)", version], cwd=repo, capture_output=True, text=True
        )
        return out.stdout

    assert "Kb-Approved-By: person:rita" in trailers(approved)
    assert "Kb-Actor: person:rita" in trailers(approved)  # rita let it in (CONTRACT §8)
    for version, kind in ((edit, "human_edit"), (undo, "revert"), (revert, "revert")):
        assert "Kb-Actor: person:rita" in trailers(version) and f"Kb-Kind: {kind}" in trailers(version)
    shown = client.get(f"/api/v1/kbs/mine/proposals/{rejected}", headers=rita).json()
    assert (shown["status"], shown["decided_by"]) == ("rejected", "person:rita")
    review = client.get("/api/v1/kbs/mine/review", headers=persons["viewer"]).json()
    assert review["reviewed"] == revert
    assert services.control.proposal("mine", pid).decided_by == "person:rita"  # type: ignore[union-attr]
    git_fsck(repo)


def test_a_personal_token_stops_working_when_rotated_or_deleted(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]]
) -> None:
    from kbserver.services.access import people

    vic = persons["viewer"]
    assert client.get("/api/v1/kbs", headers=vic).status_code == 200
    _, token = people.rotate(services, ADMIN, "vic")
    assert client.get("/api/v1/kbs", headers=vic).json()["error"]["code"] == "unauthorized"
    fresh = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/kbs", headers=fresh).status_code == 200
    people.delete(services, ADMIN, "vic")
    assert client.get("/api/v1/kbs", headers=fresh).status_code == 401


def test_a_personal_token_is_not_an_mcp_or_git_credential(
    client: TestClient, persons: dict[str, dict[str, str]]
) -> None:
    owner = persons["owner"]
    r = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=owner)
    assert r.status_code == 401
    r = client.get("/git/mine.git/info/refs?service=git-upload-pack", headers=owner)
    assert r.status_code == 401
