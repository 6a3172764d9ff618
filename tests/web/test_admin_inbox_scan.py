"""The review inbox as a list a person scans, at 1280 and 375 px: 40 writes of four agents, one line
each in words, grouped by agent and task, the diff one click away, "Mark these reviewed" per group."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.axe import SCREENS, fits, needs_axe, serious_violations
from tests.web.live import Api, pytestmark, signed_in_page

__all__ = ["pytestmark"]

_MEMORY = (
    "---\nid: {id}\nagentId: {agent}\nmemory_type: fact\ncreatedAt: '2026-12-01T10:00:00Z'\n---\n\n{text}\n"
)


def _seed(api: Api, slug: str) -> dict[str, Any]:
    """40 writes of four agents: memories, new notes, edits, in runs and outside."""
    names = ["ann", "bob", "cyd", "dee"]
    who = {n: api.agent(f"{slug}-{n}", slug) for n in names}
    runs = {n: api.call("POST", "/runs", who[n], json={})["id"] for n in names[:3]}
    made: list[str] = []
    for n in range(40):
        name = names[n % 4]
        body: dict[str, Any]
        if n % 4 == 0:  # ann: two memories a write, in her run
            files = [
                {
                    "path": f"memories/{n * 2 + k:016x}.md",
                    "mode": "create",
                    "content": _MEMORY.format(
                        id=f"{n * 2 + k:016x}", agent=f"{slug}-ann", text=f"Fact {n}.{k}"
                    ),
                }
                for k in range(2)
            ]
            body = {"files": files, "run_id": runs["ann"], "message": "remember the customer's preferences"}
        elif n % 4 == 1:  # bob: creates notes in his run
            body = {
                "files": [{"path": f"notes/bob-{n}.md", "mode": "create", "content": "one\ntwo\nthree\n"}],
                "run_id": runs["bob"],
                "message": "draft the release notes",
            }
        elif n % 4 == 2:  # cyd: edits one plan, in a run
            mode = "create" if n == 2 else "overwrite" if n == 14 else "append"
            content = "step 2\nstep 6\nnew a\nnew b\nnew c\n" if n == 14 else f"step {n}\n"
            body = {
                "files": [{"path": "notes/plan.md", "mode": mode, "content": content}],
                "run_id": runs["cyd"],
                "message": "plan the migration",
            }
        else:  # dee: writes outside a run
            body = {"files": [{"path": f"dee/{n}.md", "mode": "create", "content": f"note {n}\n"}]}
        made.append(str(api.call("POST", f"/kbs/{slug}/write", who[name], json=body)["version"]))
    return {"versions": made, "runs": runs}


@needs_axe
@pytest.mark.parametrize("screen", list(SCREENS))
def test_forty_writes_fit_the_goal_and_read_in_words(
    browser: Any, server: Any, api: Api, screen: str
) -> None:
    slug = api.kb(f"scan-{screen}")
    made = _seed(api, slug)
    width, height = SCREENS[screen]
    page = signed_in_page(browser, server.url, (width, height))
    page.goto(f"{server.url}/admin/kbs/{slug}/review")
    assert page.locator("li.write").count() == 40
    tall = page.evaluate("() => document.documentElement.scrollHeight")
    print(f"inbox of 40 writes at {width}x{height}: {tall} px")  # for docs/performance-style notes
    screens = 2 if screen == "desktop" else 5
    assert tall <= screens * height, (screen, tall)  # the goal: 2 screens at 1280 px, 5 at 375 px
    fits(page, width)
    assert serious_violations(page) == []
    agents = page.locator("section.agent-writes")
    assert agents.count() == 4  # one section per agent, however many runs
    ann = agents.filter(has=page.get_by_role("heading", name=re.compile(f"^agent:{slug}-ann ")))
    assert ann.locator(".group-head h3").inner_text().startswith("remember the customer's preferences")
    assert set(ann.locator(".what").all_inner_texts()) == {"added 2 memories"}
    cyd = agents.filter(has=page.get_by_role("heading", name=re.compile(f"^agent:{slug}-cyd ")))
    said = cyd.locator(".what").all_inner_texts()
    assert "edited notes/plan.md: +3 \u22121 lines" in said and "edited notes/plan.md: +1 line" in said
    dee = agents.filter(has=page.get_by_role("heading", name=re.compile(f"^agent:{slug}-dee ")))
    assert dee.locator(".group-head h3").inner_text().startswith("Writes outside a run")
    main = page.locator("main").inner_text()
    assert "run_" not in main and not re.search(r"@@ ", main)  # no raw run ids or hunk headers shown
    first = ann.locator("li.write").first
    assert not first.locator("table.diff, .record-diff").first.is_visible()  # the diff: one click away
    first.locator("details.more > summary").click()
    assert first.locator(".record-diff, table.diff").first.is_visible()
    ann.get_by_role("button", name=re.compile("^Mark these reviewed")).click()  # one group, one click
    page.wait_for_url(re.compile(r".*/review$"))
    assert "Marked 10 writes reviewed" in page.get_by_role("status").inner_text()
    assert page.locator("li.write").count() == 30
    assert api.call("GET", f"/kbs/{slug}/review")["reviewed"] is None  # the marker stays: only ann's
    left = {v["version"] for v in api.call("GET", f"/kbs/{slug}/review")["unreviewed"]}
    assert left == {v for n, v in enumerate(made["versions"]) if n % 4}
    page.context.close()
