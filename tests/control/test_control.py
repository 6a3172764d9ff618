"""ControlStore: token hashes only, links, runs cleanup, proposal compare-and-set, idempotency keys."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kbserver.control import ControlStore, PostgresControlStore, ProposalRow, RunRow, hash_token
from kbserver.control.migrations import MIGRATIONS
from kbserver.control.pg_migrations import PG_MIGRATIONS
from kbserver.control.sql import RUN_KEPT_SECONDS
from tests.control.conftest import OpenStore


def _proposal(pid: str = "p1") -> ProposalRow:
    return ProposalRow(pid, "kb", "bob", "run", time.time(), "pending", None, "c" * 40, {"files": []})


def test_agents_tokens_and_links(store: ControlStore) -> None:
    assert store.add_agent("bob", "secret-token", None, ("context",), False)
    assert not store.add_agent("bob", "other", None, ("context",), False)
    assert store.agent_by_token("secret-token").name == "bob"  # type: ignore[union-attr]
    assert store.agent_by_token("wrong") is None
    store.link("bob", "kb", "read")
    store.link("bob", "kb", "read_write")  # a second link replaces the first
    assert store.agent("bob").links == {"kb": "read_write"}  # type: ignore[union-attr]
    assert store.unlink("bob", "kb") and not store.unlink("bob", "kb")
    assert store.set_token("bob", "new-token") and store.agent_by_token("secret-token") is None
    assert store.delete_agent("bob") and store.agent("bob") is None and not store.delete_agent("bob")
    assert store.integrity_errors() == []


def test_agents_list_in_name_order_with_their_links(store: ControlStore, open_store: OpenStore) -> None:
    assert store.add_agent("zed", "t-zed", None, ("context", "memory"), True)
    assert store.add_agent("amy", "t-amy", "zed", (), False)
    assert not store.add_agent("amy2", "t-amy", None, (), False)  # a token is one agent's only
    store.link("zed", "b-kb", "read")
    store.link("zed", "a-kb", "read_write_ask")
    listed = open_store().agents()  # another connection sees them at once
    assert [a.name for a in listed] == ["amy", "zed"]
    amy, zed = listed
    assert (amy.parent, amy.tools, amy.auto_record, amy.links) == ("zed", (), False, {})
    assert (zed.tools, zed.auto_record) == (("context", "memory"), True)
    assert zed.links == {"a-kb": "read_write_ask", "b-kb": "read"}
    assert store.delete_agent("zed") and [a.name for a in store.agents()] == ["amy"]
    assert store.integrity_errors() == []  # its links went with it


def test_sqlite_keeps_only_token_hashes(tmp_path: Path) -> None:
    from kbserver.control import SqliteControlStore

    db = SqliteControlStore(tmp_path / "control.db")
    db.add_agent("bob", "secret-token", None, ("context",), False)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("control.db*"))
    assert b"secret-token" not in raw and hash_token("secret-token").encode() in raw
    db.close()


def test_kbs_and_limits(store: ControlStore) -> None:
    assert store.add_kb("notes", "Team notes") and not store.add_kb("notes", "again")
    store.set_limits("notes", {"max_files": 3})
    row = store.kb("notes")
    assert row is not None and (row.description, row.limits) == ("Team notes", {"max_files": 3})
    assert [r.slug for r in store.kbs()] == ["notes"] and store.kb("other") is None


def test_expired_runs_are_removed_without_cron(store: ControlStore) -> None:
    now = time.time()
    gone = now - RUN_KEPT_SECONDS - 1
    store.add_run(RunRow("old", "bob", gone - 100, gone, False, {"kb": "a" * 40}))
    store.add_run(RunRow("recent", "bob", now - 100, now - 1, False, {"kb": "a" * 40}))
    store.add_run(RunRow("new", "bob", now, now + 100, True, {"kb": "b" * 40}))
    assert store.run("old") is None  # adding a run sweeps the long expired ones
    recent = store.run("recent")  # kept a while, so that its reads can say it expired
    assert recent is not None and recent.ended is None
    assert store.run("new") == RunRow("new", "bob", now, now + 100, True, {"kb": "b" * 40})


def test_a_run_ends_once(store: ControlStore) -> None:
    now = time.time()
    store.add_run(RunRow("r1", "bob", now, now + 100, False, {"kb": "a" * 40}))
    ended = store.end_run("r1", now + 5)
    assert ended is not None and ended.ended == now + 5 and ended.mounts == {"kb": "a" * 40}
    again = store.end_run("r1", now + 9)
    assert again is not None and again.ended == now + 5  # the first end stands
    assert store.run("r1") == ended and store.end_run("nope", now) is None


def test_a_run_keeps_its_label(store: ControlStore, open_store: OpenStore) -> None:
    now = time.time()
    store.add_run(RunRow("r2", "bob", now, now + 100, True, {}, label="triage 问题"))
    store.add_run(RunRow("r3", "bob", now, now + 100, True, {}))
    assert open_store().run("r2").label == "triage 问题"  # type: ignore[union-attr]
    assert open_store().run("r3").label is None  # type: ignore[union-attr]


def test_schema_version_is_the_last_migration(store: ControlStore, open_store: OpenStore) -> None:
    latest = (PG_MIGRATIONS if isinstance(store, PostgresControlStore) else MIGRATIONS)[-1][0]
    assert store.schema_version() == latest
    assert open_store().schema_version() == latest  # opening again migrates nothing


def test_proposal_moves_only_from_the_state_it_expects(store: ControlStore) -> None:
    store.add_proposal(_proposal())
    assert not store.finish_proposal("kb", "p1", "v" * 40, 1)  # not claimed
    assert not store.release_proposal("kb", "p1", None, 1)
    first = store.claim_proposal("kb", "p1", "admin")
    assert first is not None and first >= 1
    claimed = store.proposal("kb", "p1")
    assert claimed is not None and claimed.status == "applying" and claimed.claimed is not None
    assert claimed.fence == first
    assert store.claim_proposal("kb", "p1", "admin") is None  # a second approval loses
    assert not store.reject_proposal("kb", "p1", "admin", "no")  # and so does a rejection
    assert store.release_proposal("kb", "p1", "stale: README.md changed", first)
    released = store.proposal("kb", "p1")
    assert released is not None and (released.status, released.reason) == (
        "pending",
        "stale: README.md changed",
    )
    second = store.claim_proposal("kb", "p1", "admin")
    assert second is not None and second > first
    assert store.finish_proposal("kb", "p1", "v" * 40, second)
    done = store.proposal("kb", "p1")
    assert done is not None and (done.status, done.version, done.decided_by) == (
        "approved",
        "v" * 40,
        "admin",
    )
    assert not store.reject_proposal("kb", "p1", "admin", None)
    assert [p.id for p in store.proposals("kb", "approved")] == ["p1"] and store.proposals(
        "kb", "pending"
    ) == []


def test_a_claim_taken_over_is_fenced_off(store: ControlStore) -> None:
    """The token of a claim that was released (settled) and claimed again no longer moves anything."""
    store.add_proposal(_proposal())
    old = store.claim_proposal("kb", "p1", "admin")
    assert old is not None and store.proposal_fence_current("kb", "p1", old)
    assert store.release_proposal("kb", "p1", "the approval was interrupted; approve again", old)
    assert not store.proposal_fence_current("kb", "p1", old)  # released: pending, not applying
    new = store.claim_proposal("kb", "p1", "admin")
    assert new is not None and new > old
    assert not store.proposal_fence_current("kb", "p1", old) and store.proposal_fence_current("kb", "p1", new)
    before = store.proposal("kb", "p1")
    assert not store.release_proposal("kb", "p1", "late failure", old)  # the old claim cannot free it
    assert not store.finish_proposal("kb", "p1", "v" * 40, old)  # nor record its own version
    assert store.proposal("kb", "p1") == before
    assert store.finish_proposal("kb", "p1", "w" * 40, new)
    assert not store.proposal_fence_current("kb", "p1", new)  # approved: no claim is current


def test_a_rejection_is_final(store: ControlStore) -> None:
    store.add_proposal(_proposal())
    assert store.reject_proposal("kb", "p1", "admin", "superseded")
    row = store.proposal("kb", "p1")
    assert row is not None and (row.status, row.reason, row.decided_by) == ("rejected", "superseded", "admin")
    assert store.claim_proposal("kb", "p1", "admin") is None
    assert not store.reject_proposal("kb", "p1", "x", None)


def test_one_decision_wins_among_racing_connections(open_store: OpenStore) -> None:
    open_store().add_proposal(_proposal())
    stores = [open_store() for _ in range(6)]  # separate connections
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def decide(n: int, s: ControlStore) -> None:
        if n % 2:
            won = s.claim_proposal("kb", "p1", "admin") is not None
        else:
            won = s.reject_proposal("kb", "p1", "admin", None)
        with lock:
            results.append(("claim" if n % 2 else "reject", won))

    threads = [threading.Thread(target=decide, args=(n, s)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    winners = [kind for kind, won in results if won]
    assert len(results) == 6 and len(winners) == 1
    row = open_store().proposal("kb", "p1")
    assert row is not None and row.status == ("applying" if winners == ["claim"] else "rejected")


def test_idempotency_keys(store: ControlStore) -> None:
    now = time.time()
    bob = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now, 86400, 600)
    assert isinstance(bob, int)
    held = store.reserve_key("agent:bob", "kb", "k1", "b" * 64, now, 86400, 600)
    assert not isinstance(held, int) and (held.body_sha256, held.result) == ("a" * 64, None)  # running
    # scoped per caller and KB
    eve = store.reserve_key("agent:eve", "kb", "k1", "a" * 64, now, 86400, 600)
    assert isinstance(eve, int) and eve != bob
    assert isinstance(store.reserve_key("agent:bob", "other", "k1", "a" * 64, now, 86400, 600), int)
    assert store.finish_key("agent:bob", "kb", "k1", 200, {"version": "v" * 40}, bob)
    store.release_key("agent:bob", "kb", "k1", bob)  # a finished key is kept
    done = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now, 86400, 600)
    assert not isinstance(done, int) and (done.status, done.result) == (200, {"version": "v" * 40})
    store.release_key("agent:eve", "kb", "k1", eve)  # a failed write frees its key
    eve = store.reserve_key("agent:eve", "kb", "k1", "c" * 64, now, 86400, 600)
    assert isinstance(eve, int)
    # a reservation left without a result by a dead process is taken over after a while (same body only)
    assert not isinstance(store.reserve_key("agent:eve", "kb", "k1", "d" * 64, now + 601, 86400, 600), int)
    taken = store.reserve_key("agent:eve", "kb", "k1", "c" * 64, now + 601, 86400, 600)
    assert isinstance(taken, int)
    assert not isinstance(store.reserve_key("agent:eve", "kb", "k1", "c" * 64, now + 602, 86400, 600), int)
    # a day later the key is free again
    assert isinstance(store.reserve_key("agent:bob", "kb", "k1", "d" * 64, now + 86401, 86400, 600), int)


def test_a_key_taken_over_is_fenced_off(store: ControlStore) -> None:
    """The write whose reservation was taken over can neither record its result nor free the key."""
    now = time.time()
    old = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now, 86400, 600)
    assert isinstance(old, int) and store.key_fence_current("agent:bob", "kb", "k1", old)
    new = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now + 601, 86400, 600)
    assert isinstance(new, int) and new > old
    assert not store.key_fence_current("agent:bob", "kb", "k1", old)
    assert store.key_fence_current("agent:bob", "kb", "k1", new)
    assert not store.finish_key("agent:bob", "kb", "k1", 200, {"version": "o" * 40}, old)
    store.release_key("agent:bob", "kb", "k1", old)  # changes nothing: the key is held by `new`
    assert store.key_fence_current("agent:bob", "kb", "k1", new)
    assert store.finish_key("agent:bob", "kb", "k1", 200, {"version": "n" * 40}, new)
    assert not store.key_fence_current("agent:bob", "kb", "k1", new)  # answered: no write may commit
    done = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now + 602, 86400, 600)
    assert not isinstance(done, int) and done.result == {"version": "n" * 40}
    # the tokens of a key outgrow those of its expired, deleted reservations
    again = store.reserve_key("agent:bob", "kb", "k1", "a" * 64, now + 601 + 86401, 86400, 600)
    assert isinstance(again, int) and again > new


def test_sqlite_upgrades_a_data_folder_from_before_migrations(tmp_path: Path) -> None:
    import sqlite3

    from kbserver.control import SqliteControlStore

    old = sqlite3.connect(tmp_path / "control.db")
    for statement in MIGRATIONS[0][1]:
        old.execute(statement)
    old.execute(
        "INSERT INTO proposals (id, slug, agent, created, status, ref_commit, request)"
        " VALUES ('p1', 'kb', 'bob', 1.0, 'pending', ?, '{\"files\": []}')",
        ("c" * 40,),
    )
    old.commit()
    old.close()
    store = SqliteControlStore(tmp_path / "control.db")
    assert store.schema_version() == MIGRATIONS[-1][0]
    assert store.claim_proposal("kb", "p1", "admin") == 1  # `applying` is allowed after the upgrade
    row = store.proposal("kb", "p1")
    assert row is not None and (row.agent, row.status) == ("bob", "applying")
    assert store.integrity_errors() == []
    store.close()


def test_the_review_marker_moves(store: ControlStore, open_store: OpenStore) -> None:
    assert store.reviewed("kb") is None
    store.set_reviewed("kb", "a" * 40, "admin")
    store.set_reviewed("kb", "b" * 40, "admin")  # a second review replaces the first
    assert store.reviewed("kb") == "b" * 40 and store.reviewed("other") is None
    assert open_store().reviewed("kb") == "b" * 40  # kept in the database


def test_versions_reviewed_one_by_one(store: ControlStore, open_store: OpenStore) -> None:
    assert store.reviewed_each("kb") == set()
    store.add_reviewed_each("kb", ["a" * 40, "b" * 40], "admin")
    store.add_reviewed_each("kb", ["b" * 40, "c" * 40], "admin")  # again: no error, no duplicate
    assert (
        store.reviewed_each("kb") == {"a" * 40, "b" * 40, "c" * 40} and store.reviewed_each("other") == set()
    )
    assert open_store().reviewed_each("kb") == {"a" * 40, "b" * 40, "c" * 40}  # kept in the database


def test_memory_retrievals_count_and_reinforce_importance(store: ControlStore, open_store: OpenStore) -> None:
    assert store.memory_access("kb", ["m1", "m2"]) == {}
    first = store.record_memory_access("kb", {"m1": 0.5}, 1000.0, 0.95)
    assert first["m1"].access_count == 1 and first["m1"].last_accessed == 1000.0
    assert abs(first["m1"].importance - (0.95 * 0.5 + 0.05)) < 1e-9 and first["m1"].base == 0.5
    again = open_store().record_memory_access(
        "kb", {"m1": 0.5, "m2": 0.2}, 2000.0, 0.95
    )  # another connection
    assert again["m1"].access_count == 2 and again["m1"].last_accessed == 2000.0
    assert abs(again["m1"].importance - (0.95 * (0.95 * 0.5 + 0.05) + 0.05)) < 1e-9
    assert again["m2"].access_count == 1 and abs(again["m2"].importance - 0.24) < 1e-9
    assert set(store.memory_access("kb", ["m1", "m2", "m3"])) == {"m1", "m2"}
    assert store.memory_access("other", ["m1"]) == {}  # per KB
    # the file's importance changed (a new importance, a revert): reinforcement starts from it again
    moved = store.record_memory_access("kb", {"m1": 0.1}, 3000.0, 0.95)
    assert moved["m1"].access_count == 3 and abs(moved["m1"].importance - (0.95 * 0.1 + 0.05)) < 1e-9
    store.set_memory_importance("kb", "m1", 0.8)
    store.set_memory_importance("kb", "m9", 0.3)  # never retrieved: no count, no time
    rows = store.memory_access("kb", ["m1", "m9"])
    assert (rows["m1"].importance, rows["m1"].base, rows["m1"].access_count) == (0.8, 0.8, 3)
    assert (rows["m9"].access_count, rows["m9"].last_accessed, rows["m9"].importance) == (0, None, 0.3)


def test_concurrent_retrievals_all_count(open_store: OpenStore) -> None:
    stores = [open_store() for _ in range(4)]

    def retrieve(s: ControlStore) -> None:
        for n in range(10):
            s.record_memory_access("kb", {"m1": 0.5}, float(n), 0.95)

    threads = [threading.Thread(target=retrieve, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    row = open_store().memory_access("kb", ["m1"])["m1"]
    expected = 0.5
    for _ in range(40):
        expected = 0.95 * expected + 0.05
    assert row.access_count == 40 and abs(row.importance - expected) < 1e-9


def test_admin_sessions_end_on_every_connection(store: ControlStore, open_store: OpenStore) -> None:
    other = open_store()  # another node
    now = time.time()
    store.add_session("sid-1", now + 60)
    store.add_session("sid-2", now + 60)
    assert other.session_alive("sid-1", now) and other.session_alive("sid-2", now)
    assert not other.session_alive("sid-1", now + 61)  # expired
    assert not other.session_alive("unknown", now)
    other.end_session("sid-1")  # a logout on the other node
    assert not store.session_alive("sid-1", now) and store.session_alive("sid-2", now)
    store.add_session("sid-3", now + 60)  # adding one drops the expired ones
    assert not store.session_alive("sid-1", now - 100)


def test_sessions_keep_only_hashes(tmp_path: Path) -> None:
    from kbserver.control import SqliteControlStore

    db = SqliteControlStore(tmp_path / "control.db")
    db.add_session("the-session-id-secret", time.time() + 60)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("control.db*"))
    assert b"the-session-id-secret" not in raw and hash_token("the-session-id-secret").encode() in raw
    db.close()


def test_login_failures_count_per_address_across_connections(
    store: ControlStore, open_store: OpenStore
) -> None:
    other = open_store()
    now = 1000.0
    assert [store.login_failed("10.0.0.1", now + n, 900) for n in range(3)] == [1, 2, 3]
    assert other.login_failed("10.0.0.1", now + 3, 900) == 4  # the count is shared
    assert (
        other.login_failures("10.0.0.1", now + 3, 900) == 4
        and store.login_failures("10.0.0.2", now, 900) == 0
    )
    assert store.login_failures("10.0.0.1", now + 901, 900) == 2  # 1000 and 1001 fell out of the window
    assert store.login_failed("10.0.0.2", now + 2000, 900) == 1  # and is dropped by the next failure
    assert other.login_failures("10.0.0.1", now, 900) == 0
    store.login_failed("10.0.0.3", now + 2000, 900)
    other.login_succeeded("10.0.0.3")
    assert store.login_failures("10.0.0.3", now + 2000, 900) == 0


def test_sqlite_close_closes_every_threads_connection(tmp_path: Path) -> None:
    import os

    from kbserver.control import SqliteControlStore

    def open_files() -> int:
        fds = os.listdir("/proc/self/fd")
        names = []
        for fd in fds:
            try:
                names.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
        return sum(1 for name in names if name.startswith(str(tmp_path / "control.db")))

    db = SqliteControlStore(tmp_path / "control.db")
    used, done = threading.Barrier(5), threading.Event()

    def worker() -> None:  # a worker thread that stays alive, as the server's pool threads do
        db.kbs()
        used.wait(timeout=60)
        done.wait(timeout=60)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    used.wait(timeout=60)
    assert open_files() >= 5  # this thread's connection and the four workers'
    db.close()
    try:
        assert open_files() == 0
    finally:
        done.set()
        for t in threads:
            t.join(timeout=60)


def test_ping_answers_while_the_store_is_open(store: ControlStore) -> None:
    store.ping()  # raises Unavailable when the store does not answer (tests/services/test_readiness.py)
    store.ping(timeout=0.5)
