"""A reviewer in real Chromium: signs in with email and password, approves a proposal on their KB,
and the approval's commit in the bare repository names them (checked with C git)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers import ADMIN_TOKEN, LiveServer, git_fsck
from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]

PASSWORD = "a long passphrase for rita"


def test_a_reviewer_signs_in_and_approves_as_themselves(tab: Tab, api: Api, server: LiveServer) -> None:
    slug = api.kb("rita-kb")
    asker = api.agent("rita-asker", slug, "read_write_ask")
    run = api.call("POST", "/runs", asker, json={"interactive": True})["id"]
    body = {"run_id": run, "files": [{"path": "idea.md", "mode": "create", "content": "an idea\n"}]}
    proposal = api.call("POST", f"/kbs/{slug}/write", asker, json=body)["proposal"]["id"]
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbserver.cli",
            "person",
            "create",
            "rita",
            "--email",
            "rita@example.org",
            "--role",
            "reviewer",
            "--kb",
            slug,
            "--password-stdin",
            "--data",
            str(server.data),
        ],
        input=PASSWORD + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN},
    )
    assert made.returncode == 0, made.stderr

    page = tab.page
    tab.go(f"/admin/kbs/{slug}/proposals")
    assert "/admin/login" in page.url
    page.get_by_label("Email").fill("rita@example.org")
    page.get_by_label("Password").fill("not her password")
    tab.button("Sign in").click()
    assert page.get_by_role("alert").is_visible()
    page.get_by_label("Email").fill("Rita@Example.org")
    page.get_by_label("Password").fill(PASSWORD)
    tab.button("Sign in").click()
    page.wait_for_url(re.compile(rf".*/admin/kbs/{slug}/proposals$"))
    assert "Signed in as rita (reviewer)" in page.locator("header").inner_text()
    tab.button("Approve").click()
    page.wait_for_url(re.compile(rf".*/admin/kbs/{slug}/versions/[0-9a-f]{{40}}$"))
    version = page.url.rsplit("/", 1)[1]

    repo = server.data / "kbs" / f"{slug}.git"
    log = subprocess.run(
        ["git", "log", "-1", "--format=%(trailers)", version],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Kb-Approved-By: person:rita" in log and f"Kb-Proposal: {proposal}" in log
    assert "Kb-Kind: approval" in log
    head = subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert head == version
    git_fsck(repo)
    shown = api.call("GET", f"/kbs/{slug}/proposals/{proposal}")
    assert (shown["status"], shown["decided_by"]) == ("approved", "person:rita")
