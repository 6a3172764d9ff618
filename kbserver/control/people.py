"""People in the SQL control stores: accounts with a role, an argon2id password hash and a personal
token hash, written once for SQLite and PostgreSQL (mixed into `SqlStore`).

Emails are unique whatever their case: `email_key` holds the email lowercased in Python, so both
databases agree on what counts as the same address.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from kbserver.control.rows import PersonRow, hash_token, person_row
from kbserver.core.model import Role

__all__ = ["SqlPeople", "email_key"]


def email_key(email: str) -> str:
    """What makes two emails the same account: `Ann@Example.org` is `ann@example.org`."""
    return email.strip().lower()


class SqlPeople:
    """The people methods of the ControlStore; the helpers are `SqlStore`'s."""

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        raise NotImplementedError

    def _row(self, sql: str, args: Sequence[object] = ()) -> Any | None:
        raise NotImplementedError

    def _change(self, sql: str, args: Sequence[object] = ()) -> int:
        raise NotImplementedError

    def add_person(
        self, name: str, email: str, role: Role, reviews: Sequence[str], password_hash: str | None
    ) -> bool:
        added = self._change(
            "INSERT INTO people (name, email, email_key, role, reviews, password_hash, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (name, email.strip(), email_key(email), role, ",".join(reviews), password_hash, time.time()),
        )
        return added == 1

    def person(self, name: str) -> PersonRow | None:
        row = self._row("SELECT * FROM people WHERE name = ?", (name,))
        return person_row(row) if row else None

    def person_by_email(self, email: str) -> PersonRow | None:
        row = self._row("SELECT * FROM people WHERE email_key = ?", (email_key(email),))
        return person_row(row) if row else None

    def person_by_token(self, token: str) -> PersonRow | None:
        row = self._row("SELECT * FROM people WHERE token_hash = ?", (hash_token(token),))
        return person_row(row) if row else None

    def people(self) -> list[PersonRow]:
        return [person_row(r) for r in self._rows("SELECT * FROM people ORDER BY name")]

    def set_person_token(self, name: str, token: str) -> bool:
        sql = "UPDATE people SET token_hash = ? WHERE name = ?"
        return self._change(sql, (hash_token(token), name)) == 1

    def set_person_password(self, name: str, password_hash: str | None) -> bool:
        return self._change("UPDATE people SET password_hash = ? WHERE name = ?", (password_hash, name)) == 1

    def set_person_role(self, name: str, role: Role, reviews: Sequence[str]) -> bool:
        sql = "UPDATE people SET role = ?, reviews = ? WHERE name = ?"
        return self._change(sql, (role, ",".join(reviews), name)) == 1

    def delete_person(self, name: str) -> bool:
        with self._write() as db:
            db.execute("DELETE FROM admin_sessions WHERE person = ?", (name,))  # signed out on every node
            # the connections they allowed end with them (OAuth clients acting as agents)
            db.execute(
                "UPDATE oauth_grants SET revoked = ? WHERE person = ? AND revoked IS NULL",
                (time.time(), name),
            )
            return int(db.execute("DELETE FROM people WHERE name = ?", (name,)).rowcount) == 1
