"""Dialect writes racing each other on one KB: nothing is lost, every change is its own version."""

from __future__ import annotations

import threading

from kbserver.dialects import auto, typed
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import files
from kbserver.services.reviewing import versions
from tests.helpers import git_fsck, make_agent

THREADS = 4
EACH = 3


def _race(work: list[threading.Thread]) -> None:
    for t in work:
        t.start()
    for t in work:
        t.join(timeout=120)
        assert not t.is_alive()


def test_concurrent_add_memory_keeps_every_entry(services: Services, kb: str) -> None:
    make_agent(services, "alice", {kb: "read_write"}, tools=["auto"])
    call = DialectCall(services, caller_for(services, "alice"))
    failures: list[BaseException] = []

    def adder(n: int) -> None:
        try:
            for i in range(EACH):
                auto.add_memory(call, f"fact {n}-{i}")
        except BaseException as exc:  # reported below, with the thread's own error
            failures.append(exc)

    start = len(versions.listing(services, ADMIN, kb, limit=100).versions)
    _race([threading.Thread(target=adder, args=(n,)) for n in range(THREADS)])
    assert failures == []
    lines = files.read(services, ADMIN, kb, "memory/alice/MEMORY.md").content.splitlines()
    assert sorted(lines) == sorted(f"- fact {n}-{i}" for n in range(THREADS) for i in range(EACH))
    after = versions.listing(services, ADMIN, kb, limit=100).versions
    assert len(after) == start + THREADS * EACH
    git_fsck(services.repos.path(kb))


def test_concurrent_saves_keep_user_md_complete(services: Services, kb: str) -> None:
    make_agent(services, "typist", {kb: "read_write"}, tools=["typed"])
    call = DialectCall(services, caller_for(services, "typist"))
    failures: list[BaseException] = []

    def saver(n: int) -> None:
        try:
            for i in range(EACH):
                typed.save_memory(call, "relationship", f"friend number {n}-{i}", name=f"Friend {n}-{i}")
            typed.save_memory(call, "relationship", "everyone's friend", name="Shared Friend")
        except BaseException as exc:  # reported below
            failures.append(exc)

    _race([threading.Thread(target=saver, args=(n,)) for n in range(THREADS)])
    assert failures == []
    user = files.read(services, ADMIN, kb, "USER.md").content
    for n in range(THREADS):
        for i in range(EACH):
            assert f"- **Friend {n}-{i}**: friend number {n}-{i}" in user
    assert user.count("Shared Friend") == 1  # four saves of one name: one record, updated in place
