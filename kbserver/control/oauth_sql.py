"""The OAuth tables of both SQL control stores: clients, connections (grants), codes and tokens.

Codes and tokens are stored as their SHA-256 only. Using a code and rotating a refresh token are
compare-and-set updates in the transaction that issues the new tokens, so two requests presenting the
same code or refresh token can never both get tokens; a second use revokes the whole connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal

from kbserver.control.rows import (
    AgentRow,
    CodeRow,
    GrantRow,
    OAuthClientRow,
    agent_rows,
    grant_row,
    hash_token,
)

__all__ = ["ConnectionsSql", "NewToken"]

NewToken = tuple[str, str, float]
"""(token, kind `access` or `refresh`, expires) of a token to record."""

_GRANT_COLUMNS = (
    "g.id, g.client_id, g.client_name, g.agent, g.person, g.resource, g.scopes, g.created,"
    " g.last_used, g.revoked"
)

# beside `a.*`, whose `id` and `created` are the agent's
_AGENT_GRANT_COLUMNS = _GRANT_COLUMNS.replace("g.id", "g.id AS g_id").replace(
    "g.created", "g.created AS g_made"
)


class ConnectionsSql:
    """The OAuth methods of the ControlStore, on the shared-SQL helpers of SqlStore."""

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        raise NotImplementedError

    def _row(self, sql: str, args: Sequence[object] = ()) -> Any | None:
        raise NotImplementedError

    def _change(self, sql: str, args: Sequence[object] = ()) -> int:
        raise NotImplementedError

    # -- clients
    def oauth_client(self, client_id: str) -> OAuthClientRow | None:
        row = self._row("SELECT * FROM oauth_clients WHERE client_id = ?", (client_id,))
        if row is None:
            return None
        return OAuthClientRow(
            client_id=row["client_id"],
            info=json.loads(row["info"]),
            metadata_url=bool(row["metadata_url"]),
            created=row["created"],
            fetched=row["fetched"],
        )

    def put_oauth_client(self, client_id: str, info: dict[str, Any], metadata_url: bool, now: float) -> None:
        """Record a client, or replace the cached document of a metadata-URL client."""
        self._change(
            "INSERT INTO oauth_clients (client_id, info, metadata_url, created, fetched)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id)"
            " DO UPDATE SET info = excluded.info, fetched = excluded.fetched",
            (client_id, json.dumps(info), metadata_url, now, now),
        )

    # -- connections and their codes
    def add_grant(
        self, grant: GrantRow, code: str, redirect: tuple[str, bool], challenge: str, expires: float
    ) -> None:
        """Record a connection a person allowed, with the authorization code that hands it over."""
        with self._write() as db:
            db.execute("DELETE FROM oauth_codes WHERE expires < ?", (time.time() - 3600,))
            db.execute(
                "INSERT INTO oauth_grants"
                " (id, client_id, client_name, agent, person, resource, scopes, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    grant.id,
                    grant.client_id,
                    grant.client_name,
                    grant.agent,
                    grant.person,
                    grant.resource,
                    " ".join(grant.scopes),
                    grant.created,
                ),
            )
            db.execute(
                "INSERT INTO oauth_codes"
                " (code_hash, grant_id, redirect_uri, redirect_explicit, code_challenge, expires)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (hash_token(code), grant.id, redirect[0], redirect[1], challenge, expires),
            )

    def oauth_code(self, code: str) -> CodeRow | None:
        row = self._row(
            f"SELECT {_GRANT_COLUMNS}, c.redirect_uri, c.redirect_explicit, c.code_challenge, c.expires,"
            " c.used FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = ?",
            (hash_token(code),),
        )
        if row is None:
            return None
        return CodeRow(
            grant=grant_row(row),
            redirect_uri=row["redirect_uri"],
            redirect_explicit=bool(row["redirect_explicit"]),
            code_challenge=row["code_challenge"],
            expires=row["expires"],
            used=row["used"],
        )

    def exchange_code(self, code: str, now: float, tokens: Sequence[NewToken]) -> bool:
        """Use the code once and record `tokens` for its connection; False (and the connection
        revoked) when the code was used before, expired, or its connection was revoked."""
        with self._write() as db:
            grant = _use_once(db, "code", code, now)
            if grant is None:
                return False
            _insert_tokens(db, grant, tokens)
            db.execute("UPDATE oauth_grants SET last_used = ? WHERE id = ?", (now, grant))
            return True

    # -- tokens
    def oauth_refresh(self, token: str) -> tuple[GrantRow, float, float | None] | None:
        """The connection of a refresh token, its expiry and when it was used (rotated), if ever."""
        row = self._row(
            f"SELECT {_GRANT_COLUMNS}, t.expires, t.used FROM oauth_tokens t"
            " JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ? AND t.kind = 'refresh'",
            (hash_token(token),),
        )
        return (grant_row(row), row["expires"], row["used"]) if row is not None else None

    def rotate_refresh(self, token: str, now: float, tokens: Sequence[NewToken]) -> bool:
        """Use the refresh token once and record `tokens` in its place; False when it was used
        before (the connection is revoked then: a reused refresh token means it leaked), expired,
        or its connection was revoked."""
        with self._write() as db:
            grant = _use_once(db, "refresh", token, now)
            if grant is None:
                return False
            db.execute("DELETE FROM oauth_tokens WHERE grant_id = ? AND kind = 'access'", (grant,))
            _insert_tokens(db, grant, tokens)
            return True

    def agent_by_access_token(self, token: str, now: float) -> tuple[AgentRow, GrantRow] | None:
        """The agent an unexpired access token of a live connection acts as, with links, in one query."""
        rows = self._rows(
            f"SELECT a.*, l.slug, l.permission, {_AGENT_GRANT_COLUMNS}"
            " FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN agents a ON a.name = g.agent"
            " LEFT JOIN links l ON l.agent = a.name"
            " WHERE t.token_hash = ? AND t.kind = 'access' AND t.expires > ? AND g.revoked IS NULL"
            " ORDER BY l.slug",
            (hash_token(token), now),
        )
        if not rows:
            return None
        first = rows[0]
        grant = GrantRow(
            id=first["g_id"],
            client_id=first["client_id"],
            client_name=first["client_name"],
            agent=first["agent"],
            person=first["person"],
            resource=first["resource"],
            scopes=tuple(s for s in first["scopes"].split(" ") if s),
            created=first["g_made"],
            last_used=first["last_used"],
        )
        return agent_rows(rows)[0], grant

    def access_grant(self, token: str) -> GrantRow | None:
        """The connection of an access token (expired or not), for revocation."""
        row = self._row(
            f"SELECT {_GRANT_COLUMNS} FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id"
            " WHERE t.token_hash = ? AND t.kind = 'access'",
            (hash_token(token),),
        )
        return grant_row(row) if row is not None else None

    def touch_grant(self, grant_id: str, now: float) -> None:
        self._change("UPDATE oauth_grants SET last_used = ? WHERE id = ?", (now, grant_id))

    def revoke_grant(self, grant_id: str, now: float) -> bool:
        """End a connection: its tokens stop working at their next request, on every node."""
        with self._write() as db:
            done = db.execute(
                "UPDATE oauth_grants SET revoked = ? WHERE id = ? AND revoked IS NULL", (now, grant_id)
            ).rowcount
            db.execute("DELETE FROM oauth_tokens WHERE grant_id = ?", (grant_id,))
            return int(done) == 1

    def grants(self) -> list[GrantRow]:
        """The connections not revoked, oldest first."""
        return [
            grant_row(r)
            for r in self._rows(
                f"SELECT {_GRANT_COLUMNS} FROM oauth_grants g WHERE g.revoked IS NULL ORDER BY g.created"
            )
        ]

    def grant(self, grant_id: str) -> GrantRow | None:
        row = self._row(f"SELECT {_GRANT_COLUMNS} FROM oauth_grants g WHERE g.id = ?", (grant_id,))
        return grant_row(row) if row is not None else None


_ONCE = {
    "code": ("oauth_codes", "code_hash", ""),
    "refresh": ("oauth_tokens", "token_hash", " AND kind = 'refresh'"),
}
"""Where each single-use secret is: its table, the column of its hash, and what else picks its rows."""


def _use_once(db: Any, kind: Literal["code", "refresh"], secret: str, now: float) -> str | None:
    """Mark the authorization code or refresh token `secret` used, in the caller's transaction, and
    return its connection's id; None when it is unknown, or (then its connection is revoked too: a
    second use means it leaked) used before, expired, or its connection was revoked.

    The mark is one compare-and-set UPDATE, so of two requests presenting the same secret one wins.
    """
    table, column, only = _ONCE[kind]
    hashed = hash_token(secret)
    found = db.execute(f"SELECT grant_id FROM {table} WHERE {column} = ?{only}", (hashed,)).fetchone()
    if found is None:
        return None
    grant: str = found["grant_id"]
    used = db.execute(
        f"UPDATE {table} SET used = ? WHERE {column} = ?{only} AND used IS NULL AND expires > ?"
        " AND grant_id IN (SELECT id FROM oauth_grants WHERE revoked IS NULL)",
        (now, hashed, now),
    ).rowcount
    if used != 1:
        db.execute("UPDATE oauth_grants SET revoked = ? WHERE id = ? AND revoked IS NULL", (now, grant))
        return None
    return grant


def _insert_tokens(db: Any, grant: str, tokens: Sequence[NewToken]) -> None:
    db.execute("DELETE FROM oauth_tokens WHERE expires < ?", (time.time(),))
    for token, kind, expires in tokens:
        db.execute(
            "INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires) VALUES (?, ?, ?, ?)",
            (hash_token(token), grant, kind, expires),
        )
