"""Running C git's `upload-pack --stateless-rpc` for one request, streaming its answer to the client."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import zlib
from dataclasses import dataclass
from pathlib import Path

import anyio
from starlette.types import Message, Receive, Send

from kbserver.core.errors import InvalidRequest, TooLarge

__all__ = [
    "PROPOSALS",
    "UploadPack",
    "protocol_version",
    "read_body",
    "unreachable_want",
]

log = logging.getLogger("kbserver.gitweb")

PROPOSALS = "refs/proposals"  # pending proposals' commits: hidden unless the admin asks for them
_CHUNK = 64 * 1024
_STDERR_KEEP = 4096
_PROTOCOL_VALUE = re.compile(r"[A-Za-z0-9=:._-]{1,256}")
_NO_CACHE = [
    (b"cache-control", b"no-cache, max-age=0, must-revalidate"),
    (b"expires", b"Fri, 01 Jan 1980 00:00:00 GMT"),
    (b"pragma", b"no-cache"),
]
# Always on the command line, where they override any system or repository config: no want of an
# object no visible ref reaches, no want-ref, no partial clone (whose lazy fetches want blobs by id).
_LOCKED_CONFIG = (
    "uploadpack.allowAnySHA1InWant=false",
    "uploadpack.allowTipSHA1InWant=false",
    "uploadpack.allowReachableSHA1InWant=false",
    "uploadpack.allowRefInWant=false",
    "uploadpack.allowFilter=false",
)


def protocol_version(git_protocol: str | None) -> int:
    """The version git derives from GIT_PROTOCOL: the highest `version=N` among its `:`-separated keys."""
    version = 0
    for item in (git_protocol or "").split(":"):
        key, _, value = item.partition("=")
        if key == "version" and value in ("0", "1", "2"):
            version = max(version, int(value))
    return version


@dataclass(frozen=True)
class UploadPack:
    """How to run upload-pack for one KB and one caller."""

    git: str
    repo: Path
    hide_proposals: bool
    git_protocol: str | None  # the client's Git-Protocol header

    @property
    def protocol(self) -> str | None:
        """The Git-Protocol header passed to git as GIT_PROTOCOL, if well-formed."""
        value = self.git_protocol
        return value if value and _PROTOCOL_VALUE.fullmatch(value) else None

    @property
    def version(self) -> int:
        return protocol_version(self.protocol)

    def argv(self, *, advertise: bool) -> list[str]:
        config = list(_LOCKED_CONFIG)
        if self.hide_proposals:
            config.append(f"uploadpack.hideRefs={PROPOSALS}")
        args = [self.git]
        for item in config:
            args += ["-c", item]
        args += ["upload-pack", "--stateless-rpc", "--strict"]
        if advertise:
            args.append("--http-backend-info-refs")
        return [*args, str(self.repo)]

    def env(self) -> dict[str, str]:
        """A small fixed environment: no HOME, so no user's global config; the system config stays."""
        env = {"LC_ALL": "C"}
        if self.protocol:
            env["GIT_PROTOCOL"] = self.protocol
        return env

    async def advertise(self, receive: Receive, send: Send) -> None:
        """GET info/refs: the ref advertisement (v0/v1) or the capability advertisement (v2)."""
        prefix = b"" if self.version == 2 else b"001e# service=git-upload-pack\n0000"
        await self._run(
            self.argv(advertise=True),
            None,
            prefix,
            "application/x-git-upload-pack-advertisement",
            receive,
            send,
        )

    async def serve(self, body: bytes, receive: Receive, send: Send) -> None:
        """POST git-upload-pack: negotiation and the pack, streamed as git writes it."""
        await self._run(
            self.argv(advertise=False), body, b"", "application/x-git-upload-pack-result", receive, send
        )

    async def _run(
        self,
        argv: list[str],
        stdin: bytes | None,
        prefix: bytes,
        content_type: str,
        receive: Receive,
        send: Send,
    ) -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env(),
            start_new_session=True,  # its own process group: a kill reaches pack-objects as well
        )
        assert proc.stdout is not None and proc.stderr is not None
        stderr = bytearray()
        drained = anyio.Event()
        watching = anyio.CancelScope()
        disconnected = False

        async def watch(everything: anyio.CancelScope) -> None:
            nonlocal disconnected
            with watching:
                while (await receive())["type"] != "http.disconnect":
                    pass
                disconnected = True
                everything.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch, tg.cancel_scope)
                tg.start_soon(_drain, proc.stderr, stderr, drained)
                if stdin is not None:
                    tg.start_soon(_feed, proc, stdin)
                headers = [(b"content-type", content_type.encode()), *_NO_CACHE]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                if prefix:
                    await send({"type": "http.response.body", "body": prefix, "more_body": True})
                while chunk := await proc.stdout.read(_CHUNK):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                watching.cancel()  # servers report a completed response as a disconnect too
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                await proc.wait()
                await drained.wait()
                tg.cancel_scope.cancel()
        except* OSError:  # the client went away while we were sending (servers that raise on it)
            disconnected = True
        finally:
            await _reap(proc)
        if proc.returncode and not disconnected:
            log.warning(
                "git upload-pack on %s exited with %s: %s",
                self.repo.name,
                proc.returncode,
                bytes(stderr).decode("utf-8", "replace").strip(),
            )


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    """Write the request to git's stdin (concurrently with reading, so neither pipe can fill up)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()
        await proc.stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        pass  # git stopped reading (it died on a bad request); its answer says why


async def _drain(stream: asyncio.StreamReader, keep: bytearray, done: anyio.Event) -> None:
    try:
        while chunk := await stream.read(_CHUNK):
            keep.extend(chunk[: max(0, _STDERR_KEEP - len(keep))])
    finally:
        done.set()


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Kill git's process group unless it has exited, and wait for it, even while being cancelled."""
    with anyio.CancelScope(shield=True):
        if proc.returncode is None:
            # Its pid cannot be reused before we reap it, so this cannot hit another process group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await proc.wait()


