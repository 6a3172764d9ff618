"""The data methods both SQL control stores share, written once in the SQL SQLite and PostgreSQL both
speak (`?` placeholders, `ON CONFLICT`, `RETURNING`).

A store supplies `_tx` (one write transaction), `_select` (a read outside one) and its placeholder;
what the two databases do differently (connections, the schema, `IN` against `ANY`) stays in
`sqlite.py` and `postgres.py`. Every compare-and-set is one UPDATE ... WHERE, so two processes or
nodes can never both win; fencing tokens only grow (a column, or the `fences` counter for rows that
expire).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar

from kbserver.control.oauth_sql import ConnectionsSql
from kbserver.control.people import SqlPeople
from kbserver.control.rows import (
    AgentRow,
    IdempotencyRow,
    KBRow,
    MemoryAccessRow,
    ProposalRow,
    ProposalStatus,
    RunRow,
    SessionRow,
    agent_rows,
    hash_token,
    idempotency_row,
    kb_row,
    proposal_row,
    run_row,
)
from kbserver.core.model import Permission

__all__ = ["RUN_KEPT_SECONDS", "SqlStore"]

RUN_KEPT_SECONDS = 7 * 86400.0
"""How long a run's row outlives its expiry, so that a read through it says "expired"."""


class _Tx:
    """A transaction's connection that takes the shared SQL (`?`) and hands the store's dialect on."""

    def __init__(self, db: Any, placeholder: str) -> None:
        self._db, self._placeholder = db, placeholder

    def execute(self, sql: str, args: Sequence[object] = ()) -> Any:
        return self._db.execute(_dialect(sql, self._placeholder), args)


def _dialect(sql: str, placeholder: str) -> str:
    return sql if placeholder == "?" else sql.replace("?", placeholder)


