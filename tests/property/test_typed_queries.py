"""`query_index` and `recall_raw` (typed tool set, over MCP) agree with a plain reference model.

The model knows only the documented rules (docs/reference.md, "typed"): a query's words (latin words folded,
CJK as bigrams, question and common words dropped unless nothing else is left) are looked for in a
record's label, names and summary (a day's summary, diary and facts); a latin word matches whole
words only (a plural s aside), a CJK term anywhere in CJK text; query_index filters by `types`,
recall_raw by the date range; both answer the best `limit`. Generated queries (the records' own
words, punctuation glued on, operators, wildcards, field:value) and whole realistic questions
(English, Chinese, mixed) must never be an error unless they hold no word at all.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kbserver.config import Settings
from kbserver.core.words import CJK_FUNCTION_CHARS, COMMON_WORDS, QUESTION_WORDS
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN, make_agent
from tests.mcp.clients import memory_client

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")

RECORDS: list[dict[str, Any]] = [
    {
        "type": "self",
        "category": "work",
        "key": "employer",
        "summary": "Works at Acme as a data engineer since 2021.",
    },
    {
        "type": "self",
        "category": "food",
        "key": "allergy",
        "summary": "Allergic to peanuts; avoids steak sauce.",
    },
    {
        "type": "self",
        "category": "drink",
        "key": "morning",
        "summary": "Drinks black coffee every morning, never tea.",
    },
    {"type": "relationship", "name": "Anna", "summary": "Sister. Her birthday is May 3; she lives in Paris."},
    {"type": "relationship", "name": "张三", "summary": "同事，喜欢喝绿茶，周一开会。"},
    {
        "type": "relationship",
        "name": "Bob Smith",
        "summary": "Manager of the team; prefers email over Slack.",
    },
    {"type": "topic", "name": "garden", "summary": "Planting tomatoes and basil in the garden this spring."},
    {"type": "topic", "name": "旅行计划", "summary": "十月去京都旅行，预订了酒店和新干线。"},
    {
        "type": "topic",
        "name": "deploy",
        "summary": "Migrating the deploy scripts to Python 3.12 (the team's CI).",
    },
    {"type": "topic", "name": "车", "summary": "买了一辆新车，电动的。"},
    {
        "type": "saved",
        "saved_kind": "text_note",
        "summary": "Team meeting notes: budget review on Monday.",
        "title": "Budget meeting",
    },
    {
        "type": "saved",
        "saved_kind": "arrangement",
        "summary": "Doctor appointment Tuesday 9:40 at the clinic.",
    },
    {
        "type": "saved",
        "saved_kind": "conversation_ref",
        "saved_reason": "travel ideas",
        "summary": "Talked about the river trip and the new camera; 想买相机。",
    },
]
DAYS: list[dict[str, Any]] = [
    {
        "date": "2026-11-01",
        "summary": "Planned the garden.",
        "diary": "Bought basil seeds.",
        "facts": ["likes basil"],
    },
    {
        "date": "2026-11-03",
        "summary": "Anna's birthday dinner in Paris.",
        "diary": "Steak and red wine.",
        "facts": ["Anna turned 30"],
    },
    {"date": "2026-11-10", "summary": "周一开会，讨论预算。", "diary": "喝了绿茶。", "facts": ["预算通过"]},
    {
        "date": "2026-11-15",
        "summary": "Deploy of v1.9 went fine.",
        "diary": "Python scripts migrated.",
        "facts": [],
    },
    {
        "date": "2026-11-20",
        "summary": "Doctor at 9:40.",
        "diary": "The team met without me.",
        "facts": ["teams call"],
    },
    {
        "date": "2026-11-28",
        "summary": "去京都旅行的准备。",
        "diary": "Coffee with Bob; he prefers tea.",
        "facts": ["tea for Bob"],
    },
]
EN = "coffee tea team steak garden birthday sister paris deploy python budget meeting doctor camera".split()
ZH = "绿茶 京都 旅行 相机 开会 预算 新车 周一 茶 车 咖啡".split()
GLUE = ("?", "!", ",", ".", "'s", ":", "*", "~", "^2", ")", "(", '"', "？", "，", "。")
OPS = ("AND", "OR", "NOT", "-", "+", '"', "*", "title:", "category:", "(", ")", "&&", "||", "\\", "/")
QUESTIONS = [
    "What is my sister's birthday?",
    "When is Anna's birthday?",
    "Where does Anna live??",
    "What do I drink in the morning?",
    "Do I like tea or coffee?",
    "coffee OR tea",
    "coffee AND tea",
    "NOT coffee",
    '"black coffee"',
    '"unclosed quote',
    "cof*",
    "te?",
    "title:garden",
    "category:food key:allergy",
    "Who is my manager?",
    "张三喜欢喝什么？",
    "我的新车是什么车？",
    "什么车?",
    "我的旅行计划是什么",
    "京都",
    "Python的部署",
    "What did we decide at the budget meeting on Monday?",
    "9:40",
    "doctor's appointment?",
    "peanuts!!!",
    "((garden))",
    "-steak",
    "Bob's email",
    "teams",
    "The Who",
    "what",
    "a",
    "我",
    "tea",
    "相机 camera",
    "Tell me everything you know about the river trip.",
    "コーヒー",
    "커피",
]
EMPTY = ["?", "...", "", "   ", "？?", "()", "--", "**"]


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _is_cjk(word: str) -> bool:
    return bool(re.match(rf"[{_CJK}]", word))


def _terms(text: str) -> list[str]:
    out: list[str] = []
    for word in _TOKEN.findall(unicodedata.normalize("NFC", text).casefold()):
        if _is_cjk(word) and len(word) > 1:
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return list(dict.fromkeys(out))


def model_words(query: str) -> list[str]:
    every = _terms(query)
    kept: list[str] = []
    for w in every:
        if w in QUESTION_WORDS or w in COMMON_WORDS:
            continue
        if len(w) == 2 and _is_cjk(w) and set(w) & CJK_FUNCTION_CHARS:
            kept.extend(c for c in w if c not in CJK_FUNCTION_CHARS)
        else:
            kept.append(w)
    return list(dict.fromkeys(kept)) or every


def model_matches(words: list[str], texts: list[str]) -> bool:
    text = unicodedata.normalize("NFC", " ".join(texts)).casefold()
    latin = {_fold(w) for w in _TOKEN.findall(text) if not _is_cjk(w)}
    cjk = " ".join(w for w in _TOKEN.findall(text) if _is_cjk(w))
    return any((w in cjk) if _is_cjk(w) else (_fold(w) in latin) for w in words)


class _Typed:
    def __init__(self, root: Path) -> None:
        settings = Settings(data=root / "data", admin_token=ADMIN_TOKEN, sample=False, index_poll_seconds=0.2)
        self.services = open_services(settings.data, settings.options())
        self.services.start()
        kbs.create(self.services, ADMIN, "typed", "typed records")
        make_agent(self.services, "typist", {"typed": "read_write"}, tools=["typed"])
        self.portal_cm = start_blocking_portal()
        self.portal: BlockingPortal = self.portal_cm.__enter__()
        self.mcp_cm = self.portal.wrap_async_context_manager(memory_client(self.services, "typist"))
        self.mcp: Any = self.mcp_cm.__enter__()
        rng = random.Random(20261201)
        generated = [
            {
                "type": "topic",
                "name": f"t{i}",
                "summary": " ".join(rng.choice(EN + ZH) for _ in range(rng.randint(2, 8))),
            }
            for i in range(10)
        ]
        # (type, id) -> the texts the documented rule searches
        self.records: dict[tuple[str, str], list[str]] = {}
        for args in RECORDS + generated:
            saved = self.call("save_memory", args)
            got = self.call("get_memory", {"type": saved["type"], "id": saved["id"]})
            label = self.label(got)
            self.records[(saved["type"], saved["id"])] = [
                got["summary"],
                got.get("name") or "",
                got.get("category") or "",
                got.get("key") or "",
                got.get("saved_reason") or "",
                label,
            ]
        for day in DAYS:
            self.call("archive_day", day)
        self.days = {d["date"]: [d["summary"], d["diary"], *d["facts"]] for d in DAYS}

    @staticmethod
    def label(record: dict[str, Any]) -> str:
        if record.get("title"):
            return str(record["title"])
        if record.get("name"):
            return str(record["name"])
        if record.get("category") is not None and record.get("key") is not None:
            return f"{record['category']}: {record['key']}"
        return " ".join(str(record["summary"]).split())[:80]

    def raw(self, tool: str, args: dict[str, Any]) -> Any:
        return self.portal.call(self.mcp.call_tool, tool, args)

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = self.raw(tool, args)
        assert not result.is_error, (tool, args, result.content)
        return dict(result.structured_content)

    def close(self) -> None:
        self.mcp_cm.__exit__(None, None, None)
        self.portal_cm.__exit__(None, None, None)
        self.services.close()


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Typed]:
    t = _Typed(tmp_path_factory.mktemp("typed"))
    yield t
    t.close()


@st.composite
def generated_queries(draw: st.DrawFn) -> str:
    """The records' words with punctuation glued on, operators, wildcards and field names between."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["word", "word", "word", "glued", "op", "question"]))
        if kind == "op":
            parts.append(draw(st.sampled_from(OPS)))
        elif kind == "question":
            parts.append(draw(st.sampled_from(sorted(QUESTION_WORDS | COMMON_WORDS))))
        else:
            word = draw(st.sampled_from(EN + ZH + ["zebra", "量子", "Teams", "BIRTHDAYS", "Café"]))
            parts.append(word + draw(st.sampled_from(GLUE)) if kind == "glued" else word)
    sep = draw(st.sampled_from([" ", " ", "", "  "]))
    return sep.join(parts)


