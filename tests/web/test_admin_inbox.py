"""The review inbox in a browser: groups by agent and task, filters, Mark reviewed up to here, Undo
that asks first, the keyboard alone, and a message after every action."""

from __future__ import annotations

import re
from typing import Any

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def _run_write(api: Api, slug: str, who: dict[str, str], run: str, path: str, content: str) -> str:
    body = {"run_id": run, "files": [{"path": path, "mode": "create", "content": content}]}
    return str(api.call("POST", f"/kbs/{slug}/write", who, json=body)["version"])


def _seed(api: Api, slug: str) -> dict[str, Any]:
    ann, bob = api.agent(f"{slug}-ann", slug), api.agent(f"{slug}-bob", slug)
    run = api.call("POST", "/runs", ann, json={})["id"]
    made = {
        "ann1": _run_write(api, slug, ann, run, "memories/a1.md", "ann one\n"),
        "bob1": api.write(slug, bob, {"path": "notes/b1.md", "mode": "create", "content": "bob one\n"}),
        "ann2": _run_write(api, slug, ann, run, "memories/a2.md", "ann two\n"),
        "bob2": api.write(slug, bob, {"path": "notes/b2.md", "mode": "create", "content": "bob two\n"}),
    }
    return {"run": run, **made}


def test_groups_by_agent_and_run_and_filters(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("inbox-kb")
    made = _seed(api, slug)
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/review")
    agents = page.locator("section.agent-writes")
    assert agents.count() == 2 and page.locator("div.group").count() == 2
    ann = agents.filter(has_text=f"agent:{slug}-ann")
    assert made["run"] not in ann.inner_text()  # a task in words, not a run id
    assert (
        ann.locator(".group-head h3").inner_text().startswith("A run from ")
        and ann.locator("li.write").count() == 2
    )
    bob = agents.filter(has_text=f"agent:{slug}-bob")
    assert "Writes outside a run" in bob.inner_text() and bob.locator("li.write").count() == 2
    first = ann.locator("li.write").first
    assert not first.locator(".record-diff").is_visible()  # the diff is one click away
    first.locator("details.more > summary").click()
    assert first.locator(".record-diff").is_visible()
    page.get_by_label("Agent", exact=True).select_option(f"agent:{slug}-bob")
    admin_tab.button("Filter").click()
    assert page.locator("li.write").count() == 2
    assert page.locator(f'li.write a[href$="{made["bob1"]}"]').count() == 1
    admin_tab.go(f"/admin/kbs/{slug}/review?prefix=memories/")
    assert page.locator("li.write").count() == 2
    assert "2 of them match" in page.locator("main").inner_text()
    admin_tab.go(f"/admin/kbs/{slug}/review?kind=approval")
    assert page.get_by_text("No unreviewed write matches the filter").is_visible()
    response = admin_tab.go(f"/admin/kbs/{slug}/review?kind=bogus")
    assert response.status == 400 and "kind" in page.get_by_role("alert").inner_text()


def test_mark_reviewed_up_to_here(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("upto-kb")
    made = _seed(api, slug)
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/review")
    item = page.locator("li.write", has=page.locator(f'a[href$="/versions/{made["ann2"]}"]'))
    item.locator("details.more > summary").click()
    item.get_by_role("button", name=re.compile("^Mark reviewed up to here")).click()
    page.wait_for_url(re.compile(r".*/review$"))
    assert api.call("GET", f"/kbs/{slug}/review")["reviewed"] == made["ann2"]
    assert "1 agent write left to review" in page.get_by_role("status").inner_text()
    assert page.locator("li.write").count() == 1  # only bob2, newer than the marker
    assert page.locator(f'li.write a[href$="/versions/{made["bob2"]}"]').count() == 1


def test_the_inbox_with_the_keyboard_alone(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("keys-kb")
    made = _seed(api, slug)
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/review")
    names = []
    for _ in range(80):  # Tab to the first write's Diff, open it, on to its "Mark reviewed up to here"
        page.keyboard.press("Tab")
        tag = page.evaluate("() => document.activeElement.tagName")
        name = page.evaluate("() => document.activeElement.getAttribute('aria-label') || ''")
        names.append(tag)
        if tag == "SUMMARY" and "SUMMARY" not in names[:-1]:
            page.keyboard.press("Enter")  # the diff opens from the keyboard too
        if name.startswith("Mark reviewed up to here"):
            break
    else:
        raise AssertionError(f"no Mark reviewed up to here reached by Tab: {names}")
    assert "SUMMARY" in names
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state()
    assert api.call("GET", f"/kbs/{slug}/review")["reviewed"] == made["bob2"]  # the newest comes first
    assert page.evaluate("() => document.activeElement.tagName") == "BODY"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"


def test_every_action_says_what_it_did(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("said-kb")
    bob = api.agent("said-bob", slug)
    first = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "one\n"})
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    page = admin_tab.page

    def said(text: str) -> str:
        status = page.locator("p.flash")
        assert text in status.inner_text(), status.inner_text()
        link = status.get_by_role("link")
        return str(link.get_attribute("href")) if link.count() else ""

    admin_tab.go(f"/admin/kbs/{slug}/versions/{first}")
    admin_tab.button("Revert").click()
    admin_tab.button("Revert 1 file").click()  # it asks first
    assert said("Reverted").endswith(f"/versions/{api.head(slug)}")
    admin_tab.go(f"/admin/kbs/{slug}/edit/a.md")
    page.get_by_label("Content").fill("three\n")
    admin_tab.button("Publish").click()
    assert said("Published a.md").endswith(f"/versions/{api.head(slug)}")
    asker = api.agent("said-asker", slug, "read_write_ask")
    for _ in range(2):
        run = api.call("POST", "/runs", asker, json={"interactive": True})
        body = {"run_id": run["id"], "files": [{"path": "idea.md", "mode": "create", "content": "x\n"}]}
        api.call("POST", f"/kbs/{slug}/write", asker, json=body)
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    admin_tab.button("Approve").first.click()
    assert said("Approved proposal").endswith(f"/versions/{api.head(slug)}")
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    admin_tab.button("Reject").first.click()
    said("Rejected proposal")
    admin_tab.go("/admin/agents")
    section = page.locator("section.agent", has=page.get_by_role("heading", name="said-bob"))
    section.get_by_label("KB", exact=True).select_option(slug)
    section.get_by_label("Permission").select_option("read")
    section.get_by_role("button", name="Link", exact=True).click()
    said(f"Linked said-bob to {slug} with permission read")
    admin_tab.go("/admin/agents")
    assert page.locator("p.flash").count() == 0  # said once
