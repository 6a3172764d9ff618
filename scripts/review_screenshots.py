#!/usr/bin/env python3
"""Screenshots of what a reviewer reads: the inbox with 40 writes of four agents, a memory's change,
and the approval card, at 1280 px. Prints each page's height.

Usage: scripts/review_screenshots.py SUFFIX   (writes docs/review-inbox-SUFFIX.png,
docs/review-memory-SUFFIX.png and docs/review-card-SUFFIX.png; run from the tree to show)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "screenshot-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
MEMORY = (
    "---\nid: {id}\nagentId: {agent}\nuser_id: default\nmemory_type: {type}\n"
    "createdAt: '2026-12-01T10:00:00Z'\n{extra}---\n\n{text}\n"
)
HOST = """
window.addEventListener("message", (event) => {
  const frame = document.getElementById("card").contentWindow;
  const m = event.data;
  const reply = (result) => frame.postMessage({ jsonrpc: "2.0", id: m.id, result }, "*");
  const info = { name: "h", version: "0" };
  if (m.method === "ui/initialize")
    reply({ protocolVersion: "2026-01-26", hostInfo: info, hostCapabilities: {}, hostContext: {} });
  else if (m.method === "ui/notifications/initialized") {
    const note = { jsonrpc: "2.0", method: "ui/notifications/tool-result", params: window.toolResult };
    frame.postMessage(note, "*");
  }
});
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(http: httpx.Client) -> dict[str, Any]:
    def post(path: str, body: dict[str, Any], who: dict[str, str] = ADMIN) -> dict[str, Any]:
        r = http.post(path, json=body, headers=who)
        r.raise_for_status()
        return dict(r.json())

    def agent(name: str, permission: str = "read_write") -> dict[str, str]:
        token = post("/agents", {"name": name})["token"]
        post(f"/agents/{name}/links", {"kb": "team", "permission": permission})
        return {"Authorization": f"Bearer {token}"}

    post("/kbs", {"slug": "team", "description": "The team's memory"})
    names = ["ann", "bob", "cyd", "dee"]
    who = {n: agent(n) for n in names}
    runs = {n: post("/runs", {}, who[n])["id"] for n in names[:3]}
    for n in range(40):
        name = names[n % 4]
        if name == "ann":
            files = [
                {
                    "path": f"memories/{n * 2 + k:016x}.md",
                    "mode": "create",
                    "content": MEMORY.format(
                        id=f"{n * 2 + k:016x}",
                        agent="ann",
                        type="fact",
                        extra="",
                        text=f"The customer prefers option {n}.{k}.",
                    ),
                }
                for k in range(2)
            ]
            body = {"files": files, "run_id": runs["ann"], "message": "remember the customer's preferences"}
        elif name == "bob":
            files = [{"path": f"notes/release-{n}.md", "mode": "create", "content": "one\ntwo\nthree\n"}]
            body = {"files": files, "run_id": runs["bob"], "message": "draft the release notes"}
        elif name == "cyd":
            mode = "create" if n == 2 else "append"
            files = [{"path": "notes/plan.md", "mode": mode, "content": f"step {n}\n"}]
            body = {"files": files, "run_id": runs["cyd"], "message": "plan the migration"}
        else:
            body = {"files": [{"path": f"dee/{n}.md", "mode": "create", "content": f"note {n}\n"}]}
        post("/kbs/team/write", body, who[name])
    old, new = "00000000000000f1", "00000000000000f2"
    history = "metadata:\n  history:\n  - value: Ann likes coffee\n    at: '2026-11-30'\n"
    post(
        "/kbs/team/write",
        {
            "files": [
                {
                    "path": f"memories/{old}.md",
                    "mode": "create",
                    "content": MEMORY.format(
                        id=old,
                        agent="ann",
                        type="preference",
                        extra=history,
                        text="Ann drinks black coffee in the morning.",
                    ),
                }
            ]
        },
        who["ann"],
    )
    post(
        "/kbs/team/write",
        {
            "files": [
                {
                    "path": f"memories/{new}.md",
                    "mode": "create",
                    "content": MEMORY.format(
                        id=new,
                        agent="ann",
                        type="preference",
                        extra="",
                        text="Ann drinks green tea in the morning.",
                    ),
                }
            ]
        },
        who["ann"],
    )
    marked = MEMORY.format(
        id=old,
        agent="ann",
        type="preference",
        extra=history + f"superseded_by: {new}\n",
        text="Ann drank black coffee in the morning.",
    )
    memory = post(
        "/kbs/team/write",
        {"files": [{"path": f"memories/{old}.md", "mode": "overwrite", "content": marked}]},
        who["ann"],
    )
    ivy = agent("ivy", "read_write_ask")
    run = post("/runs", {"interactive": True}, ivy)
    plan = http.get("/kbs/team/files/notes/plan.md", headers=ADMIN).json()
    edit = {
        "path": "notes/plan.md",
        "mode": "edit",
        "old_string": "step 2\n",
        "new_string": "step 2: freeze writes for one minute while the new index is built and checked\n",
        "expected_sha256": plan["sha256"],
    }
    asked = post(
        "/kbs/team/write",
        {"files": [edit], "run_id": run["id"], "message": "make the plan's first step safe"},
        ivy,
    )
    return {"memory": memory["version"], "proposal": asked["proposal"]["id"]}


