"""MCP over Streamable HTTP at `/mcp`: bearer tokens, DNS-rebinding protection, the route for app.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbserver.core import threads
from kbserver.core.errors import KBError, Unauthorized
from kbserver.core.model import Caller
from kbserver.mcp import sdk
from kbserver.mcp.binding import Binding
from kbserver.mcp.oauth import KBOAuthProvider, oauth_enabled, oauth_routes
from kbserver.mcp.server import build_server
from kbserver.services import Services
from kbserver.services.access import connections
from kbserver.services.access.auth import (
    MISSING_TOKEN,
    TOO_MANY_FAILURES,
    UNKNOWN_TOKEN,
    authenticate,
    client_address,
)

__all__ = ["MCP_PATH", "KBTokenVerifier", "mcp_http", "mount_mcp", "transport_security"]

MCP_PATH = "/mcp"
_CALLER = "kbserver.caller"
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")

log = logging.getLogger(__name__)
# The request being answered, as _ContractErrors sees it: the client's address for the verifier (the
# SDK hands it the token only), and the verifier's `retry_after` when it refused a throttled client.
_REQUEST: ContextVar[dict[str, Any] | None] = ContextVar("kbserver_mcp_request", default=None)


class KBTokenVerifier(TokenVerifier):
    """An agent's static token, the admin token, or the access token of a connection (OAuth), each
    bound to `resource` (`{public URL}/mcp`). Unknown tokens get 401 from the SDK; a control store
    that cannot answer raises Unavailable (answered 503 by _ContractErrors)."""

    def __init__(self, services: Services, admin_token: str, resource: str) -> None:
        self.services = services
        self.admin_token = admin_token
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        request = _REQUEST.get()
        address = request.get("address") if request is not None else None
        try:
            return await threads.run(self._verify, token, address)
        except Unauthorized as err:
            if request is not None and "retry_after" in err.details:
                request["retry_after"] = err.details["retry_after"]
            return None

    def _verify(self, token: str, address: str | None) -> AccessToken:
        resource = self.resource
        connection = connections.access_caller(self.services, token)
        if connection is not None:
            caller, grant = connection
            resource = grant.resource
        else:
            caller = authenticate(self.services, token, self.admin_token, address)
        # client_id names the principal; the SDK binds each session to it, so one agent cannot use
        # another's session id. The Caller rides along so tools need no second lookup per request.
        return AccessToken(
            token=token, client_id=caller.actor, scopes=[], resource=resource, claims={_CALLER: caller}
        )


def _token_caller(services: Services, admin_token: str) -> Callable[[], Caller]:
    def caller() -> Caller:
        token = get_access_token()
        if token is None:
            raise Unauthorized(MISSING_TOKEN)
        found = _verified_caller()
        return found if found is not None else authenticate(services, token.token, admin_token)

    return caller


def _verified_caller() -> Caller | None:
    """The Caller that KBTokenVerifier found for this request's token (None: none verified)."""
    token = get_access_token()
    found = (token.claims or {}).get(_CALLER) if token is not None else None
    return found if isinstance(found, Caller) else None


