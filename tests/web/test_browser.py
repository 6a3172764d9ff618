"""The admin in a real browser (Debian's Chromium through Playwright): every flow a reviewer uses.

One browser and one live server for the module; each test makes its own KB so tests stay apart.
"""

from __future__ import annotations

import re

from tests.helpers import ADMIN_TOKEN
from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def test_login_logout_and_back(tab: Tab, api: Api) -> None:
    api.kb("login-kb")
    tab.go("/admin/kbs/login-kb/versions")
    assert "/admin/login" in tab.page.url
    tab.page.get_by_label("Token").fill("wrong")
    tab.button("Log in").click()
    assert tab.page.get_by_role("alert").is_visible()
    tab.page.get_by_label("Token").fill(ADMIN_TOKEN)
    tab.button("Log in").click()
    tab.page.wait_for_url(re.compile(r".*/admin/kbs/login-kb/versions$"))
    assert tab.page.get_by_role("heading", name="Versions of login-kb").is_visible()
    tab.button("Logout").click()
    tab.page.wait_for_url(re.compile(r".*/admin/login$"))
    tab.go("/admin/")
    assert "/admin/login" in tab.page.url


def test_browse_files_and_readme(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("browse-kb")
    bob = api.agent("browse-bob", slug)
    api.write(slug, bob, {"path": "docs/guide.md", "mode": "create", "content": "# Guide\n\nUse **UTC**.\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}")
    assert page.locator(".readme .markdown h1").inner_text() == slug  # README.md rendered under the tree
    assert page.get_by_text("docs/").is_visible()
    page.get_by_role("link", name="guide.md").click()
    page.wait_for_url(re.compile(r".*/files/docs/guide.md$"))
    assert page.locator(".markdown strong").inner_text() == "UTC"
    assert re.search(r"[0-9a-f]{64}", page.locator(".facts").inner_text())
    assert page.get_by_role("link", name="Edit", exact=True).is_visible()


def test_versions_show_agent_writes_and_a_diff(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("versions-kb")
    bob = api.agent("versions-bob", slug)
    api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "the quick brown fox\n"})
    v = api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "the quick red fox\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/versions")
    labels = page.locator(".version .label").all_inner_texts()
    assert labels[:2] == ["agent write", "agent write"] and labels[-1] == "create"
    page.get_by_role("link", name=v[:12]).click()
    page.wait_for_url(re.compile(rf".*/versions/{v}$"))
    assert page.locator("tr.del del").inner_text() == "brown"  # word-level highlight
    assert page.locator("tr.add ins").inner_text() == "red"
    admin_tab.go(f"/admin/kbs/{slug}/versions?kind=create")
    assert page.locator(".version .label").all_inner_texts() == ["create"]


def test_revert_makes_a_revert_version(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("revert-kb")
    bob = api.agent("revert-bob", slug)
    good = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "good\n"})
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "bad\n"})
    admin_tab.go(f"/admin/kbs/{slug}/versions/{good}")
    admin_tab.button("Revert").click()
    admin_tab.button("Revert 1 file").click()  # it asks first
    admin_tab.page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert admin_tab.page.locator("h1 .label").inner_text() == "revert"
    assert api.content(slug, "a.md") == "good\n"
    assert api.call("GET", f"/kbs/{slug}/versions?limit=1")["versions"][0]["kind"] == "revert"


def test_review_undo_its_conflict_and_mark_reviewed(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("review-kb")
    bob = api.agent("review-bob", slug)
    first = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "one\n"})
    wrong = api.write(slug, bob, {"path": "b.md", "mode": "create", "content": "invented\n"})
    later = api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/review")
    assert page.locator("li.write").count() == 3
    item = page.locator("li.write", has=page.locator(f'a[href$="{wrong}"]'))
    item.locator("details.more > summary").click()  # the diff and Undo: one click away
    item.get_by_role("button", name="Undo", exact=True).click()
    page.get_by_role("heading", name=re.compile("Undo version")).wait_for()  # asks first
    assert api.content(slug, "b.md") == "invented\n" and page.locator("tr.add").count() == 1
    admin_tab.button("Undo").click()
    page.wait_for_url(re.compile(r".*/review$"))
    done = page.get_by_role("status").filter(has_text="Undid version")
    undo_version = api.head(slug)
    assert done.get_by_role("link").get_attribute("href").endswith(f"/versions/{undo_version}")
    assert api.content(slug, "b.md") is None and api.content(slug, "a.md") == "two\n"
    undone = page.locator("li.write.undone")  # still to review, marked, with no second Undo
    assert undone.count() == 1 and undone.get_by_role("button", name="Undo", exact=True).count() == 0
    assert undone.locator(f'a[href$="/versions/{undo_version}"]').count() == 1
    before = api.head(slug)
    item = page.locator("li.write", has=page.locator(f'a[href$="/versions/{first}"]'))
    item.locator("details.more > summary").click()
    item.get_by_role("button", name="Undo", exact=True).click()
    admin_tab.button("Undo").click()
    alert = page.get_by_role("alert")
    assert "a.md" in alert.inner_text() and "changed again" in alert.inner_text()
    assert page.locator(f'main a[href$="/versions/{later}"]').count() >= 1  # names the later change
    assert api.head(slug) == before
    admin_tab.go(f"/admin/kbs/{slug}/review")
    admin_tab.button("Mark reviewed").click()
    page.wait_for_url(re.compile(r".*/review$"))
    assert page.get_by_text("Nothing to review").is_visible()
    assert "nothing is left to review" in page.get_by_role("status").inner_text()
    assert api.call("GET", f"/kbs/{slug}/review")["unreviewed"] == []
    admin_tab.go("/admin/")
    card = page.locator(".card", has=page.get_by_role("link", name=slug, exact=True))
    assert "Unreviewed agent writes\n0" in card.inner_text()


