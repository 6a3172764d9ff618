"""A memory's front matter in words: who may read it, keys a person reads, values never a repr."""

from __future__ import annotations

from kbserver.dialects.record_view import field_words, value_words, view_of


def _memory(front: str) -> str:
    return f"---\n{front}---\n\nAnn likes tea.\n"


def test_who_reads_a_memory_in_words() -> None:
    private = view_of("memories/a.md", _memory("agentId: bob\nuser_id: default\n"))
    assert private is not None and private.scope_words == "private to agent bob"
    about = view_of("memories/a.md", _memory("agentId: bob\nuser_id: ann\n"))
    assert about is not None and about.scope_words == "private to agent bob, about user ann"
    shared = view_of("memories/a.md", _memory("memory_type: fact\n"))
    assert shared is not None and shared.scope_words == "shared with every agent of the KB"


def test_keys_and_values_in_words() -> None:
    assert [field_words(k) for k in ("agentId", "memory_type", "createdAt", "superseded_by", "odd_key")] == [
        "agent",
        "type",
        "created",
        "superseded by",
        "odd key",
    ]
    assert value_words({"source": "chat", "history": [{"value": "x"}, {"value": "y"}]}) == (
        "source: chat; history: 2 entries"
    )
    assert value_words(["a", "b"]) == "a, b"
    record = view_of("memories/a.md", _memory("metadata:\n  history:\n  - value: old\n"))
    assert (
        record is not None and "{" not in record.fields["metadata"] and "[" not in record.fields["metadata"]
    )
