"""Front matter: parsed leniently into stored, searchable and filter fields."""

from __future__ import annotations

from kbserver.index.document import parse, sha256, to_document


def test_front_matter_fields_are_strings_and_tags_are_joined() -> None:
    parsed = parse(
        "---\ntitle: Coffee\ntags: [drinks, morning]\ncategory: prefs\nimportance: 0.5\n"
        "pinned: true\ncreated: 2026-01-02\nmetadata: {a: 1}\n---\nBody text\n"
    )
    assert parsed.body == "Body text\n"
    assert parsed.fields == {
        "title": "Coffee",
        "tags": "drinks, morning",
        "category": "prefs",
        "importance": "0.5",
        "pinned": "true",
        "created": "2026-01-02",
    }
    assert parsed.exact["tags"] == ["drinks", "morning"]


def test_tags_as_a_string_are_split_on_commas() -> None:
    parsed = parse("---\ntags: a, b ,c\n---\nx")
    assert parsed.fields["tags"] == "a, b, c"
    assert parsed.exact["tags"] == ["a", "b", "c"]


def test_bad_yaml_leaves_the_whole_text_as_body() -> None:
    text = "---\ntitle: [unclosed\n---\nbody"
    assert parse(text).body == text
    assert parse(text).fields == {}


def test_non_mapping_and_missing_close_are_plain_text() -> None:
    assert parse("---\n- a\n- b\n---\nx").fields == {}
    assert parse("---\ntitle: x\nno closing fence").body == "---\ntitle: x\nno closing fence"
    assert parse("---\n---\nonly body").body == "only body"


def test_odd_keys_are_ignored() -> None:
    parsed = parse("---\n1: one\nbad key: x\n_x: y\nok_key-1: z\n---\n")
    assert parsed.fields == {"ok_key-1": "z"}


def test_document_has_folders_sha_and_filter_fields() -> None:
    doc = to_document("a/b/c.md", "---\nagent_id: bob\n---\nhi")
    assert doc["dirs"] == "a/\x1fa/b/"
    assert doc["sha"] == bytes.fromhex(sha256("---\nagent_id: bob\n---\nhi"))
    assert doc["f_agent_id"] == "bob"
    assert doc["body"] == "hi"
