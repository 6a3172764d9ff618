"""`kbserver mount --url|--update` and `kbserver run`: the commands of a sandbox host on another
machine, which reach the server over HTTP only (no data folder).

`run` starts a run as the agent whose token it has, mounts each KB's pinned version read-only under
the mount root, writes MCP client configurations that name the run (the `Kb-Run` header), runs the
command with `KBSERVER_URL`, `KBSERVER_RUN`, `KBSERVER_CONTEXT_DIR` and `KBSERVER_TOKEN` set, passes
SIGINT and SIGTERM on to it, ends the run when it exits, and exits with its status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from kbserver.cli.bars import progress_bars
from kbserver.cli.mounts import Mounted, mount, read_source, source_file, update
from kbserver.cli.remote import Remote, check_url
from kbserver.core.errors import InvalidRequest, KBError, NotFound

__all__ = ["DEFAULT_MOUNT_ROOT", "MCP_SERVER_NAME", "mount_command", "run_command"]

DEFAULT_MOUNT_ROOT = Path("/mnt/context/contexts")
"""Where `kbserver run` mounts the KBs when it may create it (else ./context), as the platform does."""

MCP_SERVER_NAME = "kbserver"
"""The server's name in the MCP client configurations `kbserver run` writes."""

NO_AUTO_MEMORY = "CLAUDE_CODE_DISABLE_AUTO_MEMORY"
"""Claude Code's documented switch for its own auto memory: off while the agent can write a KB."""

_WRITABLE = ("read_write", "read_write_ask")


def _token(args: argparse.Namespace) -> str:
    token = args.token or os.environ.get("KBSERVER_TOKEN")
    if not token:
        raise InvalidRequest("pass --token TOKEN (or set KBSERVER_TOKEN): the agent's token")
    return str(token)


def _print_mounted(done: Mounted, how: str) -> None:
    changes = f" ({done.written} written, {done.deleted} deleted)" if how == "updated" else ""
    print(f"{how} {done.folder}: KB {done.slug} at version {done.version}, {done.files} files{changes}")


def mount_command(args: argparse.Namespace) -> int:
    """`kbserver mount`: the local form (SLUG DIR, on the data folder), a copy from a server
    (`--url`, with `--kb` or `--run`), or `--update DIR`."""
    where: list[str] = args.where
    remote_form = args.url or args.kb or args.run
    if not args.update and not remote_form:
        if len(where) != 2:
            raise InvalidRequest("mount takes SLUG DIR (or --url URL --kb SLUG DIR, or --update DIR)")
        args.slug, args.dir = where
        from kbserver.cli import admin  # the data folder's services, only for the local form

        return admin.mount(args)
    if len(where) != 1:
        raise InvalidRequest("with --url or --update, mount takes one folder: DIR")
    folder = Path(where[0])
    if args.update:
        if args.kb or args.run or args.url:
            raise InvalidRequest("--update takes DIR alone: the copy's source says where it came from")
        with progress_bars() as bars:
            done = update(
                folder, _token(args), args.version, lambda n, of: bars(f"updating {folder.name}", n, of)
            )
        _print_mounted(done, "updated")
        return 0
    if bool(args.kb) == bool(args.run):
        raise InvalidRequest("pass exactly one of --kb SLUG and --run RUN")
    if args.run and args.version:
        raise InvalidRequest("--version goes with --kb; a run pinned its versions")
    remote = Remote(check_url(args.url or os.environ.get("KBSERVER_URL")), _token(args))
    if args.kb:
        with progress_bars() as bars:
            done = mount(remote, args.kb, folder, args.version, None, _bar(bars, args.kb))
        _print_mounted(done, "mounted")
        return 0
    run = remote.call("GET", f"/runs/{args.run}")
    for slug in sorted(run.get("mounts") or {}):
        with progress_bars() as bars:
            done = mount(remote, slug, folder / slug, None, args.run, _bar(bars, slug))
        _print_mounted(done, "mounted")
    return 0


def _bar(bars: Callable[[str, int, int | None], None], slug: str) -> Callable[[int, int], None]:
    return lambda done, total: bars(f"mounting {slug}", done, total)


def mount_root(given: str | None) -> Path:
    """The folder the KBs go into: `given`, else /mnt/context/contexts where it may be created,
    else ./context."""
    if given:
        return Path(given)
    try:
        DEFAULT_MOUNT_ROOT.mkdir(parents=True, exist_ok=True)
        if os.access(DEFAULT_MOUNT_ROOT, os.W_OK | os.X_OK):
            return DEFAULT_MOUNT_ROOT
    except OSError:
        pass
    return Path("context").absolute()


def _mount_pinned(remote: Remote, run: str, slug: str, version: str, folder: Path, bars: Any) -> Mounted:
    """The run's version of `slug` in `folder`: an earlier copy of the same KB from the same server
    is moved to it (only what changed); a missing or empty folder gets a fresh copy."""
    if source_file(folder).exists():
        source = read_source(folder)
        if (source.url, source.slug) == (remote.url, slug):
            return update(folder, remote.token, version or None, _bar(bars, slug), run)
    return mount(remote, slug, folder, None, run, _bar(bars, slug))


