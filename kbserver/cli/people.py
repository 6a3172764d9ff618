"""The `kbserver person ...` commands, run as the admin on the data folder: people and their tokens."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from kbserver.cli.context import closing, services_of
from kbserver.core.errors import InvalidRequest
from kbserver.services.access import people
from kbserver.services.access.auth import ADMIN

__all__ = ["add_commands", "person_create", "person_delete", "person_list", "person_token"]


def _password_line() -> str:
    """One line of standard input, without its line end (a password may hold spaces)."""
    line = sys.stdin.readline()
    if not line:
        raise InvalidRequest("--password-stdin: standard input is empty; send the password as one line")
    return line.removesuffix("\n").removesuffix("\r")


def person_create(args: argparse.Namespace) -> int:
    password = _password_line() if args.password_stdin else None
    _, services = services_of(args)
    with closing(services):
        person = people.create(services, ADMIN, args.name, args.email, args.role, args.kb, password)
    kbs = f" of {', '.join(person.kbs)}" if person.kbs else ""
    how = "signs in with email and password" if person.password else "has no password yet"
    print(f"created person {person.name} <{person.email}>, {person.role}{kbs}; {how}")
    return 0


def person_list(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        listing = people.listing(services, ADMIN)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), ensure_ascii=False))
        return 0
    for p in listing.people:
        kbs = ",".join(p.kbs) or "-"
        print(f"{p.name}\t{p.email}\t{p.role}\tkbs={kbs}\tpassword={'yes' if p.password else 'no'}")
    return 0


def person_delete(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        people.delete(services, ADMIN, args.name)
    print(f"deleted person {args.name}; their token and sessions stop working now")
    return 0


def person_token(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        person, token = people.rotate(services, ADMIN, args.name)
    print(f"new personal token for {person.name}; the previous one stops working now. Shown once:")
    print(token)
    return 0


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """Adds `person create|list|delete|token` to the parser (`command` is the parser's helper)."""
    person = sub.add_parser("person", help="manage people", description="manage people and their tokens")
    person_sub = person.add_subparsers(dest="person_command", required=True)
    make = command
    p = make("create", person_create, "create a person (owner, reviewer of some KBs, or viewer)", person_sub)
    p.add_argument("name", help="the person's name: lowercase letters, digits, dashes and underscores")
    p.add_argument("--email", required=True, help="their email (unique; sign-in and single sign-on match it)")
    p.add_argument("--role", required=True, choices=["owner", "reviewer", "viewer"], help="what they may do")
    p.add_argument(
        "--kb", action="append", default=None, help="a KB a reviewer decides on (repeatable; reviewers only)"
    )
    p.add_argument(
        "--password-stdin", action="store_true", help="read their password as one line of standard input"
    )
    p = make("list", person_list, "list people: name, email, role, KBs", person_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = make("delete", person_delete, "delete a person; their token and sessions stop working", person_sub)
    p.add_argument("name", help="the person")
    p = make("token", person_token, "give a person a new personal token (printed last)", person_sub)
    p.add_argument("name", help="the person")
