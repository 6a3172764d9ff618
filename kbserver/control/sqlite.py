"""The SQLite ControlStore: one connection per thread, WAL, short BEGIN IMMEDIATE transactions."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from kbserver.control.migrations import migrate
from kbserver.control.rows import (
    AgentRow,
    IdempotencyRow,
    KBRow,
    MemoryAccessRow,
    ProposalRow,
    ProposalStatus,
    RunRow,
    access_row,
    hash_token,
    idempotency_row,
    kb_row,
    proposal_row,
    run_row,
)
from kbserver.core.model import Permission

__all__ = ["SqliteControlStore"]


class _Connection(sqlite3.Connection):
    """A connection that can be referenced weakly (sqlite3.Connection itself cannot)."""


class SqliteControlStore:
    """The control database in one SQLite file. Safe to share between threads and between processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # Every thread's connection, to close them all; weak, so a finished thread's goes with it.
        self._open: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._open_lock = threading.Lock()
        try:
            self._version = migrate(self._db())
        except BaseException:
            self.close()
            raise

    def schema_version(self) -> int:
        return self._version

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False, factory=_Connection
            )
            with self._open_lock:
                self._open.add(db)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection of every thread (a thread that goes on would open a new one)."""
        with self._open_lock:
            opened, self._open = list(self._open), weakref.WeakSet()
        for db in opened:
            db.close()
        self._local = threading.local()

    def ping(self, timeout: float = 2.0) -> None:
        self._db().execute("SELECT 1").fetchone()

    def integrity_errors(self) -> list[str]:
        rows = self._db().execute("PRAGMA integrity_check").fetchall()
        problems = [r[0] for r in rows if r[0] != "ok"]
        problems += [f"foreign key: {tuple(r)}" for r in self._db().execute("PRAGMA foreign_key_check")]
        return problems

    # -- KBs ----------------------------------------------------------------------------------------
    def add_kb(self, slug: str, description: str) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO kbs (slug, description, created) VALUES (?, ?, ?)",
                (slug, description, time.time()),
            )
            return cur.rowcount == 1

    def kb(self, slug: str) -> KBRow | None:
        row = self._db().execute("SELECT * FROM kbs WHERE slug = ?", (slug,)).fetchone()
        return kb_row(row) if row else None

    def kbs(self) -> list[KBRow]:
        return [kb_row(r) for r in self._db().execute("SELECT * FROM kbs ORDER BY slug")]

    def set_limits(self, slug: str, limits: dict[str, int]) -> None:
        with self._tx() as db:
            db.execute("UPDATE kbs SET limits = ? WHERE slug = ?", (json.dumps(limits), slug))

    # -- agents -------------------------------------------------------------------------------------
    def add_agent(
        self, name: str, token: str, parent: str | None, tools: tuple[str, ...], auto_record: bool
    ) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO agents (name, token_hash, parent, tools, auto_record, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (name, hash_token(token), parent, ",".join(tools), int(auto_record), time.time()),
            )
            return cur.rowcount == 1

    def set_token(self, name: str, token: str) -> bool:
        with self._tx() as db:
            cur = db.execute("UPDATE agents SET token_hash = ? WHERE name = ?", (hash_token(token), name))
            return cur.rowcount == 1

    def delete_agent(self, name: str) -> bool:
        with self._tx() as db:
            db.execute("DELETE FROM links WHERE agent = ?", (name,))
            return db.execute("DELETE FROM agents WHERE name = ?", (name,)).rowcount == 1

    def agent(self, name: str) -> AgentRow | None:
        row = self._db().execute("SELECT * FROM agents WHERE name = ?", (name,)).fetchone()
        return self._agent(row) if row else None

    def agent_by_token(self, token: str) -> AgentRow | None:
        row = self._db().execute("SELECT * FROM agents WHERE token_hash = ?", (hash_token(token),)).fetchone()
        return self._agent(row) if row else None

    def agents(self) -> list[AgentRow]:
        return [self._agent(r) for r in self._db().execute("SELECT * FROM agents ORDER BY name")]

    def _agent(self, row: sqlite3.Row) -> AgentRow:
        links = {
            r["slug"]: cast(Permission, r["permission"])
            for r in self._db().execute("SELECT slug, permission FROM links WHERE agent = ?", (row["name"],))
        }
        return AgentRow(
            name=row["name"],
            parent=row["parent"],
            tools=tuple(t for t in row["tools"].split(",") if t),
            auto_record=bool(row["auto_record"]),
            created=row["created"],
            links=links,
        )

    def link(self, agent: str, slug: str, permission: Permission) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO links (agent, slug, permission) VALUES (?, ?, ?)"
                " ON CONFLICT(agent, slug) DO UPDATE SET permission = excluded.permission",
                (agent, slug, permission),
            )

    def unlink(self, agent: str, slug: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM links WHERE agent = ? AND slug = ?", (agent, slug)).rowcount == 1

    # -- runs ---------------------------------------------------------------------------------------
    def add_run(self, run: RunRow) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM runs WHERE expires < ?", (time.time(),))  # cleanup needs no cron
            db.execute(
                "INSERT INTO runs (id, agent, created, expires, interactive, mounts)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run.id, run.agent, run.created, run.expires, int(run.interactive), json.dumps(run.mounts)),
            )

    def run(self, run_id: str) -> RunRow | None:
        row = self._db().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return run_row(row)

    # -- proposals ----------------------------------------------------------------------------------
    def add_proposal(self, p: ProposalRow) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO proposals (id, slug, agent, run_id, created, status, base, ref_commit, request)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    p.id,
                    p.slug,
                    p.agent,
                    p.run_id,
                    p.created,
                    p.status,
                    p.base,
                    p.ref_commit,
                    json.dumps(p.request),
                ),
            )

    def proposal(self, slug: str, proposal_id: str) -> ProposalRow | None:
        row = (
            self._db()
            .execute("SELECT * FROM proposals WHERE slug = ? AND id = ?", (slug, proposal_id))
            .fetchone()
        )
        return proposal_row(row) if row else None

    def proposals(self, slug: str, status: str | None) -> list[ProposalRow]:
        sql, args = "SELECT * FROM proposals WHERE slug = ?", [slug]
        if status:
            sql += " AND status = ?"
            args.append(status)
        return [proposal_row(r) for r in self._db().execute(sql + " ORDER BY created DESC, id", args)]

    def claim_proposal(self, slug: str, proposal_id: str, by: str) -> int | None:
        with self._tx() as db:
            row = db.execute(
                "UPDATE proposals SET status = 'applying', decided_by = ?, claimed = ?, fence = fence + 1"
                " WHERE slug = ? AND id = ? AND status = 'pending' RETURNING fence",
                (by, time.time(), slug, proposal_id),
            ).fetchone()
            return int(row["fence"]) if row else None

    def proposal_fence_current(self, slug: str, proposal_id: str, fence: int) -> bool:
        row = (
            self._db()
            .execute(
                "SELECT 1 FROM proposals WHERE slug = ? AND id = ? AND status = 'applying' AND fence = ?",
                (slug, proposal_id, fence),
            )
            .fetchone()
        )
        return row is not None

    def finish_proposal(self, slug: str, proposal_id: str, version: str, fence: int) -> bool:
        done = {"decided": time.time(), "version": version, "reason": None}
        return self._move(slug, proposal_id, "applying", "approved", fence, **done)

    def release_proposal(self, slug: str, proposal_id: str, reason: str | None, fence: int) -> bool:
        return self._move(
            slug, proposal_id, "applying", "pending", fence, decided_by=None, claimed=None, reason=reason
        )

    def reject_proposal(self, slug: str, proposal_id: str, by: str, reason: str | None) -> bool:
        return self._move(
            slug, proposal_id, "pending", "rejected", None, decided_by=by, decided=time.time(), reason=reason
        )

    def _move(
        self,
        slug: str,
        proposal_id: str,
        old: ProposalStatus,
        new: ProposalStatus,
        fence: int | None,
        **fields: object,
    ) -> bool:
        """Compare-and-set of a proposal's status (and of its claim's `fence` when given)."""
        names = ", ".join(f"{name} = ?" for name in fields)
        sql = f"UPDATE proposals SET status = ?, {names} WHERE slug = ? AND id = ? AND status = ?"
        args = [new, *fields.values(), slug, proposal_id, old]
        if fence is not None:
            sql, args = sql + " AND fence = ?", [*args, fence]
        with self._tx() as db:
            return db.execute(sql, args).rowcount == 1

    # -- idempotency keys -----------------------------------------------------------------------------
    def reserve_key(
        self, caller: str, slug: str, key: str, body_sha256: str, now: float, ttl: float, abandon_after: float
    ) -> int | IdempotencyRow:
        with self._tx() as db:
            db.execute("DELETE FROM idempotency WHERE created < ?", (now - ttl,))
            # Keys expire and are deleted, so their tokens come from one counter that never goes back.
            fence = db.execute(
                "INSERT INTO fences (name, last) VALUES ('idempotency', 1)"
                " ON CONFLICT(name) DO UPDATE SET last = last + 1 RETURNING last"
            ).fetchone()[0]
            taken = db.execute(
                "UPDATE idempotency SET created = ?, fence = ? WHERE caller = ? AND slug = ? AND key = ?"
                " AND body_sha256 = ? AND result IS NULL AND created < ?",
                (now, fence, caller, slug, key, body_sha256, now - abandon_after),
            )
            if taken.rowcount == 1:
                return int(fence)
            row = db.execute(
                "SELECT * FROM idempotency WHERE caller = ? AND slug = ? AND key = ?", (caller, slug, key)
            ).fetchone()
            if row is not None:
                return idempotency_row(row)
            db.execute(
                "INSERT INTO idempotency (caller, slug, key, body_sha256, created, fence)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (caller, slug, key, body_sha256, now, fence),
            )
            return int(fence)

    def key_fence_current(self, caller: str, slug: str, key: str, fence: int) -> bool:
        row = (
            self._db()
            .execute(
                "SELECT 1 FROM idempotency WHERE caller = ? AND slug = ? AND key = ? AND fence = ?"
                " AND result IS NULL",
                (caller, slug, key, fence),
            )
            .fetchone()
        )
        return row is not None

    def finish_key(
        self, caller: str, slug: str, key: str, status: int, result: dict[str, object], fence: int
    ) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE idempotency SET status = ?, result = ? WHERE caller = ? AND slug = ? AND key = ?"
                " AND fence = ? AND result IS NULL",
                (status, json.dumps(result), caller, slug, key, fence),
            )
            return cur.rowcount == 1

    def release_key(self, caller: str, slug: str, key: str, fence: int) -> None:
        with self._tx() as db:
            db.execute(
                "DELETE FROM idempotency WHERE caller = ? AND slug = ? AND key = ? AND fence = ?"
                " AND result IS NULL",
                (caller, slug, key, fence),
            )

    # -- review -------------------------------------------------------------------------------------
    def reviewed(self, slug: str) -> str | None:
        row = self._db().execute("SELECT version FROM reviews WHERE slug = ?", (slug,)).fetchone()
        return str(row["version"]) if row else None

    def set_reviewed(self, slug: str, version: str, by: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO reviews (slug, version, reviewed_by, reviewed) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(slug) DO UPDATE SET version = excluded.version,"
                " reviewed_by = excluded.reviewed_by, reviewed = excluded.reviewed",
                (slug, version, by, time.time()),
            )

    # -- web sessions and failed logins --------------------------------------------------------------
    def add_session(self, sid: str, expires: float) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM admin_sessions WHERE expires < ?", (time.time(),))
            db.execute(
                "INSERT INTO admin_sessions (id_hash, expires) VALUES (?, ?)", (hash_token(sid), expires)
            )

    def session_alive(self, sid: str, now: float) -> bool:
        sql = "SELECT 1 FROM admin_sessions WHERE id_hash = ? AND expires >= ?"
        return self._db().execute(sql, (hash_token(sid), now)).fetchone() is not None

    def end_session(self, sid: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM admin_sessions WHERE id_hash = ?", (hash_token(sid),))

    def login_failed(self, address: str, now: float, window: float) -> int:
        with self._tx() as db:
            db.execute("DELETE FROM login_failures WHERE at <= ?", (now - window,))
            db.execute("INSERT INTO login_failures (address, at) VALUES (?, ?)", (address, now))
            sql = "SELECT count(*) FROM login_failures WHERE address = ? AND at > ?"
            return int(db.execute(sql, (address, now - window)).fetchone()[0])

    def login_failures(self, address: str, now: float, window: float) -> int:
        sql = "SELECT count(*) FROM login_failures WHERE address = ? AND at > ?"
        return int(self._db().execute(sql, (address, now - window)).fetchone()[0])

    def login_succeeded(self, address: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM login_failures WHERE address = ?", (address,))

    # -- retrievals of memories ---------------------------------------------------------------------
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        found: dict[str, MemoryAccessRow] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), 500):  # SQLite caps the number of parameters
            chunk = wanted[start : start + 500]
            rows = self._db().execute(
                f"SELECT * FROM memory_access WHERE slug = ? AND id IN ({','.join('?' * len(chunk))})",
                (slug, *chunk),
            )
            found.update((r["id"], access_row(r)) for r in rows)
        return found

    def record_memory_access(
        self, slug: str, retrieved: Mapping[str, float], now: float, keep: float
    ) -> dict[str, MemoryAccessRow]:
        with self._tx() as db:
            for memory_id, base in retrieved.items():
                # The stored importance counts only while it was derived from the same file importance.
                db.execute(
                    "INSERT INTO memory_access (slug, id, access_count, last_accessed, importance, base)"
                    " VALUES (?, ?, 1, ?, ? * ? + (1 - ?), ?)"
                    " ON CONFLICT(slug, id) DO UPDATE SET access_count = access_count + 1,"
                    " last_accessed = excluded.last_accessed,"
                    " importance = CASE WHEN abs(base - excluded.base) < 1e-9 THEN importance ELSE"
                    " excluded.base END * ? + (1 - ?), base = excluded.base",
                    (slug, memory_id, now, base, keep, keep, base, keep, keep),
                )
        return self.memory_access(slug, list(retrieved))

    def set_memory_importance(self, slug: str, memory_id: str, importance: float) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO memory_access (slug, id, importance, base) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(slug, id) DO UPDATE SET importance = excluded.importance, base = excluded.base",
                (slug, memory_id, importance, importance),
            )
