"""A small client of a kbserver's HTTP API for the commands that work from another machine (`mount
--url`, `run`): JSON calls and streamed downloads, every failure one KBError with the server's words.

The standard library's urllib: these commands need no more, and a sandbox image needs no new package.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from kbserver.core import errors
from kbserver.core.errors import InvalidRequest, KBError, Unauthorized, Unavailable

__all__ = ["API", "Remote", "check_url"]

API = "/api/v1"

_BY_CODE: dict[str, type[KBError]] = {
    c.code: c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, KBError)
}


def check_url(url: str | None, option: str = "--url", env: str = "KBSERVER_URL") -> str:
    """The server's base URL without a trailing slash. Raises InvalidRequest."""
    if not url:
        raise InvalidRequest(f"pass {option} URL (or set {env}): the kbserver to use")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidRequest(f"{option} must be an http:// or https:// URL, not {url!r}")
    if parts.username or parts.password:
        raise InvalidRequest(f"{option} must not carry a user or password; pass the token with --token")
    return url.rstrip("/")


class Remote:
    """One server (`url`, e.g. `http://127.0.0.1:8765`) called with one bearer token."""

    def __init__(self, url: str, token: str | None, timeout: float = 60.0) -> None:
        self.url = check_url(url)
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, query: dict[str, str] | None, body: object) -> Any:
        url = self.url + API + urllib.parse.quote(path)
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as err:
            raise self._error(err) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise Unavailable(
                f"cannot reach {self.url}: {reason}; check the URL (--url or KBSERVER_URL) and that "
                "the server runs"
            ) from None

    def _error(self, err: urllib.error.HTTPError) -> KBError:
        try:
            raw = err.read(1 << 16)
            info = json.loads(raw)["error"]
            code, message = str(info["code"]), str(info["message"])
        except (OSError, ValueError, KeyError, TypeError):
            return Unavailable(
                f"{self.url} answered HTTP {err.code} without an error body; is it a kbserver?"
            )
        finally:
            err.close()
        if code == "unauthorized":
            return Unauthorized(f"{message} (the token of --token or KBSERVER_TOKEN)")
        cls = _BY_CODE.get(code, Unavailable)
        return cls(message)

    def call(self, method: str, path: str, body: object = None, **query: str) -> Any:
        """One JSON call: its answer, parsed. Raises the server's error as a KBError."""
        with self._request(method, path, query, body) as answer:
            try:
                return json.loads(answer.read())
            except (TimeoutError, ValueError, OSError) as err:
                raise Unavailable(f"{self.url} answered {path} with no JSON ({err})") from None

    @contextmanager
    def stream(self, path: str, **query: str) -> Iterator[IO[bytes]]:
        """The body of a GET, read as it arrives. Raises the server's error as a KBError."""
        with self._request("GET", path, query, None) as answer:
            yield answer