def main() -> int:
    suffix = sys.argv[1] if len(sys.argv) > 1 else "after"
    docs = ROOT / "docs"
    with tempfile.TemporaryDirectory() as tmp:
        port = _port()
        env = {
            **os.environ,
            "KBSERVER_ADMIN_TOKEN": TOKEN,
            "KBSERVER_SAMPLE": "false",
            "PYTHONPATH": str(ROOT),
        }
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
            made = _seed(httpx.Client(base_url=base + "/api/v1", timeout=60))
            from kbserver.config import Settings
            from kbserver.mcp.card import approval
            from kbserver.services.access.auth import ADMIN as ADMIN_CALLER
            from kbserver.wiring import open_services

            services = open_services(Path(f"{tmp}/data"), Settings(data=Path(f"{tmp}/data")).options())
            card = approval(services, ADMIN_CALLER, made["proposal"], base)
            services.close()
            html = resources.files("kbserver.mcp").joinpath("card.html").read_text(encoding="utf-8")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(base + "/admin/login")
                page.get_by_label("Token").fill(TOKEN)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url("**/admin/")
                for name, url in (
                    ("inbox", "/admin/kbs/team/review"),
                    ("memory", f"/admin/kbs/team/versions/{made['memory']}"),
                ):
                    page.goto(base + url)
                    tall = page.evaluate("() => document.documentElement.scrollHeight")
                    print(f"{name} ({suffix}): {tall} px high at 1280x800")
                    page.screenshot(
                        path=str(docs / f"review-{name}-{suffix}.png"),
                        full_page=True,
                        clip={"x": 0, "y": 0, "width": 1280, "height": min(tall, 1600)},
                    )
                host = browser.new_page(viewport={"width": 720, "height": 640})
                host.set_content("<!doctype html><title>host</title><style>body{margin:0}</style>")
                host.evaluate(HOST)
                result = {"structuredContent": {"proposal": {"id": made["proposal"]}, "approval": card}}
                host.evaluate(
                    """([result, html]) => { window.toolResult = result;
                    const f = document.createElement("iframe"); f.id = "card"; f.sandbox = "allow-scripts";
                    f.width = 720; f.height = 640; f.style.border = "0"; f.srcdoc = html;
                    document.body.appendChild(f); }""",
                    [json.loads(json.dumps(result)), html],
                )
                host.frame_locator("#card").locator("#files li").first.wait_for()
                host.screenshot(path=str(docs / f"review-card-{suffix}.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote docs/review-{{inbox,memory,card}}-{suffix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
