"""The SQLite schema as numbered migrations; `schema_migrations` records which ones ran.

Never edit a migration that has shipped: add the next number. Migration 1 is the schema from
before migrations were recorded (every statement `IF NOT EXISTS`), so old data folders upgrade.
"""

from __future__ import annotations

import sqlite3
import time

from kbserver.core.errors import Unavailable

__all__ = ["MIGRATIONS", "migrate", "refuse_newer"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE IF NOT EXISTS kbs (
                slug TEXT PRIMARY KEY,
                description TEXT NOT NULL DEFAULT '',
                created REAL NOT NULL,
                limits TEXT NOT NULL DEFAULT '{}'
            )""",
            """CREATE TABLE IF NOT EXISTS agents (
                name TEXT PRIMARY KEY,
                token_hash TEXT NOT NULL UNIQUE,
                parent TEXT,
                tools TEXT NOT NULL DEFAULT 'context',
                auto_record INTEGER NOT NULL DEFAULT 0,
                created REAL NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS links (
                agent TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
                slug TEXT NOT NULL,
                permission TEXT NOT NULL CHECK (permission IN ('read', 'read_write', 'read_write_ask')),
                PRIMARY KEY (agent, slug)
            )""",
            """CREATE TABLE IF NOT EXISTS runs (
                id TEXT PRIMARY KEY,
                agent TEXT NOT NULL,
                created REAL NOT NULL,
                expires REAL NOT NULL,
                interactive INTEGER NOT NULL DEFAULT 0,
                mounts TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS runs_expires ON runs(expires)",
            """CREATE TABLE IF NOT EXISTS proposals (
                id TEXT PRIMARY KEY,
                slug TEXT NOT NULL,
                agent TEXT NOT NULL,
                run_id TEXT,
                created REAL NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
                base TEXT,
                ref_commit TEXT NOT NULL,
                request TEXT NOT NULL,
                reason TEXT,
                decided_by TEXT,
                decided REAL,
                version TEXT
            )""",
            "CREATE INDEX IF NOT EXISTS proposals_slug ON proposals(slug, status, created)",
        ),
    ),
    (
        2,  # approvals claim a proposal (pending -> applying) before they commit it
        (
            """CREATE TABLE proposals_new (
                id TEXT PRIMARY KEY,
                slug TEXT NOT NULL,
                agent TEXT NOT NULL,
                run_id TEXT,
                created REAL NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'applying', 'approved', 'rejected')),
                base TEXT,
                ref_commit TEXT NOT NULL,
                request TEXT NOT NULL,
                reason TEXT,
                decided_by TEXT,
                decided REAL,
                version TEXT,
                claimed REAL
            )""",
            "INSERT INTO proposals_new (id, slug, agent, run_id, created, status, base, ref_commit, request,"
            " reason, decided_by, decided, version) SELECT id, slug, agent, run_id, created, status, base,"
            " ref_commit, request, reason, decided_by, decided, version FROM proposals",
            "DROP TABLE proposals",
            "ALTER TABLE proposals_new RENAME TO proposals",
            "CREATE INDEX proposals_slug ON proposals(slug, status, created)",
        ),
    ),
    (
        3,  # Idempotency-Key of writes, per caller and KB
        (
            """CREATE TABLE idempotency (
                caller TEXT NOT NULL,
                slug TEXT NOT NULL,
                key TEXT NOT NULL,
                body_sha256 TEXT NOT NULL,
                created REAL NOT NULL,
                status INTEGER,
                result TEXT,
                PRIMARY KEY (caller, slug, key)
            )""",
            "CREATE INDEX idempotency_created ON idempotency(created)",
        ),
    ),
    (
        4,  # the "reviewed up to" marker of each KB (the web admin's review inbox)
        (
            """CREATE TABLE reviews (
                slug TEXT PRIMARY KEY,
                version TEXT NOT NULL,
                reviewed_by TEXT NOT NULL,
                reviewed REAL NOT NULL
            )""",
        ),
    ),
    (
        5,  # retrieval counters and reinforced importance of `semantic` memories (reads make no version)
        (
            """CREATE TABLE memory_access (
                slug TEXT NOT NULL,
                id TEXT NOT NULL,
                access_count INTEGER NOT NULL DEFAULT 0,
                last_accessed REAL,
                importance REAL NOT NULL,
                base REAL NOT NULL,
                PRIMARY KEY (slug, id)
            )""",
        ),
    ),
    (
        6,  # fencing tokens: each claim of a proposal and each reservation of a key takes a larger one
        (
            "ALTER TABLE proposals ADD COLUMN fence INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE idempotency ADD COLUMN fence INTEGER NOT NULL DEFAULT 0",
            # counters that never go back, for the tokens of rows that are deleted (keys expire)
            "CREATE TABLE fences (name TEXT PRIMARY KEY, last INTEGER NOT NULL)",
        ),
    ),
    (
        7,  # the web admin's sessions and failed logins (so a logout and the limiter hold on every node)
        (
            "CREATE TABLE admin_sessions (id_hash TEXT PRIMARY KEY, expires REAL NOT NULL)",
            "CREATE INDEX admin_sessions_expires ON admin_sessions(expires)",
            "CREATE TABLE login_failures (address TEXT NOT NULL, at REAL NOT NULL)",
            "CREATE INDEX login_failures_address ON login_failures(address, at)",
            "CREATE INDEX login_failures_at ON login_failures(at)",
        ),
    ),
    (
        8,  # people (owners, reviewers, viewers): sign-in, personal tokens; sessions say whose they are
        (
            """CREATE TABLE people (
                name TEXT PRIMARY KEY,
                email TEXT NOT NULL,
                email_key TEXT NOT NULL UNIQUE,
                role TEXT NOT NULL CHECK (role IN ('owner', 'reviewer', 'viewer')),
                reviews TEXT NOT NULL DEFAULT '',
                password_hash TEXT,
                token_hash TEXT UNIQUE,
                created REAL NOT NULL
            )""",
            "ALTER TABLE admin_sessions ADD COLUMN person TEXT",
            "CREATE INDEX admin_sessions_person ON admin_sessions(person)",
        ),
    ),
    (
        9,  # an agent's identity: runs and proposals name it, so a re-created name inherits none of them
        (
            "ALTER TABLE agents ADD COLUMN id TEXT",
            "UPDATE agents SET id = lower(hex(randomblob(8)))",
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
        10,  # OAuth for MCP clients: clients, connections (grants), their codes and tokens (hashes only)
        (
            """CREATE TABLE oauth_clients (
                client_id TEXT PRIMARY KEY,
                info TEXT NOT NULL,
                metadata_url INTEGER NOT NULL DEFAULT 0,
                created REAL NOT NULL,
                fetched REAL NOT NULL
            )""",
            """CREATE TABLE oauth_grants (
                id TEXT PRIMARY KEY,
                client_id TEXT NOT NULL,
                client_name TEXT NOT NULL,
                agent TEXT NOT NULL,
                person TEXT NOT NULL,
                resource TEXT NOT NULL,
                scopes TEXT NOT NULL DEFAULT '',
                created REAL NOT NULL,
                last_used REAL,
                revoked REAL
            )""",
            "CREATE INDEX oauth_grants_agent ON oauth_grants(agent)",
            """CREATE TABLE oauth_codes (
                code_hash TEXT PRIMARY KEY,
                grant_id TEXT NOT NULL,
                redirect_uri TEXT NOT NULL,
                redirect_explicit INTEGER NOT NULL,
                code_challenge TEXT NOT NULL,
                expires REAL NOT NULL,
                used REAL
            )""",
            "CREATE INDEX oauth_codes_expires ON oauth_codes(expires)",
            """CREATE TABLE oauth_tokens (
                token_hash TEXT PRIMARY KEY,
                grant_id TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
                expires REAL NOT NULL,
                used REAL
            )""",
            "CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id)",
            "CREATE INDEX oauth_tokens_expires ON oauth_tokens(expires)",
        ),
    ),
    (
        11,  # a run ended early (POST /runs/{id}/end): when, so its reads can say "ended", not "expired"
        ("ALTER TABLE runs ADD COLUMN ended REAL",),
    ),
    (
        12,  # writes a person marked reviewed one group at a time, past the "reviewed up to" marker
        (
            """CREATE TABLE reviewed_versions (
                slug TEXT NOT NULL,
                version TEXT NOT NULL,
                reviewed_by TEXT NOT NULL,
                reviewed REAL NOT NULL,
                PRIMARY KEY (slug, version)
            )""",
        ),
    ),
    (
        13,  # a run's label (start_run / POST /runs): what the reviewer's inbox calls its task
        ("ALTER TABLE runs ADD COLUMN label TEXT",),
    ),
)


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations `db` lacks, each in its own transaction; returns the schema version.

    Safe when several processes open the same data folder at once: each migration re-checks the
    recorded version inside its write transaction.
    """
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied REAL NOT NULL)"
    )
    for number, statements in MIGRATIONS:
        db.execute("BEGIN IMMEDIATE")
        try:
            done = db.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (number,)).fetchone()
            if done is None:
                for statement in statements:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)", (number, time.time())
                )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    row = db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    refuse_newer("the control database", int(row[0]), MIGRATIONS[-1][0])
    return int(row[0])


def refuse_newer(store: str, version: int, known: int) -> None:
    """Refuse a schema a newer kbserver wrote (both stores): this one would misread it."""
    if version > known:
        raise Unavailable(
            f"{store} has schema version {version}, newer than this kbserver knows "
            f"({known}); upgrade kbserver on this node"
        )
