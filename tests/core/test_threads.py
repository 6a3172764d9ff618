"""One async boundary: blocking calls from the event loop run on anyio's pool under one limiter, sized
from the `threads` setting, the same limiter Starlette and the MCP SDK use."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from starlette.testclient import TestClient

import kbserver
from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.core import threads
from kbserver.core.errors import InvalidRequest


def test_run_keeps_to_the_limiter_and_leaves_the_loop_thread() -> None:
    seen: list[int] = []
    running = 0
    peak = 0
    lock = threading.Lock()

    def blocking(n: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        seen.append(threading.get_ident())
        return n * 2

    async def go() -> list[int]:
        threads.size_limiter(3)
        assert anyio.to_thread.current_default_thread_limiter().total_tokens == 3
        loop_thread = threading.get_ident()
        results: list[int] = []

        async def one(n: int) -> None:
            results.append(await threads.run(blocking, n))

        async with anyio.create_task_group() as tg:
            for n in range(9):
                tg.start_soon(one, n)
        assert loop_thread not in seen
        return sorted(results)

    assert anyio.run(go) == [n * 2 for n in range(9)]
    assert 1 <= peak <= 3


def test_the_server_sizes_its_one_limiter_from_the_setting(tmp_path: Path) -> None:
    settings = Settings(
        data=tmp_path / "data", admin_token="t" * 32, sample=False, embedder="none", threads=7
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        total = client.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens)
    assert total == 7


@pytest.mark.parametrize("value", ["0", "-3", "many", "1001"])
def test_a_bad_threads_setting_is_refused_naming_it(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KBSERVER_THREADS", value)
    with pytest.raises(InvalidRequest, match="KBSERVER_THREADS"):
        Settings.from_env(data=tmp_path)


def test_nothing_uses_a_second_pool_beside_anyios() -> None:
    root = Path(kbserver.__file__).parent
    offenders = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"asyncio\.to_thread\(|run_in_executor\(", line)
    ]
    assert offenders == []
