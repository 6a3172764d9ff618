"""`SearchIndex.coverage`, the keyword side of hybrid memory search, against a plain model.

Coverage of a file for a question: the idf-weighted share of the question's words (the index's
question-word rule, `question_words`) that the file holds, idf = ln(1 + (N - df + 0.5) / (df + 0.5))
over the live documents. The model computes it from the analysed texts alone (the analyzer is
tested on its own); generated corpora are rewritten and partly deleted before and after a merge,
and whole questions in English and Chinese are asked.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbserver.index import SearchIndex
from kbserver.index.analysis import is_cjk, terms
from kbserver.index.query import question_words
from tests.search_model import QUESTIONS

WORDS = "coffee tea morning meeting deploy river garden sister doctor paris 咖啡 绿茶 会议 医生".split()
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
questions = st.one_of(
    st.sampled_from(QUESTIONS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
)


def _model(question: str, live: dict[str, str]) -> dict[str, float]:
    # A file holds its analysed terms, and each CJK character it contains (one-character question
    # words, like the 咖 of 的咖, are looked up character by character).
    held = {path: {*terms(text), *(ch for ch in text if is_cjk(ch))} for path, text in live.items()}
    words = question_words(question)
    n = len(live) + 1  # the index holds one more document, the one with its version
    idf = {
        w: math.log(1 + (n - (df := sum(w in t for t in held.values())) + 0.5) / (df + 0.5)) for w in words
    }
    total = sum(idf.values())
    return {p: (sum(idf[w] for w in words if w in t) / total if total else 0.0) for p, t in held.items()}


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    first=st.dictionaries(st.sampled_from([f"n{i}.md" for i in range(8)]), texts, min_size=1, max_size=8),
    second=st.dictionaries(st.sampled_from([f"n{i}.md" for i in range(8)]), texts, max_size=4),
    deleted=st.sets(st.sampled_from([f"n{i}.md" for i in range(8)]), max_size=3),
    question=questions,
)
def test_coverage_matches_the_model_before_and_after_a_merge(
    tmp_path: Path, first: dict[str, str], second: dict[str, str], deleted: set[str], question: str
) -> None:
    folder = tmp_path / f"ix{abs(hash((tuple(first.items()), tuple(second.items()), question)))}"
    with SearchIndex(folder) as index:
        index.update("a" * 40, first, [])
        index.update("b" * 40, second, sorted(deleted - second.keys()))
        live = {**first, **second}
        for path in deleted - second.keys():
            live.pop(path, None)
        asked = sorted({*first, *second, "missing.md"})
        expected = _model(question, live)
        before = index.coverage(question, asked)
        assert before == pytest.approx(expected)
        assert all(0.0 <= value <= 1.0 for value in before.values())
        index.merge()
        assert index.coverage(question, asked) == pytest.approx(before)  # deleted copies never count


def test_every_rare_word_is_strong_evidence_and_one_common_word_weak(tmp_path: Path) -> None:
    notes = {f"m{i}.md": f"Mia had a meeting on day {i}" for i in range(20)}
    notes["mentor.md"] = "Mia asked Raj to mentor Tom through his first quarter"
    with SearchIndex(tmp_path / "ix") as index:
        index.update("a" * 40, notes, [])
        got = index.coverage("Who is mentoring Tom?", ["mentor.md", "m1.md"])
        assert got == {"mentor.md": pytest.approx(1.0), "m1.md": 0.0}
        common = index.coverage("Mia and the mentor", ["mentor.md", "m1.md"])
        assert 0.0 < common["m1.md"] < 0.1 < 0.9 < common["mentor.md"] < 1.0 + 1e-9
        assert index.coverage("什么？", ["m1.md"]) == {"m1.md": 0.0}
        assert index.coverage("", ["m1.md"]) == {"m1.md": 0.0}
