"""Progress.wait leaves nothing registered, however it ends: covered, timed out or cancelled."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kbserver.services import Services
from kbserver.services.following.progress import Progress

pytestmark = pytest.mark.anyio


def _progress(services: Services) -> Progress:
    """A real Progress over the KB's repository with one sink that covers nothing yet."""
    return Progress(services.repos, ["slow"], lambda sink, slug: None)


async def _registered(progress: Progress, slug: str, count: int) -> None:
    for _ in range(2000):  # bounded: ~20 s at most
        if progress.waiting(slug) == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{progress.waiting(slug)} waiters on {slug}, expected {count}")


@pytest.mark.parametrize("settle", [0.0, 0.3])  # cancelled during the check, or while it waits
async def test_a_cancelled_wait_is_unregistered(services: Services, kb: str, settle: float) -> None:
    progress = _progress(services)
    head = services.repos.repo(kb).head()
    assert head is not None
    waits = [asyncio.create_task(progress.wait(kb, head, timeout=600)) for _ in range(5)]
    await _registered(progress, kb, 5)
    await asyncio.sleep(settle)
    for task in waits:
        task.cancel()
    assert progress.waited()
    for task in waits:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert progress.waiting(kb) == 0
    assert not progress.waited()  # a standby follower reads the feed slowly again


async def test_waits_that_end_are_unregistered(services: Services, kb: str) -> None:
    progress = _progress(services)
    head = services.repos.repo(kb).head()
    assert head is not None
    assert await progress.wait(kb, head, timeout=0.05) is False  # timed out
    assert progress.waiting(kb) == 0
    assert not progress.waited()
    covered = asyncio.create_task(progress.wait(kb, head, timeout=600))
    await _registered(progress, kb, 1)
    assert progress.waited()
    progress.record("slow", kb, head)
    assert await asyncio.wait_for(covered, 60) is True
    assert progress.waiting(kb) == 0 and not progress.waited()
    ended: list[bool] = []
    later = "f" * 40  # a version the sink covers only once recorded below
    blocked = threading.Thread(target=lambda: ended.append(progress.wait_blocking(kb, later, 600)))
    blocked.start()
    for _ in range(2000):  # bounded: ~20 s at most
        if progress.waited():
            break
        await asyncio.sleep(0.01)
    assert progress.waited() and not ended  # a blocking wait counts too
    progress.record("slow", kb, later)
    blocked.join(timeout=60)
    assert ended == [True] and not progress.waited()


async def test_a_wait_asks_once_for_each_sink_behind_and_a_lost_ask_only_logs(
    services: Services, kb: str, caplog: pytest.LogCaptureFixture
) -> None:
    head = services.repos.repo(kb).head()
    assert head is not None
    progress = Progress(
        services.repos, ["index", "slow"], lambda sink, slug: head if sink == "index" else None
    )
    asked: list[tuple[str, str, str]] = []

    def ask(sink: str, slug: str, version: str) -> None:
        asked.append((sink, slug, version))
        raise OSError(28, "No space left on device")  # the feed line could not be written

    progress.on_wait = ask
    assert progress.wait_blocking(kb, head, timeout=0.3) is False  # a timeout, not the OSError
    assert await progress.wait(kb, head, timeout=0.3) is False
    assert asked == [("slow", kb, head), ("slow", kb, head)]  # once a wait, only the sink that is behind
    assert "No space left on device" in caplog.text
    asked.clear()
    progress.record("slow", kb, head)
    assert progress.wait_blocking(kb, head, timeout=60) and await progress.wait(kb, head, timeout=60)
    assert asked == []  # covered at the first look: nobody is hurried