class SqlStore(SqlPeople, ConnectionsSql):
    """KBs, agents and links, people, OAuth connections, runs, proposals, idempotency keys, review
    markers, web sessions, failed logins and memory importances: the ControlStore methods whose SQL
    is the same in both stores."""

    placeholder: ClassVar[str] = "?"

    def _tx(self) -> AbstractContextManager[Any]:
        """One write transaction on a connection of the store's own dialect."""
        raise NotImplementedError

    def _select(self, sql: str, args: Sequence[object]) -> list[Any]:
        """The rows of one read (`sql` in the store's dialect)."""
        raise NotImplementedError

    @contextmanager
    def _write(self) -> Iterator[_Tx]:
        with self._tx() as db:
            yield _Tx(db, self.placeholder)

    def _rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        return self._select(_dialect(sql, self.placeholder), args)

    def _row(self, sql: str, args: Sequence[object] = ()) -> Any | None:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    def _change(self, sql: str, args: Sequence[object] = ()) -> int:
        """One statement in a transaction of its own: how many rows it changed."""
        with self._write() as db:
            return int(db.execute(sql, args).rowcount)

    # -- KBs ----------------------------------------------------------------------------------------
    def add_kb(self, slug: str, description: str) -> bool:
        sql = "INSERT INTO kbs (slug, description, created) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        return self._change(sql, (slug, description, time.time())) == 1

    def kb(self, slug: str) -> KBRow | None:
        row = self._row("SELECT * FROM kbs WHERE slug = ?", (slug,))
        return kb_row(row) if row else None

    def kbs(self) -> list[KBRow]:
        return [kb_row(r) for r in self._rows("SELECT * FROM kbs ORDER BY slug")]

    def set_limits(self, slug: str, limits: dict[str, int]) -> None:
        self._change("UPDATE kbs SET limits = ? WHERE slug = ?", (json.dumps(limits), slug))

    # -- agents -------------------------------------------------------------------------------------
    def add_agent(
        self, name: str, token: str, parent: str | None, tools: tuple[str, ...], auto_record: bool
    ) -> bool:
        added = self._change(
            "INSERT INTO agents (name, token_hash, parent, tools, auto_record, created, id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                name,
                hash_token(token),
                parent,
                ",".join(tools),
                auto_record,
                time.time(),
                secrets.token_hex(8),
            ),
        )
        return added == 1

    def set_token(self, name: str, token: str) -> bool:
        return self._change("UPDATE agents SET token_hash = ? WHERE name = ?", (hash_token(token), name)) == 1

    def delete_agent(self, name: str) -> bool:
        with self._write() as db:
            db.execute("DELETE FROM links WHERE agent = ?", (name,))  # they cascade too, where enforced
            # its connections end with it: an agent made again under the name never inherits them
            db.execute(
                "UPDATE oauth_grants SET revoked = ? WHERE agent = ? AND revoked IS NULL", (time.time(), name)
            )
            return int(db.execute("DELETE FROM agents WHERE name = ?", (name,)).rowcount) == 1

    def agent(self, name: str) -> AgentRow | None:
        found = self._agents_where("a.name = ?", (name,))
        return found[0] if found else None

    def agent_by_token(self, token: str) -> AgentRow | None:
        found = self._agents_where("a.token_hash = ?", (hash_token(token),))
        return found[0] if found else None

    def agents(self) -> list[AgentRow]:
        return self._agents_where("TRUE", ())

    def _agents_where(self, where: str, args: Sequence[object]) -> list[AgentRow]:
        """Agents with their links, in one query (a node sees another's change at once)."""
        rows = self._rows(
            "SELECT a.*, l.slug, l.permission FROM agents a LEFT JOIN links l ON l.agent = a.name"
            f" WHERE {where} ORDER BY a.name, l.slug",
            args,
        )
        return agent_rows(rows)

    def link(self, agent: str, slug: str, permission: Permission) -> None:
        self._change(
            "INSERT INTO links (agent, slug, permission) VALUES (?, ?, ?)"
            " ON CONFLICT (agent, slug) DO UPDATE SET permission = excluded.permission",
            (agent, slug, permission),
        )

    def unlink(self, agent: str, slug: str) -> bool:
        return self._change("DELETE FROM links WHERE agent = ? AND slug = ?", (agent, slug)) == 1

    # -- runs ---------------------------------------------------------------------------------------
    def add_run(self, run: RunRow) -> None:
        with self._write() as db:
            # Cleanup needs no cron; a run is kept a while past its end so its reads can say why.
            db.execute("DELETE FROM runs WHERE expires < ?", (time.time() - RUN_KEPT_SECONDS,))
            db.execute(
                "INSERT INTO runs (id, agent, created, expires, interactive, mounts, agent_id, label)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.agent,
                    run.created,
                    run.expires,
                    run.interactive,
                    json.dumps(run.mounts),
                    run.agent_id,
                    run.label,
                ),
            )

    def run(self, run_id: str) -> RunRow | None:
        row = self._row("SELECT * FROM runs WHERE id = ?", (run_id,))
        return run_row(row) if row else None

    def end_run(self, run_id: str, at: float) -> RunRow | None:
        with self._write() as db:
            db.execute("UPDATE runs SET ended = ? WHERE id = ? AND ended IS NULL", (at, run_id))
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return run_row(row) if row else None

    # -- proposals ----------------------------------------------------------------------------------
    def add_proposal(self, p: ProposalRow, key: tuple[str, str, int] | None = None) -> bool:
        with self._write() as db:
            if key is not None:
                caller, name, fence = key
                # An update that changes nothing: it locks the key's row (PostgreSQL waits for, then
                # re-reads, a takeover in flight), so no takeover lands between the check and the insert.
                held = db.execute(
                    "UPDATE idempotency SET fence = fence WHERE caller = ? AND slug = ? AND key = ?"
                    " AND fence = ? AND result IS NULL",
                    (caller, p.slug, name, fence),
                )
                if held.rowcount != 1:
                    return False
            db.execute(
                "INSERT INTO proposals"
                " (id, slug, agent, run_id, created, status, base, ref_commit, request, agent_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    p.agent_id,
                ),
            )
        return True

    def proposal(self, slug: str, proposal_id: str) -> ProposalRow | None:
        row = self._row("SELECT * FROM proposals WHERE slug = ? AND id = ?", (slug, proposal_id))
        return proposal_row(row) if row else None

    def proposals(self, slug: str, status: str | None) -> list[ProposalRow]:
        sql, args = "SELECT * FROM proposals WHERE slug = ?", [slug]
        if status:
            sql += " AND status = ?"
            args.append(status)
        return [proposal_row(r) for r in self._rows(sql + " ORDER BY created DESC, id", args)]

    def claim_proposal(self, slug: str, proposal_id: str, by: str) -> int | None:
        with self._write() as db:
            row = db.execute(
                "UPDATE proposals SET status = 'applying', decided_by = ?, claimed = ?, fence = fence + 1"
                " WHERE slug = ? AND id = ? AND status = 'pending' RETURNING fence",
                (by, time.time(), slug, proposal_id),
            ).fetchone()
            return int(row["fence"]) if row else None

    def proposal_fence_current(self, slug: str, proposal_id: str, fence: int) -> bool:
        sql = "SELECT 1 FROM proposals WHERE slug = ? AND id = ? AND status = 'applying' AND fence = ?"
        return self._row(sql, (slug, proposal_id, fence)) is not None

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
        return self._change(sql, args) == 1

    # -- idempotency keys ---------------------------------------------------------------------------
    def reserve_key(
        self, caller: str, slug: str, key: str, body_sha256: str, now: float, ttl: float, abandon_after: float
    ) -> int | IdempotencyRow:
        while True:
            with self._write() as db:
                db.execute("DELETE FROM idempotency WHERE created < ?", (now - ttl,))
                # Keys expire and are deleted, so their tokens come from one counter that never goes back.
                fence = int(
                    db.execute(
                        "INSERT INTO fences (name, last) VALUES ('idempotency', 1)"
                        " ON CONFLICT (name) DO UPDATE SET last = fences.last + 1 RETURNING last"
                    ).fetchone()["last"]
                )
                taken = db.execute(
                    "UPDATE idempotency SET created = ?, fence = ? WHERE caller = ? AND slug = ? AND key = ?"
                    " AND body_sha256 = ? AND result IS NULL AND created < ?",
                    (now, fence, caller, slug, key, body_sha256, now - abandon_after),
                )
                if taken.rowcount == 1:
                    return fence
                added = db.execute(
                    "INSERT INTO idempotency (caller, slug, key, body_sha256, created, fence)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (caller, slug, key, body_sha256, now, fence),
                )
                if added.rowcount == 1:
                    return fence
                row = db.execute(
                    "SELECT * FROM idempotency WHERE caller = ? AND slug = ? AND key = ?", (caller, slug, key)
                ).fetchone()
            if row is not None:
                return idempotency_row(row)
            # released by its write between our insert and our select (PostgreSQL): free, try again

    def key_fence_current(self, caller: str, slug: str, key: str, fence: int) -> bool:
        sql = (
            "SELECT 1 FROM idempotency WHERE caller = ? AND slug = ? AND key = ? AND fence = ?"
            " AND result IS NULL"
        )
        return self._row(sql, (caller, slug, key, fence)) is not None

    def finish_key(
        self, caller: str, slug: str, key: str, status: int, result: dict[str, object], fence: int
    ) -> bool:
        sql = (
            "UPDATE idempotency SET status = ?, result = ? WHERE caller = ? AND slug = ? AND key = ?"
            " AND fence = ? AND result IS NULL"
        )
        return self._change(sql, (status, json.dumps(result), caller, slug, key, fence)) == 1

    def release_key(self, caller: str, slug: str, key: str, fence: int) -> None:
        self._change(
            "DELETE FROM idempotency WHERE caller = ? AND slug = ? AND key = ? AND fence = ?"
            " AND result IS NULL",
            (caller, slug, key, fence),
        )

    # -- review -------------------------------------------------------------------------------------
    def reviewed(self, slug: str) -> str | None:
        row = self._row("SELECT version FROM reviews WHERE slug = ?", (slug,))
        return str(row["version"]) if row else None

    def set_reviewed(self, slug: str, version: str, by: str) -> None:
        self._change(
            "INSERT INTO reviews (slug, version, reviewed_by, reviewed) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (slug) DO UPDATE SET version = excluded.version,"
            " reviewed_by = excluded.reviewed_by, reviewed = excluded.reviewed",
            (slug, version, by, time.time()),
        )

    def reviewed_each(self, slug: str) -> set[str]:
        rows = self._rows("SELECT version FROM reviewed_versions WHERE slug = ?", (slug,))
        return {str(r["version"]) for r in rows}

    def add_reviewed_each(self, slug: str, versions: Sequence[str], by: str) -> None:
        now = time.time()
        with self._write() as db:
            for version in sorted(set(versions)):
                db.execute(
                    "INSERT INTO reviewed_versions (slug, version, reviewed_by, reviewed) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (slug, version) DO NOTHING",
                    (slug, version, by, now),
                )

    # -- web sessions and failed logins --------------------------------------------------------------
    def add_session(self, sid: str, expires: float, person: str | None = None) -> None:
        with self._write() as db:
            db.execute("DELETE FROM admin_sessions WHERE expires < ?", (time.time(),))
            db.execute(
                "INSERT INTO admin_sessions (id_hash, expires, person) VALUES (?, ?, ?)",
                (hash_token(sid), expires, person),
            )

    def session_alive(self, sid: str, now: float) -> bool:
        return self.session(sid, now) is not None

    def session(self, sid: str, now: float) -> SessionRow | None:
        sql = "SELECT expires, person FROM admin_sessions WHERE id_hash = ? AND expires >= ?"
        row = self._row(sql, (hash_token(sid), now))
        return SessionRow(person=row["person"], expires=row["expires"]) if row else None

    def end_session(self, sid: str) -> None:
        self._change("DELETE FROM admin_sessions WHERE id_hash = ?", (hash_token(sid),))

    def login_failed(self, address: str, now: float, window: float) -> int:
        with self._write() as db:
            db.execute("DELETE FROM login_failures WHERE at <= ?", (now - window,))
            db.execute("INSERT INTO login_failures (address, at) VALUES (?, ?)", (address, now))
            sql = "SELECT count(*) AS n FROM login_failures WHERE address = ? AND at > ?"
            return int(db.execute(sql, (address, now - window)).fetchone()["n"])

    def login_failures(self, address: str, now: float, window: float) -> int:
        row = self._row(
            "SELECT count(*) AS n FROM login_failures WHERE address = ? AND at > ?", (address, now - window)
        )
        return int(row["n"]) if row else 0

    def login_succeeded(self, address: str) -> None:
        self._change("DELETE FROM login_failures WHERE address = ?", (address,))

    # -- retrievals of memories ---------------------------------------------------------------------
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        raise NotImplementedError  # `IN (...)` in chunks in SQLite, `= ANY(...)` in PostgreSQL

    def record_memory_access(
        self, slug: str, retrieved: Mapping[str, float], now: float, keep: float
    ) -> dict[str, MemoryAccessRow]:
        with self._write() as db:
            for memory_id, base in sorted(retrieved.items()):  # one lock order: no deadlock between nodes
                # The stored importance counts only while it was derived from the same file importance.
                db.execute(
                    "INSERT INTO memory_access AS m (slug, id, access_count, last_accessed, importance, base)"
                    " VALUES (?, ?, 1, ?, ? * ? + (1 - ?), ?)"
                    " ON CONFLICT (slug, id) DO UPDATE SET access_count = m.access_count + 1,"
                    " last_accessed = excluded.last_accessed,"
                    " importance = CASE WHEN abs(m.base - excluded.base) < 1e-9 THEN m.importance ELSE"
                    " excluded.base END * ? + (1 - ?), base = excluded.base",
                    (slug, memory_id, now, base, keep, keep, base, keep, keep),
                )
        return self.memory_access(slug, list(retrieved))

    def set_memory_importance(self, slug: str, memory_id: str, importance: float) -> None:
        self._change(
            "INSERT INTO memory_access (slug, id, importance, base) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (slug, id) DO UPDATE SET importance = excluded.importance, base = excluded.base",
            (slug, memory_id, importance, importance),
        )
