"""The PostgreSQL ControlStore: one short transaction per call on a pooled connection.

Several nodes share one database. Every compare-and-set is one UPDATE ... WHERE, so two nodes can
never both win; fencing tokens only grow (a column, or the `fences` counter for rows that expire).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import cast

from kbserver.control.pg_base import PostgresBase, safe_url
from kbserver.control.pg_heads import PostgresHeads
from kbserver.control.pg_migrations import PG_MIGRATIONS
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

__all__ = ["PostgresControlStore", "safe_url"]


class PostgresControlStore(PostgresBase):
    """The control plane in a PostgreSQL database shared by every node; `heads` is the shared log of
    new heads that the change feed of several nodes reads."""

    def __init__(
        self, url: str, *, max_connections: int = 10, wait_seconds: float = 10.0, migrate: bool = True
    ) -> None:
        super().__init__(url, max_connections=max_connections, wait_seconds=wait_seconds, migrate=migrate)
        self.heads = PostgresHeads(self, url)

    def integrity_errors(self) -> list[str]:
        problems: list[str] = []
        done = {int(r["version"]) for r in self._all("SELECT version FROM schema_migrations")}
        missing = sorted({n for n, _ in PG_MIGRATIONS} - done)
        if missing:
            problems.append(f"migrations not applied: {missing}; run `kbserver migrate`")
        orphans = self._all(
            "SELECT l.agent, l.slug FROM links l LEFT JOIN agents a ON a.name = l.agent WHERE a.name IS NULL"
        )
        problems += [f"link of a missing agent: {(r['agent'], r['slug'])}" for r in orphans]
        return problems

    # -- KBs ----------------------------------------------------------------------------------------
    def add_kb(self, slug: str, description: str) -> bool:
        return (
            self._count(
                "INSERT INTO kbs (slug, description, created) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (slug, description, time.time()),
            )
            == 1
        )

    def kb(self, slug: str) -> KBRow | None:
        row = self._one("SELECT * FROM kbs WHERE slug = %s", (slug,))
        return kb_row(row) if row else None

    def kbs(self) -> list[KBRow]:
        return [kb_row(r) for r in self._all("SELECT * FROM kbs ORDER BY slug")]

    def set_limits(self, slug: str, limits: dict[str, int]) -> None:
        self._count("UPDATE kbs SET limits = %s WHERE slug = %s", (json.dumps(limits), slug))

    # -- agents -------------------------------------------------------------------------------------
    def add_agent(
        self, name: str, token: str, parent: str | None, tools: tuple[str, ...], auto_record: bool
    ) -> bool:
        return (
            self._count(
                "INSERT INTO agents (name, token_hash, parent, tools, auto_record, created)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (name, hash_token(token), parent, ",".join(tools), auto_record, time.time()),
            )
            == 1
        )

    def set_token(self, name: str, token: str) -> bool:
        sql = "UPDATE agents SET token_hash = %s WHERE name = %s"
        return self._count(sql, (hash_token(token), name)) == 1

    def delete_agent(self, name: str) -> bool:
        return self._count("DELETE FROM agents WHERE name = %s", (name,)) == 1  # links cascade

    def agent(self, name: str) -> AgentRow | None:
        found = self._agents_where("a.name = %s", (name,))
        return found[0] if found else None

    def agent_by_token(self, token: str) -> AgentRow | None:
        found = self._agents_where("a.token_hash = %s", (hash_token(token),))
        return found[0] if found else None

    def agents(self) -> list[AgentRow]:
        return self._agents_where("TRUE", ())

    def _agents_where(self, where: str, args: Sequence[object]) -> list[AgentRow]:
        """Agents with their links, in one query (a node sees another's change at once)."""
        rows = self._all(
            "SELECT a.*, l.slug, l.permission FROM agents a LEFT JOIN links l ON l.agent = a.name"
            f" WHERE {where} ORDER BY a.name, l.slug",
            args,
        )
        found: dict[str, AgentRow] = {}
        for r in rows:
            row = found.get(r["name"])
            if row is None:
                row = found[r["name"]] = AgentRow(
                    name=r["name"],
                    parent=r["parent"],
                    tools=tuple(t for t in r["tools"].split(",") if t),
                    auto_record=bool(r["auto_record"]),
                    created=r["created"],
                    links={},
                )
            if r["slug"] is not None:
                row.links[r["slug"]] = cast(Permission, r["permission"])
        return list(found.values())

    def link(self, agent: str, slug: str, permission: Permission) -> None:
        self._count(
            "INSERT INTO links (agent, slug, permission) VALUES (%s, %s, %s)"
            " ON CONFLICT (agent, slug) DO UPDATE SET permission = excluded.permission",
            (agent, slug, permission),
        )

    def unlink(self, agent: str, slug: str) -> bool:
        return self._count("DELETE FROM links WHERE agent = %s AND slug = %s", (agent, slug)) == 1

    # -- runs ---------------------------------------------------------------------------------------
    def add_run(self, run: RunRow) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM runs WHERE expires < %s", (time.time(),))  # cleanup needs no cron
            db.execute(
                "INSERT INTO runs (id, agent, created, expires, interactive, mounts)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (run.id, run.agent, run.created, run.expires, run.interactive, json.dumps(run.mounts)),
            )

    def run(self, run_id: str) -> RunRow | None:
        row = self._one("SELECT * FROM runs WHERE id = %s", (run_id,))
        if row is None:
            return None
        return run_row(row)

    # -- proposals ----------------------------------------------------------------------------------
    def add_proposal(self, p: ProposalRow) -> None:
        request = json.dumps(p.request)
        self._count(
            "INSERT INTO proposals (id, slug, agent, run_id, created, status, base, ref_commit, request)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (p.id, p.slug, p.agent, p.run_id, p.created, p.status, p.base, p.ref_commit, request),
        )

    def proposal(self, slug: str, proposal_id: str) -> ProposalRow | None:
        row = self._one("SELECT * FROM proposals WHERE slug = %s AND id = %s", (slug, proposal_id))
        return proposal_row(row) if row else None

    def proposals(self, slug: str, status: str | None) -> list[ProposalRow]:
        sql, args = "SELECT * FROM proposals WHERE slug = %s", [slug]
        if status:
            sql += " AND status = %s"
            args.append(status)
        return [proposal_row(r) for r in self._all(sql + " ORDER BY created DESC, id", args)]

    def claim_proposal(self, slug: str, proposal_id: str, by: str) -> int | None:
        row = self._one(
            "UPDATE proposals SET status = 'applying', decided_by = %s, claimed = %s, fence = fence + 1"
            " WHERE slug = %s AND id = %s AND status = 'pending' RETURNING fence",
            (by, time.time(), slug, proposal_id),
        )
        return int(row["fence"]) if row else None

    def proposal_fence_current(self, slug: str, proposal_id: str, fence: int) -> bool:
        sql = "SELECT 1 FROM proposals WHERE slug = %s AND id = %s AND status = 'applying' AND fence = %s"
        return self._one(sql, (slug, proposal_id, fence)) is not None

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
        names = ", ".join(f"{name} = %s" for name in fields)
        sql = f"UPDATE proposals SET status = %s, {names} WHERE slug = %s AND id = %s AND status = %s"
        args = [new, *fields.values(), slug, proposal_id, old]
        if fence is not None:
            sql, args = sql + " AND fence = %s", [*args, fence]
        return self._count(sql, args) == 1

    # -- idempotency keys ---------------------------------------------------------------------------
    def reserve_key(
        self, caller: str, slug: str, key: str, body_sha256: str, now: float, ttl: float, abandon_after: float
    ) -> int | IdempotencyRow:
        while True:
            with self._tx() as db:
                db.execute("DELETE FROM idempotency WHERE created < %s", (now - ttl,))
                # Keys expire and are deleted, so their tokens come from one counter that never goes back.
                counter = db.execute(
                    "INSERT INTO fences (name, last) VALUES ('idempotency', 1)"
                    " ON CONFLICT (name) DO UPDATE SET last = fences.last + 1 RETURNING last"
                ).fetchone()
                assert counter is not None
                fence = int(counter["last"])
                taken = db.execute(
                    "UPDATE idempotency SET created = %s, fence = %s WHERE caller = %s AND slug = %s"
                    " AND key = %s AND body_sha256 = %s AND result IS NULL AND created < %s",
                    (now, fence, caller, slug, key, body_sha256, now - abandon_after),
                )
                if taken.rowcount == 1:
                    return fence
                added = db.execute(
                    "INSERT INTO idempotency (caller, slug, key, body_sha256, created, fence)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (caller, slug, key, body_sha256, now, fence),
                )
                if added.rowcount == 1:
                    return fence
                row = db.execute(
                    "SELECT * FROM idempotency WHERE caller = %s AND slug = %s AND key = %s",
                    (caller, slug, key),
                ).fetchone()
            if row is not None:
                return idempotency_row(row)
            # released by its write between our insert and our select: the key is free, try again

    def key_fence_current(self, caller: str, slug: str, key: str, fence: int) -> bool:
        sql = (
            "SELECT 1 FROM idempotency WHERE caller = %s AND slug = %s AND key = %s AND fence = %s"
            " AND result IS NULL"
        )
        return self._one(sql, (caller, slug, key, fence)) is not None

    def finish_key(
        self, caller: str, slug: str, key: str, status: int, result: dict[str, object], fence: int
    ) -> bool:
        sql = (
            "UPDATE idempotency SET status = %s, result = %s WHERE caller = %s AND slug = %s AND key = %s"
            " AND fence = %s AND result IS NULL"
        )
        return self._count(sql, (status, json.dumps(result), caller, slug, key, fence)) == 1

    def release_key(self, caller: str, slug: str, key: str, fence: int) -> None:
        self._count(
            "DELETE FROM idempotency WHERE caller = %s AND slug = %s AND key = %s AND fence = %s"
            " AND result IS NULL",
            (caller, slug, key, fence),
        )

    # -- review -------------------------------------------------------------------------------------
    def reviewed(self, slug: str) -> str | None:
        row = self._one("SELECT version FROM reviews WHERE slug = %s", (slug,))
        return str(row["version"]) if row else None

    def set_reviewed(self, slug: str, version: str, by: str) -> None:
        self._count(
            "INSERT INTO reviews (slug, version, reviewed_by, reviewed) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (slug) DO UPDATE SET version = excluded.version,"
            " reviewed_by = excluded.reviewed_by, reviewed = excluded.reviewed",
            (slug, version, by, time.time()),
        )

    # -- web sessions and failed logins --------------------------------------------------------------
    def add_session(self, sid: str, expires: float) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM admin_sessions WHERE expires < %s", (time.time(),))
            sql = "INSERT INTO admin_sessions (id_hash, expires) VALUES (%s, %s)"
            db.execute(sql, (hash_token(sid), expires))

    def session_alive(self, sid: str, now: float) -> bool:
        sql = "SELECT 1 FROM admin_sessions WHERE id_hash = %s AND expires >= %s"
        return self._one(sql, (hash_token(sid), now)) is not None

    def end_session(self, sid: str) -> None:
        self._count("DELETE FROM admin_sessions WHERE id_hash = %s", (hash_token(sid),))

    def login_failed(self, address: str, now: float, window: float) -> int:
        with self._tx() as db:
            db.execute("DELETE FROM login_failures WHERE at <= %s", (now - window,))
            db.execute("INSERT INTO login_failures (address, at) VALUES (%s, %s)", (address, now))
            sql = "SELECT count(*) AS n FROM login_failures WHERE address = %s AND at > %s"
            row = db.execute(sql, (address, now - window)).fetchone()
        return int(row["n"]) if row else 0

    def login_failures(self, address: str, now: float, window: float) -> int:
        sql = "SELECT count(*) AS n FROM login_failures WHERE address = %s AND at > %s"
        row = self._one(sql, (address, now - window))
        return int(row["n"]) if row else 0

    def login_succeeded(self, address: str) -> None:
        self._count("DELETE FROM login_failures WHERE address = %s", (address,))

    # -- retrievals of memories ---------------------------------------------------------------------
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        rows = self._all(
            "SELECT * FROM memory_access WHERE slug = %s AND id = ANY(%s)", (slug, list(dict.fromkeys(ids)))
        )
        return {r["id"]: access_row(r) for r in rows}

    def record_memory_access(
        self, slug: str, retrieved: Mapping[str, float], now: float, keep: float
    ) -> dict[str, MemoryAccessRow]:
        with self._tx() as db:
            for memory_id, base in sorted(retrieved.items()):  # one lock order: no deadlock between nodes
                # The stored importance counts only while it was derived from the same file importance.
                db.execute(
                    "INSERT INTO memory_access AS m (slug, id, access_count, last_accessed, importance, base)"
                    " VALUES (%s, %s, 1, %s, %s * %s + (1 - %s), %s)"
                    " ON CONFLICT (slug, id) DO UPDATE SET access_count = m.access_count + 1,"
                    " last_accessed = excluded.last_accessed,"
                    " importance = CASE WHEN abs(m.base - excluded.base) < 1e-9 THEN m.importance ELSE"
                    " excluded.base END * %s + (1 - %s), base = excluded.base",
                    (slug, memory_id, now, base, keep, keep, base, keep, keep),
                )
        return self.memory_access(slug, list(retrieved))

    def set_memory_importance(self, slug: str, memory_id: str, importance: float) -> None:
        self._count(
            "INSERT INTO memory_access (slug, id, importance, base) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (slug, id) DO UPDATE SET importance = excluded.importance, base = excluded.base",
            (slug, memory_id, importance, importance),
        )
