"""`memory_search` against a plain reference model: natural-language questions and every filter.

Generated memories (English, Chinese, mixed; with and without category, agentId, sessionId; at
distinct times) and generated whole questions ("What did Lily say about the dentist?", "我的咖啡在
哪里？"), searched by the admin and by two agents with every combination of category, agentId,
sessionId, startTime/endTime (in Z and in other offsets), limit/offset and mode. No call may fail;
a scoped memory never reaches another agent; filters and `total` agree with the model; every
keyword hit holds a word of the question; pages are slices of one ranking. The model shares the
index's analyzer and question-word rules (tests/search_model.py) and nothing else. Bounded and
derandomized; semantic search is off here (keyword and hybrid answer alike, semantic finds nothing).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kbserver.core.model import Create, WriteRequest
from kbserver.dialects import memory
from kbserver.dialects.memory_records import Memory, render_memory
from kbserver.dialects.session import DialectCall
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.context import Options
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.search_model import Item, expected

EN = "lily raj mia dentist piano lisbon budget kafka hiking birthday coffee tea garden train doctor".split()
ZH = "咖啡 绿茶 牙医 钢琴 预算 会议 生日 蛋糕 花园 火车 医生 早上".split()
CATEGORIES = ("alpha", "beta")  # never words of a question: the index searches the category too
AGENTS = ("alice", "bob")
SESSIONS = ("s1", "s2")
BASE = datetime.datetime(2026, 11, 1, 9, 0, tzinfo=datetime.UTC)
QUESTIONS = (
    "What did {en} say about the {en2}?",
    "When is my {en} {en2}?",
    "Do you remember anything about {en}?",
    "{zh}在哪里？",
    "我的{zh}和{zh2}怎么样？",
    "What about {zh} and {en}?",
    "Tell me about {en} {zh2} {en2}",
    "Where is the zebra?",
    "what did I do",
)
_slugs = itertools.count()


@dataclass(frozen=True)
class Spec:
    words: tuple[str, ...]
    joined: bool  # Chinese words written without spaces
    category: str | None
    agent: str | None
    session: str | None
    minute: int


_SPEC = st.builds(
    Spec,
    words=st.lists(st.sampled_from(EN + ZH), min_size=1, max_size=6).map(tuple),
    joined=st.booleans(),
    category=st.sampled_from((None, *CATEGORIES)),
    agent=st.sampled_from((None, *AGENTS)),
    session=st.sampled_from((None, *SESSIONS)),
    minute=st.integers(0, 600),
)


@st.composite
def _question(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(("", "   ")))  # an empty search lists newest first
    return draw(st.sampled_from(QUESTIONS)).format(
        en=draw(st.sampled_from(EN)),
        en2=draw(st.sampled_from(EN)),
        zh=draw(st.sampled_from(ZH)),
        zh2=draw(st.sampled_from(ZH)),
    )


def _time(minute: int, offset_hours: int) -> str:
    zone = datetime.timezone(datetime.timedelta(hours=offset_hours))
    when = (BASE + datetime.timedelta(minutes=minute)).astimezone(zone)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if offset_hours == 0 else when.isoformat()


_FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "category": st.sampled_from((*CATEGORIES, "gamma")),
        "agentId": st.sampled_from(AGENTS),
        "sessionId": st.sampled_from((*SESSIONS, "s3")),
        "startTime": st.tuples(st.integers(0, 600), st.sampled_from((0, 2, -5))),
        "endTime": st.tuples(st.integers(0, 600), st.sampled_from((0, 8))),
        "limit": st.integers(1, 12),
        "offset": st.integers(0, 12),
        "mode": st.sampled_from(("keyword", "hybrid", "semantic")),
    },
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    services = open_services(tmp_path_factory.mktemp("memsearch") / "data", Options(embedder=None))
    services.start()
    for name in AGENTS:
        agents.create(services, ADMIN, name, tools=["memory"])
    yield services
    services.close()


def _memories(specs: list[Spec]) -> list[Memory]:
    out = []
    for i, spec in enumerate(specs):
        sep = "" if spec.joined and all(w in ZH for w in spec.words) else " "
        created = _time(spec.minute, 0)
        out.append(
            Memory(
                id=f"{i:016x}",
                content=sep.join(spec.words),
                category=spec.category,
                agentId=spec.agent,
                sessionId=spec.session,
                createdAt=created,
                updatedAt=created,
            )
        )
    return out


def _model(
    memories: list[Memory], question: str, who: str | None, filters: dict[str, object]
) -> tuple[set[str], list[Memory]]:
    """The ids the documented rules select, and the memories passing scope and filters."""
    start = filters.get("startTime")
    end = filters.get("endTime")
    allowed = []
    for m in memories:
        created = datetime.datetime.fromisoformat(m.createdAt.replace("Z", "+00:00"))
        if who is not None and m.agentId not in (None, who):
            continue
        if "category" in filters and m.category != filters["category"]:
            continue
        if "agentId" in filters and m.agentId != filters["agentId"]:
            continue
        if "sessionId" in filters and m.sessionId != filters["sessionId"]:
            continue
        if start is not None and created < BASE + datetime.timedelta(minutes=start[0]):  # type: ignore[index]
            continue
        if end is not None and created > BASE + datetime.timedelta(minutes=end[0]):  # type: ignore[index]
            continue
        allowed.append(m)
    if not question.strip():
        return {m.id for m in allowed}, allowed
    # What the index sees of a memory: its path, its body and its category (tags are empty here).
    docs = {m.path: f"{m.content}\n{m.category or ''}" for m in allowed}
    items = [Item("word", chunk) for chunk in question.split()]
    hits = expected(docs, items, None).paths
    mode = filters.get("mode", "hybrid")
    if mode == "semantic":  # no embedder in this deployment: nothing is ranked by meaning
        return set(), allowed
    return {m.id for m in allowed if m.path in hits}, allowed


def _args(question: str, filters: dict[str, object]) -> dict[str, object]:
    args = dict(filters)
    if "startTime" in args:
        minute, zone = args["startTime"]  # type: ignore[misc]
        args["startTime"] = _time(minute, zone)
    if "endTime" in args:
        minute, zone = args["endTime"]  # type: ignore[misc]
        args["endTime"] = _time(minute, zone)
    return {"search": question, **args}


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=st.lists(_SPEC, min_size=1, max_size=30),
    searches=st.lists(
        st.tuples(_question(), st.sampled_from((None, *AGENTS)), _FILTERS), min_size=1, max_size=6
    ),
)
def test_memory_search_agrees_with_the_model(
    shared: Services, specs: list[Spec], searches: list[tuple[str, str | None, dict[str, object]]]
) -> None:
    services = shared
    slug = f"ms{next(_slugs)}"
    kbs.create(services, ADMIN, slug)
    for name in AGENTS:
        agents.link(services, ADMIN, name, slug, "read_write")
    memories = _memories(specs)
    version = None
    for start in range(0, len(memories), 20):  # at most max_files per version
        batch = [
            Create(path=m.path, mode="create", content=render_memory(m)) for m in memories[start : start + 20]
        ]
        version = writes.submit(services, ADMIN, slug, WriteRequest(files=batch)).version  # type: ignore[arg-type]
    assert version is not None
    assert services.progress.wait_blocking(slug, version, 60, ["index"])
    by_id = {m.id: m for m in memories}
    for question, who, filters in searches:
        call = DialectCall(services, ADMIN if who is None else caller_for(services, who))
        args = _args(question, filters)
        note(f"{who or 'admin'} searches {args!r}")
        want, allowed = _model(memories, question, who, filters)
        page = memory.memory_search(call, kb=slug, **args)  # type: ignore[arg-type]
        everything = memory.memory_search(call, kb=slug, **{**args, "limit": 100, "offset": 0})  # type: ignore[arg-type]
        got = [r.id for r in everything.memories]
        assert len(got) == len(set(got))
        assert set(got) == want, (sorted(got), sorted(want))
        assert everything.total == page.total == len(want)
        limit, offset = int(filters.get("limit", 10)), int(filters.get("offset", 0))  # type: ignore[call-overload]
        assert [r.id for r in page.memories] == got[offset : offset + limit]
        for row in everything.memories:
            m = by_id[row.id]
            assert m in allowed
            assert row.content == m.content and row.agentId == m.agentId
            assert who is None or m.agentId in (None, who)  # a scoped memory never leaks
        if not question.strip():
            times = [by_id[i].createdAt for i in got]
            assert times == sorted(times, reverse=True)  # newest first
