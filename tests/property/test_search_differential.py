"""Differential property test: search equals a plain reference model, in the index, over HTTP, over MCP.

Random small corpora (English, Chinese, mixed; nested folders) and random queries drawn from
their words, phrases and junk, with random prefix, limit and offset. Every page must come back
without an error; the pages must be disjoint, their union the model's set of matching paths for
the prefix, `total` right, scores non-increasing, and a hit's rank tier (the integer part of its
score) the model's. Examples are bounded (derandomized, so a landing never meets a new example).
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.index import SearchIndex
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import search
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, make_agent
from tests.mcp.clients import memory_client
from tests.search_model import PREFIXES, Expected, expected, make_corpus, queries, render
from tests.search_seed import seed

_KINDS = ("en", "zh", "mixed")
_PREFIX = st.sampled_from(PREFIXES)
_LIMIT = st.integers(1, 5)
Page = tuple[list[tuple[str, float]], int]  # (path, score) hits and total


def _check(want: Expected, fetch: Callable[[int, int], Page], limit: int, offset: int) -> None:
    """Walk every page of `limit` hits (and the page at `offset`) against the model."""
    seen: list[tuple[str, float]] = []
    for start in range(0, len(want.paths) + limit, limit):
        hits, total = fetch(limit, start)
        assert total == len(want.paths), (total, sorted(want.paths))
        assert len(hits) == max(0, min(limit, total - start))
        seen.extend(hits)
    paths = [p for p, _ in seen]
    assert len(paths) == len(set(paths)), paths  # pages are disjoint
    assert set(paths) == want.paths
    scores = [s for _, s in seen]
    assert scores == sorted(scores, reverse=True)
    for path, score in seen:
        assert math.floor(score) == want.tiers[path], (path, score, want.tiers)
    hits, total = fetch(limit, offset)
    assert total == len(want.paths) and [p for p, _ in hits] == paths[offset : offset + limit]


# -- the index ----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data(), seed_=st.integers(0, 2**32), kind=st.sampled_from(_KINDS), split=st.booleans())
def test_index_matches_the_model(data: st.DataObject, seed_: int, kind: str, split: bool) -> None:
    docs = make_corpus(random.Random(seed_), kind)
    items = data.draw(queries(docs))
    prefix, limit, offset = data.draw(_PREFIX), data.draw(_LIMIT), data.draw(st.integers(0, 6))
    note(f"docs={docs!r} query={render(items)!r} split={split}")
    with tempfile.TemporaryDirectory() as tmp:
        ix = SearchIndex(Path(tmp) / "ix")
        try:
            paths = sorted(docs)
            if split:  # several segments, replaced files, a merge mid-walk: the refresh and merge paths
                ix.update("v1", {p: "placeholder words\n" for p in paths[:1]}, [])
                ix.search("placeholder")
                ix.update("v2", {p: docs[p] for p in paths[::2]}, [])
                ix.update("v3", {p: docs[p] for p in paths[1::2]}, [])
            else:
                ix.update("v1", docs, [])
            text = render(items)
            first: list[Page] = []

            def fetch(lim: int, off: int) -> Page:
                r = ix.search(text, limit=lim, offset=off, prefix=prefix)
                page = [(h.path, h.score) for h in r.hits], r.total
                if split and not first:  # the follower merges when idle: here between pages 1 and 2
                    first.append(page)
                    ix.merge()
                return page

            _check(expected(docs, items, prefix), fetch, limit, offset)
            if first:  # the merge changed no score
                assert fetch(limit, 0) == first[0]
        finally:
            ix.close()


# -- HTTP and MCP over three fixed KBs built by the same generator ------------------------------


class _Edges:
    def __init__(self, root: Path) -> None:
        self.settings = Settings(
            data=root / "data", admin_token=ADMIN_TOKEN, sample=False, index_poll_seconds=0.2
        )
        self.services = open_services(self.settings.data, self.settings.options())
        self.services.start()
        self.corpora: dict[str, dict[str, str]] = {}
        for kind in _KINDS:
            slug = f"kb-{kind}"
            kbs.create(self.services, ADMIN, slug, kind)
            rng = random.Random(kind)
            docs: dict[str, str] = {}
            for round_ in range(4):  # a few corpora's worth of notes in one KB
                docs.update({f"r{round_}/{p}": t for p, t in make_corpus(rng, kind).items()})
            self.corpora[slug] = docs
        self.headers = make_agent(self.services, "prop", {slug: "read_write" for slug in self.corpora})
        self.client = TestClient(create_app(self.settings, self.services), raise_server_exceptions=False)
        self.client.__enter__()
        for slug, docs in self.corpora.items():
            seed(self.client, slug, self.headers, docs)
            # Every KB starts with a README.md; it is searched too, so the model must know it.
            readme = self.client.get(f"/api/v1/kbs/{slug}/files/README.md", headers=self.headers)
            assert readme.status_code == 200 and not readme.json()["content"].startswith("---")
            docs["README.md"] = readme.json()["content"]
            head = kbs.describe(self.services, ADMIN, slug).head
            assert search.status(self.services, ADMIN, slug, wait_for=head, timeout=60).covered
        # No merge here: the follower merges when idle, often in the middle of a paged walk, and
        # the pages must stay disjoint across it (scores come from live documents only).
        self.portal_cm = start_blocking_portal()
        self.portal: BlockingPortal = self.portal_cm.__enter__()
        self.mcp_cm = self.portal.wrap_async_context_manager(memory_client(self.services, "prop"))
        self.mcp: Any = self.mcp_cm.__enter__()

    def close(self) -> None:
        self.mcp_cm.__exit__(None, None, None)
        self.portal_cm.__exit__(None, None, None)
        self.client.__exit__(None, None, None)
        self.services.close()


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Edges]:
    e = _Edges(tmp_path_factory.mktemp("edges"))
    yield e
    e.close()


def _with_folder(prefix: str | None, round_: int) -> str | None:
    # The KBs hold each generated corpus under r{N}/: prefixes apply inside one of them, or across all.
    if prefix is None:
        return None
    return f"r{round_}/{prefix}" if round_ < 4 else prefix


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), kind=st.sampled_from(_KINDS), round_=st.integers(0, 4))
def test_http_matches_the_model(edges: _Edges, data: st.DataObject, kind: str, round_: int) -> None:
    slug = f"kb-{kind}"
    docs = edges.corpora[slug]
    items = data.draw(queries(docs))
    prefix = _with_folder(data.draw(_PREFIX), round_)
    limit, offset = data.draw(_LIMIT), data.draw(st.integers(0, 6))
    text = render(items)

    def fetch(lim: int, off: int) -> Page:
        params: dict[str, Any] = {"q": text, "limit": lim, "offset": off}
        if prefix is not None:
            params["prefix"] = prefix
        r = edges.client.get(f"/api/v1/kbs/{slug}/search", params=params, headers=edges.headers)
        if not text.strip():
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
            return [], 0
        assert r.status_code == 200, r.text
        body = r.json()
        return [(h["path"], h["score"]) for h in body["hits"]], body["total"]

    if not text.strip():
        fetch(limit, offset)
        return
    _check(expected(docs, items, prefix), fetch, limit, offset)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), kind=st.sampled_from(_KINDS), round_=st.integers(0, 4))
def test_mcp_matches_the_model(edges: _Edges, data: st.DataObject, kind: str, round_: int) -> None:
    slug = f"kb-{kind}"
    docs = edges.corpora[slug]
    items = data.draw(queries(docs))
    prefix = _with_folder(data.draw(_PREFIX), round_)
    limit = data.draw(st.integers(1, 20))
    text = render(items)
    args: dict[str, Any] = {"kb": slug, "query": text, "limit": limit}
    if prefix is not None:
        args["prefix"] = prefix
    result = edges.portal.call(edges.mcp.call_tool, "search_context", args)
    if not text.strip():
        assert result.is_error and result.structured_content["error"]["code"] == "invalid_request"
        return
    assert not result.is_error, result.content
    hits = [(h["path"], h["score"]) for h in result.structured_content["hits"]]
    want = expected(docs, items, prefix)
    assert len(hits) == min(limit, len(want.paths))
    assert len({p for p, _ in hits}) == len(hits) and {p for p, _ in hits} <= want.paths
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    # The best hits are the best of the model's tiers: no file of a higher tier is left out.
    if hits:
        lowest = min(want.tiers[p] for p, _ in hits)
        assert {p for p, t in want.tiers.items() if t > lowest} <= {p for p, _ in hits}
