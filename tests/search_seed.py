"""Seeding a KB for search tests through the HTTP contract (write, then wait for the index)."""

from __future__ import annotations

from starlette.testclient import TestClient


def seed(client: TestClient, kb: str, headers: dict[str, str], files: dict[str, str]) -> str:
    """Create `files` (path -> content) in writes of at most 20 files; returns the last version."""
    items = [{"path": p, "mode": "create", "content": c} for p, c in files.items()]
    version = ""
    for start in range(0, len(items), 20):
        r = client.post(f"/api/v1/kbs/{kb}/write", json={"files": items[start : start + 20]}, headers=headers)
        assert r.status_code == 200, r.text
        version = str(r.json()["version"])
    r = client.get(f"/api/v1/kbs/{kb}/index", params={"wait_for": version, "timeout": 30}, headers=headers)
    assert r.status_code == 200 and r.json()["covered"] is True, r.text
    return version
