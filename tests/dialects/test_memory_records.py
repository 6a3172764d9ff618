"""Memory records round-trip through Markdown with YAML front matter: parse(render(m)) == m."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbserver.dialects.memory_records import Memory, parse_memory, render_memory

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_WORDS = st.sampled_from(
    ["tea", "咖啡", "Lily", "yes", "null", "2026-11-01", "a: b", "- x", "#", "'q'", "多行\n文本"]
)
_VALUE = st.one_of(_WORDS, _TEXT, st.integers(-5, 5), st.booleans(), st.none())
_TIME = st.sampled_from(["2026-11-01T10:00:00Z", "2026-12-31T23:59:59Z"])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    content=st.one_of(_WORDS, _TEXT).filter(lambda t: t.strip() == t and t != ""),
    category=st.one_of(st.none(), _WORDS),
    tags=st.lists(_WORDS, max_size=3),
    agent=st.one_of(st.none(), st.sampled_from(["alice", "bob"])),
    session=st.one_of(st.none(), _WORDS),
    metadata=st.dictionaries(st.sampled_from(["source", "n", "列表", "history"]), _VALUE, max_size=3),
    created=_TIME,
    updated=_TIME,
)
def test_render_then_parse_is_the_same_memory(
    content: str,
    category: str | None,
    tags: list[str],
    agent: str | None,
    session: str | None,
    metadata: dict[str, object],
    created: str,
    updated: str,
) -> None:
    memory = Memory(
        id="0123456789abcdef",
        content=content,
        category=category or None,
        tags=tags,
        agentId=agent,
        sessionId=session or None,
        metadata=metadata,
        createdAt=created,
        updatedAt=updated,
    )
    assert parse_memory(render_memory(memory)) == memory
