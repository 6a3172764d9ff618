"""Memories as records in a browser: text first, then type, scope and times; titles in every list; a
change shown as a table of fields and a word diff."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.axe import SCREENS, fits, needs_axe, serious_violations
from tests.web.live import Api, Tab, pytestmark, signed_in_page

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
    for expected in (
        "Who reads it\nPrivate to agent records-bob, about user ann",
        "Type\npreference",
        "Importance\n0.9",
        "Source\nchat 2026-12-01",
        "Created\n1 Dec 2026, 10:00 UTC",
    ):
        assert expected in facts, facts
    admin_tab.go(f"/admin/kbs/{slug}")
    item = page.locator("li.file", has=page.get_by_role("link", name="1b3079ad9e57f728.md"))
    assert item.locator(".title").inner_text() == "Ann drinks green tea in the morning."
    admin_tab.go(f"/admin/kbs/{slug}/versions/{version}")
    said = page.locator("ul.record-changes li").all_inner_texts()
    assert "Importance changed from 0.5 to 0.9." in said
    assert "Updated changed from 1 Dec 2026, 10:00 UTC to 2 Dec 2026, 09:00 UTC." in said
    assert " ".join(page.locator(".record-diff del").all_inner_texts()) == "black coffee"
    assert " ".join(page.locator(".record-diff ins").all_inner_texts()) == "green tea"
    assert not page.locator("details.raw-diff table.diff").is_visible()  # the raw diff folds away
    admin_tab.go(f"/admin/kbs/{slug}/review")
    page.locator("li.write details.more > summary").first.click()
    assert page.locator(".diff-file .title").first.inner_text() == "Ann drinks green tea in the morning."
    assert page.locator(".record-diff ins").first.inner_text() == "green"
    api.call("GET", f"/kbs/{slug}/index", params={"wait_for": version, "timeout": 30})
    admin_tab.go(f"/admin/kbs/{slug}/search?q=tea")
    assert page.locator(".hits .title").inner_text() == "Ann drinks green tea in the morning."


SUPERSEDED = """---
id: {id}
agentId: {agent}
user_id: default
memory_type: fact
createdAt: '2026-12-01T10:00:00Z'
{extra}---

{text}
"""


@needs_axe
@pytest.mark.parametrize("screen", list(SCREENS))
def test_memories_read_as_sentences_and_have_a_page(browser: Any, server: Any, api: Api, screen: str) -> None:
    slug = api.kb(f"sentences-{screen}")
    name = f"sentences-{screen}-bob"
    bob = api.agent(name, slug)
    old, new = "aaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaa2"
    history = "metadata:\n  history:\n  - value: Ann likes coffee\n    at: '2026-11-30'\n"
    first = SUPERSEDED.format(id=old, agent=name, extra=history, text="Ann likes coffee.")
    api.write(slug, bob, {"path": f"memories/{old}.md", "mode": "create", "content": first})
    api.write(
        slug,
        bob,
        {
            "path": f"memories/{new}.md",
            "mode": "create",
            "content": SUPERSEDED.format(id=new, agent=name, extra="", text="Ann likes green tea."),
        },
    )
    marked = SUPERSEDED.format(
        id=old, agent=name, extra=history + f"superseded_by: {new}\n", text="Ann liked coffee."
    )
    version = api.write(slug, bob, {"path": f"memories/{old}.md", "mode": "overwrite", "content": marked})
    shared = "---\nid: bbbbbbbbbbbbbbb1\nmemory_type: rule\n---\n\nDates are in UTC.\n"
    api.write(
        slug,
        api.agent(f"sentences-{screen}-ann", slug),
        {"path": "memories/bbbbbbbbbbbbbbb1.md", "mode": "create", "content": shared},
    )
    width, height = SCREENS[screen]
    page = signed_in_page(browser, server.url, (width, height))
    page.goto(f"{server.url}/admin/kbs/{slug}/versions/{version}")
    shown = page.locator("main").inner_text()  # what a person sees, the folded raw diff aside
    assert "Now superseded by «Ann likes green tea.»" in shown, shown
    assert "Text changed from" in shown
    for raw in ("agentId", "memory_type", "superseded_by", "createdAt", "{'", "[{"):
        assert raw not in shown, (raw, shown)
    assert serious_violations(page) == [] and fits(page, width) is None
    page.goto(f"{server.url}/admin/kbs/{slug}/memories")
    shelves = page.locator("section.shelf h2").all_inner_texts()
    assert shelves[0].startswith("Shared with every agent of the KB") and shelves[1].startswith(
        f"Private to agent {name}"
    )
    gone = page.locator("li.memory.superseded")
    assert gone.count() == 1 and "superseded by «Ann likes green tea.»" in gone.inner_text()
    assert (
        "created 1 Dec 2026, 10:00 UTC"
        in page.locator("section.shelf").nth(1).locator("li.memory").first.inner_text()
    )
    assert serious_violations(page) == [] and fits(page, width) is None
    page.get_by_label("Words in the memory").fill("tea")
    page.get_by_role("button", name="Find").click()
    assert page.locator("li.memory").all_inner_texts()[0].startswith("Ann likes green tea.")
    assert page.locator("li.memory").count() == 1
    page.context.close()
