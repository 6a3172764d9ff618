"""`/git/{slug}.git`: read-only smart HTTP (`git clone`, `git fetch`) as a pure ASGI app."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, unquote

import anyio
from starlette.types import Receive, Scope, Send

from kbserver.core import threads
from kbserver.core.errors import Forbidden, InvalidRequest, KBError, NotFound, TooLarge, Unavailable
from kbserver.core.model import SLUG_PATTERN, Caller
from kbserver.gitweb.pktline import error_packet, parse_v2_request
from kbserver.gitweb.upload_pack import UploadPack, read_body, unreachable_want
from kbserver.services import Services, kbs
from kbserver.services.access.auth import authenticate, client_address

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_PROCESSES",
    "PROPOSALS_HEADER",
    "PUSH_REFUSED",
    "QUEUE_SECONDS",
    "GitEdge",
    "git_app",
]

log = logging.getLogger("kbserver.gitweb")

MAX_PROCESSES = 4  # `git upload-pack` processes at once; each may take a core and its memory
QUEUE_SECONDS = 10.0  # how long a request waits for one of them before 503 (Retry-After)
MAX_BODY_BYTES = 16 * 1024 * 1024  # a fetch request is wants and haves; git's own default cap is 10 MB
PROPOSALS_HEADER = "x-kb-proposals"  # `X-KB-Proposals: 1` from the admin: advertise refs/proposals/*
_ROUTE = re.compile(r"/(?P<slug>[^/]+)\.git/(?P<action>info/refs|git-upload-pack)")
_RETRY_AFTER = 5
_V2_COMMANDS = ("ls-refs", "fetch")  # all that clone, fetch and ls-remote use
_NO_GIT = "git clone needs C git on the server: install git (e.g. apt-get install git) and restart"
_READ_ONLY = "this server is read-only over git; change a KB through the HTTP API or MCP"
# The first line git prints for a refused push (as `remote: ...`, above its own "error: 403").
PUSH_REFUSED = "kbserver is read-only: write through the API (HTTP or MCP); git serves clone and fetch"


class _MethodNotAllowed(KBError):
    code, status = "invalid_request", 405  # as the HTTP API answers a wrong method


class _UnsupportedMediaType(KBError):
    code, status = "invalid_request", 415


class GitEdge:
    """Serves `GET /{slug}.git/info/refs?service=git-upload-pack` and `POST /{slug}.git/git-upload-pack`.

    Mounted at `/git`. Needs `read` on the KB; the token comes as HTTP basic auth (any user name,
    the token as password) or as `Authorization: Bearer TOKEN`.
    """

    def __init__(
        self,
        services: Services,
        admin_token: str,
        *,
        git: str | None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_processes: int = MAX_PROCESSES,
        queue_seconds: float = QUEUE_SECONDS,
    ) -> None:
        self.services = services
        self.admin_token = admin_token
        self.git = git  # the C git binary; None answers 503 (there is no pure-Python fallback)
        self.max_body_bytes = max_body_bytes
        self.max_processes = max_processes
        self.queue_seconds = queue_seconds
        self._slots: anyio.Semaphore | None = None  # made on first use, inside the event loop

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of `max_processes` git processes; waits up to `queue_seconds`, then Unavailable."""
        if self._slots is None:
            self._slots = anyio.Semaphore(self.max_processes)
        acquired = False
        with anyio.move_on_after(self.queue_seconds):  # bounds the wait only, never the serving
            await self._slots.acquire()
            acquired = True
        if not acquired:
            raise Unavailable(
                f"{self.max_processes} clones or fetches are running already; retry in a few seconds",
                retry_after=_RETRY_AFTER,
            )
        try:
            yield
        finally:
            self._slots.release()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        try:
            await self._handle(scope, receive, send)
        except KBError as err:  # always raised before the response started
            await _send_error(scope, send, err)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _route_path(scope)
        query = scope.get("query_string", b"").decode("latin-1")
        raw_path = bytes(scope.get("raw_path") or b"").decode("latin-1")
        if any("receive-pack" in unquote(part).lower() for part in (path, raw_path, query)):
            raise Forbidden(PUSH_REFUSED)
        route = _ROUTE.fullmatch(path)
        if route is None or not re.fullmatch(SLUG_PATTERN, route["slug"]):
            raise NotFound("no such git repository here; clone http://HOST/git/{slug}.git")
        slug, action = route["slug"], route["action"]
        method = scope["method"]
        headers = _headers(scope)
        if action == "info/refs":
            if method != "GET":
                raise _MethodNotAllowed(f"method {method} is not allowed here; use GET")
            if parse_qs(query).get("service") != ["git-upload-pack"]:
                raise Forbidden(f"only ?service=git-upload-pack (smart HTTP) is served: {_READ_ONLY}")
        else:
            if method != "POST":
                raise _MethodNotAllowed(f"method {method} is not allowed here; use POST")
            if headers.get("content-type") != "application/x-git-upload-pack-request":
                raise _UnsupportedMediaType("send Content-Type: application/x-git-upload-pack-request")
            if headers.get("content-encoding", "identity") not in ("identity", "gzip", "x-gzip"):
                raise _UnsupportedMediaType("only gzip request bodies are understood")
            declared = headers.get("content-length")  # refused before a byte of the body is read
            if declared is not None and not declared.strip().isdigit():
                raise InvalidRequest("the Content-Length header must be a number of bytes")
            if declared is not None and int(declared) > self.max_body_bytes:
                limit = self.max_body_bytes
                raise TooLarge(f"the request body is over {limit} bytes", limit=limit)

        caller = await threads.run(
            authenticate, self.services, _token(headers), self.admin_token, client_address(scope)
        )
        scope.setdefault("state", {})["caller"] = caller.actor  # for the access log
        repo = await threads.run(self._repository, caller, slug)
        if self.git is None:
            raise Unavailable(_NO_GIT)
        pack = UploadPack(
            git=self.git,
            repo=repo,
            # Only the admin may see pending proposals, and only when asking for them.
            hide_proposals=not (caller.is_admin and headers.get(PROPOSALS_HEADER) == "1"),
            git_protocol=headers.get("git-protocol"),
        )
        try:
            if action == "info/refs":
                async with self._slot():
                    await pack.advertise(receive, send)
                return
            # The body is read before taking a slot, so a slow client cannot hold one while it sends.
            body = await read_body(receive, headers.get("content-encoding"), self.max_body_bytes)
            if body is None:
                return  # the client went away
            async with self._slot():
                refusal = await self._refusal(pack, body)
                if refusal is not None:
                    await _send_git_error(send, refusal)
                    return
                await pack.serve(body, receive, send)
        except (FileNotFoundError, PermissionError) as err:  # the binary went away since startup
            log.error("cannot run %s: %s", self.git, err)
            raise Unavailable(_NO_GIT) from None

    def _repository(self, caller: Caller, slug: str) -> Path:
        """The KB's bare repository. Raises NotFound, also when the caller may not see the KB."""
        return kbs.repository(self.services, caller, slug)

    async def _refusal(self, pack: UploadPack, body: bytes) -> str | None:
        """Why a protocol v2 request must not reach git, or None. v0/v1 wants are checked by git itself."""
        if pack.version != 2:
            return None
        try:
            request = parse_v2_request(body)
        except ValueError as err:
            return f"upload-pack: malformed request: {err}"
        if request.command not in _V2_COMMANDS:
            return f"upload-pack: command {request.command!r} is not served here"
        if request.want_refs:
            return "upload-pack: want-ref is not allowed"
        if pack.hide_proposals:
            assert self.git is not None
            oid = await unreachable_want(self.git, pack.repo, request.wants)
            if oid is not None:
                return f"upload-pack: not our ref {oid}"
        return None


