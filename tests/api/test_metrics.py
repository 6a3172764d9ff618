"""/metrics: only for the admin token or the metrics token; commits counted from the repositories."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN

METRICS_TOKEN = "test-metrics-token"


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[tuple[TestClient, Settings]]:
    settings = Settings(
        data=tmp_path / "data", admin_token=ADMIN_TOKEN, metrics_token=METRICS_TOKEN, sample=False
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client, settings


def _commits(text: str) -> dict[str, float]:
    return {
        m[1]: float(m[2]) for m in re.finditer(r'^kbserver_commits_total\{kb="([^"]+)"\} (\S+)$', text, re.M)
    }


def test_metrics_needs_the_admin_or_the_metrics_token(
    metered: tuple[TestClient, Settings],
) -> None:
    client, _ = metered
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert client.post("/api/v1/kbs", json={"slug": "secret-plans"}, headers=admin).status_code == 201
    agent = client.post("/api/v1/agents", json={"name": "bob"}, headers=admin).json()
    token = agent.get("token")
    assert isinstance(token, str)
    refused = [
        ({}, 401, "unauthorized"),
        ({"Authorization": "Bearer nope"}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {token}"}, 403, "forbidden"),
    ]
    for headers, status, code in refused:
        r = client.get("/metrics", headers=headers)
        assert r.status_code == status and r.json()["error"]["code"] == code
        assert "secret-plans" not in r.text
    for good in (ADMIN_TOKEN, METRICS_TOKEN):
        r = client.get("/metrics", headers={"Authorization": f"Bearer {good}"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        assert _commits(r.text) == {"secret-plans": 1.0}


def test_commits_of_other_processes_are_counted(metered: tuple[TestClient, Settings], tmp_path: Path) -> None:
    client, settings = metered
    auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert client.post("/api/v1/kbs", json={"slug": "team"}, headers=admin).status_code == 201
    assert _commits(client.get("/metrics", headers=auth).text) == {"team": 1.0}
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.md").write_text("imported\n")
    env = {**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN}
    for slug in ("team", "other"):  # a write to an existing KB and a new KB, by another process
        proc = subprocess.run(
            [sys.executable, "-m", "kbserver.cli", "import", slug, str(folder), "--data", str(settings.data)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    r = client.post(
        "/api/v1/kbs/team/write",
        json={"files": [{"path": "b.md", "mode": "create", "content": "b\n"}]},
        headers=admin,
    )
    assert r.status_code == 200
    counts = _commits(client.get("/metrics", headers=auth).text)
    services = open_services(settings.data)
    try:
        on_main = {
            s: len(list(services.repos.repo(s).first_parents(services.repos.repo(s).head() or "")))
            for s in ("team", "other")
        }
    finally:
        services.close()
    assert on_main == {"team": 3, "other": 2}
    assert counts == {"team": 3.0, "other": 2.0}
