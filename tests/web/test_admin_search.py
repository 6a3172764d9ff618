"""Search in the admin: matched words as <mark> from the API's offsets, a file's own bold left alone."""

from __future__ import annotations

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def test_matches_are_marked_and_bold_text_is_not(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("mark-kb")
    bob = api.agent("mark-bob", slug)
    text = "Always use **UTC** in every <b>timestamp</b> of the logs.\n"
    version = api.write(slug, bob, {"path": "notes/time.md", "mode": "create", "content": text})
    api.call("GET", f"/kbs/{slug}/index", params={"wait_for": version, "timeout": 30})
    [hit] = api.call("GET", f"/kbs/{slug}/search", params={"q": "timestamp"})["hits"]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["timestamp"]
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/search?q=timestamp")
    snippet = page.locator(".hits .snippet")
    assert snippet.locator("mark").all_inner_texts() == ["timestamp"]  # not UTC, bold in the file
    assert "**UTC**" in snippet.inner_text() and "<b>timestamp</b>" in snippet.inner_text()  # as text
    assert page.locator(".hits b").count() == 0
