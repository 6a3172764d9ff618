"""Connections as services, on both control stores: what a person may grant on the consent page,
and that a refused consent makes nothing."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from kbserver.config import Settings
from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.services import Services, kbs
from kbserver.services.access import agents, connections
from kbserver.services.access.auth import ADMIN

CALLBACK = "http://127.0.0.1:9/cb"
VIEWER = Caller(name="vera", person="vera", role="viewer")
REVIEWER = Caller(name="rui", person="rui", role="reviewer", reviews=frozenset({"notes"}))


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


@pytest.fixture
def pending(services: Services) -> connections.Pending:
    kbs.create(services, ADMIN, "notes", "Notes")
    kbs.create(services, ADMIN, "other", "Other")
    connections.register(services, {"client_id": "c1", "client_name": "Chat", "redirect_uris": [CALLBACK]})
    return connections.Pending("c1", CALLBACK, True, "challenge", "st", "http://h/mcp", (), time.time() + 60)


def test_what_each_person_may_grant() -> None:
    assert connections.grantable(ADMIN, "notes") == ("read", "read_write", "read_write_ask")
    assert connections.grantable(VIEWER, "notes") == ("read",)
    assert connections.grantable(REVIEWER, "notes") == ("read", "read_write", "read_write_ask")
    assert connections.grantable(REVIEWER, "other") == ("read",)
    assert connections.grantable(Caller(name="bob"), "notes") == ()  # an agent grants nothing


def test_a_viewer_granting_write_makes_nothing(services: Services, pending: connections.Pending) -> None:
    for perm in ("read_write", "read_write_ask", "admin"):
        with pytest.raises(InvalidRequest):
            connections.allow(services, VIEWER, pending, "http://h", None, "vera-bot", {"notes": perm})
    assert services.control.agent("vera-bot") is None and services.control.grants() == []
    url = connections.allow(services, VIEWER, pending, "http://h", None, "vera-bot", {"notes": "read"})
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(CALLBACK + "?") and query["iss"] == ["http://h"] and query["state"] == ["st"]
    assert services.control.agent("vera-bot").links == {"notes": "read"}  # type: ignore[union-attr]
    (grant,) = services.control.grants()
    assert (grant.person, grant.agent, grant.client_name) == ("vera", "vera-bot", "Chat")


def test_a_reviewer_grants_write_only_on_their_kbs(services: Services, pending: connections.Pending) -> None:
    with pytest.raises(InvalidRequest):
        connections.allow(services, REVIEWER, pending, "http://h", None, "rui-bot", {"other": "read_write"})
    connections.allow(
        services, REVIEWER, pending, "http://h", None, "rui-bot", {"notes": "read_write", "other": "read"}
    )
    assert services.control.agent("rui-bot").links == {"notes": "read_write", "other": "read"}  # type: ignore[union-attr]


def test_an_existing_agent_is_chosen_only_within_what_the_person_may_grant(
    services: Services, pending: connections.Pending
) -> None:
    agents.create(services, ADMIN, "writer")
    agents.link(services, ADMIN, "writer", "notes", "read_write")
    with pytest.raises(InvalidRequest):
        connections.allow(services, VIEWER, pending, "http://h", "writer", "", {})
    assert services.control.grants() == []
    connections.allow(services, ADMIN, pending, "http://h", "writer", "", {})
    assert [g.agent for g in services.control.grants()] == ["writer"]


def test_an_unregistered_redirect_or_an_altered_request_is_refused(
    services: Services, pending: connections.Pending
) -> None:
    key = connections.request_key("k")
    blob = connections.start(key, pending)
    assert connections.pending(key, blob) == pending
    for bad in (blob[:-1] + ("0" if blob[-1] != "0" else "1"), "x." + blob.split(".")[1], "", "."):
        with pytest.raises(InvalidRequest):
            connections.pending(key, bad)
    with pytest.raises(InvalidRequest):
        connections.pending(connections.request_key("other"), blob)
    moved = connections.Pending(**{**pending.__dict__, "redirect_uri": "https://evil.example/cb"})
    with pytest.raises(InvalidRequest):
        connections.allow(services, ADMIN, moved, "http://h", None, "x-bot", {})
    expired = connections.Pending(**{**pending.__dict__, "expires": time.time() - 1})
    with pytest.raises(InvalidRequest):
        connections.pending(key, connections.start(key, expired))


def test_the_default_agent_name_is_free(services: Services, pending: connections.Pending) -> None:
    assert connections.default_agent(services, "Claude", ADMIN) == "claude-admin"
    agents.create(services, ADMIN, "claude-admin")
    assert connections.default_agent(services, "Claude", ADMIN) == "claude-admin-2"
    assert connections.default_agent(services, "ChatGPT «Pro»", VIEWER) == "chatgpt-pro-vera"
