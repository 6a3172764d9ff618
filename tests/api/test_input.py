"""HTTP input edges (CONTRACT.md §3, Errors): deep JSON, long numbers, wrong encodings, huge bodies."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Message

from kbserver.api import ENDPOINTS
from kbserver.api.http import MAX_BODY_BYTES
from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN, LiveServer, state

WRITE = {"files": [{"path": "a.md", "mode": "create", "content": "hello\n"}]}


def _post_urls(kb: str) -> Iterator[tuple[str, bool]]:
    """Every POST endpoint with a JSON body (or an optional one), with real path parameters."""
    for e in ENDPOINTS:
        if e.method != "POST":
            continue
        path = e.path.replace("{slug}", kb).replace("{proposal}", "p1").replace("{name}", "nobody")
        yield "/api/v1" + path, e.admin


def _assert_invalid(r: Any) -> None:
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_request"
    assert "Traceback" not in r.text


BAD_BODIES = {
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "nested object 100,000 deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "deep inside a write": b'{"files": [], "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    "5,000-digit integer": b'{"files": [], "message": ' + b"9" * 5000 + b"}",
    "5,000-digit float": b'{"kbs": [], "interactive": 1' + b"0" * 5000 + b".5}",
    "float out of range": b'{"message": 1e999}',
    "NaN": b'{"message": NaN}',
    "UTF-16": json.dumps(WRITE).encode("utf-16"),
    "UTF-16-LE without BOM": json.dumps(WRITE).encode("utf-16-le"),
    "UTF-32": json.dumps(WRITE).encode("utf-32"),
    "Latin-1": json.dumps(
        {"files": [{"path": "caf\u00e9.md", "mode": "create", "content": "x"}]}, ensure_ascii=False
    ).encode("latin-1"),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_json_is_invalid_request_on_every_endpoint(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], name: str
) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    before = state(services, kb)
    agents_before = services.control.agents()
    for url, admin_only in _post_urls(kb):
        r = client.post(url, content=BAD_BODIES[name], headers=admin if admin_only else agent)
        if url.endswith(("/approve", "/token")):  # take no body: unknown proposal or agent
            assert r.status_code == 404, r.text
            continue
        _assert_invalid(r)
    assert state(services, kb) == before
    assert services.control.agents() == agents_before


def test_a_utf16_write_stores_nothing(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    r = client.post(
        f"/api/v1/kbs/{kb}/write",
        content=json.dumps(WRITE).encode("utf-16"),
        headers={**agent, "content-type": "application/json"},
    )
    _assert_invalid(r)
    assert "UTF-8" in r.json()["error"]["message"]
    assert state(services, kb) == before
    # the same write as UTF-8 is accepted
    assert client.post(f"/api/v1/kbs/{kb}/write", json=WRITE, headers=agent).status_code == 200


async def _drive(app: ASGIApp, path: str, headers: dict[str, str], chunks: int, size: int) -> tuple[int, int]:
    """POST `chunks` chunks of `size` bytes straight into the ASGI app; (status, bytes it pulled)."""
    pulled = 0
    sent = 0
    status = 0

    async def receive() -> Message:
        nonlocal pulled, sent
        if sent >= chunks:
            return {"type": "http.disconnect"}
        sent += 1
        pulled += size
        return {"type": "http.request", "body": b" " * size, "more_body": sent < chunks}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    await app(scope, receive, send)
    return status, pulled


CHUNK = 64 * 1024
HUGE = (MAX_BODY_BYTES // CHUNK) * 4  # 32 MiB in 64 KiB chunks


def test_content_length_over_the_limit_is_refused_before_reading(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    headers = {**agent, "content-length": str(HUGE * CHUNK)}
    status, pulled = anyio.run(_drive, client.app, f"/api/v1/kbs/{kb}/write", headers, HUGE, CHUNK)
    assert status == 413
    assert pulled == 0
    assert state(services, kb) == before


def test_a_chunked_body_is_counted_while_it_streams(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    for url in (f"/api/v1/kbs/{kb}/write", "/api/v1/runs", f"/api/v1/kbs/{kb}/revert"):
        status, pulled = anyio.run(_drive, client.app, url, agent, HUGE, CHUNK)
        assert status == 413, url
        assert pulled <= MAX_BODY_BYTES + CHUNK, url  # stopped right after the limit
    assert state(services, kb) == before


def test_too_large_has_the_contract_shape(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    r = client.post(f"/api/v1/kbs/{kb}/write", content=b" " * (MAX_BODY_BYTES + 1), headers=agent)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "too_large"
    assert r.json()["error"]["max_body_bytes"] == MAX_BODY_BYTES
    r = client.post(f"/api/v1/kbs/{kb}/write", content=b"{}", headers={**agent, "content-length": "x"})
    assert r.status_code == 400


def test_live_server_refuses_a_400_mb_declared_body_at_once(live: LiveServer) -> None:
    """A real socket: the answer comes after the headers and a few bytes, not after 400 MB."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=60) as sock:
        sock.sendall(
            b"POST /api/v1/kbs/sample/write HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {400 * 1024 * 1024}\r\n\r\n".encode()
            + b'{"files": ['
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_optional_bodies_are_optional_in_openapi(client: TestClient, agent: dict[str, str]) -> None:
    doc = client.get("/openapi.json").json()["paths"]
    assert doc["/api/v1/runs"]["post"]["requestBody"]["required"] is False
    assert doc["/api/v1/kbs/{slug}/proposals/{proposal}/reject"]["post"]["requestBody"]["required"] is False
    assert doc["/api/v1/kbs/{slug}/write"]["post"]["requestBody"]["required"] is True
    assert client.post("/api/v1/runs", headers=agent).status_code == 201


def test_405_names_every_allowed_method(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    methods: dict[str, set[str]] = {}
    for e in ENDPOINTS:
        methods.setdefault(e.path, set()).add(e.method)
    for path, allowed in methods.items():
        url = "/api/v1" + (
            path.replace("{slug}", kb)
            .replace("{path:path}", "a.md")
            .replace("{version}", "0" * 40)
            .replace("{proposal}", "p1")
            .replace("{name}", "bob")
            .replace("{run}", "r1")
        )
        for method in ("PUT", "PATCH", "TRACE", "DELETE", "POST"):
            if method in allowed:
                continue
            r = client.request(method, url, headers=agent)
            assert r.status_code == 405, (method, url, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
            expected = allowed | ({"HEAD"} if "GET" in allowed else set())
            assert set(r.headers["allow"].replace(" ", "").split(",")) == expected, (method, url)
    r = client.post("/healthz")
    assert r.status_code == 405 and "GET" in r.headers["allow"]


def test_openapi_states_the_constraints_the_server_enforces(client: TestClient) -> None:
    from typing import get_args

    from kbserver.api.schemas import ToolSet
    from kbserver.core.paths import PATH_PATTERN
    from kbserver.services.access.agents import TOOL_SETS

    doc = client.get("/openapi.json").json()
    paths, schemas = doc["paths"], doc["components"]["schemas"]

    def param(path: str, method: str, name: str) -> dict[str, Any]:
        [found] = [p for p in paths[path][method]["parameters"] if p["name"] == name]
        return found["schema"]  # type: ignore[no-any-return]

    def found(schema: Any, key: str) -> list[Any]:
        """Every value of `key` in a schema, through anyOf and nesting."""
        if isinstance(schema, dict):
            return ([schema[key]] if key in schema else []) + [
                v for item in schema.values() for v in found(item, key)
            ]
        if isinstance(schema, list):
            return [v for item in schema for v in found(item, key)]
        return []

    hex40 = "^[0-9a-f]{40}$"
    kb = "/api/v1/kbs/{slug}"
    assert found(param(kb + "/versions/{version}", "get", "version"), "pattern") == [hex40]
    assert found(param(kb + "/files", "get", "version"), "pattern") == [hex40]
    assert found(param(kb + "/files/{path}", "get", "version"), "pattern") == [hex40]
    assert found(param(kb + "/index", "get", "wait_for"), "pattern") == [hex40]
    assert found(param(kb + "/versions", "get", "cursor"), "pattern") == [hex40]
    assert found(schemas["RevertIn"]["properties"]["version"], "pattern") == [hex40]
    search_q = param(kb + "/search", "get", "q")
    assert search_q["minLength"] == 1 and search_q["pattern"] == r"\S"
    assert param(kb + "/files/{path}", "get", "path")["pattern"] == PATH_PATTERN
    assert found(param(kb + "/versions", "get", "path"), "pattern") == [PATH_PATTERN]
    assert found(param(kb + "/versions", "get", "path"), "minLength") == [1]
    assert found(schemas["Create"]["properties"]["path"], "pattern") == [PATH_PATTERN]
    assert set(get_args(ToolSet)) == set(TOOL_SETS)
    assert schemas["AgentCreate"]["properties"]["tools"]["items"]["enum"] == list(TOOL_SETS)
    assert schemas["AgentCreate"]["properties"]["tools"]["uniqueItems"] is True
