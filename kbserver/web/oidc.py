"""Single sign-on with OpenID Connect (authorization code + PKCE S256, `state` and `nonce`), through
Authlib's Starlette client: discovery, the token exchange and the ID token's checks (signature,
issuer, audience, expiry, nonce) are Authlib's.

The flow's secrets (state, nonce, PKCE verifier, where to go after) travel in a signed cookie of
their own, SameSite=Lax on /admin/oidc for ten minutes: the provider's redirect back is a cross-site
navigation, which the admin's SameSite=Strict session cookie does not make, and any node can finish
a flow another node started. Who the verified email is decides `services.people.sso_person`.

Authlib, joserfc and httpx are imported when single sign-on is set up or used, not with the admin:
a server without a provider does not carry them (~7 MB with the rich and pygments httpx brings).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass, field

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from kbserver.core import threads
from kbserver.core.errors import InvalidRequest, KBError, NotFound, Unauthorized, Unavailable
from kbserver.services.access import people
from kbserver.web.page import render, see_other, services_of
from kbserver.web.session import log_in, safe_next

__all__ = ["COOKIE", "OidcConfig", "callback", "start"]

log = logging.getLogger("kbserver.web")

COOKIE = "kbserver_oidc"
FLOW_SECONDS = 600
_SCOPE = "openid email profile"


@dataclass(frozen=True)
class OidcConfig:
    """The provider and this server's client at it (from the KBSERVER_OIDC_* settings)."""

    issuer: str
    client_id: str
    client_secret: str | None
    redirect_uri: str  # {public URL}/admin/oidc/callback
    allowed_domains: list[str] = field(default_factory=list)


class Oidc:
    """The Authlib client of one provider, and the signer of the flow's cookie."""

    def __init__(self, config: OidcConfig, secret: str) -> None:
        from authlib.integrations.starlette_client import OAuth, StarletteOAuth2App

        self.config = config
        oauth = OAuth()
        oauth.register(
            "kbserver",
            client_id=config.client_id,
            client_secret=config.client_secret,
            server_metadata_url=config.issuer + "/.well-known/openid-configuration",
            client_kwargs={"scope": _SCOPE, "code_challenge_method": "S256", "timeout": 10},
        )
        client = oauth.create_client("kbserver")
        assert isinstance(client, StarletteOAuth2App)
        self.client = client
        self.cookies = URLSafeTimedSerializer(secret, salt="kbserver oidc flow")

    async def metadata(self) -> dict[str, object]:
        """The provider's discovery document, whose `issuer` must be the configured one."""
        found: dict[str, object] = await self.client.load_server_metadata()
        if str(found.get("issuer", "")).rstrip("/") != self.config.issuer:
            raise Unavailable(
                f"the provider's discovery names issuer {found.get('issuer')!r}, not KBSERVER_OIDC_ISSUER"
            )
        return found


def _oidc(request: Request) -> Oidc:
    oidc: Oidc | None = request.app.state.oidc
    if oidc is None:
        raise NotFound("single sign-on is not set up on this server (KBSERVER_OIDC_ISSUER)")
    return oidc


def _provider_down(err: Exception) -> Unavailable:
    log.warning("single sign-on: the provider could not be reached: %s", type(err).__name__)
    return Unavailable("the identity provider could not be reached; retry in a moment", retry_after=5)


async def start(request: Request) -> Response:
    """Send the browser to the provider, with a fresh state, nonce and PKCE challenge."""
    oidc = _oidc(request)  # set up: Authlib is imported by now
    import httpx
    from authlib.integrations.base_client import OAuthError

    next_url = safe_next(request.query_params.get("next"))
    try:
        await oidc.metadata()
        made = await oidc.client.create_authorization_url(oidc.config.redirect_uri)
    except (httpx.HTTPError, ValueError, OAuthError) as err:
        raise _provider_down(err) from None
    flow = {k: made[k] for k in ("state", "nonce", "code_verifier")} | {"next": next_url}
    response = see_other(str(made["url"]))
    response.set_cookie(
        COOKIE,
        oidc.cookies.dumps(flow),
        max_age=FLOW_SECONDS,
        path="/admin/oidc",
        httponly=True,
        samesite="lax",
    )
    return response


async def callback(request: Request) -> Response:
    """Finish the flow: check the state, exchange the code (with the PKCE verifier), check the ID
    token (Authlib) and its verified email, then sign the person in."""
    oidc = _oidc(request)
    try:
        person, next_url = await _finish(request, oidc)
    except KBError as err:
        response = render(
            request, "login.html", err.status, next="/admin/", error=err.message, email="", sso=True
        )
        if getattr(request.state, "oidc_flow_used", False):  # a forged callback leaves a real flow be
            response.delete_cookie(COOKIE, path="/admin/oidc")
        return response
    await threads.run(log_in, request, request.app.state.session_seconds, person)
    # A page of ours, not a redirect, moves on: the new SameSite=Strict cookie goes with a navigation
    # this site starts, where a redirect from the provider's cross-site one might not carry it.
    response = render(request, "signed_in.html", name=person, next=next_url)
    response.delete_cookie(COOKIE, path="/admin/oidc")
    return response


async def _finish(request: Request, oidc: Oidc) -> tuple[str, str]:
    import httpx
    from authlib.integrations.base_client import OAuthError
    from joserfc.errors import JoseError

    q = request.query_params
    try:
        flow = oidc.cookies.loads(request.cookies.get(COOKIE, ""), max_age=FLOW_SECONDS)
    except BadSignature:
        raise InvalidRequest("this sign-in took too long or did not start here; sign in again") from None
    state = q.get("state", "")
    if not isinstance(flow, dict) or not hmac.compare_digest(str(flow.get("state", "")), state):
        raise InvalidRequest("this sign-in did not start here (its state does not match); sign in again")
    request.state.oidc_flow_used = True  # the state matched: this flow ends here, whatever follows
    if q.get("error"):
        raise Unauthorized(f"the identity provider refused the sign-in ({q.get('error', '')[:100]})")
    code = q.get("code")
    if not code:
        raise InvalidRequest("the identity provider sent no code; sign in again")
    metadata = await oidc.metadata()
    issuer = q.get("iss")
    if issuer is not None and issuer.rstrip("/") != str(metadata["issuer"]).rstrip("/"):
        raise InvalidRequest("the answer names another issuer (RFC 9207); sign in again")
    try:
        token = await oidc.client.fetch_access_token(
            redirect_uri=oidc.config.redirect_uri, code=code, code_verifier=flow["code_verifier"]
        )
        claims = await oidc.client.parse_id_token(token, nonce=flow["nonce"])
    except OAuthError as err:
        raise Unauthorized(f"the identity provider refused the code ({err.error})") from None
    except (JoseError, ValueError, KeyError) as err:
        log.warning("single sign-on: an ID token failed its checks: %s", type(err).__name__)
        raise Unauthorized("the identity provider's ID token failed its checks; sign in again") from None
    except httpx.HTTPError as err:
        raise _provider_down(err) from None
    if claims is None:
        raise Unauthorized("the identity provider sent no ID token")
    row = await threads.run(
        people.sso_person, services_of(request), dict(claims), oidc.config.allowed_domains
    )
    return row.name, safe_next(str(flow.get("next", "/admin/")))
