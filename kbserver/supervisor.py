"""`kbserver serve`'s follower as a child process: started and stopped with it, restarted if it dies.

The serving process then never indexes or embeds: the child (`kbserver worker --parent PID`) holds
`follower.lock` and follows main; the server stands by, learning what each sink covers from the
data folder's feed, so `wait_for` and `memory_task_wait` wait exactly as with an embedded follower.
The child writes its log lines to the server's stderr (one log). It ends with its parent even when
the parent is killed (Linux: a parent-death signal; elsewhere it checks its parent every second).
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["FollowerProcess", "StopFlag", "end_with_parent"]

log = logging.getLogger(__name__)

RESTART_SECONDS = (0.5, 1.0, 2.0, 5.0, 15.0)  # pauses before restarting a child that keeps dying
STABLE_SECONDS = 60.0  # a child that ran this long starts the pauses over
STOP_SECONDS = 30.0  # a child not gone this long after SIGTERM is killed
PR_SET_PDEATHSIG = 1


class FollowerProcess:
    """Runs `kbserver worker` for `data` as a supervised child of this process."""

    def __init__(self, data: Path, command: Sequence[str] | None = None) -> None:
        """`command` replaces the child's command line (tests); by default this interpreter runs
        `kbserver.cli worker --data DATA --parent PID` with this process's environment."""
        self._command = (
            list(command)
            if command
            else [
                sys.executable,
                "-m",
                "kbserver.cli",
                "worker",
                "--data",
                str(data),
                "--parent",
                str(os.getpid()),
            ]
        )
        self._cond = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        """The running child's process id (None between a death and its restart)."""
        with self._cond:
            proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._spawn()
        self._thread = threading.Thread(target=self._watch, name="kbserver-follower-process", daemon=True)
        self._thread.start()

    def _spawn(self) -> None:
        # stdout to nowhere (the worker's banner is not the server's); stderr, the log, is shared.
        self._proc = subprocess.Popen(self._command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        log.info("follower process %d started", self._proc.pid)

    def _watch(self) -> None:
        failures = 0
        while True:
            with self._cond:
                proc = self._proc
            if proc is None:
                return
            started = time.monotonic()
            code = proc.wait()
            with self._cond:
                if self._stopping:
                    return
            failures = 1 if time.monotonic() - started >= STABLE_SECONDS else failures + 1
            pause = RESTART_SECONDS[min(failures, len(RESTART_SECONDS)) - 1]
            log.warning("follower process %d exited with %s; restarting it in %g s", proc.pid, code, pause)
            with self._cond:
                if self._cond.wait_for(lambda: self._stopping, timeout=pause):
                    return
                self._spawn()
                self.restarts += 1

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after STOP_SECONDS) and stop supervising it."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                log.warning(
                    "follower process %d did not stop within %g s; killing it", proc.pid, STOP_SECONDS
                )
                proc.kill()
                proc.wait(timeout=STOP_SECONDS)
            log.info("follower process %d stopped", proc.pid)
        if self._thread is not None:
            self._thread.join(timeout=STOP_SECONDS)
            self._thread = None


class StopFlag:
    """A stop request that a signal handler may raise: `set` only stores a flag and writes a byte to
    a pipe, so it takes no lock (an `Event.set` in a handler deadlocked a main thread that was inside
    the same event's `wait`, holding its lock); `wait` sleeps in select(2) on that pipe."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._set = False

    def set(self, *_: object) -> None:
        """Request the stop; safe in a signal handler and from any thread (takes no lock)."""
        self._set = True
        try:
            os.write(self._write, b"\0")
        except OSError:
            pass  # the pipe is full (set often already) or closed: the flag is what counts

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep until the stop is requested or `timeout` seconds passed; whether it is requested."""
        if not self._set:
            try:
                select.select([self._read], [], [], timeout)
            except (OSError, ValueError):
                time.sleep(timeout)  # closed meanwhile
        return self._set

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


def parent_gone(parent: int) -> bool:
    """Whether the process `parent` is no longer this process's parent (it died: we were adopted)."""
    return os.getppid() != parent


def end_with_parent(parent: int, stop: StopFlag, grace: float = STOP_SECONDS) -> None:
    """In the child: request `stop` once `parent` is gone (SIGTERM on its death where Linux sends one;
    a check of the parent every second everywhere, in a thread of its own besides the caller's loop),
    and end the process outright if it has not ended `grace` seconds after a stop was requested."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the check below still ends it within a second

    def check() -> None:
        while not stop.wait(1.0):
            if parent_gone(parent):
                log.warning("the server (process %d) is gone; this follower process stops", parent)
                stop.set()
        # Stopping closes the services (a sink's last write, the follower's join): bounded, but an
        # orphan must never outlive its parent for good, whatever blocks its main thread.
        time.sleep(grace)
        log.error("this follower process did not stop within %g s of its stop; it exits now", grace)
        os._exit(1)

    if parent_gone(parent):
        stop.set()
    threading.Thread(target=check, name="kbserver-parent-check", daemon=True).start()
