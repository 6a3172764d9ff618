"""Connections: OAuth clients (Claude.ai, ChatGPT, ...) that a person lets act as an agent on `/mcp`.

kbserver is the authorization server of its own `/mcp` (the MCP edge adapts the SDK's provider
protocol onto these functions). A person allows a client on the consent page; the connection then
holds short access tokens and rotating refresh tokens, stored as hashes, and every token acts
exactly as the agent chosen there. Each request asks the control store, so a revoked connection,
a deleted agent or an unlinked KB counts at the next request on every node.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from pydantic import JsonValue

from kbserver.control import GrantRow
from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import Caller, Permission
from kbserver.services.access import agents, client_metadata
from kbserver.services.access.auth import ADMIN, agent_caller
from kbserver.services.context import Services

__all__ = [
    "ACCESS_SECONDS",
    "CODE_SECONDS",
    "REFRESH_SECONDS",
    "REQUEST_SECONDS",
    "Pending",
    "Tokens",
    "access_caller",
    "allow",
    "client",
    "code",
    "default_agent",
    "deny",
    "exchange_code",
    "grantable",
    "listing",
    "pending",
    "refresh_grant",
    "register",
    "request_key",
    "revoke",
    "revoke_grant",
    "rotate",
    "start",
    "token_grant",
]

ACCESS_SECONDS = 3600
REFRESH_SECONDS = 30 * 24 * 3600
CODE_SECONDS = 300
REQUEST_SECONDS = 1800  # how long a consent page stays valid once the client sent the person there
METADATA_CACHE_SECONDS = 3600
TOUCH_SECONDS = 60.0  # `last used` is written at most this often per connection
ACCESS_PREFIX = "kbo_"
PERMISSIONS: tuple[Permission, ...] = ("read", "read_write", "read_write_ask")
_BAD_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "blob", "about", "ftp", "ws", "wss"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class Pending:
    """An authorization request waiting for a person's decision (signed into the consent page's URL)."""

    client_id: str
    redirect_uri: str
    redirect_explicit: bool
    code_challenge: str
    state: str | None
    resource: str
    scopes: tuple[str, ...]
    expires: float


@dataclass(frozen=True)
class Tokens:
    access: str
    refresh: str
    expires_in: int
    scopes: tuple[str, ...]


def request_key(admin_token: str) -> bytes:
    """The key that signs pending requests: derived from the admin token, as the session cookies are."""
    return hmac.new(admin_token.encode(), b"kbserver oauth request", hashlib.sha256).digest()


# -- clients -----------------------------------------------------------------------------------------


def client(services: Services, client_id: str, loopback: bool = False) -> dict[str, JsonValue] | None:
    """The metadata of a client (registered here, or a metadata document fetched and cached), or None."""
    row = services.control.oauth_client(client_id)
    now = time.time()
    if row is not None and (not row.metadata_url or now - row.fetched < METADATA_CACHE_SECONDS):
        return row.info
    if not client_metadata.is_metadata_url(client_id, loopback):
        return None
    doc = client_metadata.fetch(client_id, loopback)  # raises ClientMetadataError
    method = doc.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise client_metadata.ClientMetadataError(
            "a metadata-document client must use token_endpoint_auth_method none (PKCE, no secret)"
        )
    keep = (
        "client_name",
        "client_uri",
        "logo_uri",
        "redirect_uris",
        "grant_types",
        "response_types",
        "scope",
    )
    info = {k: doc[k] for k in keep if k in doc}
    info.update(client_id=client_id, token_endpoint_auth_method="none")
    check_redirect_uris(info.get("redirect_uris"))
    services.control.put_oauth_client(client_id, info, True, now)
    return info


def check_redirect_uris(uris: object) -> None:
    """https, loopback http, or an app's own scheme; never javascript:, data:, a fragment. Raises
    InvalidRequest."""
    if not isinstance(uris, list) or not uris:
        raise InvalidRequest("redirect_uris must list at least one URI")
    for uri in uris:
        parts = urlsplit(str(uri))
        scheme = parts.scheme.lower()
        if not scheme or scheme in _BAD_SCHEMES or parts.fragment:
            raise InvalidRequest(f"redirect URI {uri} is not allowed (a scheme of its own, no fragment)")
        if scheme == "http" and (parts.hostname or "") not in _LOOPBACK:
            raise InvalidRequest(f"redirect URI {uri}: plain http only on a loopback address; use https")
        if scheme == "https" and not parts.hostname:
            raise InvalidRequest(f"redirect URI {uri} has no host")


def register(services: Services, info: dict[str, Any]) -> None:
    """Record a client that registered itself (RFC 7591). Raises InvalidRequest (a bad redirect URI)."""
    check_redirect_uris(info.get("redirect_uris"))
    services.control.put_oauth_client(str(info["client_id"]), info, False, time.time())


# -- the consent page --------------------------------------------------------------------------------


def start(key: bytes, request: Pending) -> str:
    """The signed, opaque form of a pending request, for the consent page's URL."""
    body = base64.urlsafe_b64encode(json.dumps(asdict(request), separators=(",", ":")).encode()).decode()
    return body.rstrip("=") + "." + _sign(key, body.rstrip("="))


