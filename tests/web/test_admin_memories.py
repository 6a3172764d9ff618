"""Memories as records in a browser: text first, then type, scope and times; titles in every list; a
change shown as a table of fields and a word diff."""

from __future__ import annotations

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]

MEMORY = """---
id: 1b3079ad9e57f728
agentId: records-bob
memory_type: preference
user_id: ann
importance: {importance}
metadata:
  source: chat 2026-12-01
createdAt: '2026-12-01T10:00:00Z'
updatedAt: '{updated}'
---

{text}
"""


def _memory(importance: float, updated: str, text: str) -> str:
    return MEMORY.format(importance=importance, updated=updated, text=text)


def test_a_memory_reads_as_a_record_everywhere(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("records-kb")
    bob = api.agent("records-bob", slug)
    path = "memories/1b3079ad9e57f728.md"
    first = _memory(0.5, "2026-12-01T10:00:00Z", "Ann drinks black coffee in the morning.")
    api.write(slug, bob, {"path": path, "mode": "create", "content": first})
    later = _memory(0.9, "2026-12-02T09:00:00Z", "Ann drinks green tea in the morning.")
    version = api.write(slug, bob, {"path": path, "mode": "overwrite", "content": later})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/files/{path}")
    record = page.locator("section.record")
    assert record.locator(".markdown").inner_text().strip() == "Ann drinks green tea in the morning."
    facts = record.locator(".facts").inner_text()
    for expected in ("Type\npreference", "Scope\nuser ann", "Importance\n0.9", "Source\nchat 2026-12-01"):
        assert expected in facts, facts
    admin_tab.go(f"/admin/kbs/{slug}")
    item = page.locator("li.file", has=page.get_by_role("link", name="1b3079ad9e57f728.md"))
    assert item.locator(".title").inner_text() == "Ann drinks green tea in the morning."
    admin_tab.go(f"/admin/kbs/{slug}/versions/{version}")
    fields = page.locator("table.fields")
    rows = fields.locator("tbody tr").all_inner_texts()
    assert "importance\t0.5\t0.9" in rows and "updatedAt\t2026-12-01T10:00:00Z\t2026-12-02T09:00:00Z" in rows
    assert " ".join(page.locator(".record-diff del").all_inner_texts()) == "black coffee"
    assert " ".join(page.locator(".record-diff ins").all_inner_texts()) == "green tea"
    assert not page.locator("details.raw-diff table.diff").is_visible()  # the raw diff folds away
    admin_tab.go(f"/admin/kbs/{slug}/review")
    assert page.locator(".diff-file .title").first.inner_text() == "Ann drinks green tea in the morning."
    assert page.locator(".record-diff ins").first.inner_text() == "green"
    api.call("GET", f"/kbs/{slug}/index", params={"wait_for": version, "timeout": 30})
    admin_tab.go(f"/admin/kbs/{slug}/search?q=tea")
    assert page.locator(".hits .title").inner_text() == "Ann drinks green tea in the morning."
