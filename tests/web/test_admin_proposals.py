"""Proposals a person can judge, in a browser: the change against the version it was proposed on,
what main changed since, plain words, and no Approve button that is bound to fail."""

from __future__ import annotations

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def test_a_stale_overwrite_shows_both_changes_in_words(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("judge-kb")
    bob = api.agent("judge-bob", slug)
    asker = api.agent("judge-asker", slug, "read_write_ask")
    base = api.write(slug, bob, {"path": "plan.md", "mode": "create", "content": "step one\nstep two\n"})
    read = api.call("GET", f"/kbs/{slug}/files/plan.md", asker)
    run = api.call("POST", "/runs", asker, json={"interactive": True})
    change = {
        "path": "plan.md",
        "mode": "overwrite",
        "content": "step one\nstep 2\n",
        "expected_sha256": read["sha256"],
    }
    pid = api.call("POST", f"/kbs/{slug}/write", asker, json={"run_id": run["id"], "files": [change]})[
        "proposal"
    ]["id"]
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    card = page.locator("article.proposal")
    assert card.locator(f'a[href$="/versions/{base}"]').count() == 1  # proposed on this version
    assert card.locator("tr.add ins").inner_text() == "2" and admin_tab.button("Approve").count() == 1
    assert card.locator(".warning").count() == 0
    api.write(
        slug, bob, {"path": "plan.md", "mode": "overwrite", "content": "step one\nstep two\nstep three\n"}
    )
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    card = page.locator("article.proposal")
    assert card.locator(".warning").inner_text() == (
        "Stale. Someone changed plan.md after the agent read it: approving would fail. "
        "Reject it, or edit the file yourself."
    )
    diffs = card.locator(".diff-file")
    assert diffs.count() == 2
    assert diffs.nth(0).locator("tr.add").inner_text().endswith("step 2")  # what the agent wanted
    assert diffs.nth(1).locator("tr.add").inner_text().endswith("step three")  # what main did since
    assert admin_tab.button("Approve").count() == 0 and admin_tab.button("Reject").count() == 1
    assert "sha256" not in card.inner_text() and "retry" not in card.inner_text()
    admin_tab.button("Reject").click()
    assert "Rejected proposal" in page.locator("p.flash").inner_text()
    assert api.call("GET", f"/kbs/{slug}/proposals/{pid}")["status"] == "rejected"
