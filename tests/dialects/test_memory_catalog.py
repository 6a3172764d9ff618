"""The memory catalogue stays equal to a fresh reading of memories/ across every kind of change.

Random sequences of the dialect's own adds, updates and deletes, writes that bypass the dialect
(a hand-written memory, a file that is no memory, a copy under another name, a malformed file) and
reverts to earlier versions. After each step the catalogue must equal the memories parsed from a
fresh listing of the folder, and `memory_add`'s look-alikes must equal a brute-force Jaccard over
every memory the caller can see (the catalogue finds them through its word index, not by scoring
all). Bounded and derandomized.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kbserver.core.model import Create, Delete, Overwrite, WriteRequest
from kbserver.dialects import memory
from kbserver.dialects.memory_records import Memory, parse_memory, render_memory, similarity, visible
from kbserver.dialects.session import DialectCall
from kbserver.services import Services, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.context import Options
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from kbserver.services.writing import writes
from kbserver.wiring import open_services

WORDS = "tea coffee lily raj piano lisbon budget kafka garden 咖啡 会议 生日 花园 morning report".split()
_slugs = itertools.count()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    services = open_services(tmp_path_factory.mktemp("catalog") / "data", Options(embedder=None))
    agents.create(services, ADMIN, "alice", tools=["memory"])
    yield services
    services.close()


def _reference(services: Services, slug: str) -> dict[str, Memory]:
    """What a catalogue must hold: every file of memories/ read and parsed now."""
    out = {}
    for entry in files.listing(services, ADMIN, slug, "memories/").files:
        try:
            text = files.read(services, ADMIN, slug, entry.path).content
        except Exception:  # not UTF-8: no memory
            continue
        parsed = parse_memory(text)
        if parsed is not None and parsed.path == entry.path:
            out[entry.path] = parsed
    return out


def _brute_similar(content: str, seen: list[Memory]) -> list[dict[str, object]]:
    scored = sorted(((similarity(content, m.content), m.id, m) for m in seen), key=lambda t: (-t[0], t[1]))
    return [{"id": m.id, "content": m.content, "score": round(s, 4)} for s, _id, m in scored if s >= 0.5][:5]


_TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
_STEP = st.one_of(
    st.tuples(st.just("add"), _TEXT, st.sampled_from(["admin", "alice"]), st.booleans()),
    st.tuples(st.just("update"), _TEXT, st.integers(0, 20)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("revert"), st.integers(0, 20)),
    st.tuples(st.just("foreign"), _TEXT, st.sampled_from(["memory", "other", "copy", "broken", "remove"])),
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, min_size=1, max_size=10))
def test_the_catalogue_equals_a_fresh_reading(shared: Services, steps: list[tuple[object, ...]]) -> None:
    services = shared
    slug = f"cat{next(_slugs)}"
    kbs.create(services, ADMIN, slug)
    agents.link(services, ADMIN, "alice", slug, "read_write")
    calls = {
        "admin": DialectCall(services, ADMIN),
        "alice": DialectCall(services, caller_for(services, "alice")),
    }
    history = [services.repos.repo(slug).head()]
    note(f"steps={steps!r}")
    assert memory.catalog(calls["admin"], slug) == {}
    for step in steps:
        kind = step[0]
        known = sorted(_reference(services, slug).values(), key=lambda m: m.id)
        version: str | None = None
        if kind == "add":
            _, text, who, scoped = step
            call = calls[str(who)]
            agent = None if who == "admin" else str(who)
            seen = [m for m in known if visible(m, agent)]
            want = _brute_similar(str(text), seen)
            out = memory.memory_add(call, str(text), agentId=agent if scoped else None, kb=slug)
            assert [s.model_dump() for s in out.similar] == want
            version = str(out.taskId)
        elif kind == "update" and known:
            _, text, pick = step
            out = memory.memory_update(calls["admin"], known[int(pick) % len(known)].id, str(text), kb=slug)
            version = str(out.taskId)
        elif kind == "delete" and known:
            out = memory.memory_delete(calls["admin"], known[int(step[1]) % len(known)].id, kb=slug)
            version = str(out.taskId)
        elif kind == "revert" and len(history) > 1:
            target = history[int(step[1]) % (len(history) - 1)]
            assert target is not None
            try:
                version = versions.revert(services, ADMIN, slug, target).version
            except Exception as err:  # the files already equal that version
                assert getattr(err, "code", None) == "invalid_request", err
        elif kind == "foreign":
            version = _foreign(services, slug, str(step[1]), str(step[2]), known)
        if version is not None:
            history.append(version)
        assert memory.catalog(calls["admin"], slug) == _reference(services, slug)
        mine = memory.catalog(calls["alice"], slug)  # one catalogue per KB, whoever asks
        assert mine == _reference(services, slug)


def _foreign(services: Services, slug: str, text: str, what: str, known: list[Memory]) -> str | None:
    """A write that bypasses the dialect (the web editor, write_context, git): the catalogue must
    notice it by the versions' diff."""
    n = len(known)
    if what == "memory":
        m = Memory(
            id=f"{n:016x}", content=text, createdAt="2026-11-01T10:00:00Z", updatedAt="2026-11-01T10:00:00Z"
        )
        change: object = Create(path=m.path, mode="create", content=render_memory(m))
        if m.path in {k.path for k in known}:
            return None
    elif what == "other":
        change = Create(path=f"memories/notes-{n}.txt", mode="create", content=text)
    elif what == "copy" and known:
        source = known[0]
        change = Create(path=f"memories/copy-{n}.md", mode="create", content=render_memory(source))
    elif what == "broken" and known:
        target = known[-1]
        current = files.read(services, ADMIN, slug, target.path)
        change = Overwrite(
            path=target.path, mode="overwrite", content="---\nid: [unclosed\n", expected_sha256=current.sha256
        )
    elif what == "remove" and known:
        change = Delete(path=known[0].path, mode="delete")
    else:
        return None
    try:
        return writes.submit(services, ADMIN, slug, WriteRequest(files=[change])).version  # type: ignore[list-item]
    except Exception as err:  # a second copy under a name taken already, say
        assert getattr(err, "code", None) in ("already_exists",), err
        return None


def test_another_services_sees_the_same_memories(tmp_path: Path) -> None:
    """Two services on one data folder (two processes): each catalogue follows the other's writes."""
    one = open_services(tmp_path / "data", Options(embedder=None))
    two = open_services(tmp_path / "data", Options(embedder=None))
    try:
        kbs.create(one, ADMIN, "shared")
        a, b = DialectCall(one, ADMIN), DialectCall(two, ADMIN)
        first = memory.memory_add(a, "Lily drinks green tea every morning", kb="shared")
        assert set(memory.catalog(b, "shared")) == {f"memories/{first.id}.md"}
        memory.memory_update(b, str(first.id), "Lily drinks black coffee every morning", kb="shared")
        second = memory.memory_add(b, "Raj plays the piano", kb="shared")
        seen = memory.catalog(a, "shared")
        assert seen == _reference(one, "shared")
        assert seen[f"memories/{first.id}.md"].content == "Lily drinks black coffee every morning"
        memory.memory_delete(a, str(second.id), kb="shared")
        assert memory.catalog(b, "shared") == _reference(two, "shared")
        assert set(memory.catalog(b, "shared")) == {f"memories/{first.id}.md"}
    finally:
        two.close()
        one.close()
