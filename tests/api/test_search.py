"""GET /kbs/{slug}/search: the requests that hit Whoosh's quality-skipping trap answer 200."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.search_seed import seed


def test_prefix_limit_offset_is_not_a_500(client: TestClient, kb: str, agent: dict[str, str]) -> None:
    files = {
        f"{'notes' if i % 2 else 'other'}/n{i}.md": f"hello world {i} " + "coffee " * (i % 5)
        for i in range(40)
    }
    seed(client, kb, agent, files)
    for params in (
        {"q": "hello", "prefix": "notes", "limit": 1, "offset": 1},
        {"q": '"hello world"', "prefix": "notes", "limit": 1, "offset": 1},
        {"q": "what did I say about hello and coffee?", "prefix": "notes/", "limit": 1},
    ):
        r = client.get(f"/api/v1/kbs/{kb}/search", params=params, headers=agent)
        assert r.status_code == 200, (params, r.text)
        body = r.json()
        assert body["total"] == 20 and len(body["hits"]) == 1, params
        assert body["hits"][0]["path"].startswith("notes/")
