"""A write in words: memories counted, other files named with their lines (or counted past two)."""

from __future__ import annotations

from kbserver.services.models import DiffEntry
from kbserver.web.summary import in_words


def _entry(path: str, change: str, plus: int, minus: int) -> DiffEntry:
    patch = "--- a\n+++ b\n@@ -1 +1 @@\n" + "-x\n" * minus + "+y\n" * plus
    return DiffEntry(path=path, change=change, patch=patch)  # type: ignore[arg-type]


def test_a_write_in_words() -> None:
    two = [_entry("memories/a.md", "added", 5, 0), _entry("memories/b.md", "added", 5, 0)]
    assert in_words(two) == "added 2 memories"
    assert in_words([_entry("memories/a.md", "modified", 1, 1)]) == "changed 1 memory"
    assert in_words([_entry("notes/plan.md", "modified", 3, 1)]) == "edited notes/plan.md: +3 \u22121 lines"
    assert in_words([_entry("notes/plan.md", "modified", 1, 0)]) == "edited notes/plan.md: +1 line"
    assert in_words([_entry("notes/new.md", "added", 4, 0)]) == "created notes/new.md: +4 lines"
    assert in_words([_entry("old.md", "deleted", 0, 2)]) == "deleted old.md"
    many = [_entry(f"f{n}.md", "modified", 2, 1) for n in range(3)]
    assert in_words([*two, *many]) == "added 2 memories; edited 3 files: +6 \u22123 lines"
    assert in_words([_entry("memory-tool/notes.xml", "added", 1, 0)]).startswith("created memory-tool/")
    assert in_words([]) == "changed no file"


def test_hunk_headers_read_as_words() -> None:
    from kbserver.web.markup import parse_patch

    f = parse_patch("a.md", "modified", "--- a\n+++ b\n@@ -12,3 +12,4 @@ section\n ctx\n-x\n+y\n+z\n")
    hunks = [line.html for line in f.lines if line.kind == "hunk"]
    assert hunks == ["From line 12:"] and (f.added, f.deleted) == (2, 1)
