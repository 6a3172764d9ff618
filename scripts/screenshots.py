#!/usr/bin/env python3
"""Make the README's screenshots of the web admin: a versions list with agent-write labels and a diff.

Usage: scripts/screenshots.py   (writes docs/admin-versions.png and docs/admin-diff.png)
Runs `kbserver serve` on a free port with a throw-away data folder and drives Debian's Chromium.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "screenshot-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(api: str) -> str:
    """A sample KB with agent writes, an approval, a human edit and a revert; returns a version to show."""
    http = httpx.Client(base_url=api, headers=ADMIN, timeout=60)

    def post(path: str, body: dict[str, object], headers: dict[str, str] | None = None) -> dict[str, object]:
        r = http.post(path, json=body, headers=headers)
        r.raise_for_status()
        return dict(r.json())

    def agent(name: str, permission: str) -> dict[str, str]:
        token = post("/agents", {"name": name})["token"]
        post(f"/agents/{name}/links", {"kb": "sample", "permission": permission})
        return {"Authorization": f"Bearer {token}"}

    bob, ivy = agent("bob", "read_write"), agent("ivy", "read_write_ask")
    log = http.get("/kbs/sample/files/log/2026-11.md").json()
    readme = http.get("/kbs/sample/files/README.md").json()["content"]
    title = readme.splitlines()[0]
    entry = "\n## 2026-11-29 -- Fix booking time zone\nSlots are stored in UTC; the UI converts them.\n"
    files = [
        {"path": "log/2026-11.md", "mode": "append", "expected_sha256": log["sha256"], "content": entry},
        {"path": "README.md", "mode": "edit", "old_string": title, "new_string": title + " (shared memory)"},
    ]
    shown = post("/kbs/sample/write", {"message": "log the booking fix", "files": files}, bob)["version"]
    post(
        "/kbs/sample/write",
        {"files": [{"path": "notes/todo.md", "mode": "create", "content": "- digest\n"}]},
        bob,
    )
    run = post("/runs", {"interactive": True}, ivy)
    idea = {
        "path": "notes/ideas.md",
        "mode": "create",
        "content": "# Ideas\n\n- Weekly digest of agent writes.\n",
    }
    proposal = post("/kbs/sample/write", {"run_id": run["id"], "files": [idea]}, ivy)["proposal"]
    post(f"/kbs/sample/proposals/{proposal['id']}/approve", {})  # type: ignore[index]
    more = {"path": "notes/ideas.md", "mode": "append", "content": "- Reviewed by a person.\n"}
    post("/kbs/sample/write", {"files": [more]})
    return str(shown)


def main() -> int:
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        port = _port()
        env = {**os.environ, "KBSERVER_ADMIN_TOKEN": TOKEN}
        server = subprocess.Popen(
            [sys.executable, "-m", "kbserver.cli", "serve", "--data", f"{tmp}/data", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            version = _seed(base + "/api/v1")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1000, "height": 760}, device_scale_factor=1)
                page.goto(base + "/admin/login")
                page.get_by_label("Token").fill(TOKEN)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url("**/admin/")
                page.goto(base + "/admin/kbs/sample/versions")
                page.screenshot(path=str(docs / "admin-versions.png"))
                page.goto(base + f"/admin/kbs/sample/versions/{version}")
                page.screenshot(path=str(docs / "admin-diff.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote {docs / 'admin-versions.png'} and {docs / 'admin-diff.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
