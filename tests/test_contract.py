"""Contract tests: error codes, routes in /openapi.json, answers matching their models, README in step."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jsonschema
import pytest
from starlette.testclient import TestClient

from kbserver.api import ENDPOINTS
from kbserver.config import Settings
from kbserver.core import errors
from kbserver.services import Services
from tests.helpers import make_agent

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()

# CONTRACT.md §3, "Errors"
CONTRACT_ERRORS = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "already_exists": 409,
    "not_pending": 409,
    "stale": 409,
    "no_match": 422,
    "ambiguous_match": 422,
    "too_large": 413,
    "secret_detected": 422,
    "approval_unavailable": 403,
    "busy": 503,
}


def test_every_contract_error_has_its_class() -> None:
    classes = {
        c.code: c.status
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.KBError) and c is not errors.KBError
    }
    for code, status in CONTRACT_ERRORS.items():
        assert classes.get(code) == status, code
    assert set(classes) - set(CONTRACT_ERRORS) == {"unavailable"}  # the one documented 5xx
    for code in CONTRACT_ERRORS:
        assert f"`{code}`" in README


def test_every_setting_is_documented() -> None:
    for name in Settings.model_fields:
        assert re.search(rf"^\| `{name}` \|", README, re.M), f"setting {name} missing from README"


def test_every_route_is_in_openapi(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for e in ENDPOINTS:
        path = "/api/v1" + re.sub(r"\{(\w+)(?::path)?\}", r"{\1}", e.path)
        assert e.method.lower() in doc["paths"][path], (e.method, path)
        params = {p["name"] for p in doc["paths"][path][e.method.lower()].get("parameters", [])}
        assert set(re.findall(r"\{(\w+)", e.path)) <= params
    schemas = doc["components"]["schemas"]
    assert "WriteRequest" in schemas or any(k.startswith("WriteRequest") for k in schemas)


def test_answers_match_their_models(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    """Drive every JSON endpoint once and validate its answer with the model /openapi.json publishes."""
    asker = make_agent(services, "asker", {kb: "read_write_ask"})
    w = client.post(
        f"/api/v1/kbs/{kb}/write",
        headers=agent,
        json={"files": [{"path": "a.md", "mode": "create", "content": "alpha"}]},
    ).json()
    run = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()
    prop = client.post(
        f"/api/v1/kbs/{kb}/write",
        headers=asker,
        json={"run_id": run["id"], "files": [{"path": "b.md", "mode": "create", "content": "beta"}]},
    ).json()
    pid = prop["proposal"]["id"]
    first = client.get(f"/api/v1/kbs/{kb}/versions", headers=agent).json()["versions"][-1]["version"]
    calls = {
        ("GET", "/kbs"): client.get("/api/v1/kbs", headers=agent),
        ("GET", "/kbs/{slug}"): client.get(f"/api/v1/kbs/{kb}", headers=agent),
        ("GET", "/kbs/{slug}/files"): client.get(f"/api/v1/kbs/{kb}/files", headers=agent),
        ("GET", "/kbs/{slug}/files/{path:path}"): client.get(f"/api/v1/kbs/{kb}/files/a.md", headers=agent),
        ("GET", "/kbs/{slug}/versions"): client.get(f"/api/v1/kbs/{kb}/versions", headers=agent),
        ("GET", "/kbs/{slug}/versions/{version}"): client.get(
            f"/api/v1/kbs/{kb}/versions/{w['version']}", headers=agent
        ),
        ("GET", "/kbs/{slug}/search"): client.get(
            f"/api/v1/kbs/{kb}/search", params={"q": "alpha"}, headers=agent
        ),
        ("GET", "/kbs/{slug}/index"): client.get(
            f"/api/v1/kbs/{kb}/index", params={"wait_for": w["version"]}, headers=agent
        ),
        ("GET", "/kbs/{slug}/proposals"): client.get(f"/api/v1/kbs/{kb}/proposals", headers=admin),
        ("GET", "/kbs/{slug}/proposals/{proposal}"): client.get(
            f"/api/v1/kbs/{kb}/proposals/{pid}", headers=admin
        ),
        ("GET", "/runs/{run}/kbs/{slug}/files"): client.get(
            f"/api/v1/runs/{run['id']}/kbs/{kb}/files", headers=asker
        ),
        ("GET", "/runs/{run}/kbs/{slug}/files/{path:path}"): client.get(
            f"/api/v1/runs/{run['id']}/kbs/{kb}/files/README.md", headers=asker
        ),
        ("GET", "/agents"): client.get("/api/v1/agents", headers=admin),
        ("GET", "/agents/{name}"): client.get("/api/v1/agents/bob", headers=admin),
        ("GET", "/agents/{name}/links"): client.get("/api/v1/agents/bob/links", headers=admin),
        ("POST", "/kbs/{slug}/proposals/{proposal}/approve"): client.post(
            f"/api/v1/kbs/{kb}/proposals/{pid}/approve", headers=admin
        ),
        ("GET", "/kbs/{slug}/review"): client.get(f"/api/v1/kbs/{kb}/review", headers=admin),
        ("POST", "/kbs/{slug}/review"): client.post(
            f"/api/v1/kbs/{kb}/review", json={"version": w["version"]}, headers=admin
        ),
        ("POST", "/kbs/{slug}/versions/{version}/undo"): client.post(
            f"/api/v1/kbs/{kb}/versions/{w['version']}/undo", headers=agent
        ),
        ("POST", "/kbs/{slug}/revert"): client.post(
            f"/api/v1/kbs/{kb}/revert", json={"version": first}, headers=agent
        ),
        ("POST", "/agents"): client.post("/api/v1/agents", json={"name": "carol"}, headers=admin),
        ("POST", "/agents/{name}/links"): client.post(
            "/api/v1/agents/carol/links", json={"kb": kb, "permission": "read"}, headers=admin
        ),
        ("POST", "/agents/{name}/token"): client.post("/api/v1/agents/carol/token", headers=admin),
        ("DELETE", "/agents/{name}/links/{slug}"): client.delete(
            f"/api/v1/agents/carol/links/{kb}", headers=admin
        ),
        ("DELETE", "/agents/{name}"): client.delete("/api/v1/agents/carol", headers=admin),
        ("POST", "/kbs"): client.post("/api/v1/kbs", json={"slug": "other"}, headers=admin),
        ("GET", "/runs/{run}"): client.get(f"/api/v1/runs/{run['id']}", headers=asker),
        ("POST", "/runs/{run}/end"): client.post(f"/api/v1/runs/{run['id']}/end", headers=asker),
    }
    by_key = {(e.method, e.path): e for e in ENDPOINTS}
    doc = client.get("/openapi.json").json()
    for key, response in calls.items():
        endpoint = by_key[key]
        assert response.status_code == endpoint.status, (key, response.text)
        assert endpoint.response is not None
        endpoint.response.model_validate(response.json())
        published = doc["paths"]["/api/v1" + re.sub(r"\{(\w+)(?::path)?\}", r"{\1}", key[1])]
        schema = published[key[0].lower()]["responses"][str(endpoint.status)]["content"]["application/json"]
        _strictly_valid(response.json(), schema["schema"], doc)
    covered = set(calls) | {
        ("POST", "/kbs/{slug}/write"),
        ("POST", "/runs"),
        ("POST", "/kbs/{slug}/proposals/{proposal}/reject"),
        ("GET", "/kbs/{slug}/archive"),
    }
    assert covered == set(by_key), set(by_key) - covered


def _strictly_valid(answer: object, schema: dict[str, object], doc: dict[str, object]) -> None:
    """`answer` matches the published schema, and has no key that the schema does not declare."""
    components = copy.deepcopy(doc["components"])
    for model in components["schemas"].values():  # type: ignore[index]
        if "properties" in model:
            model.setdefault("additionalProperties", False)  # ErrorInfo keeps its explicit `true`
    jsonschema.validate(answer, {**schema, "components": components})


@pytest.mark.parametrize("url", ["/healthz", "/openapi.json"])
def test_public_endpoints(client: TestClient, url: str) -> None:
    assert client.get(url).status_code == 200
