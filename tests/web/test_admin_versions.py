"""Versions a person can pick (short ids, two radio buttons) and paths in any script, in a browser."""

from __future__ import annotations

import re
from urllib.parse import unquote

from tests.web.live import Api, Tab, pytestmark

__all__ = ["pytestmark"]


def test_short_ids_work_in_addresses_and_forms(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("short-kb")
    bob = api.agent("short-bob", slug)
    one = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "one\n"})
    two = api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "two\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/versions/{two[:7]}")  # the address names the full id after
    page.wait_for_url(re.compile(rf".*/versions/{two}$"))
    assert page.locator("tr.add").inner_text().endswith("two")
    admin_tab.go(f"/admin/kbs/{slug}/versions/{one[:9].upper()}...{two[:12]}")
    page.wait_for_url(re.compile(rf".*/versions/{one}\.\.\.{two}$"))
    admin_tab.go(f"/admin/kbs/{slug}/versions")
    page.get_by_label("Compare from version").fill(one[:7])
    page.get_by_label("to version").fill(two[:8])
    admin_tab.button("Compare").click()
    page.wait_for_url(re.compile(rf".*/versions/{one}\.\.\.{two}$"))
    assert page.locator("tr.del").inner_text().endswith("one")
    admin_tab.go(f"/admin/kbs/{slug}/files/a.md?version={one[:7]}")
    assert page.locator("pre.raw").inner_text() == "one\n"
    for bad, code in (("abc", "invalid_request"), ("0000000", "not_found"), ("zzzzzzz", "invalid_request")):
        response = admin_tab.go(f"/admin/kbs/{slug}/versions/{bad}")
        assert response.status in (400, 404) and code in page.get_by_role("alert").inner_text(), bad
    before = api.head(slug)
    admin_tab.go(f"/admin/kbs/{slug}/versions/{one[:7]}")
    admin_tab.button("Revert").click()
    admin_tab.button("Revert 1 file").click()  # it asks first
    page.wait_for_url(re.compile(r".*/versions/[0-9a-f]{40}$"))
    assert api.head(slug) != before and api.content(slug, "a.md") == "one\n"


def test_compare_two_versions_picked_in_the_list(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("pick-kb")
    bob = api.agent("pick-bob", slug)
    first = api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "alpha\n"})
    api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "beta\n"})
    last = api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": "gamma\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/versions")
    page.locator(f'input[name="a"][value="{first}"]').check()
    assert page.locator(f'input[name="b"][value="{last}"]').is_checked()  # the newest, by default
    admin_tab.button("Compare the picked versions").click()
    page.wait_for_url(re.compile(rf".*/versions/{first}\.\.\.{last}$"))
    assert page.locator("tr.del").inner_text().endswith("alpha")
    assert page.locator("tr.add").inner_text().endswith("gamma")


NAMES = ("notes/团队约定.md", "notes/Café crème.md", "notes/my notes.md")


def test_non_ascii_and_spaced_paths_open_from_lists_and_markdown(admin_tab: Tab, api: Api) -> None:
    slug = api.kb("names-kb")
    bob = api.agent("names-bob", slug)
    links = "\n".join(f"- [{n}](<{n.split('/', 1)[1]}>)" for n in NAMES)
    files = [{"path": n, "mode": "create", "content": f"# {n}\n\nbody of {n}\n"} for n in NAMES]
    api.write(slug, bob, *files, {"path": "notes/index.md", "mode": "create", "content": links + "\n"})
    encoded = "\n".join(f"- [{n}]({n.split('/', 1)[1].replace(' ', '%20')})" for n in NAMES)
    api.write(slug, bob, {"path": "notes/encoded.md", "mode": "create", "content": encoded + "\n"})
    page = admin_tab.page
    for name in NAMES:
        admin_tab.go(f"/admin/kbs/{slug}")  # the file list
        page.get_by_role("link", name=name.split("/", 1)[1], exact=True).click()
        page.wait_for_load_state()
        assert unquote(page.url).endswith(f"/files/{name}"), page.url
        assert page.locator("pre.raw").inner_text().endswith(f"body of {name}\n")
        for index in ("notes/index.md", "notes/encoded.md"):  # rendered Markdown links
            admin_tab.go(f"/admin/kbs/{slug}/files/{index}")
            page.locator(".markdown").get_by_role("link", name=name, exact=True).click()
            page.wait_for_load_state()
            assert page.locator("pre.raw").inner_text().endswith(f"body of {name}\n"), (index, page.url)
    admin_tab.go(f"/admin/kbs/{slug}/versions?path=notes/团队约定.md")
    assert page.locator(".version").count() == 1


def test_a_path_s_history_pages_through_a_long_history_and_still_compares(admin_tab: Tab, api: Api) -> None:
    from kbserver.web.history import PAGE, PATH_SCAN

    slug = api.kb("long-kb")
    bob = api.agent("long-bob", slug)
    made = [api.write(slug, bob, {"path": "a.md", "mode": "create", "content": "0\n"})]
    made += [
        api.write(slug, bob, {"path": "a.md", "mode": "overwrite", "content": f"{n}\n"})
        for n in range(1, PAGE + 2)
    ]
    api.write(slug, bob, {"path": "b.md", "mode": "create", "content": "b\n"})
    for n in range(PATH_SCAN):  # a.md's changes end up further back than one page looks
        api.write(slug, bob, {"path": "b.md", "mode": "append", "content": f"{n}\n"})
    page = admin_tab.page
    admin_tab.go(f"/admin/kbs/{slug}/versions?path=a.md")
    assert (
        f"No version among the {PATH_SCAN} looked at changed a.md" in page.locator("ul.versions").inner_text()
    )
    page.get_by_role("link", name="Older versions").click()
    page.wait_for_load_state()
    listed = page.locator('ul.versions input[name="a"]')
    assert [listed.nth(i).get_attribute("value") for i in range(listed.count())] == made[::-1][:PAGE]
    page.get_by_role("link", name="Older versions").click()  # the rest of a.md's 32 versions
    page.wait_for_load_state()
    assert [listed.nth(i).get_attribute("value") for i in range(listed.count())] == made[1::-1]
    assert page.get_by_role("link", name="Older versions").count() == 0  # a.md's first version is the KB's
    page.locator(f'input[name="a"][value="{made[0]}"]').check()
    admin_tab.button("Compare the picked versions").click()
    page.wait_for_url(re.compile(rf".*/versions/{made[0]}\.\.\.{made[1]}$"))
    assert page.locator("tr.del").inner_text().endswith("0")
    assert page.locator("tr.add").inner_text().endswith("1")
