"""People in both control stores: unique names and emails (in any case), roles, the password hash,
personal tokens (hash only, rotation), and sessions that say whose they are."""

from __future__ import annotations

import time
from pathlib import Path

from kbserver.control import ControlStore, SqliteControlStore, hash_token
from kbserver.core.model import Caller
from tests.control.conftest import OpenStore


def test_people_are_unique_by_name_and_by_email_in_any_case(
    store: ControlStore, open_store: OpenStore
) -> None:
    assert store.add_person("ann", "Ann@Example.org", "reviewer", ("notes", "docs"), "$argon2id$x")
    assert not store.add_person("ann", "other@example.org", "viewer", (), None)  # name taken
    assert not store.add_person("ann2", "ann@EXAMPLE.org", "viewer", (), None)  # email taken, other case
    assert store.add_person("bob", "bob@example.org", "owner", (), None)
    other = open_store()  # another node sees them at once
    ann = other.person("ann")
    assert ann is not None
    assert (ann.email, ann.role, ann.reviews, ann.password_hash, ann.has_token) == (
        "Ann@Example.org",
        "reviewer",
        ("notes", "docs"),
        "$argon2id$x",
        False,
    )
    assert "argon2" not in repr(ann)  # the hash stays out of logs and tracebacks
    assert other.person_by_email("ANN@example.ORG") == ann
    assert other.person_by_email(" ann@example.org ") == ann
    assert other.person_by_email("nobody@example.org") is None and other.person("nobody") is None
    assert [p.name for p in other.people()] == ["ann", "bob"]
    assert store.integrity_errors() == []


def test_personal_tokens_rotate_and_only_their_hash_is_kept(store: ControlStore) -> None:
    assert store.add_person("ann", "ann@example.org", "viewer", (), None)
    assert store.person_by_token("first-token") is None
    assert store.set_person_token("ann", "first-token")
    found = store.person_by_token("first-token")
    assert found is not None and found.name == "ann" and found.has_token
    assert store.set_person_token("ann", "second-token")
    assert store.person_by_token("first-token") is None  # the previous token stops working
    assert store.person_by_token("second-token").name == "ann"  # type: ignore[union-attr]
    assert not store.set_person_token("nobody", "x")
    assert store.agent_by_token("second-token") is None  # a person's token is no agent's


def test_sqlite_keeps_only_the_hash_of_a_personal_token(tmp_path: Path) -> None:
    db = SqliteControlStore(tmp_path / "control.db")
    db.add_person("ann", "ann@example.org", "viewer", (), None)
    db.set_person_token("ann", "the-personal-token-secret")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("control.db*"))
    assert b"the-personal-token-secret" not in raw
    assert hash_token("the-personal-token-secret").encode() in raw
    db.close()


def test_role_and_password_change_and_delete(store: ControlStore) -> None:
    assert store.add_person("ann", "ann@example.org", "viewer", (), None)
    assert store.set_person_role("ann", "reviewer", ("notes",))
    assert store.set_person_password("ann", "$argon2id$new")
    ann = store.person("ann")
    assert ann is not None
    assert (ann.role, ann.reviews, ann.password_hash) == ("reviewer", ("notes",), "$argon2id$new")
    assert not store.set_person_role("nobody", "owner", ()) and not store.set_person_password("nobody", None)
    assert store.delete_person("ann") and store.person("ann") is None and not store.delete_person("ann")
    assert store.add_person("ann2", "ann@example.org", "viewer", (), None)  # the email is free again


def test_sessions_say_whose_they_are_and_end_with_their_person(
    store: ControlStore, open_store: OpenStore
) -> None:
    other = open_store()
    now = time.time()
    store.add_person("ann", "ann@example.org", "viewer", (), None)
    store.add_session("admin-sid", now + 60)  # the admin token's session
    store.add_session("ann-sid", now + 60, person="ann")
    store.add_session("ann-sid-2", now + 60, person="ann")  # another browser
    admin, ann = other.session("admin-sid", now), other.session("ann-sid", now)
    assert admin is not None and admin.person is None
    assert ann is not None and ann.person == "ann"
    assert other.session("ann-sid", now + 61) is None and other.session("unknown", now) is None
    assert other.delete_person("ann")  # deleting the person signs them out everywhere
    assert store.session("ann-sid", now) is None and store.session("ann-sid-2", now) is None
    assert store.session_alive("admin-sid", now)


def test_caller_of_a_person_names_the_person() -> None:
    owner = Caller(name="bob", is_admin=True, person="bob", role="owner")
    reviewer = Caller(name="ann", person="ann", role="reviewer", reviews=frozenset({"notes"}))
    viewer = Caller(name="vic", person="vic", role="viewer")
    assert (owner.actor, reviewer.actor, viewer.actor) == ("person:bob", "person:ann", "person:vic")
    assert Caller(name="admin", is_admin=True).actor == "admin"
    assert Caller(name="bot").actor == "agent:bot" and not Caller(name="bot").is_person
    assert owner.may_review("any") and reviewer.may_review("notes") and not reviewer.may_review("docs")
    assert not viewer.may_review("notes") and not Caller(name="bot").may_review("notes")
