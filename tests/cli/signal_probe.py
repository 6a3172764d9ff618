"""Runs `kbserver ARGS...` with every SIGTERM/SIGINT handler it installs watched: while a handler
runs, any lock it takes (an `Event.set`, a `Thread.start`, a logging call) is reported on stderr as
`PROBE: a signal handler took a lock` with the stack. A handler that takes a lock deadlocks the
process whenever the signal lands while its main thread holds that lock (as `kill -9` of `serve`
once left a follower child that ignored SIGTERM), which a test cannot hit on purpose; this shows it
on every signal."""

from __future__ import annotations

import signal
import sys
import traceback
from types import FrameType
from typing import Any

from kbserver.cli import main

_install = signal.signal
_LOCK_TYPES = tuple({type(__import__("threading").Lock()), type(__import__("threading").RLock())})


def _watched(handler: Any) -> Any:
    if not callable(handler):
        return handler

    def run(sig: int, frame: FrameType | None) -> Any:
        def profile(frame: FrameType, event: str, arg: Any) -> None:
            owner = getattr(arg, "__self__", None)
            if event == "c_call" and isinstance(owner, _LOCK_TYPES):
                stack = "".join(traceback.format_stack(frame))
                sys.stderr.write(f"PROBE: a signal handler took a lock ({arg.__name__})\n{stack}\n")
                sys.stderr.flush()

        sys.setprofile(profile)
        try:
            return handler(sig, frame)
        finally:
            sys.setprofile(None)

    return run


def _signal(sig: int, handler: Any) -> Any:
    if sig in (signal.SIGTERM, signal.SIGINT):
        handler = _watched(handler)
    return _install(sig, handler)


signal.signal = _signal  # type: ignore[assignment]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
