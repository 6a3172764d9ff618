"""Revert in a browser, at 1280 and 375 px: it asks first, naming the files and the later versions it
takes back, and changes nothing until confirmed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.axe import SCREENS, fits, needs_axe, serious_violations
from tests.web.live import Api, pytestmark, signed_in_page

__all__ = ["pytestmark"]


@needs_axe
@pytest.mark.parametrize("screen", list(SCREENS))
def test_revert_asks_first_and_changes_nothing_until_confirmed(
    browser: Any, server: Any, api: Api, screen: str
) -> None:
    slug = api.kb(f"revert-ask-{screen}")
    bob = api.agent(f"revert-ask-{screen}-bob", slug)
    good = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "good\n"})
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "bad\n"})
    api.write(slug, bob, {"path": "b.md", "mode": "create", "content": "later\n"}, message="a later note")
    head = api.head(slug)
    width, height = SCREENS[screen]
    page = signed_in_page(browser, server.url, (width, height))
    page.goto(f"{server.url}/admin/kbs/{slug}/versions/{good}")
    page.get_by_role("button", name="Revert", exact=True).click()
    page.get_by_role("heading", name=re.compile("^Revert to version")).wait_for()
    assert api.head(slug) == head and api.content(slug, "b.md") == "later\n"  # nothing changed yet
    text = page.locator("main").inner_text()
    assert "changes 2 files" in text and "2 later versions" in text, text
    assert page.locator("h2", has_text="Put back as they were").is_visible()
    assert page.locator("ul.paths li").all_inner_texts() == ["a.md", "b.md"]
    assert "a later note" in page.locator("ul.later").inner_text()
    assert serious_violations(page) == []
    fits(page, width)
    page.get_by_role("link", name=re.compile("^Cancel")).click()  # Cancel: still nothing changed
    page.wait_for_url(re.compile(rf".*/versions/{good}$"))
    assert api.head(slug) == head
    page.get_by_role("button", name="Revert", exact=True).click()
    page.get_by_role("button", name="Revert 2 files").click()
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert page.locator("h1 .label").inner_text() == "revert"
    assert api.content(slug, "a.md") == "good\n" and api.content(slug, "b.md") is None
    page.context.close()
