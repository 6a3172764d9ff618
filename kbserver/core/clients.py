"""The client address of a request: the socket's peer, or behind a trusted proxy what it forwarded.

Only a peer in `trusted_proxies` (addresses or CIDRs, `*` for any) is believed, and only its
`X-Forwarded-For` (or, when that is absent, `Forwarded`): the address taken is the rightmost one that
is not itself a trusted proxy, the one the first trusted proxy saw. Whatever a client put to the
left of it is ignored, so a client cannot choose its own address. `ForwardedMiddleware` puts the
result in the ASGI scope's `client` (and the forwarded scheme in `scheme`), so
`kbserver.services.access.auth.client_address` and every `request.client` read the real client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = ["ForwardedMiddleware", "TrustedProxies", "parse_proxies"]

Scope = MutableMapping[str, Any]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def parse_proxies(entries: Iterable[str]) -> list[Network] | None:
    """The networks of `entries` (addresses or CIDRs); None for `*` (any peer). Raises ValueError."""
    networks: list[Network] = []
    for entry in (e.strip() for e in entries):
        if entry == "*":
            return None
        if entry:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is neither an IP address nor a CIDR (like 10.0.0.0/8)") from None
    return networks


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address in one forwarded entry (`1.2.3.4`, `1.2.3.4:80`, `[::1]:80`, `"[::1]"`)."""
    text = text.strip().strip('"').strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _forwarded(values: list[str]) -> tuple[list[str], str | None]:
    """The `for=` entries and the last `proto=` of RFC 7239 `Forwarded` header values."""
    hops: list[str] = []
    proto: str | None = None
    for element in ",".join(values).split(","):
        for pair in element.split(";"):
            key, _, value = pair.partition("=")
            key = key.strip().lower()
            if key == "for":
                hops.append(value)
            elif key == "proto":
                proto = value.strip().strip('"').lower()
    return hops, proto


class TrustedProxies:
    """The proxies whose forwarded headers to believe (`parse_proxies`)."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.networks = parse_proxies(entries)

    def trusts(self, host: str) -> bool:
        if self.networks is None:
            return True
        address = _ip(host)
        return address is not None and any(address in net for net in self.networks)

    def client(self, peer: str, forwarded_for: list[str], forwarded: list[str]) -> str:
        """The client of a request from `peer` with these header values (each header's, in order)."""
        if not self.trusts(peer):
            return peer
        if forwarded_for:
            hops = ",".join(forwarded_for).split(",")
        else:
            hops, _ = _forwarded(forwarded)
        for hop in reversed(hops):
            address = _ip(hop)
            if address is None:
                return peer  # not something a trusted proxy writes: believe nothing
            if not self.trusts(str(address)):
                return str(address)
        return str(_ip(hops[0])) if hops else peer  # every hop trusted: the leftmost is the client


class ForwardedMiddleware:
    """Rewrites the scope's `client` and `scheme` from a trusted proxy's forwarded headers."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies) -> None:
        self.app, self.proxies = app, proxies

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            peer = str(scope["client"][0])
            if self.proxies.trusts(peer):
                xff, fwd, protos = [], [], []
                for name, value in scope.get("headers", ()):
                    if name == b"x-forwarded-for":
                        xff.append(value.decode("latin-1"))
                    elif name == b"forwarded":
                        fwd.append(value.decode("latin-1"))
                    elif name == b"x-forwarded-proto":
                        protos.append(value.decode("latin-1").strip().lower())
                client = self.proxies.client(peer, xff, fwd)
                proto = protos[-1] if protos else _forwarded(fwd)[1] if fwd and not xff else None
                scope = dict(scope)
                scope["client"] = (client, 0)
                if proto in ("http", "https") and scope["type"] == "http":
                    scope["scheme"] = proto
        await self.app(scope, receive, send)
