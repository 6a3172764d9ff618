"""Command line: `kbserver serve`, KB and agent management, import, mount, reindex, fsck, repack, mcp."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from kbserver import __version__, logs
from kbserver.config import Settings, admin_token
from kbserver.core.errors import AlreadyExists, InvalidRequest, KBError, NotFound, Unavailable
from kbserver.services import Services, agents, files, health, kbs, proposals, search, semantic
from kbserver.services.auth import ADMIN
from kbserver.supervisor import FollowerProcess, end_with_parent
from kbserver.wiring import open_control, open_services

__all__ = ["MIN_ADMIN_TOKEN", "main"]

log = logging.getLogger("kbserver.cli")

MIN_ADMIN_TOKEN = 24
"""An admin token shorter than this gets a warning at `serve` (a generated one has 47 characters)."""


@contextlib.contextmanager
def _bars() -> Iterator[Callable[[str, int, int | None], None]]:
    """Progress bars on stderr (rich), one per label, each added when its first count arrives.

    On a terminal they redraw in place; when stderr is a file or a pipe (a log) nothing is
    redrawn: rich prints the final state once, a plain line per bar, and only when the command
    succeeded.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as shown:
        tasks: dict[str, TaskID] = {}

        def update(label: str, done: int, total: int | None) -> None:
            if label not in tasks:
                tasks[label] = shown.add_task(label, total=total)
            shown.update(tasks[label], completed=done, total=total)

        try:
            yield update
        except BaseException:
            # A refused command prints only its one `error: CODE: MESSAGE` line: no final bar.
            shown.live.transient = True
            if not shown.console.is_terminal:
                shown.console.file = io.StringIO()
            raise