_QUERY = st.one_of(generated_queries(), st.sampled_from(QUESTIONS + EMPTY), st.text(max_size=30))
_TYPES = st.one_of(
    st.none(),
    st.lists(
        st.sampled_from(["self", "relationship", "topic", "saved"]), min_size=1, max_size=3, unique=True
    ),
)
_DATE = st.one_of(
    st.none(), st.sampled_from(["2026-11-01", "2026-11-03", "2026-11-09", "2026-11-20", "2026-11-30"])
)


def _is_invalid(result: Any) -> bool:
    return bool(result.is_error) and result.structured_content["error"]["code"] == "invalid_request"


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=_QUERY, types=_TYPES, limit=st.integers(1, 30))
def test_query_index_matches_the_model(
    typed: _Typed, query: str, types: list[str] | None, limit: int
) -> None:
    args: dict[str, Any] = {"query": query, "limit": limit}
    if types is not None:
        args["types"] = types
    result = typed.raw("query_index", args)
    words = model_words(query)
    note(f"query={query!r} words={words}")
    if not words:
        assert _is_invalid(result), result.content
        return
    assert not result.is_error, result.content
    want = {
        key
        for key, texts in typed.records.items()
        if (types is None or key[0] in types) and model_matches(words, texts)
    }
    got = [(e["type"], e["id"]) for e in result.structured_content["entries"]]
    assert len(got) == len(set(got)) == min(limit, len(want)), (got, want)
    assert set(got) <= want, set(got) - want


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=st.one_of(st.none(), _QUERY), start=_DATE, end=_DATE, limit=st.integers(1, 10))
def test_recall_raw_matches_the_model(
    typed: _Typed, query: str | None, start: str | None, end: str | None, limit: int
) -> None:
    args: dict[str, Any] = {"limit": limit}
    for name, value in (("query", query), ("startDate", start), ("endDate", end)):
        if value is not None:
            args[name] = value
    result = typed.raw("recall_raw", args)
    words = model_words(query) if query else []
    note(f"query={query!r} words={words}")
    if (query is not None and query.strip() and not words) or (not words and start is None and end is None):
        assert _is_invalid(result), result.content
        return
    if start and end and start > end:
        assert _is_invalid(result), result.content
        return
    assert not result.is_error, result.content
    want = {
        date
        for date, texts in typed.days.items()
        if (start is None or date >= start)
        and (end is None or date <= end)
        and (not words or model_matches(words, texts))
    }
    got = [d["date"] for d in result.structured_content["days"]]
    assert len(got) == len(set(got)) == min(limit, len(want)), (got, want)
    assert set(got) <= want
    if not words:  # a range alone: newest first
        assert got == sorted(want, reverse=True)[:limit]


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("What is my sister's birthday?", ("relationship", "anna")),
        ("Where does Anna live??", ("relationship", "anna")),
        ("What do I drink in the morning?", ("self", "drink/morning")),
        ("tea", ("self", "drink/morning")),
        ("Who is my manager?", ("relationship", "bob-smith")),
        ("什么车?", ("topic", "车")),
        ("张三喜欢喝什么？", ("relationship", "张三")),
        ("What did we decide at the budget meeting on Monday?", ("saved", None)),
        ("doctor's appointment?", ("saved", None)),
    ],
)
def test_realistic_questions_find_what_they_ask_for(
    typed: _Typed, query: str, best: tuple[str, str | None]
) -> None:
    entries = typed.call("query_index", {"query": query, "limit": 5})["entries"]
    words = model_words(query)
    assert entries and entries[0]["type"] == best[0], entries
    if best[1] is not None:
        assert entries[0]["id"] == best[1], entries
    for e in entries:  # nothing that holds none of the asked-for words ("s" of "sister's", "team" for "tea")
        assert model_matches(words, typed.records[(e["type"], e["id"])]), (e, words)
