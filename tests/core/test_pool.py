"""The LRU pool: least recently used values closed past the budget, never under a lease."""

from __future__ import annotations

import threading

from kbserver.core.pool import LeasePool


class Thing:
    def __init__(self, key: str) -> None:
        self.key = key
        self.closed = False


def make(budget: int) -> tuple[LeasePool[str, Thing], list[str]]:
    closed: list[str] = []

    def close(t: Thing) -> None:
        assert not t.closed
        t.closed = True
        closed.append(t.key)

    return LeasePool(Thing, close, budget), closed


def test_least_recently_used_is_closed_past_the_budget() -> None:
    pool, closed = make(2)
    for key in ("a", "b", "a", "c"):
        with pool.lease(key):
            pass
    assert closed == ["b"] and sorted(pool.keys()) == ["a", "c"]
    pool.close()
    assert sorted(closed) == ["a", "b", "c"]


def test_a_leased_value_is_closed_by_its_last_user() -> None:
    pool, closed = make(1)
    with pool.lease("a") as a:
        with pool.lease("b"):
            assert not a.closed  # evicted but in use
        assert closed == []
        pool.drop("b")
        assert closed == ["b"]
    assert closed == ["b", "a"]
    with pool.lease("a") as again:
        assert again is not a and not again.closed


def test_threads_never_use_a_closed_value() -> None:
    pool, _ = make(3)
    errors: list[str] = []

    def work(n: int) -> None:
        for i in range(300):
            with pool.lease(f"k{(n + i) % 7}") as t:
                if t.closed:
                    errors.append(t.key)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(pool) <= 3
