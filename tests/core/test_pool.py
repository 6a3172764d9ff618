"""The LRU pool: least recently used values closed past the budget, never under a lease."""

from __future__ import annotations

import threading
import time

import pytest

from kbserver.core.pool import Kind, LeasePool


class Thing:
    def __init__(self, key: str, weight: int = 1) -> None:
        self.key = key
        self.weight = weight
        self.closed = False


def make(budget: int) -> tuple[LeasePool, Kind[Thing], list[str]]:
    closed: list[str] = []

    def close(t: Thing) -> None:
        assert not t.closed
        t.closed = True
        closed.append(t.key)

    pool = LeasePool(budget)
    return pool, pool.kind("thing", Thing, close, lambda t: t.weight), closed


def test_least_recently_used_is_closed_past_the_budget() -> None:
    pool, things, closed = make(2)
    for key in ("a", "b", "a", "c"):
        with things.lease(key):
            pass
    assert closed == ["b"] and sorted(things.names()) == ["a", "c"]
    pool.close()
    assert sorted(closed) == ["a", "b", "c"]


def test_kinds_share_one_budget_by_weight() -> None:
    pool, things, closed = make(10)
    heavy = pool.kind("heavy", lambda k: Thing(k, 8), lambda t: closed.append(t.key), lambda t: t.weight)
    heavy.get("h")
    things.get("a")
    things.get("b")
    assert closed == [] and pool.weight() == 10
    things.get("c")  # 11 > 10: the least recently used, the heavy one, goes
    assert closed == ["h"] and pool.weight() == 3


def test_the_values_of_the_kb_in_use_stay_open_together_over_the_budget() -> None:
    pool = LeasePool(64)
    closed: list[tuple[str, str]] = []
    kinds = [
        pool.kind(
            kind,
            lambda k: Thing(k, 30),
            lambda t, kind=kind: closed.append((kind, t.key)),
            lambda t: t.weight,
        )
        for kind in ("repo", "index", "vectors")
    ]
    for _ in range(3):  # one KB whose three values weigh 90 > 64, used call after call
        for kind in kinds:
            with kind.lease("big"):
                pass
    assert closed == []  # none was closed to open another of the same KB (no reopening per call)
    with kinds[0].lease("small"):  # another KB: the big one's least recently used go first
        pass
    assert closed == [("repo", "big"), ("index", "big")] and pool.weight() == 60
    pool.trim()  # nothing in use: back under the budget by the same order
    assert pool.weight() <= 64 and ("repo", "small") not in closed


def test_a_leased_value_is_closed_by_its_last_user() -> None:
    _, things, closed = make(1)
    with things.lease("a") as a:
        with things.lease("b"):
            assert not a.closed  # evicted but in use
        assert closed == []
        things.drop("b")
        assert closed == ["b"]
    assert closed == ["b", "a"]
    with things.lease("a") as again:
        assert again is not a and not again.closed


def test_threads_never_use_a_closed_value() -> None:
    pool, things, _ = make(3)
    errors: list[str] = []

    def work(n: int) -> None:
        for i in range(300):
            with things.lease(f"k{(n + i) % 7}") as t:
                if t.closed:
                    errors.append(t.key)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(pool) <= 3


def test_lease_if_open_never_opens() -> None:
    _, things, closed = make(5)
    with things.lease_if_open("a") as missing:
        assert missing is None
    assert things.names() == []
    things.get("a")
    with things.lease_if_open("a") as a:
        assert a is not None and a.key == "a"
        things.drop("a")
        assert closed == []  # still leased
    assert closed == ["a"]


def test_opening_a_cold_value_does_not_hold_up_leases_of_others() -> None:
    """A slow open (a cold KB) runs outside the pool's lock; a second lease of the same key waits
    for it and shares the one value, and an open that fails lets the next caller try again."""
    release, started = threading.Event(), threading.Event()
    opened: list[str] = []

    def open_(key: str) -> Thing:
        opened.append(key)
        if key == "cold":
            started.set()
            assert release.wait(120), "the test never released the cold open"
        if key == "broken" and opened.count("broken") == 1:
            raise OSError("disk hiccup")
        return Thing(key)

    pool = LeasePool(100)
    things = pool.kind("thing", open_, lambda t: None)
    got: dict[str, Thing] = {}

    def lease_cold(n: int) -> None:
        got[f"cold{n}"] = things.get("cold")

    cold = [threading.Thread(target=lease_cold, args=(n,)) for n in (1, 2)]
    cold[0].start()
    assert started.wait(60)
    cold[1].start()
    warm = threading.Thread(target=lambda: got.__setitem__("warm", things.get("warm")))
    warm.start()
    warm.join(timeout=60)
    assert not warm.is_alive() and got["warm"].key == "warm"  # while "cold" is still opening
    assert cold[0].is_alive() and cold[1].is_alive()
    release.set()
    for t in cold:
        t.join(timeout=60)
        assert not t.is_alive()
    assert got["cold1"] is got["cold2"] and opened.count("cold") == 1  # opened once, shared
    try:
        things.get("broken")
    except OSError:
        pass
    assert things.get("broken").key == "broken" and opened.count("broken") == 2
    pool.close()


def test_released_is_told_after_every_close_and_only_then() -> None:
    """The composition hands freed memory back (kbserver.core.trim) once values were closed."""
    told: list[list[str]] = []
    closed: list[str] = []
    pool = LeasePool(2, released=lambda: told.append(list(closed)))
    things = pool.kind("thing", Thing, lambda t: closed.append(t.key), lambda t: t.weight)
    things.get("a")
    things.get("b")
    assert told == []  # within the budget: nothing closed, nothing told
    things.get("c")  # evicts a
    assert told == [["a"]]
    with things.lease("d"):  # evicts b
        things.drop("d")  # leased: closed by its last user
        assert told == [["a"], ["a", "b"]]
    assert told[-1] == ["a", "b", "d"]
    pool.close()
    assert told[-1] == ["a", "b", "d", "c"] and len(told) == 4
    pool.close()  # nothing left to close: not told
    assert len(told) == 4


def test_give_back_skips_a_trim_within_min_seconds_of_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbserver.core import trim

    monkeypatch.setattr(trim, "_last", time.monotonic() + 3600)  # as if one had just run
    assert trim.give_back() is False
    monkeypatch.setattr(trim, "_last", time.monotonic() - 3600)
    assert trim.give_back() is (trim._malloc_trim is not None)  # glibc: it runs
