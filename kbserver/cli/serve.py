"""The long-running commands: `serve`, `worker` and `mcp` (stdio), and `migrate`."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import socket
import threading
from types import FrameType

from kbserver import __version__
from kbserver.cli.context import closing, services_of, settings_of
from kbserver.config import admin_token
from kbserver.core.errors import Unavailable
from kbserver.services.reading import semantic
from kbserver.supervisor import FollowerProcess, StopFlag, end_with_parent, parent_gone
from kbserver.wiring import open_control, open_services

__all__ = ["MIN_ADMIN_TOKEN", "listen", "mcp", "migrate", "serve", "worker"]

log = logging.getLogger("kbserver.cli")

MIN_ADMIN_TOKEN = 24
"""An admin token shorter than this gets a warning at `serve` (a generated one has 47 characters)."""


def listen(host: str, port: int) -> socket.socket:
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


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from kbserver.app import bootstrap, create_app

    settings = settings_of(args, host=args.host, port=args.port)
    sock = listen(settings.host, settings.port)
    port = int(sock.getsockname()[1])
    child = FollowerProcess(settings.data) if settings.follower == "child" else None
    options = settings.options() if child is None else dataclasses.replace(settings.options(), follow=False)
    data = settings.data.resolve()
    new_data = not data.is_dir()
    new_token = not settings.admin_token and not (data / "admin-token").exists()
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
            drain_asked = False  # a SIGTERM asked for a drain; on_tick starts its timer
            drain_started = False
            readiness = app.state.readiness

            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                # A signal handler: flags only. Starting a thread or taking a lock here could
                # deadlock a main thread interrupted while it held that lock.
                draining = sig == signal.SIGTERM and settings.drain_seconds > 0
                if draining and not self.drain_asked and not self.should_exit:
                    self.drain_asked = True
                    self.readiness.draining = True  # /healthz answers 503 at once: traffic moves away
                    return
                uvicorn.Server.handle_exit(self, sig, frame)  # at once (no drain, a second signal, Ctrl-C)

            async def on_tick(self, counter: int) -> bool:
                if self.drain_asked and not self.drain_started:
                    self.drain_started = True
                    args = (self, signal.SIGTERM, None)
                    drain = threading.Timer(settings.drain_seconds, uvicorn.Server.handle_exit, args=args)
                    drain.daemon = True
                    drain.start()
                return await super().on_tick(counter)

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:  # the address is reported only once the server answers on it
                    print(f"kbserver {__version__} on {base}")
                    print(f"admin URL: {base}/admin (HTTP API: {base}/api/v1, described by /openapi.json)")
                    print(f"admin token: {token}")
                    print(f"data folder: {data}", flush=True)
                    if new_data:  # a serve started from another folder would otherwise look empty
                        print(
                            f"NOTE: there was no data folder at {data}, so a NEW, EMPTY one was made there"
                            + (" with a new admin token (in admin-token)" if new_token else "")
                            + "; to use an existing one, stop and pass --data DIR or set KBSERVER_DATA",
                            flush=True,
                        )
                    elif new_token:
                        print(
                            f"NOTE: a new admin token was generated into {data / 'admin-token'}", flush=True
                        )

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                # Queries waiting for an embedding fail now (uvicorn waits for every open request).
                threading.Thread(target=semantic.stop_queries, args=(services,), daemon=True).start()
                await super().shutdown(sockets)
                if child is not None:  # here: uvicorn re-raises SIGTERM once run() returns
                    child.stop()

        # log_config=None: uvicorn's loggers go through the one JSON handler (kbserver.logs).
        # Forwarded headers are read by the app, only from the proxies named (kbserver.core.clients).
        config = uvicorn.Config(
            app, access_log=False, log_level="warning", log_config=None, proxy_headers=False
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


def mcp(args: argparse.Namespace) -> int:
    from kbserver.mcp import run_stdio

    settings, services = services_of(args)
    with closing(services):
        services.start()  # follows main unless another process (serve, a worker) already does
        run_stdio(services, args.agent, settings.public)  # the card's links
    return 0


def worker(args: argparse.Namespace) -> int:
    settings = settings_of(args)  # JSON logs; refuses a missing data folder like every other command
    services = open_services(settings.data, dataclasses.replace(settings.options(), follow=True))
    stop = StopFlag()  # the handlers only set a flag: an Event.set there could deadlock the loop
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop.set)
    if args.parent is not None:
        end_with_parent(args.parent, stop)
    with closing(services):
        services.start()
        stop.wait(2.0)  # the first try to lead happens at once: give it time before saying which
        said: bool | None = None
        while not stop.is_set():
            if args.parent is not None and parent_gone(args.parent):
                log.warning("the server (process %d) is gone; this follower process stops", args.parent)
                break
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


def migrate(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    control = open_control(settings.data, settings.options())  # opening applies what is missing
    try:
        where = "PostgreSQL" if settings.control_url else str(settings.data / "control.db")
        print(f"control store ({where}): schema version {control.schema_version()}")
    finally:
        control.close()
    return 0
