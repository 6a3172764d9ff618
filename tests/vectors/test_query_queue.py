"""The query embedding queue: a cap on the embedded text, callers in turns, leavers dropped, stop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from kbserver.core.errors import Unavailable
from kbserver.vectors import MAX_QUERY_CHARS, QueryCache, asking, query_text


class _Stepped:
    """An embedder whose queries each wait for the test's say-so, recording the order they ran in."""

    name = "stepped"
    dim = 2

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.running = threading.Semaphore(0)  # released when a query starts
        self.go = threading.Semaphore(0)  # one release lets one query finish

    def passages(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[type-arg]
        return np.ones((len(texts), 2), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:  # type: ignore[type-arg]
        self.calls.append(text)
        self.running.release()
        assert self.go.acquire(timeout=60), "the test never let the query finish"
        return np.array([float(len(text)), 1.0], dtype=np.float32)


@pytest.fixture
def stepped() -> Iterator[tuple[_Stepped, QueryCache]]:
    inner = _Stepped()
    cache = QueryCache(inner)
    cache.poll_seconds = 0.01
    yield inner, cache
    for _ in range(64):
        inner.go.release()
    cache.close()


def _ask(
    cache: QueryCache, who: str, text: str, out: dict[str, object], waiting: Callable[[], bool] = lambda: True
) -> threading.Thread:
    def run() -> None:
        with asking(who, waiting):
            try:
                out[text] = cache.query(text).tolist()
            except Unavailable as err:
                out[text] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _queued(cache: QueryCache, count: int) -> None:
    """Wait (bounded) until `count` jobs are known to the cache (queued or running)."""
    for _ in range(3000):
        if len(cache._jobs) >= count:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{count} jobs never queued")


def test_only_the_start_of_a_long_query_is_embedded(stepped: tuple[_Stepped, QueryCache]) -> None:
    inner, cache = stepped
    inner.go.release()
    long = "  " + "word " * 10_000
    vector = cache.query(long)
    assert inner.calls == [query_text(long)] and len(inner.calls[0]) <= MAX_QUERY_CHARS
    assert vector.tolist() == [float(len(inner.calls[0])), 1.0]
    assert cache.query(long + " more words past the cap").tolist() == vector.tolist()  # same embedding


def test_callers_take_turns(stepped: tuple[_Stepped, QueryCache]) -> None:
    """A burst of agent A's queries delays agent B's by the one under way only."""
    inner, cache = stepped
    out: dict[str, object] = {}
    threads = [_ask(cache, "agent:a", "a0", out)]
    assert inner.running.acquire(timeout=60)  # a0 runs; a1..a5 queue behind it
    threads += [_ask(cache, "agent:a", f"a{i}", out) for i in range(1, 6)]
    _queued(cache, 6)
    threads.append(_ask(cache, "agent:b", "b0", out))
    _queued(cache, 7)
    for _ in range(7):
        inner.go.release()
    for t in threads:
        t.join(60)
    assert inner.calls == ["a0", "b0", "a1", "a2", "a3", "a4", "a5"]
    assert all(isinstance(v, list) for v in out.values()) and len(out) == 7


def test_a_query_nobody_waits_for_is_dropped_before_it_runs(stepped: tuple[_Stepped, QueryCache]) -> None:
    inner, cache = stepped
    out: dict[str, object] = {}
    left = threading.Event()
    first = _ask(cache, "agent:a", "running", out)
    assert inner.running.acquire(timeout=60)
    gone = [_ask(cache, "agent:a", f"gone{i}", out, lambda: not left.is_set()) for i in range(3)]
    shared = _ask(cache, "agent:a", "shared", out, lambda: not left.is_set())
    stays = _ask(cache, "agent:b", "shared", out)  # B waits for the same text: it still runs
    _queued(cache, 5)
    left.set()  # A's requests are cancelled (the client went away)
    for t in gone:
        t.join(60)
    assert all(isinstance(out[f"gone{i}"], Unavailable) for i in range(3))
    for _ in range(8):
        inner.go.release()
    for t in (first, shared, stays):
        t.join(60)
    assert inner.calls == ["running", "shared"]  # the three left behind were never embedded
    assert cache.dropped == 3 and isinstance(out["shared"], list)


def test_stop_fails_the_queued_queries_at_once(stepped: tuple[_Stepped, QueryCache]) -> None:
    inner, cache = stepped
    out: dict[str, object] = {}
    first = _ask(cache, "agent:a", "under way", out)
    assert inner.running.acquire(timeout=60)
    queued = [_ask(cache, f"agent:{i % 3}", f"q{i}", out) for i in range(20)]
    _queued(cache, 21)
    cache.stop()
    for t in queued:
        t.join(60)
    assert all(isinstance(out[f"q{i}"], Unavailable) for i in range(20))  # before the running one ends
    assert first.is_alive()
    inner.go.release()
    first.join(60)
    assert isinstance(out["under way"], list) and inner.calls == ["under way"]  # it finished for its caller
    with pytest.raises(Unavailable):
        cache.query("after the stop")
    cache.prepare("after the stop")  # says nothing: the query that follows does