def _propose(api: Api, slug: str, who: dict[str, str], path: str, content: str) -> str:
    run = api.call("POST", "/runs", who, json={"interactive": True})
    body = {"run_id": run["id"], "files": [{"path": path, "mode": "create", "content": content}]}
    return str(api.call("POST", f"/kbs/{slug}/write", who, json=body)["proposal"]["id"])


def test_approve_applies_a_proposal(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("approve-kb")
    asker = api.agent("approve-asker", slug, "read_write_ask")
    _propose(api, slug, asker, "idea.md", "a careful idea\n")
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    assert page.locator("article.proposal tr.add").first.inner_text().endswith("a careful idea")
    admin_tab.button("Approve").click()
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert page.locator("h1 .label").inner_text() == "approval"
    assert api.content(slug, "idea.md") == "a careful idea\n"


def test_stale_proposal_says_so_and_stays_pending(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("stale-prop-kb")
    asker = api.agent("stale-asker", slug, "read_write_ask")
    bob = api.agent("stale-bob", slug)
    pid = _propose(api, slug, asker, "idea.md", "mine\n")
    api.write(slug, bob, {"path": "idea.md", "mode": "create", "content": "theirs\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    warning = page.locator("article.proposal .warning").inner_text()
    assert "Someone changed idea.md after the agent read it" in warning or "idea.md was created" in warning
    assert "Reject it, or edit the file yourself" in warning
    assert admin_tab.button("Approve").count() == 0  # never offered when bound to fail
    proposed = page.locator("article.proposal .diff-file").first  # what the agent wanted, still shown
    assert proposed.locator("tr.add").inner_text().endswith("mine")
    assert page.get_by_role("heading", name="What changed in the KB since it was proposed").is_visible()
    assert page.get_by_role("link", name="Edit idea.md yourself").is_visible()
    form = {"csrf": page.locator('input[name="csrf"]').first.get_attribute("value")}
    r = admin_tab.context.request.post(
        f"{admin_tab.base}/admin/kbs/{slug}/proposals/{pid}/approve", form=form
    )
    assert r.status == 409 and "stays pending" in r.text() and "read it again" not in r.text()
    assert api.call("GET", f"/kbs/{slug}/proposals/{pid}")["status"] == "pending"


def test_reject_leaves_main_alone_and_the_agent_reads_the_reason(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("reject-kb")
    asker = api.agent("reject-asker", slug, "read_write_ask")
    pid = _propose(api, slug, asker, "idea.md", "a bad idea\n")
    before = api.head(slug)
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/proposals")
    page.get_by_label("Reason (the agent can read it)").fill("duplicates notes/ideas.md")
    admin_tab.button("Reject").click()
    page.wait_for_url(re.compile(r".*/proposals$"))
    assert api.head(slug) == before and api.content(slug, "idea.md") is None
    seen = api.call("GET", f"/kbs/{slug}/proposals/{pid}", asker)
    assert seen["status"] == "rejected" and seen["reason"] == "duplicates notes/ideas.md"


def test_edit_and_publish_make_a_human_edit(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("edit-kb")
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/files/README.md")
    page.get_by_role("link", name="Edit", exact=True).click()
    box = page.get_by_label("Content")
    style = box.evaluate("e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).fontFamily]")
    assert style[0] == "pre" and "monospace" in style[1], style  # code-like text keeps its lines
    page.get_by_label("Content").fill("# edit-kb\n\nFixed by hand.\n")
    admin_tab.button("Publish").click()
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert page.locator("h1 .label").inner_text() == "human edit"
    assert api.content(slug, "README.md") == "# edit-kb\n\nFixed by hand.\n"
    admin_tab.go(f"/admin/kbs/{slug}/new?folder=notes/")
    assert page.get_by_label("Path").input_value() == "notes/"
    page.get_by_label("Path").fill("notes/new.md")
    page.get_by_label("Content").fill("new file\n")
    admin_tab.button("Publish").click()
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert api.content(slug, "notes/new.md") == "new file\n"


def test_a_stale_publish_shows_the_conflict_and_loses_neither_text(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("conflict-kb")
    bob = api.agent("conflict-bob", slug)
    api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "base\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/edit/a.md")
    page.get_by_label("Content").fill("my careful text\n")
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "the agent's text\n"})  # meanwhile
    before = api.head(slug)
    admin_tab.button("Publish").click()
    assert page.get_by_role("heading", name=re.compile("Conflict")).is_visible()
    assert page.locator("pre.theirs").inner_text() == "the agent's text\n"
    assert page.get_by_role("textbox", name=re.compile("Your text")).input_value() == "my careful text\n"
    assert page.locator("tr.add").inner_text().endswith("my careful text")
    assert not re.search(r"[0-9a-f]{64}", page.locator("main").inner_text())  # words, not sha256 values
    assert "conflict-bob" in page.get_by_role("alert").inner_text()  # who changed it
    assert api.head(slug) == before and api.content(slug, "a.md") == "the agent's text\n"
    admin_tab.button("Publish").click()  # publishing again, knowingly, over their version
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert api.content(slug, "a.md") == "my careful text\n"


XSS = """# Notes <script>alert('script')</script>

<img src=x onerror="alert('img')">
[click me](javascript:alert('link'))
[data](data:text/html,<script>alert('data')</script>)
![pixel](https://tracker.invalid/pixel.png)
<iframe src="https://evil.invalid"></iframe>
<a href="javascript:alert('raw')">raw</a> <svg onload="alert('svg')"></svg>
`<script>alert('code')</script>`
"""


def test_xss_corpus_is_inert(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("xss-kb")
    bob = api.agent("xss-bob", slug)
    v = api.write(
        slug,
        bob,
        {"path": "evil.md", "mode": "create", "content": XSS},
        {"path": "README.md", "mode": "append", "content": XSS},
        message="<script>alert('message')</script>",
    )
    page = admin_tab.page
    for url in (
        f"/admin/kbs/{slug}",
        f"/admin/kbs/{slug}/files/evil.md",
        f"/admin/kbs/{slug}/versions",
        f"/admin/kbs/{slug}/versions/{v}",
        f"/admin/kbs/{slug}/review",
        f"/admin/kbs/{slug}/search?q=notes",
        f"/admin/kbs/{slug}/edit/evil.md",
    ):
        admin_tab.go(url)
        # the KB page's own chart is the one svg (bars and legend swatches, drawn by the server)
        assert page.locator("script, iframe, img, foreignObject, svg:not(figure.chart svg)").count() == 0, url
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
        assert not [h for h in hrefs if re.match(r"\s*(javascript|data):", h, re.I)], url
        assert page.evaluate("() => document.querySelectorAll('[onerror], [onload]').length") == 0
    admin_tab.go(f"/admin/kbs/{slug}/files/evil.md")
    assert "<script>alert('script')</script>" in page.locator("pre.raw").inner_text()  # shown, as text
    assert admin_tab.dialogs == []
    outside = [u for u in admin_tab.requests if not u.startswith(admin_tab.base)]
    assert outside == []


def test_a_post_without_csrf_changes_nothing(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("csrf-kb")
    bob = api.agent("csrf-bob", slug)
    first = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "one\n"})
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    before = api.head(slug)
    request = admin_tab.context.request  # carries the logged-in session cookie, but no CSRF token
    for path, form in (
        (f"/admin/kbs/{slug}/versions/{first}/revert", {}),
        (f"/admin/kbs/{slug}/publish", {"path": "a.md", "content": "defaced"}),
        (f"/admin/kbs/{slug}/review", {"version": before}),
        (f"/admin/kbs/{slug}/publish", {"path": "a.md", "content": "x", "csrf": "forged"}),
    ):
        r = request.post(admin_tab.base + path, form=form, max_redirects=0)
        assert r.status == 403, (path, r.status)
    assert api.head(slug) == before and api.content(slug, "a.md") == "two\n"
    assert api.call("GET", f"/kbs/{slug}/review")["reviewed"] is None


def test_agent_create_shows_the_token_once(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("agents-kb")
    page = admin_tab.page
    admin_tab.go("/admin/agents")
    page.get_by_label("Name").fill("webagent")
    admin_tab.button("Create agent").click()
    token = page.get_by_label("Token of webagent").input_value()
    assert token.startswith("kbs_") and "only time" in page.get_by_role("status").inner_text()
    admin_tab.go("/admin/agents")
    assert token not in page.content()
    section = page.locator("section.agent", has=page.get_by_role("heading", name="webagent"))
    section.get_by_label("KB").select_option(slug)
    section.get_by_label("Permission").select_option("read")
    section.get_by_role("button", name="Link").click()
    page.wait_for_url(re.compile(r".*/admin/agents$"))
    headers = {"Authorization": f"Bearer {token}"}
    assert [kb["slug"] for kb in api.call("GET", "/kbs", headers)] == [slug]
    section = page.locator("section.agent", has=page.get_by_role("heading", name="webagent"))
    section.get_by_role("button", name="Rotate token of webagent").click()
    fresh = page.get_by_label("Token of webagent").input_value()
    assert fresh != token and api.http.get(api.url + "/kbs", headers=headers).status_code == 401


def test_narrow_screen_and_keyboard(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("narrow-kb")
    page = admin_tab.page
    page.set_viewport_size({"width": 375, "height": 700})
    admin_tab.go(f"/admin/kbs/{slug}/versions/{api.head(slug)}")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375, width  # nothing forces sideways scrolling of the page
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
