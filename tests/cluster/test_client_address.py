"""HAProxy in front (deploy/haproxy.cfg, `option forwardfor`) of a node that trusts it: the login
limiter counts each client's own address, so one address's failed logins lock only that address,
and a client cannot escape by claiming another address in its own X-Forwarded-For."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster.harness import Balancer, Node
from tests.helpers import ADMIN_TOKEN
from tests.web.session import csrf_of

pytestmark = pytest.mark.slow

ENV = {
    "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN,
    "KBSERVER_SAMPLE": "false",
    "KBSERVER_TRUSTED_PROXIES": "127.0.0.1",  # HAProxy reaches the node from 127.0.0.1
}
FAILURES = 21  # past the limiter's cap of 20 within its window


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[Balancer]:
    node = Node("node", tmp_path / "data", tmp_path, ENV).launch().wait_healthy()
    lb = Balancer(tmp_path, [node, node, node])  # deploy/haproxy.cfg names three: one node thrice
    try:
        yield lb.start()
    finally:
        lb.stop()
        node.stop()


def _client(lb: Balancer, source: str) -> httpx.Client:
    """A client whose connections to HAProxy come from loopback address `source` (127.0.0.x)."""
    return httpx.Client(base_url=lb.url, timeout=120, transport=httpx.HTTPTransport(local_address=source))


def _login(client: httpx.Client, token: str, claim: str | None = None) -> httpx.Response:
    csrf = csrf_of(client.get("/admin/login").text)
    headers = {"X-Forwarded-For": claim} if claim else {}
    return client.post("/admin/login", data={"csrf": csrf, "token": token}, headers=headers)


def test_one_address_failures_lock_only_that_address(balancer: Balancer) -> None:
    statuses: list[int] = []
    with _client(balancer, "127.0.0.2") as guesser:
        csrf_of(guesser.get("/admin/login").text)

        def guess() -> None:
            statuses.append(_login(guesser, "guess", claim=f"10.1.0.{len(statuses) % 200}").status_code)

        threads = [threading.Thread(target=guess) for _ in range(FAILURES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert statuses == [401] * FAILURES
        # locked, even with the right token, and whatever address it claims to be
        for claim in (None, "127.0.0.3"):
            r = _login(guesser, ADMIN_TOKEN, claim)
            assert r.status_code == 401 and "too many attempts" in r.text, claim
    with _client(balancer, "127.0.0.3") as neighbour:  # another address behind the same proxy
        r = _login(neighbour, ADMIN_TOKEN)
        assert r.status_code == 303, r.text
