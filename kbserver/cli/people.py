"""The `kbserver person ...` commands, run as the admin on the data folder: people and their tokens."""

from __future__ import annotations

import argparse
import json
import sys

from kbserver.cli.context import closing, services_of
from kbserver.core.errors import InvalidRequest
from kbserver.services.access import people
from kbserver.services.access.auth import ADMIN

__all__ = ["person_create", "person_delete", "person_list", "person_token"]


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
