"""Every admin page checked by axe-core (no serious or critical violation) and laid out at 375 px."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.web.live import CHROMIUM, Api, pytestmark, signed_in_page

__all__ = ["pytestmark"]

AXE = Path(os.environ.get("KBSERVER_AXE_JS", Path(__file__).parent / ".axe/node_modules/axe-core/axe.min.js"))
needs_axe = pytest.mark.skipif(
    not AXE.exists(), reason=f"needs axe-core's axe.min.js at {AXE} (scripts/test installs it with npm)"
)


def _pages(api: Api) -> list[str]:
    slug = api.kb("a11y-kb")
    bob = api.agent("a11y-bob", slug)
    memory = (
        "---\nid: 00000000000000aa\nagentId: a11y-bob\nmemory_type: fact\n"
        "createdAt: '2026-12-01T10:00:00Z'\n---\n\nA fact.\n"
    )
    first = api.write(
        slug, bob, {"path": "notes/团队约定.md", "mode": "create", "content": "# 约定\n\n**Use UTC**.\n"}
    )
    head = api.write(slug, bob, {"path": "memories/00000000000000aa.md", "mode": "create", "content": memory})
    asker = api.agent("a11y-asker", slug, "read_write_ask")
    run = api.call("POST", "/runs", asker, json={"interactive": True})
    body = {"run_id": run["id"], "files": [{"path": "idea.md", "mode": "create", "content": "idea\n"}]}
    api.call("POST", f"/kbs/{slug}/write", asker, json=body)
    api.call("GET", f"/kbs/{slug}/index", params={"wait_for": head, "timeout": 30})
    kb = f"/admin/kbs/{slug}"
    return [
        "/admin/",
        "/admin/agents",
        kb,
        f"{kb}/files/notes/团队约定.md",
        f"{kb}/files/memories/00000000000000aa.md",
        f"{kb}/search?q=UTC",
        f"{kb}/edit/notes/团队约定.md",
        f"{kb}/new",
        f"{kb}/delete/notes/团队约定.md",
        f"{kb}/versions",
        f"{kb}/versions/{head}",
        f"{kb}/versions/{first}...{head}",
        f"{kb}/review",
        f"{kb}/proposals",
        f"{kb}/week",
        f"{kb}/memories",
        "/admin/no-such-page",
    ]


@needs_axe
def test_every_page_passes_axe_and_fits_375_px(browser: Any, server: Any, api: Api) -> None:
    pages = _pages(api)
    page = signed_in_page(browser, server.url, (375, 700))
    found: dict[str, list[str]] = {}
    for url in [*pages, "/admin/login"]:
        if url == "/admin/login":
            page.get_by_role("button", name="Logout").click()
            page.wait_for_url("**/admin/login")
        else:
            page.goto(server.url + url)
        page.add_script_tag(path=str(AXE))
        result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']}"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        if bad:
            found[url] = bad
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 375, (url, width)  # nothing forces sideways scrolling at 375 px
    page.context.close()
    assert found == {}, found
    assert CHROMIUM