def _mcp_configs(url: str, run: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Claude Code's `.mcp.json` (the token as an environment reference, which it expands) and the
    generic `mcpServers` JSON (clients without expansion get the token itself)."""
    headers = {"Authorization": "Bearer ${KBSERVER_TOKEN}", "Kb-Run": run}
    claude = {"mcpServers": {MCP_SERVER_NAME: {"type": "http", "url": f"{url}/mcp", "headers": headers}}}
    generic = {"mcpServers": {MCP_SERVER_NAME: {"url": f"{url}/mcp", "headers": dict(headers)}}}
    return claude, generic


def _write_json(path: Path, data: object, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
        out.write("\n")


@contextlib.contextmanager
def _configs(root: Path, url: str, run: str, token: str) -> Iterator[dict[str, str]]:
    """Write the MCP configurations for the command; remove them when it is done. Yields the
    environment that names them."""
    claude, generic = _mcp_configs(url, run)
    generic_token = json.loads(json.dumps(generic))
    generic_token["mcpServers"][MCP_SERVER_NAME]["headers"]["Authorization"] = f"Bearer {token}"
    written: list[Path] = []
    try:
        # Claude Code's files name the token by reference (anyone may read them); the generic one
        # holds the token itself, for the run's user alone.
        for path, data, mode in (
            (root / ".mcp.json", claude, 0o644),
            (root / ".mcp-servers.json", generic_token, 0o600),
        ):
            _write_json(path, data, mode)
            written.append(path)
        here = Path(".mcp.json")
        if not here.exists():  # Claude Code reads the project's .mcp.json from its working folder
            with contextlib.suppress(OSError):
                _write_json(here, claude, 0o644)
                written.append(here.absolute())
        yield {"KBSERVER_MCP_CONFIG": str(root / ".mcp-servers.json")}
    finally:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()


def _run_child(command: list[str], env: dict[str, str]) -> int:
    """Run `command`, passing SIGTERM and SIGHUP on to it (and SIGINT, unless a terminal already
    sent that to the whole foreground group); its exit status, 128+N when a signal N ended it.

    A signal ignored when kbserver run started (SIGINT in a background job, SIGHUP under nohup)
    stays ignored, for the command too. The others are handled before the command starts, so it
    starts with their default dispositions, and one that arrives meanwhile is passed on after."""
    from_terminal = sys.stdin.isatty()
    started: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and from_terminal:
            return  # the terminal sent it to the command too
        if not started:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            started[0].send_signal(signum)

    handled = [
        s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN
    ]
    before = {s: signal.signal(s, forward) for s in handled}
    try:
        try:
            started.append(subprocess.Popen(command, env=env))
        except FileNotFoundError:
            raise NotFound(
                f"command {command[0]!r} not found; pass COMMAND after --", command=command[0]
            ) from None
        except PermissionError:
            raise InvalidRequest(f"command {command[0]!r} cannot be run (permission denied)") from None
        for signum in pending:
            forward(signum, None)
        status = started[0].wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    return status if status >= 0 else 128 - status


def run_command(args: argparse.Namespace) -> int:
    """`kbserver run ... -- COMMAND [ARG]...`."""
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise InvalidRequest("pass the command to run after --: kbserver run [OPTIONS] -- COMMAND [ARG]...")
    url = check_url(args.url or os.environ.get("KBSERVER_URL"))
    token = _token(args)
    remote = Remote(url, token)
    root = mount_root(args.mount_root)
    body: dict[str, Any] = {"interactive": bool(args.interactive)}
    if args.kb:
        body["kbs"] = list(args.kb)
    previous = signal.signal(signal.SIGTERM, _stop)  # until the command runs: end the run, then exit
    try:
        started = remote.call("POST", "/runs", body)
    except BaseException:
        signal.signal(signal.SIGTERM, previous)
        raise
    run = str(started["id"])
    try:
        root.mkdir(parents=True, exist_ok=True)
        mounts: dict[str, str] = dict(started.get("mounts") or {})
        with progress_bars() as bars:
            for slug, version in sorted(mounts.items()):
                _mount_pinned(remote, run, slug, version, root / slug, bars)
        permissions = {kb["slug"]: kb.get("permission") for kb in remote.call("GET", "/kbs")}
        env = {**os.environ, "KBSERVER_URL": url, "KBSERVER_RUN": run, "KBSERVER_TOKEN": token}
        env["KBSERVER_CONTEXT_DIR"] = str(root.absolute())
        if any(permissions.get(slug) in _WRITABLE for slug in mounts):
            env.setdefault(NO_AUTO_MEMORY, "1")  # memories go to the KB, not Claude Code's own folder
        print(
            f"run {run}: {len(mounts)} KB(s) read-only in {root}; running {command[0]}",
            file=sys.stderr,
            flush=True,
        )
        with _configs(root, url, run, token) as extra:
            status = _run_child(command, {**env, **extra})
    finally:
        _end(remote, run)
        signal.signal(signal.SIGTERM, previous)
    return status


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # through the `finally` that ends the run


def _end(remote: Remote, run: str) -> None:
    try:
        remote.call("POST", f"/runs/{run}/end", {})
    except KBError as err:
        print(f"warning: run {run} was not ended ({err.code}: {err.message}); it expires", file=sys.stderr)
