"""A week at a glance in a browser: the KB page's chart counts the versions the API lists, its facts
match the KB, the week page lists what changed, and the agents page shows each agent's writes."""

from __future__ import annotations

import re
from collections import Counter

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def _memory(memory_id: str, text: str, superseded_by: str | None = None) -> str:
    extra = f"superseded_by: {superseded_by}\n" if superseded_by else ""
    return (
        f"---\nid: {memory_id}\nmemory_type: fact\nuser_id: ann\n{extra}"
        f"createdAt: '2026-12-01T10:00:00Z'\nupdatedAt: '2026-12-01T10:00:00Z'\n---\n\n{text}\n"
    )


def test_the_chart_counts_the_versions_main_holds(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("glance-kb")
    ann, bob = api.agent("glance-ann", slug), api.agent("glance-bob", slug)
    for n in range(3):
        api.write(slug, ann, {"path": f"notes/{n}.md", "mode": "create", "content": f"note {n}\n"})
    api.write(slug, bob, {"path": "notes/0.md", "mode": "append", "content": "more\n"})
    head = api.write(slug, bob, {"path": "notes/9.md", "mode": "create", "content": "nine\n"})
    asker = api.agent("glance-asker", slug, "read_write_ask")
    run = api.call("POST", "/runs", asker, json={"interactive": True})
    body = {"run_id": run["id"], "files": [{"path": "idea.md", "mode": "create", "content": "idea\n"}]}
    api.call("POST", f"/kbs/{slug}/write", asker, json=body)
    api.call("GET", f"/kbs/{slug}/index", params={"wait_for": head, "timeout": 30})
    listed = api.call("GET", f"/kbs/{slug}/versions", params={"limit": 200})["versions"]
    want = Counter((v["time"][:10], v["author"]) for v in listed)  # every version is from today (UTC)
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}")
    chart = page.locator("figure.chart svg.bars")
    assert chart.get_attribute("role") == "img"
    assert "Versions per author per day" in (chart.locator("title").first.text_content() or "")
    bars = chart.locator("rect[data-count]")
    drawn = Counter(
        {
            (bars.nth(i).get_attribute("data-day"), bars.nth(i).get_attribute("data-author")): int(
                bars.nth(i).get_attribute("data-count") or 0
            )
            for i in range(bars.count())
        }
    )
    assert drawn == want and sum(want.values()) == len(listed) == 6  # create, 3 by ann, 2 by bob
    assert f"{len(listed)} versions in 30 days" in (chart.locator("desc").text_content() or "")
    # The table says the same: one row a day, one column an author, and a total.
    page.get_by_text("The chart's numbers, day by day").click()
    table = page.locator("#chart-table")
    authors = table.locator("thead th").all_inner_texts()[1:-1]
    today = listed[0]["time"][:10]
    row = table.locator("tbody tr", has=page.get_by_role("rowheader", name=today))
    cells = [int(c) for c in row.locator("td").all_inner_texts()]
    assert dict(zip(authors, cells[:-1], strict=True)) == {a: want[(today, a)] for a in authors}
    assert cells[-1] == len(listed)
    assert table.locator("tbody tr").count() == 30
    facts = page.locator(".glance .facts").inner_text()
    unreviewed = len(api.call("GET", f"/kbs/{slug}/review")["unreviewed"])
    assert f"Unreviewed agent writes\n{unreviewed}" in facts and unreviewed == 5
    assert "Pending proposals\n1" in facts
    kb = api.call("GET", f"/kbs/{slug}")
    assert f"Files\n{kb['file_count']}" in facts
    assert (
        kb["indexed_version"] == head and "up to date" in page.locator('.lag[data-sink="index"]').inner_text()
    )
    assert re.search(r"Size on disk\n[\d.]+ (bytes|kB|MB)", facts)


