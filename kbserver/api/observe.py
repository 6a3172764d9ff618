"""Observability of the HTTP edge: JSON access logs and Prometheus metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbserver.api.http import bearer, call, services_of
from kbserver.services.access.auth import authorize_metrics, client_address

__all__ = ["Metrics", "ObserveMiddleware", "metrics_endpoint"]

access_log = logging.getLogger("kbserver.access")


class _Commits(Collector):
    """`kbserver_commits_total{kb}`: versions on each KB's main, whichever process made them."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "kbserver_commits", "versions on main (commits of every process, imports included)", labels=["kb"]
        )
        for slug, count in sorted(self._counts().items()):
            family.add_metric([slug], count)
        yield family


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (one per app).

    `commit_counts` gives the versions on each KB's main (read from the repositories at scrape time).
    """

    def __init__(self, commit_counts: Callable[[], dict[str, int]] = dict) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kbserver_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "kbserver_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
        )
        self.write_latency = Histogram(
            "kbserver_write_seconds",
            "latency of accepted writes (HTTP)",
            registry=self.registry,
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
        )
        self.registry.register(_Commits(commit_counts))


def _route_name(app: Any, scope: Scope) -> str:
    """The route template that serves `scope` (`/api/v1/kbs/{slug}/write`), for low-cardinality labels."""
    for route in getattr(app, "routes", []):
        match, child = route.matches(scope)
        if match == Match.FULL:
            path = getattr(route, "path", "")
            inner = getattr(route, "app", None)
            if isinstance(route, Mount) and inner is not None and hasattr(inner, "routes"):
                return path + _route_name(inner, {**scope, **child})
            return path or "/"
    return "unmatched"


class ObserveMiddleware:
    """Logs one line per request (its `fields` become the JSON line's keys) and counts it; never
    changes the response."""

    def __init__(self, app: ASGIApp, metrics: Metrics, router: Any) -> None:
        self.app = app
        self.metrics = metrics
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        route = _route_name(self.router, dict(scope))  # before routing, which updates scope in place

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            if method == "POST" and route.endswith("/write") and status in (200, 202):
                self.metrics.write_latency.observe(elapsed)
            state = scope.get("state", {})
            access_log.info(
                "%s %s %s",
                method,
                scope["path"],
                status,
                extra={
                    "fields": {
                        "method": method,
                        "path": scope["path"],
                        "route": route,
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                        "caller": state.get("caller"),
                        "error": state.get("error_code"),
                    }
                },
            )


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus text for the admin token or the metrics token (KB slugs are not public).

    Raises Unauthorized (no or unknown token), Forbidden (an agent's token).
    """
    await call(
        authorize_metrics,
        services_of(request),
        bearer(request),
        request.app.state.metrics_token,
        request.app.state.admin_token,
        client_address(request.scope),
    )
    metrics: Metrics = request.app.state.metrics
    text = await run_in_threadpool(generate_latest, metrics.registry)  # counting reads the repositories
    return Response(text, media_type=CONTENT_TYPE_LATEST)
