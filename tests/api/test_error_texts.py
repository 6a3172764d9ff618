"""Error messages that tell the caller what went wrong: which token, which field, why a push fails."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import state

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.mark.parametrize(
    ("method", "url", "extra"),
    [
        ("GET", "/api/v1/kbs", {}),
        ("POST", "/mcp", MCP_HEADERS),
        ("GET", "/git/notes.git/info/refs?service=git-upload-pack", {}),
    ],
)
def test_a_wrong_token_is_told_apart_from_a_missing_one(
    client: TestClient, kb: str, method: str, url: str, extra: dict[str, str]
) -> None:
    missing = client.request(method, url, headers=extra, json=PING)
    wrong = client.request(method, url, headers={**extra, "Authorization": "Bearer kbs_nope"}, json=PING)
    for r in (missing, wrong):
        assert r.status_code == 401, r.text
        err = r.json()["error"]
        # /mcp answers JSON-RPC (the code in `data`, the message starting with it), the others the API's shape
        assert (err["data"]["code"] if url == "/mcp" else err["code"]) == "unauthorized"
    assert "send Authorization: Bearer TOKEN" in missing.json()["error"]["message"]
    assert "not known" in wrong.json()["error"]["message"]
    assert "not known" not in missing.json()["error"]["message"]


def test_a_bad_cursor_names_the_cursor(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    r = client.get(f"/api/v1/kbs/{kb}/versions?cursor=garbage", headers=agent)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and "cursor" in err["message"]
    assert "version" not in err["message"] and "version" not in err
    assert [e["field"] for e in err.get("errors", [{"field": "cursor"}])] == ["cursor"]
    r = client.get(f"/api/v1/kbs/{kb}/versions?cursor={'0' * 40}", headers=agent)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "not_found" and err["cursor"] == "0" * 40 and "cursor" in err["message"]
    assert state(services, kb) == before


def test_git_clients_get_the_message_as_text(client: TestClient, kb: str) -> None:
    """git prints a text/plain error body as `remote: ...`; other clients keep the JSON shape."""
    url = f"/git/{kb}.git/info/refs?service=git-receive-pack"
    r = client.get(url, headers={"User-Agent": "git/2.39.5"})
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("kbserver is read-only: write through the API")
    r = client.get(url)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert r.json()["error"]["message"].startswith("kbserver is read-only: write through the API")


def test_validation_errors_say_what_is_wrong_and_what_is_allowed(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    for files, said in (
        (
            [{"path": "a.md", "mode": "apend", "content": "x"}],
            "files[0].mode: 'apend' is not a mode; use create, append, edit, overwrite or delete",
        ),
        ([{"path": "a.md", "content": "x"}], "files[0].mode: is missing; use create, append, edit"),
        (
            [{"path": "a.md", "mode": "append", "content": "x", "expected_sha256": "abc"}],
            "files[0].expected_sha256: must be a sha256: 64 lowercase hex digits",
        ),
    ):
        r = client.post(f"/api/v1/kbs/{kb}/write", headers=agent, json={"files": files})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_request" and said in err["message"], err
        assert all("pattern" not in e["problem"] and "tag" not in e["problem"] for e in err["errors"])
    assert state(services, kb) == before