def transport_security(allowed_hosts: Sequence[str]) -> TransportSecuritySettings:
    """Host (and Origin) allow-list against DNS rebinding: loopback on any port plus `allowed_hosts`."""
    hosts: list[str] = []
    for host in (*_LOOPBACK, *allowed_hosts):
        hosts.append(host)
        if not host.endswith(":*") and not host.rsplit("]", 1)[-1].count(":"):
            hosts.append(f"{host}:*")  # the same host on any port
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class _ClosingSessionNoise(logging.Filter):
    """The SDK answers a notification (202) before it hands it to the session; when the client closes
    the session in between (a client that opens a session and leaves at once), the hand-over finds the
    session's stream closed and the SDK logs an ERROR with a traceback. The client has its answer and
    the session is gone on purpose: this is an INFO line without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.msg == sdk.POST_FAILED_MESSAGE and isinstance(exc, anyio.ClosedResourceError):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = "a message arrived for an MCP session that its client was closing; dropped"
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


def _quiet_closing_sessions() -> None:
    logger = logging.getLogger(sdk.POST_FAILED_LOGGER)
    if not any(isinstance(f, _ClosingSessionNoise) for f in logger.filters):
        logger.addFilter(_ClosingSessionNoise())


class _ContractErrors:
    """Answers what the SDK's auth layer cannot as JSON-RPC errors a client can show.

    A 401 keeps its status and `WWW-Authenticate` (the pointer to the protected resource metadata)
    and gets a JSON-RPC error body saying whether the token was missing or unknown. A control store
    that cannot answer while the token is checked (Unavailable, raised inside the SDK's middleware,
    which has already begun a plain-text 500 by then) is answered 503 with Retry-After instead.

    Also keeps the SDK's second answer to one request from reaching the server: after answering a
    notification 202 it may fail to hand it to a session its client is closing, then tries to answer
    500 as well (which would raise "response already started", log a traceback and count a 500 that no
    client ever saw). The first answer stands; the failure is logged at INFO.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rewriting = False
        started = False
        dropping = False
        request: dict[str, Any] = {"address": client_address(scope)}
        _REQUEST.set(request)
        held: list[Message] = []  # a 500 the SDK began: sent once it is known not to be an outage

        async def wrapped(message: Message) -> None:
            nonlocal rewriting, started, dropping
            if held:
                held.append(message)
                return
            if message["type"] == "http.response.start":
                if started:
                    dropping = True  # a second answer to the same request: the first one stands
                    return
                started = True
                if message["status"] == 500:
                    held.append(message)
                    return
            if dropping:
                return
            if message["type"] == "http.response.start" and message["status"] == 401:
                rewriting = True
                # The SDK answers 401 for a missing and an unknown token alike; say which it was.
                text = UNKNOWN_TOKEN if _has_bearer(scope) else MISSING_TOKEN
                extra: list[tuple[bytes, bytes]] = list(message.get("headers", []))
                data: dict[str, Any] = {}
                if "retry_after" in request:  # a throttled client (kbserver.services.access.auth)
                    text, data = TOO_MANY_FAILURES, {"retry_after": request["retry_after"]}
                    extra.append((b"retry-after", str(request["retry_after"]).encode()))
                await _send_jsonrpc(send, 401, "unauthorized", text, -32001, extra, data)
                return
            if rewriting:
                return  # the SDK's own body, replaced above
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        except KBError as err:
            if started and not held:
                raise
            retry = (
                [(b"retry-after", str(getattr(err, "retry_after", 5)).encode())] if err.status == 503 else []
            )
            await _send_jsonrpc(send, err.status, err.code, str(err), -32000, retry)
            log.warning("MCP request refused: %s: %s", err.code, err)
            return
        except anyio.ClosedResourceError:
            if not started:
                raise
            log.info("an MCP session was closed while one of its messages was in flight; dropped")
            return
        for message in held:
            await send(message)


async def _send_jsonrpc(
    send: Send,
    status: int,
    code: str,
    text: str,
    number: int,
    headers: Sequence[tuple[bytes, bytes]],
    data: dict[str, Any] | None = None,
) -> None:
    """A JSON-RPC error answer (id null: the request was refused before it was read), the contract's
    error code first in its message and in `data.code`."""
    error = {"code": number, "message": f"{code}: {text}", "data": {"code": code, **(data or {})}}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    keep = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
    keep += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": keep})
    await send({"type": "http.response.body", "body": body})


def _has_bearer(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and bool(token.strip())
    return False


def mcp_http(
    services: Services,
    admin_token: str,
    allowed_hosts: Sequence[str] = (),
    *,
    public_url: str = "http://127.0.0.1:8765",
    extra_tools: Sequence[Callable[..., Any]] = (),
) -> tuple[MCPServer[Any], ASGIApp]:
    """The MCP server for HTTP callers and its ASGI app serving `/mcp` (needs the server's session
    manager running: see mount_mcp)."""
    _quiet_closing_sessions()
    binding = Binding(
        services,
        _token_caller(services, admin_token),
        public_url=public_url,
        known=_verified_caller,
    )
    verifier = KBTokenVerifier(services, admin_token, public_url + MCP_PATH)
    server = build_server(binding, token_verifier=verifier, extra_tools=extra_tools, public_url=public_url)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=transport_security(allowed_hosts)
    )
    return server, _ContractErrors(app)


def mount_mcp(
    services: Services,
    admin_token: str,
    allowed_hosts: Sequence[str] = (),
    *,
    public_url: str = "http://127.0.0.1:8765",
    loopback_clients: bool = False,
    extra_tools: Sequence[Callable[..., Any]] = (),
) -> tuple[list[BaseRoute], AbstractAsyncContextManager[None]]:
    """The `/mcp` route and the OAuth routes for the host app, and the lifespan it must enter (the
    SDK's session manager).

    An exact `Route("/mcp")` rather than a catch-all `Mount("/")`: no 307 to `/mcp/`, and every other
    path keeps the host app's own 404. `loopback_clients` (tests only) lets OAuth clients publish
    their metadata documents on loopback http.
    """
    server, app = mcp_http(
        services, admin_token, allowed_hosts, public_url=public_url, extra_tools=extra_tools
    )
    routes: list[BaseRoute] = [Route(MCP_PATH, endpoint=app)]
    if oauth_enabled(public_url):
        routes += oauth_routes(KBOAuthProvider(services, admin_token, public_url, loopback=loopback_clients))
    else:
        log.warning(
            "OAuth for MCP clients is off: the public URL %s is plain http on a host other than loopback; "
            "set KBSERVER_PUBLIC_URL to the https URL clients use (static agent tokens work meanwhile)",
            public_url,
        )
    return routes, server.session_manager.run()
