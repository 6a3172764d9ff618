"""HTTP: undo one version (and its conflict), the review marker and the agent writes after it."""

from __future__ import annotations

from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import git_fsck, make_agent, state


def write(client: TestClient, kb: str, headers: dict[str, str], path: str, content: str, mode: str) -> str:
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": path, "mode": mode, "content": content}]},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return str(r.json()["version"])


def read(client: TestClient, kb: str, headers: dict[str, str], path: str) -> int | str:
    r = client.get(f"/api/v1/kbs/{kb}/files/{path}", headers=headers)
    return str(r.json()["content"]) if r.status_code == 200 else r.status_code


def test_undo_puts_back_what_one_version_changed(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    write(client, kb, agent, "a.md", "one\n", "create")
    bad = client.post(
        f"/api/v1/kbs/{kb}/write",
        headers=agent,
        json={
            "files": [
                {"path": "a.md", "mode": "overwrite", "content": "garbage\n"},
                {"path": "new.md", "mode": "create", "content": "invented\n"},
            ]
        },
    ).json()["version"]
    later = write(client, kb, agent, "b.md", "unrelated\n", "create")  # a later write elsewhere stays
    r = client.post(f"/api/v1/kbs/{kb}/versions/{bad}/undo", json={}, headers=admin)
    assert r.status_code == 200, r.text
    undone = r.json()
    assert undone["parent"] == later
    assert {f["path"]: f["mode"] for f in undone["files"]} == {"a.md": "overwrite", "new.md": "delete"}
    assert read(client, kb, agent, "a.md") == "one\n"
    assert read(client, kb, agent, "new.md") == 404
    assert read(client, kb, agent, "b.md") == "unrelated\n"
    v = client.get(f"/api/v1/kbs/{kb}/versions/{undone['version']}", headers=agent).json()
    assert v["kind"] == "revert" and v["author"] == "admin" and v["message"] == f"undo {bad[:12]}"
    git_fsck(services.repos.path(kb))
    # An agent with read_write may undo too (the permission of revert), with its own message.
    again = write(client, kb, agent, "a.md", "two\n", "overwrite")
    r = client.post(f"/api/v1/kbs/{kb}/versions/{again}/undo", json={"message": "oops"}, headers=agent)
    assert r.status_code == 200 and read(client, kb, agent, "a.md") == "one\n"


def test_undo_refused_when_a_later_version_changed_the_file(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    write(client, kb, agent, "a.md", "one\n", "create")
    first = write(client, kb, agent, "a.md", "two\n", "overwrite")
    second = write(client, kb, agent, "a.md", "three\n", "overwrite")
    before = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/versions/{first}/undo", headers=admin)
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "stale" and err["path"] == "a.md" and err["changed_in"] == second
    assert err["expected_sha256"] != err["actual_sha256"]
    assert state(services, kb) == before
    # Undoing the newest first, then the older one, works.
    assert client.post(f"/api/v1/kbs/{kb}/versions/{second}/undo", headers=admin).status_code == 200
    assert client.post(f"/api/v1/kbs/{kb}/versions/{first}/undo", headers=admin).status_code == 200
    assert read(client, kb, agent, "a.md") == "one\n"


def test_undo_errors_change_nothing(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    v = write(client, kb, agent, "a.md", "one\n", "create")
    reader = make_agent(services, "rita", {kb: "read"})
    asker = make_agent(services, "asker", {kb: "read_write_ask"})
    stranger = make_agent(services, "sam", {})
    before = state(services, kb)
    for version, headers, body, status, code in (
        ("abc", admin, None, 400, "invalid_request"),
        ("0" * 40, admin, None, 404, "not_found"),
        (v, reader, None, 403, "forbidden"),
        (v, asker, None, 403, "approval_unavailable"),
        (v, stranger, None, 404, "not_found"),
        (v, {}, None, 401, "unauthorized"),
        (v, admin, b"[1]", 400, "invalid_request"),
        (v, admin, b'{"message": 5}', 400, "invalid_request"),
        (v, admin, b'{"other": 1}', 400, "invalid_request"),
    ):
        r = client.post(f"/api/v1/kbs/{kb}/versions/{version}/undo", content=body, headers=headers)
        assert r.status_code == status, (version, headers, body, r.text)
        assert r.json()["error"]["code"] == code
        assert state(services, kb) == before
    r = client.post(f"/api/v1/kbs/nope/versions/{v}/undo", headers=admin)
    assert r.status_code == 404
    # Undoing an undo of an undo... the second undo of the same version is stale: nothing to put back.
    assert client.post(f"/api/v1/kbs/{kb}/versions/{v}/undo", headers=admin).status_code == 200
    after_undo = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/versions/{v}/undo", headers=admin)
    assert r.status_code == 409 and r.json()["error"]["code"] == "stale"
    assert state(services, kb) == after_undo


def test_review_marker_and_unreviewed_writes(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    empty = client.get(f"/api/v1/kbs/{kb}/review", headers=admin).json()
    assert empty == {"reviewed": None, "unreviewed": [], "more": False}  # the KB's create is no agent write
    a = write(client, kb, agent, "a.md", "one\n", "create")
    write(client, kb, admin, "h.md", "by hand\n", "create")  # a human edit needs no review
    b = write(client, kb, agent, "a.md", "two\n", "overwrite")
    r = client.get(f"/api/v1/kbs/{kb}/review", headers=admin).json()
    assert [v["version"] for v in r["unreviewed"]] == [b, a]
    assert {v["kind"] for v in r["unreviewed"]} == {"agent_write"} and r["unreviewed"][0]["paths"] == ["a.md"]
    moved = client.post(f"/api/v1/kbs/{kb}/review", json={"version": a}, headers=admin)
    assert moved.status_code == 200 and moved.json()["reviewed"] == a
    assert [v["version"] for v in moved.json()["unreviewed"]] == [b]
    done = client.post(f"/api/v1/kbs/{kb}/review", json={"version": b}, headers=admin).json()
    assert done["reviewed"] == b and done["unreviewed"] == []
    assert client.get(f"/api/v1/kbs/{kb}/review", headers=admin).json()["reviewed"] == b


def test_review_errors(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    v = write(client, kb, agent, "a.md", "one\n", "create")
    for method, headers, body, status in (
        ("GET", agent, None, 403),
        ("POST", agent, {"version": v}, 403),
        ("GET", {}, None, 401),
        ("POST", admin, {"version": "abc"}, 400),
        ("POST", admin, {"version": "0" * 40}, 404),
        ("POST", admin, {}, 400),
        ("POST", admin, {"version": v, "x": 1}, 400),
    ):
        r = client.request(method, f"/api/v1/kbs/{kb}/review", json=body, headers=headers)
        assert r.status_code == status, (method, headers, body, r.text)
    assert client.get(f"/api/v1/kbs/{kb}/review", headers=admin).json()["reviewed"] is None
    assert client.get("/api/v1/kbs/nope/review", headers=admin).status_code == 404
    assert client.get(f"/api/v1/kbs/{kb}/review?x=1", headers=admin).status_code == 400
