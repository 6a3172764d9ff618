"""kbserver as the OAuth 2.1 authorization server of its own `/mcp`, on the MCP SDK's pieces.

The SDK's handlers (authorize, token, register, revoke, metadata) do the protocol: PKCE S256, the
code and refresh grants, RFC 6749 errors. `KBOAuthProvider` adapts its provider protocol onto
kbserver.services.access.connections (the control store). Every client is public (PKCE, no secret), so no
client secret is ever stored; codes and tokens are stored as hashes.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.server.auth.routes import (
    REVOCATION_PATH,
    build_metadata,
    cors_middleware,
    create_auth_routes,
    create_protected_resource_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl, ConfigDict, TypeAdapter
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbserver.core import threads
from kbserver.core.errors import InvalidRequest
from kbserver.services import Services
from kbserver.services.access import connections
from kbserver.services.access.connections import Pending

__all__ = ["KBOAuthProvider", "oauth_enabled", "oauth_routes"]

log = logging.getLogger(__name__)

_METADATA_PATH = "/.well-known/oauth-authorization-server"
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))
_MAX_REVOCATION_BYTES = 64 * 1024
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_REGISTRATION = ClientRegistrationOptions(enabled=True)
_REVOCATION = RevocationOptions(enabled=True)


def oauth_enabled(public_url: str) -> bool:
    """Whether `public_url` may be an OAuth issuer: https, or http on a loopback host (RFC 8414; the
    SDK refuses any other). A plain-http public URL elsewhere serves static tokens only."""
    parts = urlsplit(public_url)
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)


class KBCode(AuthorizationCode):
    grant: str


class KBRefreshToken(RefreshToken):
    grant: str


class KBAccessToken(AccessToken):
    grant: str = ""


class KBOAuthProvider:
    """The SDK's OAuthAuthorizationServerProvider on kbserver's control store."""

    def __init__(self, services: Services, admin_token: str, public_url: str, loopback: bool = False) -> None:
        self.services = services
        self.key = connections.request_key(admin_token)
        self.issuer = public_url
        self.resource = public_url + "/mcp"
        self.loopback = loopback

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        try:
            info = await threads.run(connections.client, self.services, client_id, self.loopback)
        except InvalidRequest as err:  # a metadata document that cannot be used: the client is unknown
            log.info("OAuth client %.200s refused: %s", client_id, err)
            return None
        return OAuthClientInformationFull.model_validate(info) if info is not None else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        # Public clients only (PKCE, no secret): RFC 7591 lets the server replace the auth method,
        # and the SDK answers with this same record.
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        info = client_info.model_dump(mode="json", exclude_none=True)
        try:
            await threads.run(connections.register, self.services, info)
        except InvalidRequest as err:
            raise RegistrationError("invalid_redirect_uri", str(err)) from None

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        resource = params.resource or self.resource  # RFC 8707: absent means this server's only one
        if resource.rstrip("/") != self.resource:
            raise AuthorizeError("invalid_target", f"this server issues tokens for {self.resource} only")
        pending = Pending(
            client_id=client.client_id,
            redirect_uri=str(params.redirect_uri),
            redirect_explicit=params.redirect_uri_provided_explicitly,
            code_challenge=params.code_challenge,
            state=params.state,
            resource=self.resource,
            scopes=tuple(params.scopes or ()),
            expires=_now() + connections.REQUEST_SECONDS,
        )
        return f"{self.issuer}/admin/connect?request={connections.start(self.key, pending)}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> KBCode | None:
        row = await threads.run(connections.code, self.services, authorization_code)
        if row is None:
            return None
        return KBCode(
            code=authorization_code,
            scopes=list(row.grant.scopes),
            expires_at=row.expires,
            client_id=row.grant.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=AnyUrl(row.redirect_uri),
            redirect_uri_provided_explicitly=row.redirect_explicit,
            resource=row.grant.resource,
            subject=row.grant.agent,
            grant=row.grant.id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: KBCode
    ) -> OAuthToken:
        scopes = tuple(authorization_code.scopes)
        try:
            tokens = await threads.run(
                connections.exchange_code, self.services, authorization_code.code, scopes
            )
        except InvalidRequest as err:
            raise TokenError("invalid_grant", str(err)) from None
        return _token(tokens)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> KBRefreshToken | None:
        grant = await threads.run(connections.refresh_grant, self.services, refresh_token)
        if grant is None:
            return None
        return KBRefreshToken(
            token=refresh_token,
            client_id=grant.client_id,
            scopes=list(grant.scopes),
            resource=grant.resource,
            subject=grant.agent,
            grant=grant.id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: KBRefreshToken, scopes: list[str]
    ) -> OAuthToken:
        try:
            tokens = await threads.run(connections.rotate, self.services, refresh_token.token, tuple(scopes))
        except InvalidRequest as err:
            raise TokenError("invalid_grant", str(err)) from None
        return _token(tokens)

    async def load_access_token(self, token: str) -> KBAccessToken | None:
        """For revocation only (requests are verified by KBTokenVerifier): an access or refresh
        token of a connection, expired or not."""
        grant = await threads.run(connections.token_grant, self.services, token)
        if grant is None:
            return None
        return KBAccessToken(
            token=token, client_id=grant.client_id, scopes=[], resource=grant.resource, grant=grant.id
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        grant = getattr(token, "grant", "")
        if grant:
            await threads.run(connections.revoke_grant, self.services, grant)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: Any
    ) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported here")


def _now() -> float:
    return time.time()


def _token(tokens: connections.Tokens) -> OAuthToken:
    return OAuthToken(
        access_token=tokens.access,
        expires_in=tokens.expires_in,
        scope=" ".join(tokens.scopes) or None,
        refresh_token=tokens.refresh,
    )


def oauth_routes(provider: KBOAuthProvider) -> list[BaseRoute]:
    """The SDK's authorization-server routes and the protected resource metadata of `/mcp`, with
    server metadata that also says what the SDK does not: metadata-document clients, `iss` in the
    redirect, public clients only."""
    issuer = _URL.validate_python(provider.issuer)  # as given: `iss` in the redirect must match it exactly
    routes: list[BaseRoute] = list(
        create_auth_routes(
            provider, issuer, client_registration_options=_REGISTRATION, revocation_options=_REVOCATION
        )
    )
    metadata = build_metadata(issuer, None, _REGISTRATION, _REVOCATION)
    metadata.client_id_metadata_document_supported = True
    metadata.authorization_response_iss_parameter_supported = True
    metadata.token_endpoint_auth_methods_supported = ["none"]
    metadata.revocation_endpoint_auth_methods_supported = ["none"]
    endpoint = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    routes = [_public_revocation(r) for r in routes if getattr(r, "path", None) != _METADATA_PATH]
    routes.append(Route(_METADATA_PATH, endpoint=endpoint, methods=["GET", "OPTIONS"]))
    routes.extend(
        create_protected_resource_routes(
            _URL.validate_python(provider.resource), [issuer], resource_name="kbserver"
        )
    )
    return routes


def _public_revocation(route: BaseRoute) -> BaseRoute:
    """The SDK's revocation request model requires a `client_secret` field, which a public client
    (RFC 7009 §2.1: `client_id` alone) never sends: the revocation endpoint gets an empty one added."""
    if not isinstance(route, Route) or route.path != REVOCATION_PATH:
        return route
    return Route(REVOCATION_PATH, endpoint=_EmptySecret(route.endpoint), methods=["POST", "OPTIONS"])


class _EmptySecret:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, more = b"", True
        while more and len(body) <= _MAX_REVOCATION_BYTES:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = scope.get("headers", [])
        form = any(
            k == b"content-type" and v.startswith(b"application/x-www-form-urlencoded") for k, v in headers
        )
        if form and not more and b"client_secret=" not in body:
            body += b"&client_secret=" if body else b"client_secret="
            kept = [(k, v) for k, v in headers if k != b"content-length"]
            scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        replayed: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]

        async def replay() -> Message:
            return replayed.pop(0) if replayed else await receive()

        await self.app(scope, replay, send)