async def read_body(receive: Receive, encoding: str | None, limit: int) -> bytes | None:
    """The request body, gunzipped when `Content-Encoding: gzip`; None if the client went away.

    Raises TooLarge past `limit` bytes (sent or unpacked) and InvalidRequest on a broken gzip stream.
    """
    unzip = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding in ("gzip", "x-gzip") else None
    out = bytearray()
    sent = 0
    more = True
    while more:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        sent += len(chunk)
        if sent > limit:
            raise TooLarge(f"the request body is over {limit} bytes", limit=limit)
        try:
            if unzip is None:
                out += chunk
            else:
                out += unzip.decompress(chunk, limit + 1 - len(out))
                if unzip.unconsumed_tail:
                    raise TooLarge(f"the unpacked request body is over {limit} bytes", limit=limit)
        except zlib.error:
            raise InvalidRequest("the request body is not valid gzip") from None
        if len(out) > limit:
            raise TooLarge(f"the unpacked request body is over {limit} bytes", limit=limit)
    if unzip is not None and not unzip.eof:
        raise InvalidRequest("the gzip request body is truncated")
    return bytes(out)


async def unreachable_want(git: str, repo: Path, wants: tuple[str, ...]) -> str | None:
    """The first of `wants` that no visible ref (all but the proposals) reaches, or None if all are.

    Protocol v2 upload-pack serves any object by id whatever uploadpack.hideRefs says, so the edge asks
    `git rev-list --objects WANTS --not VISIBLE` first: any output is an object only hidden refs reach.
    Trees and blobs wanted by id may be refused although reachable; clone and fetch want commits.
    """
    if not wants:
        return None
    proc = await asyncio.create_subprocess_exec(
        git,
        f"--git-dir={repo}",
        "rev-list",
        "--objects",
        "--stdin",
        "--not",
        f"--exclude={PROPOSALS}/*",
        "--all",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={"LC_ALL": "C"},
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(f"{oid}\n" for oid in wants).encode())
        try:
            await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # rev-list died on an unknown object; its exit status says so
        first = (await proc.stdout.readline()).decode().split(" ", 1)[0].strip()
    finally:
        await _reap(proc)
    if first:
        return first if first in wants else wants[0]
    return None if proc.returncode == 0 else wants[0]
