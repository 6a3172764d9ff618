"""Bounded work on the git edge: at most `max_processes` git upload-pack processes at once."""

from __future__ import annotations

import base64
import shutil

import anyio
import pytest
from starlette.types import Message

from kbserver.gitweb import GitEdge
from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs C git on the PATH")


def _scope(kb: str) -> dict[str, object]:
    basic = base64.b64encode(f"kb:{ADMIN_TOKEN}".encode())
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"/{kb}.git/info/refs",
        "raw_path": f"/{kb}.git/info/refs".encode(),
        "root_path": "",
        "query_string": b"service=git-upload-pack",
        "headers": [(b"authorization", b"Basic " + basic)],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }


async def _receive() -> Message:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def test_a_clone_over_the_limit_waits_then_gets_503(services: Services, kb: str) -> None:
    edge = GitEdge(services, ADMIN_TOKEN, git=GIT, max_processes=1, queue_seconds=0.5)
    started = anyio.Event()
    statuses: list[int] = []
    answers: list[tuple[int, dict[bytes, bytes]]] = []

    async def main() -> None:
        async def stuck_send(message: Message) -> None:  # a client that stops reading
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
                started.set()
                await anyio.sleep_forever()

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answers.append((message["status"], dict(message["headers"])))

        async with anyio.create_task_group() as tg:
            tg.start_soon(edge, _scope(kb), _receive, stuck_send)
            with anyio.fail_after(60):
                await started.wait()
            await edge(_scope(kb), _receive, send)  # the one slot is taken
            tg.cancel_scope.cancel()  # the stuck client goes away: its git is killed
        await edge(_scope(kb), _receive, send)  # the slot is free again

    anyio.run(main)
    assert statuses == [200]
    (refused, headers), (served, _) = answers
    assert refused == 503 and headers[b"retry-after"] == b"5"
    assert served == 200
