"""Secrets over HTTP (CONTRACT.md §3): the whole resulting file, messages, paths and descriptions are
scanned; a refused call changes nothing and writes no object into the repository."""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN, make_agent, state

_rng = random.Random(20261201)
# generated at run time, so no real-looking key sits in the repository
AWS_KEY = "AKIA" + "".join(_rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
GH_TOKEN = "ghp_" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(36))
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _objects(services: Services, kb: str) -> set[str]:
    """Every object file and pack of the repository: a refused write must add none."""
    root = services.repos.path(kb) / "objects"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _write(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, Any], **extra: Any) -> Any:
    return client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files), **extra}, headers=headers)


def _refused(r: Any, rule: str | None = None) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] == "secret_detected"
    if rule is not None:
        assert error["rule"] == rule
    return error


def _unchanged(services: Services, kb: str, before: Any, objects: set[str]) -> None:
    assert state(services, kb) == before
    assert _objects(services, kb) == objects


@pytest.fixture
def log(client: TestClient, kb: str, agent: dict[str, str]) -> str:
    r = _write(client, kb, agent, {"path": "log.md", "mode": "create", "content": "# log\n"})
    assert r.status_code == 200
    return "log.md"


def test_an_unquoted_password_in_an_env_file_is_refused_and_prose_about_one_is_not(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    password = "".join(_rng.choice(string.ascii_letters) for _ in range(8)) + str(_rng.randrange(10, 99))
    before, objects = state(services, kb), _objects(services, kb)
    env = f"# staging\nDB_USER=app\nDB_PASSWORD={password}\n"
    r = _write(client, kb, agent, {"path": "deploy/staging.env", "mode": "create", "content": env})
    assert _refused(r, "Password Assignment")["path"] == "deploy/staging.env"
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": f"password: {password}\n"})
    assert _refused(r, "Password Assignment")["path"] == log
    _unchanged(services, kb, before, objects)
    prose = "The password is in the vault.\npassword=<your password>\npassword: see 1Password\npassword=\n"
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": prose})
    assert r.status_code == 200, r.text


def test_a_key_split_across_two_appends(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    first = _write(client, kb, agent, {"path": log, "mode": "append", "content": "id " + AWS_KEY[:10]})
    assert first.status_code == 200  # half a key is not a key
    before, objects = state(services, kb), _objects(services, kb)
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": AWS_KEY[10:] + "\n"})
    assert _refused(r, "AWS Access Key")["path"] == log
    _unchanged(services, kb, before, objects)


def test_an_edit_that_joins_two_halves(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    halves = f"{GH_TOKEN[:20]} REDACTED {GH_TOKEN[20:]}\n"
    assert _write(client, kb, agent, {"path": log, "mode": "append", "content": halves}).status_code == 200
    before, objects = state(services, kb), _objects(services, kb)
    r = _write(client, kb, agent, {"path": log, "mode": "edit", "old_string": " REDACTED ", "new_string": ""})
    _refused(r, "GitHub Token")
    _unchanged(services, kb, before, objects)


def test_a_pem_header_split_across_appends(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    assert (
        _write(
            client, kb, agent, {"path": log, "mode": "append", "content": "-----BEGIN RSA PRI"}
        ).status_code
        == 200
    )
    before, objects = state(services, kb), _objects(services, kb)
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": "VATE KEY-----\nMIIE\n"})
    _refused(r)
    _unchanged(services, kb, before, objects)


def test_a_file_that_already_holds_a_key_can_still_be_edited(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    # as if stored before a rule existed: written below the write engine
    from kbserver.store import CommitPlan

    _, writer = services.repos.get(kb)
    writer.submit(lambda _t: CommitPlan({log: f"old {AWS_KEY}\n".encode()}, "legacy", "admin <a@b.invalid>"))
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": "an unrelated line\n"})
    assert r.status_code == 200, r.text
    r = _write(client, kb, agent, {"path": log, "mode": "append", "content": GH_TOKEN})
    _refused(r, "GitHub Token")  # a new one still is not


@pytest.mark.parametrize(
    "secret",
    [
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n",
        "NPM_TOKEN=npm_" + "a1B2c3D4e5" * 3 + "f6G7h8",
        "STRIPE=sk_" + "test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "aws_secret_access_key=" + "wJalrXUtnFEMIK7MDENGbPxRfiCY" + "0123456789ab",
        "DATABASE_URL=postgres://app:Zq8tV3nKpL2x@db.internal:5432/app",
    ],
)
def test_formats_caught_now(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str, secret: str
) -> None:
    before, objects = state(services, kb), _objects(services, kb)
    _refused(_write(client, kb, agent, {"path": log, "mode": "append", "content": secret + "\n"}))
    _unchanged(services, kb, before, objects)


def test_placeholder_credentials_in_urls_are_fine(
    client: TestClient, kb: str, agent: dict[str, str], log: str
) -> None:
    text = "connect with postgres://user:password@example.com/db or mysql://root:<password>@localhost\n"
    assert _write(client, kb, agent, {"path": log, "mode": "append", "content": text}).status_code == 200


def test_a_token_in_a_write_message(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    before, objects = state(services, kb), _objects(services, kb)
    r = _write(
        client, kb, agent, {"path": log, "mode": "append", "content": "x\n"}, message=f"use {GH_TOKEN}"
    )
    assert _refused(r, "GitHub Token")["field"] == "message"
    _unchanged(services, kb, before, objects)


def test_a_token_in_a_revert_message(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], log: str
) -> None:
    first = state(services, kb)[0]
    assert _write(client, kb, agent, {"path": log, "mode": "append", "content": "x\n"}).status_code == 200
    before, objects = state(services, kb), _objects(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/revert", json={"version": first, "message": AWS_KEY}, headers=agent)
    _refused(r, "AWS Access Key")
    _unchanged(services, kb, before, objects)


def test_a_token_in_a_proposal_message(client: TestClient, services: Services, kb: str, log: str) -> None:
    asker = make_agent(services, "ask", {kb: "read_write_ask"})
    run = client.post("/api/v1/runs", json={"interactive": True}, headers=asker).json()["id"]
    before, objects = state(services, kb), _objects(services, kb)
    refs = sorted(p.name for p in (services.repos.path(kb) / "refs").rglob("*") if p.is_file())
    r = _write(
        client, kb, asker, {"path": log, "mode": "append", "content": "x\n"}, message=GH_TOKEN, run_id=run
    )
    _refused(r, "GitHub Token")
    _unchanged(services, kb, before, objects)
    assert sorted(p.name for p in (services.repos.path(kb) / "refs").rglob("*") if p.is_file()) == refs
    assert services.control.proposals(kb, None) == []


def test_a_token_in_a_path(client: TestClient, services: Services, kb: str, agent: dict[str, str]) -> None:
    before, objects = state(services, kb), _objects(services, kb)
    r = _write(client, kb, agent, {"path": f"keys/{GH_TOKEN}.md", "mode": "create", "content": "x\n"})
    _refused(r, "GitHub Token")
    _unchanged(services, kb, before, objects)


def test_a_token_in_a_kb_description(client: TestClient, services: Services, tmp_path: Path) -> None:
    r = client.post("/api/v1/kbs", json={"slug": "leaky", "description": f"key {AWS_KEY}"}, headers=ADMIN)
    assert _refused(r, "AWS Access Key")["field"] == "description"
    assert not services.repos.exists("leaky")
    assert services.control.kb("leaky") is None
