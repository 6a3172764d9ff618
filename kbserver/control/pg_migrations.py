"""The PostgreSQL schema as numbered migrations, recorded in `schema_migrations` like SQLite's.

Numbers are per backend: PostgreSQL's migration 1 is the whole schema SQLite reached in its six.
Never edit a migration that has shipped: add the next number. Times are seconds since the epoch in
double precision (REAL is 4 bytes in PostgreSQL); JSON values are stored as text, as in SQLite.
"""

from __future__ import annotations

import time

import psycopg
from psycopg.rows import DictRow

from kbserver.control.migrations import refuse_newer

__all__ = ["PG_MIGRATIONS", "applied_postgres", "migrate_postgres"]

_MIGRATION_LOCK = 0x6B627376  # pg_advisory_xact_lock key: one node migrates at a time ("kbsv")

PG_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE kbs (
                slug TEXT PRIMARY KEY,
                description TEXT NOT NULL DEFAULT '',
                created DOUBLE PRECISION NOT NULL,
                limits TEXT NOT NULL DEFAULT '{}'
            )""",
            """CREATE TABLE agents (
                name TEXT PRIMARY KEY,
                token_hash TEXT NOT NULL UNIQUE,
                parent TEXT,
                tools TEXT NOT NULL DEFAULT 'context',
                auto_record BOOLEAN NOT NULL DEFAULT FALSE,
                created DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE links (
                agent TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
                slug TEXT NOT NULL,
                permission TEXT NOT NULL CHECK (permission IN ('read', 'read_write', 'read_write_ask')),
                PRIMARY KEY (agent, slug)
            )""",
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                agent TEXT NOT NULL,
                created DOUBLE PRECISION NOT NULL,
                expires DOUBLE PRECISION NOT NULL,
                interactive BOOLEAN NOT NULL DEFAULT FALSE,
                mounts TEXT NOT NULL
            )""",
            "CREATE INDEX runs_expires ON runs(expires)",
            """CREATE TABLE proposals (
                id TEXT PRIMARY KEY,
                slug TEXT NOT NULL,
                agent TEXT NOT NULL,
                run_id TEXT,
                created DOUBLE PRECISION NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'applying', 'approved', 'rejected')),
                base TEXT,
                ref_commit TEXT NOT NULL,
                request TEXT NOT NULL,
                reason TEXT,
                decided_by TEXT,
                decided DOUBLE PRECISION,
                version TEXT,
                claimed DOUBLE PRECISION,
                fence BIGINT NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX proposals_slug ON proposals(slug, status, created)",
            """CREATE TABLE idempotency (
                caller TEXT NOT NULL,
                slug TEXT NOT NULL,
                key TEXT NOT NULL,
                body_sha256 TEXT NOT NULL,
                created DOUBLE PRECISION NOT NULL,
                status INTEGER,
                result TEXT,
                fence BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (caller, slug, key)
            )""",
            "CREATE INDEX idempotency_created ON idempotency(created)",
            """CREATE TABLE reviews (
                slug TEXT PRIMARY KEY,
                version TEXT NOT NULL,
                reviewed_by TEXT NOT NULL,
                reviewed DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE memory_access (
                slug TEXT NOT NULL,
                id TEXT NOT NULL,
                access_count INTEGER NOT NULL DEFAULT 0,
                last_accessed DOUBLE PRECISION,
                importance DOUBLE PRECISION NOT NULL,
                base DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (slug, id)
            )""",
            # counters that never go back, for the fencing tokens of rows that are deleted (keys expire)
            "CREATE TABLE fences (name TEXT PRIMARY KEY, last BIGINT NOT NULL)",
        ),
    ),
    (
        2,  # the web admin's sessions and failed logins (so a logout and the limiter hold on every node)
        (
            "CREATE TABLE admin_sessions (id_hash TEXT PRIMARY KEY, expires DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX admin_sessions_expires ON admin_sessions(expires)",
            "CREATE TABLE login_failures (address TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX login_failures_address ON login_failures(address, at)",
            "CREATE INDEX login_failures_at ON login_failures(at)",
        ),
    ),
    (
        3,  # the new heads of every node, for the followers of the others (with NOTIFY kbserver_heads)
        (
            """CREATE TABLE heads (
                id BIGSERIAL PRIMARY KEY,
                slug TEXT NOT NULL,
                version TEXT NOT NULL,
                at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX heads_at ON heads(at)",
        ),
    ),
    (
        4,  # people (owners, reviewers, viewers): sign-in, personal tokens; sessions say whose they are
        (
            """CREATE TABLE people (
                name TEXT PRIMARY KEY,
                email TEXT NOT NULL,
                email_key TEXT NOT NULL UNIQUE,
                role TEXT NOT NULL CHECK (role IN ('owner', 'reviewer', 'viewer')),
                reviews TEXT NOT NULL DEFAULT '',
                password_hash TEXT,
                token_hash TEXT UNIQUE,
                created DOUBLE PRECISION NOT NULL
            )""",
            "ALTER TABLE admin_sessions ADD COLUMN person TEXT",
            "CREATE INDEX admin_sessions_person ON admin_sessions(person)",
        ),
    ),
    (
        5,  # an agent's identity: runs and proposals name it, so a re-created name inherits none of them
        (
            "ALTER TABLE agents ADD COLUMN id TEXT",
            "UPDATE agents SET id = substr(md5(random()::text || name), 1, 16)",
            "CREATE UNIQUE INDEX agents_id ON agents(id)",
            "ALTER TABLE runs ADD COLUMN agent_id TEXT",
            "ALTER TABLE proposals ADD COLUMN agent_id TEXT",
            # rows made before the agent of that name was created were an earlier agent's: left unowned
            "UPDATE runs SET agent_id = (SELECT a.id FROM agents a WHERE a.name = runs.agent"
            " AND a.created <= runs.created)",
            "UPDATE proposals SET agent_id = (SELECT a.id FROM agents a WHERE a.name = proposals.agent"
            " AND a.created <= proposals.created)",
        ),
    ),
    (
        6,  # OAuth for MCP clients: clients, connections (grants), their codes and tokens (hashes only)
        (
            """CREATE TABLE oauth_clients (
                client_id TEXT PRIMARY KEY,
                info TEXT NOT NULL,
                metadata_url BOOLEAN NOT NULL DEFAULT FALSE,
                created DOUBLE PRECISION NOT NULL,
                fetched DOUBLE PRECISION NOT NULL
            )""",
            """CREATE TABLE oauth_grants (
                id TEXT PRIMARY KEY,
                client_id TEXT NOT NULL,
                client_name TEXT NOT NULL,
                agent TEXT NOT NULL,
                person TEXT NOT NULL,
                resource TEXT NOT NULL,
                scopes TEXT NOT NULL DEFAULT '',
                created DOUBLE PRECISION NOT NULL,
                last_used DOUBLE PRECISION,
                revoked DOUBLE PRECISION
            )""",
            "CREATE INDEX oauth_grants_agent ON oauth_grants(agent)",
            """CREATE TABLE oauth_codes (
                code_hash TEXT PRIMARY KEY,
                grant_id TEXT NOT NULL,
                redirect_uri TEXT NOT NULL,
                redirect_explicit BOOLEAN NOT NULL,
                code_challenge TEXT NOT NULL,
                expires DOUBLE PRECISION NOT NULL,
                used DOUBLE PRECISION
            )""",
            "CREATE INDEX oauth_codes_expires ON oauth_codes(expires)",
            """CREATE TABLE oauth_tokens (
                token_hash TEXT PRIMARY KEY,
                grant_id TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
                expires DOUBLE PRECISION NOT NULL,
                used DOUBLE PRECISION
            )""",
            "CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id)",
            "CREATE INDEX oauth_tokens_expires ON oauth_tokens(expires)",
        ),
    ),
    (
        7,  # a run ended early (POST /runs/{id}/end): when, so its reads can say "ended", not "expired"
        ("ALTER TABLE runs ADD COLUMN ended DOUBLE PRECISION",),
    ),
    (
        8,  # writes a person marked reviewed one group at a time, past the "reviewed up to" marker
        (
            """CREATE TABLE reviewed_versions (
                slug TEXT NOT NULL,
                version TEXT NOT NULL,
                reviewed_by TEXT NOT NULL,
                reviewed DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (slug, version)
            )""",
        ),
    ),
    (
        9,  # a run's label (start_run / POST /runs): what the reviewer's inbox calls its task
        ("ALTER TABLE runs ADD COLUMN label TEXT",),
    ),
)


def migrate_postgres(db: psycopg.Connection[DictRow], where: str) -> None:
    """Apply the migrations `db` lacks in its current transaction, under an advisory lock so nodes
    starting together migrate once. Raises Unavailable on a schema newer than this code knows."""
    db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations"
        " (version INTEGER PRIMARY KEY, applied DOUBLE PRECISION NOT NULL)"
    )
    done = _done(db, where)
    for number, statements in PG_MIGRATIONS:
        if number not in done:
            for statement in statements:
                db.execute(statement)
            db.execute(
                "INSERT INTO schema_migrations (version, applied) VALUES (%s, %s)", (number, time.time())
            )


def applied_postgres(db: psycopg.Connection[DictRow], where: str) -> int:
    """The last migration recorded in `db` (0 before the first); refuses a newer schema."""
    row = db.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS found").fetchone()
    if row is None or not row["found"]:
        return 0
    return max(_done(db, where), default=0)


def _done(db: psycopg.Connection[DictRow], where: str) -> set[int]:
    done = {int(r["version"]) for r in db.execute("SELECT version FROM schema_migrations")}
    known = PG_MIGRATIONS[-1][0]
    if done:
        refuse_newer(f"the control store {where}", max(done), known)
    return done