def git_app(services: Services, admin_token: str, *, git: str | None) -> GitEdge:
    """The ASGI app to mount at `/git`; `git` is the C git binary (`shutil.which("git")`) or None."""
    return GitEdge(services, admin_token, git=git)


def _route_path(scope: Scope) -> str:
    """The path below the mount point (as Starlette's routing computes it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


def _headers(scope: Scope) -> dict[str, str]:
    """Request headers, lowercase names, first value wins."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1").strip())
    return found


def _token(headers: dict[str, str]) -> str | None:
    """The token of `Authorization: Bearer TOKEN` or the password of `Authorization: Basic ...`."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return credentials or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


async def _send_error(scope: Scope, send: Send, err: KBError) -> None:
    """The contract's JSON error; for the git client, the message as text/plain, which git prints
    as `remote: MESSAGE` before its own `fatal: ... error: STATUS` line."""
    status = err.status
    scope.setdefault("state", {})["error_code"] = err.code
    if _headers(scope).get("user-agent", "").startswith("git/"):
        body, kind = f"{err.message}\n".encode(), b"text/plain; charset=utf-8"
    else:
        body, kind = json.dumps({"error": err.to_dict()}).encode(), b"application/json"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    if status == 401:
        # git prompts for (or, with GIT_TERMINAL_PROMPT=0, fails cleanly without) credentials on this.
        headers.append((b"www-authenticate", b'Basic realm="kbserver"'))
    if status == 405:
        allow = b"POST" if scope["path"].endswith("git-upload-pack") else b"GET"
        headers.append((b"allow", allow))
    if status in (401, 503) and "retry_after" in err.details:
        headers.append((b"retry-after", str(err.details["retry_after"]).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_git_error(send: Send, message: str) -> None:
    """Refuse inside the protocol (as git does): 200 with one ERR packet, shown as "remote error: ..."."""
    body = error_packet(message)
    headers = [
        (b"content-type", b"application/x-git-upload-pack-result"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
