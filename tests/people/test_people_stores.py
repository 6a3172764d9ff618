"""People on both control stores (SQLite and PostgreSQL), through the services: a personal token,
a session that names its person and follows their role, and the login limiter's two keys."""

from __future__ import annotations

import time

import pytest

from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access import admin_sessions, people
from kbserver.services.access.auth import ADMIN, authenticate
from tests.helpers import ADMIN_TOKEN


@pytest.fixture
def settings(settings_on_both_stores: Settings) -> Settings:
    return settings_on_both_stores


def test_a_personal_token_and_a_session_follow_the_person(services: Services) -> None:
    kbs.create(services, ADMIN, "notes", "")
    people.create(services, ADMIN, "ann", "ann@example.org", "viewer", None, "a long password")
    _, token = people.rotate(services, ADMIN, "ann")
    who = authenticate(services, token, ADMIN_TOKEN, None, True)
    assert (who.actor, who.role, who.is_admin) == ("person:ann", "viewer", False)
    sid = admin_sessions.start(services, time.time() + 60, "ann")
    assert admin_sessions.caller_of(services, sid, time.time()).role == "viewer"  # type: ignore[union-attr]
    services.control.set_person_role("ann", "reviewer", ["notes"])  # a new role holds at once
    now = admin_sessions.caller_of(services, sid, time.time())
    assert now is not None and now.may_review("notes") and not now.may_review("other")
    admin = admin_sessions.caller_of(services, admin_sessions.start(services, time.time() + 60), time.time())
    assert admin is ADMIN
    people.delete(services, ADMIN, "ann")
    assert admin_sessions.caller_of(services, sid, time.time()) is None  # signed out everywhere


def test_the_limiter_locks_an_account_only_from_the_address_that_failed(services: Services) -> None:
    for _ in range(3):
        admin_sessions.login_failed(services, "10.0.0.66", 900, "Ann@example.org")
    blocked = admin_sessions.login_blocked
    assert blocked(services, "10.0.0.66", "ann@EXAMPLE.org", 900, per_address=20, per_account=3)
    assert not blocked(services, "10.0.0.7", "ann@example.org", 900, per_address=20, per_account=3)
    assert not blocked(services, "10.0.0.66", "bob@example.org", 900, per_address=20, per_account=3)
    assert blocked(services, "10.0.0.66", "bob@example.org", 900, per_address=3, per_account=3)
    admin_sessions.login_succeeded(services, "10.0.0.66", "ann@example.org")
    assert not blocked(services, "10.0.0.66", "ann@example.org", 900, per_address=20, per_account=3)
    assert admin_sessions.login_failures(services, "10.0.0.66", 900) == 3  # the address still counts