def test_the_week_page_lists_what_changed_by_whom(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("week-kb")
    ann, bob = api.agent("week-ann", slug), api.agent("week-bob", slug)
    old, new = "memories/00000000000000a1.md", "memories/00000000000000b2.md"
    api.write(
        slug, ann, {"path": old, "mode": "create", "content": _memory("00000000000000a1", "Ann likes tea.")}
    )
    api.write(slug, ann, {"path": "tmp.md", "mode": "create", "content": "soon gone\n"})
    api.write(slug, bob, {"path": "tmp.md", "mode": "delete"})
    api.write(slug, bob, {"path": "README.md", "mode": "append", "content": "Be kind.\n"})
    marked = api.write(
        slug,
        bob,
        {"path": new, "mode": "create", "content": _memory("00000000000000b2", "Ann now likes coffee.")},
        {
            "path": old,
            "mode": "overwrite",
            "content": _memory("00000000000000a1", "Ann likes tea.", "00000000000000b2"),
        },
    )
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}")
    page.get_by_role("link", name="This week", exact=True).first.click()
    page.wait_for_url(re.compile(r".*/week$"))
    added = page.locator("section", has=page.get_by_role("heading", name=re.compile("^Files added")))
    paths = [li.get_attribute("data-path") for li in added.locator("li").all()]
    # The KB began this week: all it holds now was added; tmp.md came and went, so it is in no list.
    assert paths == ["README.md", old, new]
    assert "tmp.md" not in page.locator("main").inner_text()
    readme = added.locator('li[data-path="README.md"]')
    assert "by admin, agent:week-bob" in readme.inner_text()
    assert added.locator(f'li[data-path="{new}"] .title').inner_text() == "Ann now likes coffee."
    superseded = page.locator("section", has=page.get_by_role("heading", name=re.compile("^Superseded")))
    item = superseded.locator(f'li[data-path="{old}"]')
    assert item.count() == 1 and item.get_by_role("link", name="00000000000000b2").count() == 1
    assert item.locator(f'a[href$="/versions/{marked}"]').count() == 1
    table = page.locator("#by-author tbody tr")
    rows = {r.locator("th").inner_text(): r.locator("td").all_inner_texts()[:5] for r in table.all()}
    assert rows["agent:week-ann"] == [
        "2",
        "2",
        "0",
        "0",
        "0",
    ]  # versions, added, changed, deleted, superseded
    assert rows["agent:week-bob"] == ["3", "1", "2", "1", "1"]
    versions = api.call("GET", f"/kbs/{slug}/versions", params={"limit": 200})["versions"]
    assert sum(int(r[0]) for r in rows.values()) == len(versions)
    # Each memory's page links to the other: what it superseded, and what superseded it.
    item.get_by_role("link", name="00000000000000b2").click()
    page.locator("section.record").get_by_role(
        "link", name="«Ann likes tea.»"
    ).click()  # its text, not its id
    page.wait_for_url(re.compile(r".*/00000000000000a1\.md$"))
    assert "Superseded by\n«Ann now likes coffee.»" in page.locator("section.record .facts").inner_text()


def test_the_agents_page_shows_each_agents_writes_and_permissions(admin_tab: Tab, api: Api) -> None:
    one, two = api.kb("agents-one"), api.kb("agents-two")
    eve = api.agent("agents-eve", one)
    api.call("POST", "/agents/agents-eve/links", json={"kb": two, "permission": "read"})
    api.agent("agents-idle", two, "read_write_ask")
    api.write(one, eve, {"path": "a.md", "mode": "create", "content": "a\n"})
    last = api.write(one, eve, {"path": "b.md", "mode": "create", "content": "b\n"})
    page = admin_tab.page
    admin_tab.go("/admin/agents")
    card = page.locator("section.agent", has=page.get_by_role("heading", name="agents-eve", exact=True))
    facts = card.locator(".activity").inner_text()
    assert "Writes this week\n2" in facts
    assert card.locator(f'.activity a[href$="/versions/{last}"]').count() == 1
    rows = [r.split("\t")[:3] for r in card.locator("table.links tbody tr").all_inner_texts()]
    assert rows == [[one, "read_write", "2"], [two, "read", "0"]]
    idle = page.locator("section.agent", has=page.get_by_role("heading", name="agents-idle", exact=True))
    assert "Last write\nnone in the last 30 days" in idle.locator(".activity").inner_text()
    assert idle.locator("table.links tbody tr").all_inner_texts()[0].split("\t")[:2] == [
        two,
        "read_write_ask",
    ]
