"""HTTP: versions newest first, pagination, path history, diffs, revert."""

from __future__ import annotations

from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import git_fsck, state


def put(
    client: TestClient, kb: str, headers: dict[str, str], path: str, content: str, mode: str = "overwrite"
) -> str:
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        json={"files": [{"path": path, "mode": mode, "content": content}]},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return str(r.json()["version"])


def test_pagination_and_path_history(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    made = [put(client, kb, agent, "a.md", "v0", "create")]
    for i in range(1, 6):
        made.append(
            put(
                client,
                kb,
                agent,
                "a.md" if i % 2 else "b.md",
                f"v{i}",
                "overwrite" if i % 2 else ("create" if i == 2 else "overwrite"),
            )
        )
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/api/v1/kbs/{kb}/versions", params=params, headers=agent).json()
        seen += [v["version"] for v in page["versions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen[:6] == list(reversed(made)) and len(seen) == 7  # plus the KB's first version
    history = client.get(f"/api/v1/kbs/{kb}/versions", params={"path": "a.md"}, headers=agent).json()
    assert [v["version"] for v in history["versions"]] == [made[5], made[3], made[1], made[0]]
    b_hist = client.get(
        f"/api/v1/kbs/{kb}/versions", params={"path": "b.md", "limit": 1}, headers=agent
    ).json()
    assert b_hist["versions"][0]["version"] == made[4] and b_hist["next_cursor"]
    rest = client.get(
        f"/api/v1/kbs/{kb}/versions", params={"path": "b.md", "cursor": b_hist["next_cursor"]}, headers=agent
    ).json()
    assert [v["version"] for v in rest["versions"]] == [made[2]]


def test_bad_version_queries(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    for params, status in (
        ({"limit": 0}, 400),
        ({"limit": "x"}, 400),
        ({"limit": 201}, 400),
        ({"cursor": "nothex"}, 400),
        ({"cursor": "f" * 40}, 404),
        ({"path": "../x"}, 400),
    ):
        r = client.get(f"/api/v1/kbs/{kb}/versions", params=params, headers=agent)
        assert r.status_code == status, (params, r.text)
    for v, status in (("abc", 400), ("0" * 40, 404)):
        r = client.get(f"/api/v1/kbs/{kb}/versions/{v}", headers=agent)
        assert r.status_code == status


def test_version_diff(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    put(client, kb, agent, "a.md", "one\ntwo\n", "create")
    v = put(client, kb, agent, "a.md", "one\nthree\n")
    d = client.get(f"/api/v1/kbs/{kb}/versions/{v}", headers=agent).json()
    assert d["version"] == v and d["paths"] == ["a.md"]
    assert d["diff"][0]["change"] == "modified"
    patch = d["diff"][0]["patch"]
    assert "--- a/a.md" in patch and "+++ b/a.md" in patch and "-two" in patch and "+three" in patch


def test_revert_makes_a_new_version(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    base = put(client, kb, agent, "a.md", "one\n", "create")
    put(client, kb, agent, "a.md", "two\n")
    put(client, kb, agent, "b.md", "new file\n", "create")
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": base}, headers=agent)
    assert r.status_code == 200, r.text
    rv = r.json()
    assert {f["path"]: f["mode"] for f in rv["files"]} == {"a.md": "overwrite", "b.md": "delete"}
    assert client.get(f"/api/v1/kbs/{kb}/files/a.md", headers=agent).json()["content"] == "one\n"
    top = client.get(f"/api/v1/kbs/{kb}/versions", headers=agent).json()["versions"][0]
    assert top["kind"] == "revert" and top["version"] == rv["version"]
    assert len(client.get(f"/api/v1/kbs/{kb}/versions", headers=agent).json()["versions"]) == 5
    before = state(services, kb)
    again = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": base}, headers=agent)
    assert (again.status_code, again.json()["error"]["code"]) == (400, "invalid_request")
    for body, status in (({"version": "xyz"}, 400), ({"version": "0" * 40}, 404), ({}, 400)):
        r = client.post(f"/api/v1/kbs/{kb}/revert", json=body, headers=agent)
        assert r.status_code == status
    assert state(services, kb) == before
    git_fsck(services.repos.path(kb))
