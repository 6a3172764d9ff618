"""MCP fixtures: the SDK's own client in-memory, over real HTTP (uvicorn on a loopback port) and stdio."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import uvicorn

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services import Services
from tests.helpers import free_port


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Uvicorn:
    """The whole app (create_app) served by a real uvicorn in a thread, on a free loopback port."""

    def __init__(
        self,
        settings: Settings,
        services: Services,
        extra_tools: Sequence[Callable[..., Any]] = (),
        port: int | None = None,
    ) -> None:
        port = port or free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(
            create_app(settings, services, mcp_extra_tools=extra_tools),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def start(self) -> _Uvicorn:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def http_url(settings: Settings, services: Services) -> Iterator[str]:
    """Base URL of the app served over real HTTP; shares `services` with the test."""
    server = _Uvicorn(settings, services).start()
    yield server.url
    server.stop()