@contextlib.contextmanager
def _progress(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """One progress bar (see `_bars`), shown from the start."""
    with _bars() as bars:

        def update(done: int, of: int | None = None) -> None:
            bars(label, done, of if of is not None else total)

        update(0)
        yield update


def _settings(args: argparse.Namespace, **options: object) -> Settings:
    """Settings from the environment and the command's options; checks the data folder.

    Every command but `serve` and `kb create` refuses a data folder that does not exist, so a typo
    in --data is an error instead of a new, empty data folder.
    """
    settings = Settings.from_env(data=args.data or args.data_first, **options)
    # A one-shot command prints what it did; its INFO logs (a repack's, say) would only repeat it as
    # JSON on the terminal, unless KBSERVER_LOG_LEVEL asks for them.
    quiet = not args.long_running and "KBSERVER_LOG_LEVEL" not in os.environ
    logs.configure("WARNING" if quiet and settings.log_level in ("DEBUG", "INFO") else settings.log_level)
    data = settings.data
    if data.exists() and not data.is_dir():
        raise InvalidRequest(f"data folder {data} is not a folder; pass --data DIR", data=str(data))
    if not args.creates_data and not data.is_dir():
        raise NotFound(
            f"data folder {data} does not exist; pass the right --data DIR (or set KBSERVER_DATA), "
            "or make one with `kbserver serve` or `kbserver kb create`",
            data=str(data),
        )
    return settings


def _services(args: argparse.Namespace) -> tuple[Settings, Services]:
    settings = _settings(args)
    return settings, open_services(settings.data, settings.options())


def _listen(host: str, port: int) -> socket.socket:
    """Bind and listen before anything else happens, so a busy port fails first and changes nothing."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP.
    # Without it every response (headers, then body) waited ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise Unavailable(
            f"cannot listen on {host}:{port}: {err.strerror or err}; "
            "is another server running there? pick another --port",
            host=host,
            port=port,
        ) from None
    sock.set_inheritable(True)
    return sock


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from kbserver.app import bootstrap, create_app

    settings = _settings(args, host=args.host, port=args.port)
    sock = _listen(settings.host, settings.port)
    port = int(sock.getsockname()[1])
    child = FollowerProcess(settings.data) if settings.follower == "child" else None
    options = settings.options() if child is None else dataclasses.replace(settings.options(), follow=False)
    services = open_services(settings.data, options)
    try:
        if bootstrap(settings, services):
            print(f"imported sample_kb/ as KB 'sample' into {settings.data}")
        app = create_app(settings, services)
        token = admin_token(settings)
        if len(token) < MIN_ADMIN_TOKEN:  # a warning in the log (every stderr line is JSON)
            log.warning(
                "the admin token is only %d characters; whoever guesses it owns every KB: use at least %d "
                "random ones, e.g. KBSERVER_ADMIN_TOKEN=$(python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')",
                len(token),
                MIN_ADMIN_TOKEN,
            )
        base = f"http://{settings.host}:{port}"

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                readiness = app.state.readiness
                if sig == signal.SIGTERM and settings.drain_seconds > 0 and not readiness.draining:
                    readiness.draining = True  # /healthz answers 503: the balancer moves traffic away
                    drain = threading.Timer(settings.drain_seconds, self._exit, args=(sig, frame))
                    drain.daemon = True
                    drain.start()
                    return
                self._exit(sig, frame)  # at once (no drain, a second signal, Ctrl-C)

            def _exit(self, sig: int, frame: FrameType | None) -> None:
                uvicorn.Server.handle_exit(self, sig, frame)
                # Queries waiting for an embedding fail now (uvicorn waits for every open request).
                threading.Thread(target=semantic.stop_queries, args=(services,), daemon=True).start()

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:  # the address is reported only once the server answers on it
                    print(f"kbserver {__version__} on {base}")
                    print(f"admin URL: {base}/admin (HTTP API: {base}/api/v1, described by /openapi.json)")
                    print(f"admin token: {token}", flush=True)

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                await super().shutdown(sockets)
                if child is not None:  # here: uvicorn re-raises SIGTERM once run() returns
                    child.stop()

        # log_config=None: uvicorn's loggers go through the one JSON handler (kbserver.logs).
        # Forwarded headers only from the proxies named (uvicorn would believe any from loopback).
        proxies = settings.trusted_proxies
        config = uvicorn.Config(
            app,
            access_log=False,
            log_level="warning",
            log_config=None,
            proxy_headers=bool(proxies),
            forwarded_allow_ips=proxies or [],
        )
        if child is not None:
            child.start()  # after the sample's import: the child finds it on its first look
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()
        if child is not None:
            child.stop()
        services.close()
    return 0


def _kb_create(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        kb = kbs.create(services, ADMIN, args.slug, args.description)
    print(json.dumps(kb.model_dump(mode="json")))
    return 0


def _kb_limits(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        kb = kbs.set_limits(services, ADMIN, args.slug, args.max_file_bytes, args.max_files)
    print(json.dumps(kb.limits.model_dump(mode="json")))
    return 0


def _agent_create(args: argparse.Namespace) -> int:
    _, services = _services(args)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    with _closing(services):
        try:
            agent, token = agents.create(services, ADMIN, args.name, args.parent, tools, args.auto_record)
        except AlreadyExists as err:  # a second run of the README's walkthrough: say how to get a token
            hint = f"; `kbserver agent token {args.name}` gives it a new token"
            raise AlreadyExists(err.message + hint, **err.details) from None
    print(f"created agent {agent.name} (tools: {', '.join(agent.tools)}); its token, shown once:")
    print(token)
    return 0


def _kb_list(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        listing = kbs.visible(services, ADMIN)
    if args.json:
        print(json.dumps([kb.model_dump(mode="json") for kb in listing], ensure_ascii=False))
        return 0
    for kb in listing:
        head = (kb.head or "-")[:12]
        print(f"{kb.slug}\t{head}\t{kb.description}")
    return 0


def _agent_list(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        listing = agents.listing(services, ADMIN)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), ensure_ascii=False))
        return 0
    for agent in listing.agents:
        links = ", ".join(f"{link.kb}:{link.permission}" for link in agent.links) or "-"
        print(f"{agent.name}\ttools={','.join(agent.tools)}\tlinks={links}")
    return 0


def _agent_token(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        agent, token = agents.rotate(services, ADMIN, args.name)
    print(f"new token for agent {agent.name}; the old one stops working now. Shown once:")
    print(token)
    return 0


def _agent_delete(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        agents.delete(services, ADMIN, args.name)
    print(f"deleted agent {args.name} and its links; its token stops working now")
    return 0


def _unlink(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        agents.unlink(services, ADMIN, args.agent, args.slug)
    print(f"unlinked agent {args.agent} from KB {args.slug}")
    return 0


def _proposals(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        listing = proposals.listing(services, ADMIN, args.slug, args.status)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), ensure_ascii=False))
        return 0
    for p in listing.proposals:
        paths = ", ".join(f"{f.mode} {f.path}" for f in p.files)
        print(f"{p.id}\t{p.status}\t{p.agent}\t{p.created}\t{paths}")
    return 0


def _approve(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        out = proposals.approve(services, ADMIN, args.slug, args.id)
    print(f"approved proposal {args.id} of KB {args.slug} as version {out.version}")
    return 0


def _reject(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        proposals.reject(services, ADMIN, args.slug, args.id, args.reason)
    print(f"rejected proposal {args.id} of KB {args.slug}")
    return 0


def _link(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        agents.link(services, ADMIN, args.agent, args.slug, args.permission)
    print(f"linked agent {args.agent} to KB {args.slug} with {args.permission}")
    return 0


def _import(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services), _progress(f"importing {Path(args.folder).name}") as bar:
        result = kbs.import_folder(
            services, ADMIN, args.slug, Path(args.folder), bar, args.description, delete=args.delete
        )
    for skipped in result.skipped:
        print(f"skipped {skipped}", file=sys.stderr)
    if not result.changed:
        print(
            f"nothing changed: KB {result.slug} already holds these {result.unchanged} files "
            f"at version {result.version}; no version was made"
        )
        return 0
    deleted = f", deleted {result.deleted}" if result.deleted else ""
    print(
        f"imported {result.files} files{deleted} into KB {result.slug} as version {result.version}"
        f" ({result.unchanged} unchanged)"
    )
    return 0


def _mount(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services), _progress(f"writing {Path(args.dir).name}") as bar:
        out = files.export(services, ADMIN, args.slug, Path(args.dir), args.version, bar)
    print(f"wrote {out.files} files of KB {args.slug} at version {out.version} to {args.dir} (read-only)")
    return 0


_STEPS = {"index": "indexing", "vectors": "embedding"}
"""What `reindex` shows for each sink's bar: the index counts files, the vectors count passages
embedded (contents already embedded are reused, so that bar shows only new ones)."""


def _labelled(
    bars: Callable[[str, int, int | None], None], slug: str
) -> Callable[[str, int, int | None], None]:
    def progress(sink: str, done: int, total: int | None) -> None:
        bars(f"{_STEPS.get(sink, sink)} {slug}", done, total)

    return progress


def _reindex(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        slugs = [args.slug] if args.slug else kbs.slugs(services, ADMIN)
        for slug in slugs:
            kbs.describe(services, ADMIN, slug)  # NotFound for an unknown slug
            with _bars() as bars:
                version = search.reindex(services, ADMIN, slug, _labelled(bars, slug))
            print(f"{slug}: index rebuilt at version {version}")
    return 0


def _fsck(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        problems = health.fsck(services)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print("fsck: ok" if not problems else f"fsck: {len(problems)} problem(s)")
    return 0 if not problems else 2


def _repack(args: argparse.Namespace) -> int:
    _, services = _services(args)
    with _closing(services):
        health.repack(services, args.slug, args.full)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from kbserver.mcp import run_stdio

    settings, services = _services(args)
    with _closing(services):
        services.start()  # follows main unless another process (serve, a worker) already does
        run_stdio(services, args.agent, admin_token(settings))  # checks the approval card's token
    return 0


def _worker(args: argparse.Namespace) -> int:
    settings = _settings(args)  # JSON logs; refuses a missing data folder like every other command
    services = open_services(settings.data, dataclasses.replace(settings.options(), follow=True))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.parent is not None:
        end_with_parent(args.parent, stop)
    with _closing(services):
        services.start()
        stop.wait(2.0)  # the first try to lead happens at once: give it time before saying which
        said: bool | None = None
        while not stop.is_set():
            if services.follower.leading != said:
                said = services.follower.leading
                if said:
                    print(f"kbserver worker following main in {settings.data}", flush=True)
                else:
                    print(
                        f"kbserver worker standing by in {settings.data}: another process (serve, a "
                        "worker, kbserver mcp) follows main; this one takes over when it stops",
                        flush=True,
                    )
            stop.wait(1.0)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    control = open_control(settings.data, settings.options())  # opening applies what is missing
    try:
        where = "PostgreSQL" if settings.control_url else str(settings.data / "control.db")
        print(f"control store ({where}): schema version {control.schema_version()}")
    finally:
        control.close()
    return 0


class _closing:
    def __init__(self, services: Services) -> None:
        self.services = services

    def __enter__(self) -> Services:
        return self.services

    def __exit__(self, *exc: object) -> None:
        self.services.close()


class _Parser(argparse.ArgumentParser):
    """argparse with one `error: invalid_request: ...` line (and exit 1) instead of usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: invalid_request: {self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kbserver", description="Versioned memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"kbserver {__version__}")
    # --data also before the command (`kbserver --data D agent list`); its own dest, since the
    # command's --data default (None) would otherwise overwrite it.
    parser.add_argument("--data", dest="data_first", default=None, help="the data folder (as COMMAND --data)")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str,
        fn: Callable[[argparse.Namespace], int],
        help_: str,
        parent: argparse._SubParsersAction[_Parser] | None = None,
        creates_data: bool = False,
    ) -> argparse.ArgumentParser:
        p = (parent or sub).add_parser(name, help=help_, description=help_)
        where = "created when missing" if creates_data else "must exist"
        p.add_argument(
            "--data", default=None, help=f"data folder (default ./kbdata or $KBSERVER_DATA; {where})"
        )
        p.set_defaults(fn=fn, creates_data=creates_data, long_running=name in ("serve", "worker", "mcp"))
        return p

    p = command("serve", _serve, "run the server (HTTP API, MCP, git clone)", creates_data=True)
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1, or $KBSERVER_HOST)")
    p.add_argument(
        "--port", type=int, default=None, help="port to listen on (default 8765, or $KBSERVER_PORT)"
    )

    kb = sub.add_parser("kb", help="manage KBs", description="manage KBs")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    p = command("create", _kb_create, "create a KB (prints it as JSON)", kb_sub, creates_data=True)
    p.add_argument("slug", help="the KB's name: lowercase letters, digits and dashes")
    p.add_argument("--description", default="", help="what the KB is for (goes into its README.md)")
    p = command("list", _kb_list, "list every KB: slug, head version, description", kb_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = command("limits", _kb_limits, "set a KB's write limits (prints them)", kb_sub)
    p.add_argument("slug", help="the KB")
    p.add_argument("--max-file-bytes", type=int, default=None, help="size limit of one file after a change")
    p.add_argument("--max-files", type=int, default=None, help="files per write")

    agent = sub.add_parser("agent", help="manage agents", description="manage agents and their tokens")
    agent_sub = agent.add_subparsers(dest="agent_command", required=True)
    p = command("create", _agent_create, "create an agent; prints its token on the last line", agent_sub)
    p.add_argument("name", help="the agent's name: lowercase letters, digits, dashes and underscores")
    p.add_argument("--parent", default=None, help="an existing agent whose auto memory this one may read")
    p.add_argument("--tools", default=None, help="comma-separated tool sets (default: context)")
    p.add_argument("--auto-record", action="store_true", help="teach the agent to record what it learns")
    p = command("list", _agent_list, "list agents with their tool sets and links", agent_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = command(
        "token",
        _agent_token,
        "give an agent a new token (the old one stops working); prints it last",
        agent_sub,
    )
    p.add_argument("name", help="the agent")
    p = command("delete", _agent_delete, "delete an agent and its links; its token stops working", agent_sub)
    p.add_argument("name", help="the agent")

    p = command("link", _link, "give an agent a permission on a KB (replaces an earlier one)")
    p.add_argument("agent", help="the agent")
    p.add_argument("slug", help="the KB")
    p.add_argument(
        "--permission",
        required=True,
        choices=["read", "read_write", "read_write_ask"],
        help="read; read_write; read_write_ask (writes become proposals an admin approves)",
    )
    p = command("unlink", _unlink, "take an agent's permission on a KB away")
    p.add_argument("agent", help="the agent")
    p.add_argument("slug", help="the KB")

    p = command("proposals", _proposals, "list a KB's proposals, newest first")
    p.add_argument("slug", help="the KB")
    p.add_argument(
        "--status",
        default=None,
        choices=["pending", "approved", "rejected"],
        help="only proposals in this state",
    )
    p.add_argument("--json", action="store_true", help="print the proposals (with their diffs) as JSON")
    p = command("approve", _approve, "apply a pending proposal as a new version")
    p.add_argument("slug", help="the KB")
    p.add_argument("id", help="the proposal's id (prop_...)")
    p = command("reject", _reject, "reject a pending proposal")
    p.add_argument("slug", help="the KB")
    p.add_argument("id", help="the proposal's id (prop_...)")
    p.add_argument("--reason", default=None, help="why, for the agent to read")

    p = command("mount", _mount, "write a read-only copy of a version to a folder")
    p.add_argument("slug", help="the KB")
    p.add_argument("dir", help="a folder that does not exist yet, or is empty")
    p.add_argument("--version", dest="version", default=None, help="the version (default: the head)")

    p = command(
        "import", _import, "import a folder's text files as one version (changed files; --delete mirrors)"
    )
    p.add_argument("slug", help="the KB (created when missing)")
    p.add_argument("folder", help="the folder to import")
    p.add_argument("--description", default="", help="the description of a KB created by the import")
    p.add_argument(
        "--delete",
        action="store_true",
        help="also delete the KB's files that the folder does not hold (mirror it), in the same version",
    )

    p = command("reindex", _reindex, "rebuild the search index of one or every KB")
    p.add_argument("slug", nargs="?", help="the KB (default: every KB)")

    command("migrate", _migrate, "apply the control store's migrations (serve also does at start)")
    command("fsck", _fsck, "check every repository and the control plane (exit 2 on damage)")
    p = command("repack", _repack, "pack one KB's (or every KB's) history with deltas now (git repack)")
    p.add_argument("slug", nargs="?", help="the KB (default: every KB)")
    p.add_argument("--full", action="store_true", help="compute every delta again (slower, smallest)")

    p = command(
        "worker",
        _worker,
        "follow main into the search index in this process (set KBSERVER_FOLLOWER=worker for serve)",
    )
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # serve's child: end with that process

    p = command("mcp", _mcp, "serve MCP over stdio for one agent")
    p.add_argument("--agent", required=True, help="the agent whose tools and permissions the client gets")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.fn(args)
        sys.stdout.flush()  # here, so output closed early (`| head`) is caught below
    except BrokenPipeError:  # the reader has what it wanted: no error, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a tool killed by it
    except KBError as err:
        print(f"error: {err.code}: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:  # the data folder or a target folder cannot be used (permissions, disk full)
        print(f"error: io_error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
