"""Views: a value derived from a catalogue snapshot is made once per snapshot and key."""

from __future__ import annotations

from kbserver.dialects.catalog import Snapshot, Views


def test_a_view_is_made_once_per_snapshot_and_key() -> None:
    views: Views[str, list[str]] = Views(size=2)
    made: list[tuple[str | None, str]] = []

    def make(snapshot: Snapshot[str], key: str) -> list[str]:
        made.append((snapshot.version, key))
        return [p for p, r in snapshot.records.items() if key in r]

    first = Snapshot("1" * 40, {"a.md": "tea", "b.md": "coffee"}, {"a.md": "x", "b.md": "y"})
    second = Snapshot("2" * 40, {"a.md": "tea", "c.md": "green tea"}, {"a.md": "x", "c.md": "z"})
    assert views.get(first, "tea", lambda: make(first, "tea")) == ["a.md"]
    again = views.get(first, "tea", lambda: make(first, "tea"))
    assert again is views.get(first, "tea", lambda: make(first, "tea"))  # kept: the same object
    assert views.get(second, "tea", lambda: make(second, "tea")) == ["a.md", "c.md"]  # a new version
    assert views.get(first, "coffee", lambda: make(first, "coffee")) == ["b.md"]  # another key
    assert made == [("1" * 40, "tea"), ("2" * 40, "tea"), ("1" * 40, "coffee")]
    # An equal snapshot that is another object (a version made again) is not taken for the first.
    copy = Snapshot(first.version, dict(first.records), dict(first.sha256s))
    views.get(copy, "coffee", lambda: make(copy, "coffee"))
    assert len(made) == 4
    views.get(first, "tea", lambda: make(first, "tea"))  # only the last 2 are kept
    assert len(made) == 5