def pending(key: bytes, blob: str) -> Pending:
    """The pending request of a consent page. Raises InvalidRequest (altered, or expired)."""
    body, _, mac = blob.partition(".")
    if not body or not hmac.compare_digest(_sign(key, body), mac):
        raise InvalidRequest("this sign-in request is not valid; start connecting again from your app")
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        request = Pending(**{**data, "scopes": tuple(data["scopes"])})
    except (ValueError, TypeError, KeyError):
        raise InvalidRequest(
            "this sign-in request is not valid; start connecting again from your app"
        ) from None
    if request.expires < time.time():
        raise InvalidRequest("this sign-in request has expired; start connecting again from your app")
    return request


def _sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def grantable(person: Caller, slug: str) -> tuple[Permission, ...]:
    """The permissions `person` may give a connection on `slug`: the admin and owners any, a
    reviewer any on the KBs they review and `read` elsewhere, a viewer `read`; an agent none."""
    if person.is_admin or (person.role == "reviewer" and slug in person.reviews):
        return PERMISSIONS
    if person.role in ("reviewer", "viewer"):
        return ("read",)
    return ()


def _redirect(request: Pending, issuer: str, **params: str | None) -> str:
    parts = urlsplit(request.redirect_uri)
    query = [p for p in [parts.query] if p]
    values = {k: v for k, v in {**params, "state": request.state, "iss": issuer}.items() if v is not None}
    query.append(urlencode(values))
    return urlunsplit(parts._replace(query="&".join(query)))


def deny(request: Pending, issuer: str) -> str:
    """Where the person's browser goes after Deny: back to the client, with `access_denied`."""
    return _redirect(request, issuer, error="access_denied", error_description="the person denied access")


def _agent_name(services: Services, client_name: str, person: Caller) -> str:
    who = person.person or person.name
    base = (
        re.sub(r"[^a-z0-9_]+", "-", f"{client_name}-{who}".lower()).strip("-_")[:56].strip("-_") or "client"
    )
    name, n = base, 2
    while services.control.agent(name) is not None:
        name, n = f"{base}-{n}", n + 1
    return name


def default_agent(services: Services, client_name: str, person: Caller) -> str:
    """The name a new agent of this connection gets unless the person types another."""
    return _agent_name(services, client_name, person)


def allow(
    services: Services,
    person: Caller,
    request: Pending,
    issuer: str,
    agent: str | None,
    new_name: str,
    permissions: dict[str, str],
    loopback: bool = False,
) -> str:
    """Make the connection a person allowed and return where their browser goes (the client's
    redirect URI with the code and `iss`).

    `agent` None: a new agent `new_name` with `permissions` (slug -> permission, each one the person
    may grant); else that existing agent, as it is linked. Raises InvalidRequest, Forbidden,
    NotFound, AlreadyExists; nothing is made when it raises.
    """
    info = client(services, request.client_id, loopback)
    uris = info.get("redirect_uris") if info is not None else None
    if info is None or not isinstance(uris, list) or request.redirect_uri not in [str(u) for u in uris]:
        raise InvalidRequest("the client no longer lists this redirect URI; start connecting again")
    if agent is None:
        for slug, perm in permissions.items():
            if perm not in grantable(person, slug):
                raise InvalidRequest(f"you may not give {perm} on KB {slug}", kb=slug, permission=perm)
        # Made by the server on the person's behalf, within what the person may grant (checked above).
        made, _token = agents.create(services, ADMIN, new_name.strip())  # its static token is never shown
        for slug, perm in permissions.items():
            agents.link(services, ADMIN, made.name, slug, perm)
        agent = made.name
    else:
        row = services.control.agent(agent)
        if row is None:
            raise NotFound(f"agent {agent} does not exist", name=agent)
        for slug, perm in row.links.items():
            if perm not in grantable(person, slug):
                raise InvalidRequest(f"agent {agent} has {perm} on KB {slug}, more than you may give")
    now = time.time()
    grant = GrantRow(
        id="conn_" + secrets.token_hex(8),
        client_id=request.client_id,
        client_name=str(info.get("client_name") or urlsplit(request.redirect_uri).hostname or "client")[:200],
        agent=agent,
        person=person.person or person.name,
        resource=request.resource,
        scopes=request.scopes,
        created=now,
    )
    code_value = secrets.token_urlsafe(32)
    services.control.add_grant(
        grant,
        code_value,
        (request.redirect_uri, request.redirect_explicit),
        request.code_challenge,
        now + CODE_SECONDS,
    )
    return _redirect(request, issuer, code=code_value)


