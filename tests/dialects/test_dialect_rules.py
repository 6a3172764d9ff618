"""Pure rules of the dialects: record files round-trip, safe names, MEMORY.md edits, /memories paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.core.errors import AmbiguousMatch, InvalidRequest, KBError, NoMatch
from kbserver.core.paths import check_path
from kbserver.dialects import auto, memory_tool
from kbserver.dialects.typed_records import (
    Day,
    Record,
    compile_context,
    compile_user,
    merge_day,
    parse_day,
    parse_record,
    render_day,
    render_record,
    safe_name,
    terms,
)

_TEXT = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\u2028\u2029\x85"),
    min_size=1,
    max_size=40,
)
_BODY = st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc"), include_characters="\n"), max_size=80)
_LINE = _TEXT.map(lambda s: " ".join(s.split())).filter(bool)
_CHINESE = st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF), min_size=1, max_size=8)
_WHEN = st.sampled_from(["2026-11-28T09:00:00Z", "2026-12-01T23:59:59Z"])


@st.composite
def records(draw: st.DrawFn) -> Record:
    kind = draw(st.sampled_from(["self", "relationship", "topic", "saved"]))
    name = draw(st.one_of(_LINE, _CHINESE))
    summary = draw(st.one_of(_BODY, _CHINESE).map(str.strip).filter(bool))
    fields: dict[str, object] = {"type": kind, "id": safe_name(name), "summary": summary}
    fields["created"], fields["updated"] = draw(_WHEN), draw(_WHEN)
    fields["title"] = draw(st.none() | _LINE)
    if kind == "self":
        fields["category"], fields["key"] = draw(_LINE), name
    elif kind == "saved":
        fields["saved_kind"] = draw(st.sampled_from(["text_note", "arrangement"]))
        fields["saved_reason"] = draw(st.none() | _LINE)
        fields["source_refs"] = draw(
            st.none()
            | st.just([{"kind": "conversation", "date": "2026-11-28"}, {"kind": "file", "path": "a/b.md"}])
        )
    else:
        fields["name"] = name
    return Record.model_validate(fields)


@settings(max_examples=150, deadline=None)
@given(records())
def test_record_files_round_trip(record: Record) -> None:
    assert parse_record(render_record(record)) == record
    assert render_record(record).startswith("---\nid: ")


@settings(max_examples=60, deadline=None)
@given(st.lists(records(), max_size=6))
def test_compiled_files_are_deterministic(drawn: list[Record]) -> None:
    found = list({(r.type, r.id): r for r in drawn}.values())  # a KB holds one record per type and id
    assert compile_user(found) == compile_user(list(reversed(found)))
    assert compile_context(found) == compile_context(list(reversed(found)))


@settings(max_examples=200, deadline=None)
@given(st.one_of(_TEXT, _CHINESE))
def test_safe_names_are_valid_stable_paths(name: str) -> None:
    safe = safe_name(name)
    assert safe == safe_name(name) == safe_name(name.upper() if name.isascii() else name)
    assert check_path(f"topic/{safe}.md") and "/" not in safe and len(safe) <= 61


def test_safe_name_examples() -> None:
    assert safe_name("张三") == "张三"
    assert safe_name("  Alice   Smith ") == "alice-smith"
    assert safe_name("../../etc/passwd") == "etc-passwd"
    assert safe_name("CON") == "con_" and safe_name("...") == "x"


def test_days_merge_without_loss() -> None:
    first = merge_day(None, "2026-11-28", "Trip", None, ["a", "b"])
    both = merge_day(first, "2026-11-28", "Hotel", "diary", ["b", "c"])
    assert both == Day(date="2026-11-28", summary="Trip\n\nHotel", diary="diary", facts=["a", "b", "c"])
    assert merge_day(both, "2026-11-28", "Hotel", None, None) == both  # the same text again adds nothing
    assert parse_day(render_day(both), "archive/2026-11-28.json") == both
    with pytest.raises(InvalidRequest):
        parse_day("[1]", "archive/x.json")


def test_terms_split_words_and_cjk() -> None:
    assert terms("Hotel in 京都府, 9:40") == ["hotel", "in", "京都", "都府", "9", "40"]


def test_memory_md_edits() -> None:
    text = auto.added("", "likes\n tea")
    assert text == "- likes tea\n"
    text = auto.added(text.rstrip("\n"), "- 喜欢咖啡")
    assert text == "- likes tea\n- 喜欢咖啡\n"
    assert auto.edited(text, "tea", "green tea") == "- likes green tea\n- 喜欢咖啡\n"
    assert auto.edited(text, "咖啡", "") == "- likes tea\n"
    with pytest.raises(NoMatch):
        auto.edited(text, "milk", "x")
    with pytest.raises(AmbiguousMatch):
        auto.edited(text, "- ", "x")
    with pytest.raises(InvalidRequest):
        auto.entry(" \n\t ")


def test_memory_md_delivery_cuts_at_a_line() -> None:
    small = "- a\n" * 10
    assert auto.deliver(small) == (small, None)
    big = "".join(f"- fact {i:04d} 中文\n" for i in range(200))
    shown, note = auto.deliver(big)
    assert big.startswith(shown) and shown.endswith("\n") and len(shown.encode()) <= 2000
    assert note is not None and f"holds {len(big.encode())} bytes" in note


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/memories", "memory-tool"),
        ("/memories/", "memory-tool"),
        ("/memories/a.md", "memory-tool/a.md"),
        ("/memories/笔记/今天.md", "memory-tool/笔记/今天.md"),
    ],
)
def test_memory_paths(path: str, expected: str) -> None:
    assert memory_tool.kb_path(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/memories/../x",
        "/x",
        "memories/a",
        "/memories/%2E%2E/x",
        "/memories/a%2fb",
        "/memories/.git/x",
        "",
        "/",
    ],
)
def test_memory_path_escapes(path: str) -> None:
    with pytest.raises(KBError) as err:
        memory_tool.kb_path(path)
    assert err.value.code == "invalid_request"


def test_memory_tool_formats() -> None:
    assert [memory_tool.format_size(n) for n in (0, 812, 4096, 1536, 2411724)] == [
        "0B",
        "812B",
        "4K",
        "1.5K",
        "2.3M",
    ]
    assert memory_tool.numbered(["a", "b"], 9) == "     9\ta\n    10\tb"
