"""People: accounts with a role, sign-in by email and password, personal tokens (owners manage them).

Passwords are hashed with argon2id by argon2-cffi's PasswordHasher (its current parameters; a hash
made with older ones is upgraded at the next sign-in). Personal tokens are random secrets stored
as a SHA-256 hash, like agents' tokens. CONTRACT.md section 8 says what each role may do.
"""

from __future__ import annotations

import re
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from kbserver.control import PersonRow
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest, NotFound
from kbserver.core.model import AGENT_PATTERN, ROLES, Caller, Role, utc_iso
from kbserver.services.context import Services
from kbserver.services.models import Person, PersonList

__all__ = [
    "MAX_PASSWORD",
    "MIN_PASSWORD",
    "check_password",
    "create",
    "delete",
    "get",
    "listing",
    "render",
    "rotate",
    "set_password",
    "sso_person",
]

MIN_PASSWORD = 8
MAX_PASSWORD = 1024  # argon2 hashes any length; a bound keeps one sign-in's cost bounded
_NAME = re.compile(AGENT_PATTERN)
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
_HASHER = PasswordHasher()  # argon2id with the library's current (RFC 9106 low-memory) parameters
# Verified against when the email is unknown, so a sign-in takes as long whether or not it exists.
_DUMMY = _HASHER.hash(secrets.token_urlsafe(16))


def _owner(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("only an owner (or the admin token) can manage people")


def render(row: PersonRow) -> Person:
    return Person(
        name=row.name,
        email=row.email,
        role=row.role,
        kbs=list(row.reviews),
        password=row.password_hash is not None,
        token=row.has_token,
        created=utc_iso(row.created),
    )


def _check_password(password: str) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidRequest(f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    return password


def create(
    services: Services,
    caller: Caller,
    name: str,
    email: str,
    role: str,
    kbs: list[str] | None = None,
    password: str | None = None,
) -> Person:
    """Create a person; `kbs` are the KBs a reviewer decides on (for a reviewer only).

    Raises Forbidden, InvalidRequest, NotFound (an unknown KB), AlreadyExists (name or email taken).
    """
    _owner(caller)
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest("person name must match ^[a-z0-9][a-z0-9_-]{0,62}$", name=name)
    email = email.strip() if isinstance(email, str) else ""
    if len(email) > 254 or not _EMAIL.match(email):
        raise InvalidRequest("email must be an address like ann@example.org", email=email)
    if role not in ROLES:
        raise InvalidRequest("role must be owner, reviewer or viewer", role=role)
    chosen: Role = role
    reviews = list(dict.fromkeys(kbs or []))
    if chosen == "reviewer" and not reviews:
        raise InvalidRequest("a reviewer reviews some KBs: pass --kb SLUG (repeatable)")
    if chosen != "reviewer" and reviews:
        raise InvalidRequest("--kb is for reviewers; owners and viewers see every KB", role=role)
    for slug in reviews:
        if not isinstance(slug, str) or not services.repos.exists(slug):
            raise NotFound(f"KB {slug} does not exist", slug=slug)
    hashed = _HASHER.hash(_check_password(password)) if password is not None else None
    if services.control.person(name) is not None:
        raise AlreadyExists(f"a person named {name} already exists", name=name)
    if not services.control.add_person(name, email, chosen, reviews, hashed):
        raise AlreadyExists(f"a person with the email {email} already exists", email=email)
    return get(services, caller, name)


def get(services: Services, caller: Caller, name: str) -> Person:
    """Raises Forbidden, NotFound."""
    _owner(caller)
    row = services.control.person(name)
    if row is None:
        raise NotFound(f"person {name} does not exist", name=name)
    return render(row)


def listing(services: Services, caller: Caller) -> PersonList:
    """Raises Forbidden."""
    _owner(caller)
    return PersonList(people=[render(r) for r in services.control.people()])


def delete(services: Services, caller: Caller, name: str) -> None:
    """Delete a person: their token stops working and their sessions end, on every node.

    Raises Forbidden, NotFound.
    """
    _owner(caller)
    if not services.control.delete_person(name):
        raise NotFound(f"person {name} does not exist", name=name)


def rotate(services: Services, caller: Caller, name: str) -> tuple[Person, str]:
    """A new personal token for the person; the previous one stops working. Raises Forbidden, NotFound."""
    _owner(caller)
    token = "kbp_" + secrets.token_urlsafe(32)
    if not services.control.set_person_token(name, token):
        raise NotFound(f"person {name} does not exist", name=name)
    return get(services, caller, name), token


def set_password(services: Services, caller: Caller, name: str, password: str | None) -> Person:
    """Set (or with None, remove) a person's password. Raises Forbidden, InvalidRequest, NotFound."""
    _owner(caller)
    hashed = _HASHER.hash(_check_password(password)) if password is not None else None
    if not services.control.set_person_password(name, hashed):
        raise NotFound(f"person {name} does not exist", name=name)
    return get(services, caller, name)


def check_password(services: Services, email: str, password: str) -> PersonRow | None:
    """The person whose email and password these are, else None (the same time either way)."""
    if not isinstance(password, str) or len(password) > MAX_PASSWORD or not isinstance(email, str):
        return None
    row = services.control.person_by_email(email) if email.strip() else None
    stored = row.password_hash if row is not None else None
    try:
        _HASHER.verify(stored or _DUMMY, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return None
    if row is None or stored is None:
        return None
    if _HASHER.check_needs_rehash(stored):
        services.control.set_person_password(row.name, _HASHER.hash(password))
    return row


def sso_person(services: Services, claims: dict[str, object], allowed_domains: list[str]) -> PersonRow:
    """The person an OpenID Connect sign-in is: matched by verified email to a person created
    beforehand, else, for an email in `allowed_domains`, a new viewer named after it.

    Raises Forbidden for an unverified email, or an unknown one outside the allowed domains.
    """
    email = claims.get("email")
    verified = claims.get("email_verified")
    if not isinstance(email, str) or not _EMAIL.match(email.strip()) or verified not in (True, "true"):
        raise Forbidden(
            "the identity provider did not vouch for an email address; sign-in needs a verified email"
        )
    row = services.control.person_by_email(email)
    if row is not None:
        return row
    domain = email.strip().rsplit("@", 1)[1].lower()
    if domain not in {d.strip().lower().lstrip("@") for d in allowed_domains if d.strip()}:
        raise Forbidden(
            f"no person has the email {email.strip()}; ask an owner to create you "
            "(kbserver person create NAME --email EMAIL --role ...)"
        )
    base = re.sub(r"[^a-z0-9_-]+", "-", email.strip().split("@", 1)[0].lower()).strip("-_")[:50] or "person"
    for n in range(1, 1000):
        name = base if n == 1 else f"{base}-{n}"
        if services.control.add_person(name, email, "viewer", (), None):
            found = services.control.person(name)
            if found is not None:
                return found
        taken = services.control.person_by_email(email)  # signed in twice at once: the other made it
        if taken is not None:
            return taken
    raise AlreadyExists(f"no free person name for {email.strip()}; ask an owner to create you")
