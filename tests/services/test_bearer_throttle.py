"""Guessing tokens is throttled on every surface that takes one: past BEARER_FAILURES unknown tokens
from one client within the window, `/api/v1`, `/mcp` and git over HTTP answer 401 `unauthorized` with
`Retry-After`, even to a right token from that client; other clients are untouched, and the count
lives in the control store (both), so another node refuses the client too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.core.errors import Unauthorized
from kbserver.services import Services
from kbserver.services.access import agents, auth
from kbserver.services.access.auth import ADMIN, authenticate
from tests.helpers import ADMIN_TOKEN, make_agent

CAP = 5


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(auth, "BEARER_FAILURES", CAP)
    monkeypatch.setattr(auth, "_suspects", {})
    yield


def _refused(services: Services, token: str | None, address: str) -> Unauthorized:
    with pytest.raises(Unauthorized) as caught:
        authenticate(services, token, ADMIN_TOKEN, address)
    return caught.value


def test_a_client_past_the_cap_is_refused_even_with_a_right_token(services: Services, kb: str) -> None:
    _, token = agents.create(services, ADMIN, "bob")
    for i in range(CAP):
        assert "retry_after" not in _refused(services, f"kbs_wrong{i}", "10.0.0.1").details
    past = _refused(services, "kbs_wrong-again", "10.0.0.1")
    assert past.details["retry_after"] == auth.BEARER_RETRY_AFTER and past.code == "unauthorized"
    assert _refused(services, token, "10.0.0.1").details["retry_after"] == auth.BEARER_RETRY_AFTER
    assert _refused(services, ADMIN_TOKEN, "10.0.0.1").details["retry_after"] == auth.BEARER_RETRY_AFTER
    assert authenticate(services, token, ADMIN_TOKEN, "10.0.0.2").name == "bob"  # another client
    assert authenticate(services, token, ADMIN_TOKEN).name == "bob"  # no client: stdio, the CLI
    assert "retry_after" not in _refused(services, "", "10.0.0.2").details  # no token is no guess


def test_another_node_refuses_the_client_at_its_first_failure(services: Services, kb: str) -> None:
    for i in range(CAP):
        _refused(services, f"kbs_wrong{i}", "10.0.0.9")
    auth._suspects.clear()  # a node that has not met this client: it knows only the shared count
    assert _refused(services, "kbs_wrong-here", "10.0.0.9").details["retry_after"] > 0
    _, token = agents.create(services, ADMIN, "carol")
    assert _refused(services, token, "10.0.0.9").details["retry_after"] > 0


def test_api_mcp_and_git_answer_401_with_retry_after(settings: Settings, services: Services, kb: str) -> None:
    good = make_agent(services, "bob", {kb: "read"})
    bad = {"Authorization": "Bearer kbs_" + "x" * 43}
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
        surfaces = [
            ("GET", "/api/v1/kbs", {}),
            (
                "POST",
                "/mcp",
                {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            ),
            ("GET", f"/git/{kb}.git/info/refs?service=git-upload-pack", {}),
        ]
        for i in range(CAP):
            method, path, extra = surfaces[i % 3]
            answer = client.request(
                method, path, headers={**bad, **extra}, json={} if method == "POST" else None
            )
            assert answer.status_code == 401 and "retry-after" not in answer.headers, (path, answer.text)
        for method, path, extra in surfaces:
            for headers in (bad, good):
                answer = client.request(
                    method, path, headers={**headers, **extra}, json={} if method == "POST" else None
                )
                assert answer.status_code == 401, (path, answer.text)
                assert answer.headers["retry-after"] == str(auth.BEARER_RETRY_AFTER), path
                body = answer.json()["error"]
                if path == "/mcp":  # a JSON-RPC error: the contract's code and details in `data`
                    body = {**body["data"], "message": body["message"]}
                assert body["code"] == "unauthorized" and "too many" in body["message"], path
                assert body["retry_after"] == auth.BEARER_RETRY_AFTER


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_metrics_token_guesses_stop_at_the_cap(settings: Settings, services: Services, kb: str) -> None:
    metrics_token = "m" * 40
    app_settings = settings.model_copy(update={"metrics_token": metrics_token})
    with TestClient(create_app(app_settings, services), raise_server_exceptions=False) as client:
        assert client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"}).status_code == 200
        for i in range(CAP):
            guess = client.get("/metrics", headers={"Authorization": f"Bearer guess{i}"})
            assert guess.status_code == 401 and "retry-after" not in guess.headers
        # Past the cap the client is refused before its token is compared, the right one included.
        right = client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
        assert right.status_code == 401 and right.headers["retry-after"] == str(auth.BEARER_RETRY_AFTER)
        assert right.json()["error"]["code"] == "unauthorized"
