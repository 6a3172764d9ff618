"""Idempotency-Key on writes: a repeat answers the first result and writes nothing; another body
with the key is invalid_request; keys are per caller and KB; failed writes free their key."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import git_fsck, make_agent, state

APPEND = {"path": "log.md", "mode": "append", "content": "one line\n"}


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


def _write(
    client: TestClient, kb: str, headers: dict[str, str], key: str | None, *files: dict[str, Any]
) -> Any:
    extra = {"Idempotency-Key": key} if key is not None else {}
    return client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files)}, headers={**headers, **extra})


def _log(client: TestClient, kb: str, headers: dict[str, str]) -> str:
    return str(client.get(f"/api/v1/kbs/{kb}/files/log.md", headers=headers).json()["content"])


def test_a_repeat_answers_the_first_result_and_writes_nothing(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    assert (
        _write(client, kb, agent, None, {"path": "log.md", "mode": "create", "content": ""}).status_code
        == 200
    )
    first = _write(client, kb, agent, "key-1", APPEND)
    assert first.status_code == 200, first.text
    before = state(services, kb)
    for _ in range(3):
        again = _write(client, kb, agent, "key-1", APPEND)
        assert (again.status_code, again.json()) == (200, first.json())
    assert state(services, kb) == before and _log(client, kb, agent) == "one line\n"  # appended once
    # the same key with another body is refused, and changes nothing
    other = _write(client, kb, agent, "key-1", {**APPEND, "content": "another line\n"})
    assert (other.status_code, other.json()["error"]["code"]) == (400, "invalid_request"), other.text
    assert state(services, kb) == before
    # a new key is a new write
    assert _write(client, kb, agent, "key-2", APPEND).json()["parent"] == before[0]
    assert _log(client, kb, agent) == "one line\none line\n"
    git_fsck(services.repos.path(kb))


def test_keys_are_scoped_per_caller_and_kb(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], admin: dict[str, str]
) -> None:
    client.post("/api/v1/kbs", json={"slug": "other"}, headers=admin)
    eve = make_agent(services, "eve", {kb: "read_write", "other": "read_write"})
    for n, who in enumerate((agent, admin, eve)):
        r = _write(client, kb, who, "shared", {"path": f"by-{n}.md", "mode": "create", "content": "x\n"})
        assert r.status_code == 200, r.text
    r = _write(client, "other", eve, "shared", {"path": "x.md", "mode": "create", "content": "x\n"})
    assert r.status_code == 200, r.text
    assert len(list(services.repos.repo(kb).first_parents(state(services, kb)[0] or ""))) == 4


def test_a_failed_write_frees_its_key(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    missing = _write(client, kb, agent, "k", APPEND)  # log.md does not exist yet
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found"), missing.text
    assert state(services, kb) == before
    assert (
        _write(client, kb, agent, "k", {"path": "log.md", "mode": "create", "content": ""}).status_code == 200
    )


def test_bad_keys_are_invalid_requests(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    for key in ("", "x" * 256, "with space", "tab\tkey", "ключ"):
        r = client.post(
            f"/api/v1/kbs/{kb}/write",
            json={"files": [{"path": "a.md", "mode": "create", "content": "a\n"}]},
            headers={**agent, "Idempotency-Key": key.encode("utf-8")},  # type: ignore[dict-item]
        )
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), (key, r.text)
    assert state(services, kb) == before


def test_concurrent_repeats_write_once(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    assert (
        _write(client, kb, agent, None, {"path": "log.md", "mode": "create", "content": ""}).status_code
        == 200
    )
    from kbserver.core.model import Append, WriteRequest
    from kbserver.services.access.auth import caller_for
    from kbserver.services.writing import writes

    bob = caller_for(services, "bob")
    req = WriteRequest(files=[Append(path="log.md", mode="append", content="once\n")])
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(lambda _: writes.submit(services, bob, kb, req, idempotency_key="race"), range(6))
        )
    assert len({r.version for r in results}) == 1  # type: ignore[union-attr]
    assert _log(client, kb, agent) == "once\n"


def test_a_proposal_repeat_answers_the_same_proposal(
    client: TestClient, services: Services, kb: str, admin: dict[str, str]
) -> None:
    asker = make_agent(services, "asker", {kb: "read_write_ask"})
    run_id = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    body = {"files": [{"path": "idea.md", "mode": "create", "content": "idea\n"}], "run_id": run_id}
    first = client.post(f"/api/v1/kbs/{kb}/write", json=body, headers={**asker, "Idempotency-Key": "p"})
    again = client.post(f"/api/v1/kbs/{kb}/write", json=body, headers={**asker, "Idempotency-Key": "p"})
    assert (first.status_code, again.status_code) == (202, 202) and first.json() == again.json()
    assert len(client.get(f"/api/v1/kbs/{kb}/proposals", headers=admin).json()["proposals"]) == 1