# -- tokens ------------------------------------------------------------------------------------------


def code(services: Services, value: str) -> Any:
    """The code's row while it can still be exchanged (unused, unexpired, connection live), else None.
    A used code presented again revokes its connection (RFC 6749 §4.1.2)."""
    row = services.control.oauth_code(value)
    if row is None or row.grant.revoked is not None:
        return None
    if row.used is not None:
        services.control.revoke_grant(row.grant.id, time.time())
        return None
    return row


def _new_tokens(scopes: tuple[str, ...], now: float) -> tuple[Tokens, list[tuple[str, str, float]]]:
    tokens = Tokens(
        access=ACCESS_PREFIX + secrets.token_urlsafe(32),
        refresh="kbr_" + secrets.token_urlsafe(32),
        expires_in=ACCESS_SECONDS,
        scopes=scopes,
    )
    rows = [
        (tokens.access, "access", now + ACCESS_SECONDS),
        (tokens.refresh, "refresh", now + REFRESH_SECONDS),
    ]
    return tokens, rows


def exchange_code(services: Services, value: str, scopes: tuple[str, ...]) -> Tokens:
    """Tokens for a code, once. Raises InvalidRequest (used, expired or revoked: `invalid_grant`)."""
    now = time.time()
    tokens, rows = _new_tokens(scopes, now)
    if not services.control.exchange_code(value, now, rows):
        raise InvalidRequest("the authorization code was used before, expired or its connection was revoked")
    return tokens


def refresh_grant(services: Services, value: str) -> GrantRow | None:
    """The live connection of an unused refresh token. A used one presented again revokes its
    connection (it leaked: the client got a new one when it used it) and gives None."""
    found = services.control.oauth_refresh(value)
    if found is None:
        return None
    grant, expires, used = found
    now = time.time()
    if used is not None:
        services.control.revoke_grant(grant.id, now)
        return None
    if grant.revoked is not None or expires < now:
        return None
    return grant


def rotate(services: Services, value: str, scopes: tuple[str, ...]) -> Tokens:
    """New tokens for a refresh token, which stops working. Raises InvalidRequest (`invalid_grant`)."""
    now = time.time()
    tokens, rows = _new_tokens(scopes, now)
    if not services.control.rotate_refresh(value, now, rows):
        raise InvalidRequest("the refresh token was used before, expired or its connection was revoked")
    return tokens


def access_caller(services: Services, token: str) -> tuple[Caller, GrantRow] | None:
    """The agent an access token acts as, and its connection; None unless the token is live."""
    if not token.startswith(ACCESS_PREFIX):
        return None
    now = time.time()
    found = services.control.agent_by_access_token(token, now)
    if found is None:
        return None
    row, grant = found
    if grant.last_used is None or now - grant.last_used > TOUCH_SECONDS:
        services.control.touch_grant(grant.id, now)
    return agent_caller(row), grant


def token_grant(services: Services, token: str) -> GrantRow | None:
    """The connection of an access or refresh token (for revocation), or None."""
    found = services.control.access_grant(token)
    if found is not None:
        return found
    refresh = services.control.oauth_refresh(token)
    return refresh[0] if refresh is not None else None


# -- the Agents page ---------------------------------------------------------------------------------


def listing(services: Services, person: Caller) -> dict[str, list[GrantRow]]:
    """Live connections by agent name."""
    out: dict[str, list[GrantRow]] = {}
    for grant in services.control.grants():
        out.setdefault(grant.agent, []).append(grant)
    return out


def revoke(services: Services, person: Caller, grant_id: str) -> GrantRow:
    """End a connection (its tokens stop at their next request). Raises NotFound, Forbidden."""
    grant = services.control.grant(grant_id)
    if grant is None or grant.revoked is not None:
        raise NotFound(f"connection {grant_id} does not exist or was revoked already", id=grant_id)
    if not (person.is_admin or (person.person is not None and grant.person == person.person)):
        raise Forbidden("only an owner, or the person who allowed it, may revoke a connection", id=grant_id)
    services.control.revoke_grant(grant_id, time.time())
    return grant


def revoke_grant(services: Services, grant_id: str) -> None:
    """End a connection by its id (the client revoked one of its tokens, RFC 7009)."""
    services.control.revoke_grant(grant_id, time.time())
