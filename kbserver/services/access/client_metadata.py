"""Client ID Metadata Documents: a client whose id is an https URL publishes its metadata there.

Fetched with a size limit, a time limit and no redirects, only from public addresses (a URL naming
a private, loopback or link-local address, or a host resolving to one, is refused before any
connection: the server must not be a way into its own network), and connected to at the address
that was checked, not at a second lookup's. Loopback `http://` URLs are allowed only with the
test-only setting `oauth_loopback_clients`.

httpx is imported on the first fetch: its import brings rich and pygments (~5 MB of the serving
process), and most servers never see a metadata URL.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue

from kbserver.core.errors import InvalidRequest

__all__ = ["MAX_BYTES", "TIMEOUT_SECONDS", "ClientMetadataError", "fetch", "is_metadata_url"]

MAX_BYTES = 64 * 1024
TIMEOUT_SECONDS = 5.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class ClientMetadataError(InvalidRequest):
    """The client's metadata document could not be used (the reason is in the message)."""


def is_metadata_url(client_id: str, loopback: bool = False) -> bool:
    """Whether `client_id` names a metadata document (an https URL with a path), rather than an id
    this server registered."""
    parts = urlsplit(client_id)
    if parts.scheme == "https" or (loopback and parts.scheme == "http"):
        return bool(parts.hostname) and parts.path not in ("", "/")
    return False


def _check_address(host: str, port: int, loopback: bool) -> IPAddress:
    """The address to connect to: the first `host` resolves to, once every one it resolves to is
    public (or loopback under the test setting). The fetch connects to this very address, so a
    name that resolves elsewhere the second time (DNS rebinding) cannot lead it to a private one."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise ClientMetadataError(f"the client's host {host} could not be resolved ({err})") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    for address in addresses:
        if loopback and address.is_loopback:
            continue
        if not address.is_global or address.is_multicast:
            raise ClientMetadataError(
                f"the client's metadata URL resolves to {address}, a private or reserved address; "
                "only public addresses are fetched"
            )
    if not addresses:
        raise ClientMetadataError(f"the client's host {host} resolves to no address")
    return addresses[0]


def fetch(url: str, loopback: bool = False, timeout: float = TIMEOUT_SECONDS) -> dict[str, JsonValue]:
    """The JSON object at `url`, whose `client_id` must be `url`. Raises ClientMetadataError."""
    parts = urlsplit(url)
    if not is_metadata_url(url, loopback) or parts.username or parts.password or parts.fragment:
        raise ClientMetadataError("a client metadata URL must be https://HOST/PATH, without user or fragment")
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ClientMetadataError("the client metadata URL has a bad port") from None
    if parts.scheme == "http" and not ipaddress.ip_address(_literal(host) or "0.0.0.0").is_loopback:
        raise ClientMetadataError("plain http client metadata is only allowed on a loopback address")
    address = _check_address(host, port, loopback)
    import httpx  # here, not at the top: see the module's docstring

    pinned = f"[{address}]" if address.version == 6 else str(address)
    target = urlunsplit((parts.scheme, f"{pinned}:{port}", parts.path, parts.query, ""))
    headers = {"Accept": "application/json", "Host": parts.netloc}
    tls = {"sni_hostname": host} if parts.scheme == "https" else {}  # the certificate is checked for host

    deadline = time.monotonic() + timeout
    body = bytearray()
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False) as client,
            client.stream("GET", target, headers=headers, extensions=tls) as response,
        ):
            if response.status_code != 200:
                raise ClientMetadataError(f"the client's metadata URL answered HTTP {response.status_code}")
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ClientMetadataError(f"the client's metadata document is over {MAX_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise ClientMetadataError(f"the client's metadata took over {timeout:g} s to arrive")
    except httpx.HTTPError as err:
        raise ClientMetadataError(
            f"the client's metadata could not be fetched ({type(err).__name__})"
        ) from None
    try:
        doc = json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError):
        raise ClientMetadataError("the client's metadata document is not JSON") from None
    if not isinstance(doc, dict):
        raise ClientMetadataError("the client's metadata document is not a JSON object")
    if doc.get("client_id") != url:
        raise ClientMetadataError("the client's metadata document names another client_id than its URL")
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise ClientMetadataError("the client's metadata document lists no redirect_uris")
    return doc


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None if host != "localhost" else "127.0.0.1"
