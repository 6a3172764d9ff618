"""memory_search scores are absolute: near-identical memories score alike, scores compare across queries."""

from __future__ import annotations

from kbserver.dialects.memory import memory_add, memory_search
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from tests.helpers import make_agent


def _call(services: Services, kb: str) -> DialectCall:
    make_agent(services, "alice", {kb: "read_write"}, tools=["memory"])
    return DialectCall(services, caller_for(services, "alice"))


def _caught_up(services: Services, call: DialectCall, kb: str) -> None:
    head = services.repos.repo(kb).head()
    assert head is not None and services.progress.wait_blocking(kb, head, 120)


def test_near_identical_memories_score_alike(services: Services, kb: str) -> None:
    call = _call(services, kb)
    memory_add(call, "Alice prefers green tea in the morning")
    memory_add(call, "Alice prefers green tea in the mornings")
    _caught_up(services, call, kb)
    found = memory_search(call, "what does Alice drink in the morning?").memories
    scores = [m.score for m in found if m.score is not None]
    assert len(scores) == 2
    assert abs(scores[0] - scores[1]) < 0.1, scores  # min-max over the results made them 0.80 and 0.05
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_scores_compare_across_questions(services: Services, kb: str) -> None:
    """The best match of an unrelated question scores low, not the 0.75 that min-max over the
    results gave whatever was asked; the memory that answers scores high."""
    call = _call(services, kb)
    memory_add(call, "The quarterly report is due on Friday")
    memory_add(call, "Bob likes hiking in the Alps")
    _caught_up(services, call, kb)
    related = memory_search(call, "when is the quarterly report due?").memories
    unrelated = memory_search(call, "how do volcanoes form under the ocean?").memories
    best = related[0]
    assert best.content == "The quarterly report is due on Friday"
    assert best.score is not None and best.score > 0.5, best
    worst = unrelated[0].score
    assert worst is not None and worst < 0.5 < best.score, (unrelated, best)
