"""Composition root of the server: build the services and the Starlette app, bootstrap a data folder."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from kbserver.api import api_routes, openapi_document
from kbserver.api.errors import EXCEPTION_HANDLERS
from kbserver.api.observe import Metrics, ObserveMiddleware, metrics_endpoint
from kbserver.config import Settings, admin_token
from kbserver.core import threads
from kbserver.core.clients import ForwardedMiddleware, TrustedProxies
from kbserver.core.errors import AlreadyExists
from kbserver.gitweb import git_app
from kbserver.mcp import mount_mcp
from kbserver.services import Services, health
from kbserver.services import kbs as kbs_service
from kbserver.services.access.auth import ADMIN
from kbserver.services.metrics import VersionCounter
from kbserver.web import admin_app
from kbserver.web.oidc import OidcConfig
from kbserver.wiring import open_services

__all__ = ["bootstrap", "create_app", "sample_folder"]

log = logging.getLogger("kbserver")

BOOTSTRAP_WAIT_SECONDS = 120.0  # another process importing the sample on the same empty folder


def _sso(settings: Settings) -> OidcConfig | None:
    """Single sign-on's provider and client, when KBSERVER_OIDC_ISSUER is set."""
    if settings.oidc_issuer is None or settings.oidc_client_id is None:
        return None
    secret = settings.oidc_client_secret.get_secret_value() if settings.oidc_client_secret else None
    return OidcConfig(
        issuer=settings.oidc_issuer,
        client_id=settings.oidc_client_id,
        client_secret=secret,
        redirect_uri=settings.public + "/admin/oidc/callback",
        allowed_domains=list(settings.oidc_allowed_domains),
    )


def sample_folder() -> Path | None:
    """sample_kb/ next to the package (source checkout) or in the working folder (container)."""
    for candidate in (Path(__file__).resolve().parent.parent / "sample_kb", Path.cwd() / "sample_kb"):
        if (candidate / "README.md").is_file():
            return candidate
    return None


def bootstrap(settings: Settings, services: Services) -> bool:
    """On an empty data folder import sample_kb/ as the KB `sample`. Returns True when it did.

    Several processes starting on one empty folder at once take turns (a flock on
    `DATA/bootstrap.lock`, bounded): the first imports, the others then find a KB and skip."""
    if not settings.sample or kbs_service.slugs(services, ADMIN):
        return False
    folder = sample_folder()
    if folder is None:
        log.warning("sample_kb/ not found; starting without the sample KB")
        return False
    fd = os.open(settings.data / "bootstrap.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + BOOTSTRAP_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning("another process held bootstrap.lock too long; starting without the sample")
                    return False
                time.sleep(0.05)
        if kbs_service.slugs(services, ADMIN):
            return False  # another process imported it meanwhile
        try:
            kbs_service.import_folder(
                services, ADMIN, "sample", folder, description="Sample KB: a small team's shared agent memory"
            )
        except AlreadyExists:  # a process of an older kbserver, which takes no turn, imported it
            return False
        return True
    finally:
        os.close(fd)


async def healthz(request: Request) -> Response:
    """200 while the node should get requests; 503 while it starts, drains or lacks its control store."""
    ok, why = await threads.run(health.ready, request.app.state.services, request.app.state.readiness)
    if ok:
        return JSONResponse({"status": "ok"})
    return JSONResponse(
        {"status": "unavailable", "reason": why}, status_code=503, headers={"Retry-After": "5"}
    )


async def openapi_json(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


def create_app(
    settings: Settings,
    services: Services | None = None,
    *,
    mcp_extra_tools: Sequence[Callable[..., Any]] = (),
) -> Starlette:
    """The whole server as one ASGI app. It owns `services` when it creates them.

    `mcp_extra_tools` adds MCP tools (the benchmark's no-op baseline); the product ships none.
    """
    owned = services is None
    svc = services or open_services(settings.data, settings.options())
    token = admin_token(settings)
    metrics = Metrics(VersionCounter(svc).counts)

    mcp_routes, mcp_lifespan = mount_mcp(
        svc,
        token,
        settings.allowed_hosts,
        public_url=settings.public,
        loopback_clients=settings.oauth_loopback_clients,
        extra_tools=mcp_extra_tools,
    )

    readiness = health.Readiness()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        threads.size_limiter(settings.threads)  # the loop's one pool: API, MCP, admin, services
        svc.start()
        readiness.starting = False
        async with mcp_lifespan:
            try:
                yield
            finally:
                if owned:
                    svc.close()
                else:
                    svc.stop()

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Mount("/api/v1", routes=api_routes()),
        Mount("/git", app=git_app(svc, token, git=shutil.which("git"))),
        Mount(
            "/admin",
            app=admin_app(
                svc,
                token,
                secure_cookies=settings.secure_cookies,
                sso=_sso(settings),
                public_url=settings.public,
                loopback_clients=settings.oauth_loopback_clients,
            ),
        ),
        *mcp_routes,
    ]
    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS, lifespan=lifespan)
    app.state.services = svc
    app.state.readiness = readiness  # cli.py sets `draining` on SIGTERM
    app.state.admin_token = token
    app.state.metrics = metrics
    app.state.metrics_token = settings.metrics_token
    app.state.settings = settings
    app.state.openapi = openapi_document()
    app.add_middleware(ObserveMiddleware, metrics=metrics, router=app.router)
    if settings.trusted_proxies:  # outermost: the logs, the limiters and every page see the client
        app.add_middleware(ForwardedMiddleware, proxies=TrustedProxies(settings.trusted_proxies))
    return app
