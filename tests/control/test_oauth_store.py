"""The OAuth tables on both control stores: codes and refresh tokens work once, a second use revokes
the connection, only hashes are stored, and a connection made through one connection (node) is
seen by another at once."""

from __future__ import annotations

import sqlite3
import threading
import time

from kbserver.control import ControlStore, GrantRow, PostgresControlStore
from tests.control.conftest import OpenStore


def _grant(gid: str = "conn_1", agent: str = "bob") -> GrantRow:
    return GrantRow(gid, "client-1", "Chat", agent, "admin", "http://h/mcp", ("a", "b"), time.time())


def _setup(store: ControlStore) -> None:
    assert store.add_agent("bob", "static", None, ("context",), False)
    store.link("bob", "kb", "read_write")
    store.add_grant(_grant(), "the-code", ("http://127.0.0.1/cb", True), "challenge", time.time() + 300)


def _dump(store: ControlStore) -> str:
    """Every value of the OAuth tables, as text (to look for secrets in clear)."""
    tables = ("oauth_clients", "oauth_grants", "oauth_codes", "oauth_tokens")
    if isinstance(store, PostgresControlStore):
        with store.transaction() as db:
            return repr([db.execute(f"SELECT * FROM {t}").fetchall() for t in tables])
    db = sqlite3.connect(store.path)  # type: ignore[attr-defined]
    try:
        return repr([db.execute(f"SELECT * FROM {t}").fetchall() for t in tables])
    finally:
        db.close()


def test_a_code_works_once_and_its_second_use_revokes_the_connection(
    store: ControlStore, open_store: OpenStore
) -> None:
    _setup(store)
    code = store.oauth_code("the-code")
    assert code is not None and code.grant.agent == "bob" and code.grant.scopes == ("a", "b")
    assert (code.redirect_uri, code.redirect_explicit, code.used) == ("http://127.0.0.1/cb", True, None)
    now = time.time()
    assert store.exchange_code(
        "the-code", now, [("kbo_a1", "access", now + 60), ("kbr_r1", "refresh", now + 600)]
    )
    found = open_store().agent_by_access_token("kbo_a1", now)  # another node sees it at once
    assert found is not None and found[0].name == "bob" and found[0].links == {"kb": "read_write"}
    assert found[1].id == "conn_1" and found[1].resource == "http://h/mcp"
    assert found[0].id and found[0].id == store.agent("bob").id  # type: ignore[union-attr]  # the agent's, not the grant's
    assert not store.exchange_code("the-code", now, [("kbo_a2", "access", now + 60)])  # used: refused
    assert store.agent_by_access_token("kbo_a1", now) is None  # ... and the connection revoked
    assert store.grants() == []
    assert not store.exchange_code("no-such-code", now, [])


def test_an_expired_code_or_token_is_refused(store: ControlStore) -> None:
    _setup(store)
    later = time.time() + 400
    assert not store.exchange_code("the-code", later, [("kbo_x", "access", later + 60)])
    assert store.agent_by_access_token("kbo_x", later) is None


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_family(store: ControlStore) -> None:
    _setup(store)
    now = time.time()
    assert store.exchange_code(
        "the-code", now, [("kbo_a1", "access", now + 60), ("kbr_r1", "refresh", now + 600)]
    )
    assert store.rotate_refresh(
        "kbr_r1", now, [("kbo_a2", "access", now + 60), ("kbr_r2", "refresh", now + 600)]
    )
    assert store.agent_by_access_token("kbo_a1", now) is None  # the old access token went with it
    assert store.agent_by_access_token("kbo_a2", now) is not None
    refreshed = store.oauth_refresh("kbr_r1")
    assert refreshed is not None and refreshed[2] is not None  # marked used, kept to detect reuse
    assert not store.rotate_refresh("kbr_r1", now, [("kbo_a3", "access", now + 60)])  # reused
    assert store.agent_by_access_token("kbo_a2", now) is None  # the whole family is revoked
    assert not store.rotate_refresh("kbr_r2", now, [("kbo_a4", "access", now + 60)])
    assert store.grant("conn_1").revoked is not None  # type: ignore[union-attr]


def test_only_one_of_two_racing_refreshes_wins(store: ControlStore, open_store: OpenStore) -> None:
    _setup(store)
    now = time.time()
    assert store.exchange_code("the-code", now, [("kbr_r1", "refresh", now + 600)])
    others = [open_store() for _ in range(4)]
    wins: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda s=s, i=i: wins.append(
                s.rotate_refresh("kbr_r1", now, [(f"kbr_n{i}", "refresh", now + 600)])
            )
        )
        for i, s in enumerate(others)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(wins) == [False, False, False, True]
    assert store.grant("conn_1").revoked is not None  # type: ignore[union-attr]  # the losers' reuse


def test_deleting_the_agent_or_revoking_ends_the_connection(store: ControlStore) -> None:
    _setup(store)
    now = time.time()
    assert store.exchange_code("the-code", now, [("kbo_a1", "access", now + 60)])
    assert [g.id for g in store.grants()] == ["conn_1"]
    assert store.delete_agent("bob")
    assert store.agent_by_access_token("kbo_a1", now) is None
    assert store.add_agent("bob", "static2", None, ("context",), False)  # the same name again
    assert store.agent_by_access_token("kbo_a1", now) is None  # never inherits the connection
    store.add_grant(_grant("conn_2"), "code-2", ("http://127.0.0.1/cb", True), "c", now + 300)
    assert store.exchange_code("code-2", now, [("kbo_b1", "access", now + 60)])
    assert store.revoke_grant("conn_2", now) and not store.revoke_grant("conn_2", now)
    assert store.agent_by_access_token("kbo_b1", now) is None


def test_unlinking_a_kb_counts_at_the_next_lookup(store: ControlStore) -> None:
    _setup(store)
    now = time.time()
    assert store.exchange_code("the-code", now, [("kbo_a1", "access", now + 60)])
    assert store.unlink("bob", "kb")
    found = store.agent_by_access_token("kbo_a1", now)
    assert found is not None and found[0].links == {}


def test_clients_and_only_hashes_are_stored(store: ControlStore) -> None:
    _setup(store)
    now = time.time()
    store.put_oauth_client(
        "client-1", {"client_id": "client-1", "redirect_uris": ["http://127.0.0.1/cb"]}, False, now
    )
    store.put_oauth_client("https://app.example/c.json", {"client_name": "A"}, True, now)
    store.put_oauth_client("https://app.example/c.json", {"client_name": "B"}, True, now + 1)  # refetched
    doc = store.oauth_client("https://app.example/c.json")
    assert (
        doc is not None and doc.metadata_url and doc.info == {"client_name": "B"} and doc.fetched == now + 1
    )
    assert store.oauth_client("client-1").metadata_url is False  # type: ignore[union-attr]
    assert store.oauth_client("nobody") is None
    assert store.exchange_code(
        "the-code",
        now,
        [("kbo_secret_access", "access", now + 60), ("kbr_secret_refresh", "refresh", now + 600)],
    )
    dumped = _dump(store)
    assert (
        "the-code" not in dumped and "kbo_secret_access" not in dumped and "kbr_secret_refresh" not in dumped
    )
    touched = time.time() + 5
    store.touch_grant("conn_1", touched)
    assert store.grant("conn_1").last_used == touched  # type: ignore[union-attr]
