"""One sink's thread of the follower, and its pace: polite while close behind, at full speed past a bound.

The policy (`Pace`): while a sink is close behind main, its work runs in a helper thread `follower_nice`
levels below the requests, and commits that stream in settle into one delta (`batch_seconds`).
A KB a reader waits for (`hurry`) is neither: its commits are applied at once, at the requests'
priority (the waiting request lends the apply its own; batching and politeness save the requests
CPU only where none is waiting). Once
the oldest commit it has not applied is older than `lag_seconds`, or `lag_commits` or more wait, the
sink catches up at the requests' priority (its own thread, which is never lowered), applying
everything pending at once without settling, until nothing waits; then it is polite again. A
polite apply already under way when the bound passes is raised to the requests' priority where the
OS permits (CAP_SYS_NICE or RLIMIT_NICE; lowering never needs a privilege, raising does), else it
finishes where it is and the next one runs at full speed.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = ["Pace", "SinkWorker", "lower_thread_priority"]

log = logging.getLogger(__name__)

T = TypeVar("T")

IDLE_SECONDS = 2.0  # commits paused this long: sinks do their housekeeping (index merges)
SHORT_PAUSE_SECONDS = 0.1  # no delta for this long: sinks do what cannot wait for a real pause
RETRY_LOOK_SECONDS = 0.5  # an idle worker looks for failed catch-ups due for a retry this often
SETTLE_SHARE = 0.25  # batching: a sink applies once no commit came for this share of batch_seconds


@dataclass(frozen=True)
class Pace:
    """How a sink keeps out of the requests' way, and how far behind it may fall before it stops."""

    nice: int = 0  # polite work runs this many nice levels below the requests (0: never lowered)
    batch_seconds: float = 0.0  # while commits stream in, wait up to this long to apply them as one
    lag_seconds: float = 1.0  # the oldest commit not applied is older: catch up at full speed
    lag_commits: int = 50  # this many commits wait: catch up at full speed

    def behind(self, age: float, commits: int) -> bool:
        """True when `commits` waiting, the oldest `age` seconds old, are past the bound."""
        return commits > 0 and (age >= self.lag_seconds or commits >= self.lag_commits)


def _nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def lower_thread_priority(steps: int) -> int | None:
    """Lower the calling thread's OS scheduling priority by `steps` nice levels (capped at 19) and
    return its nice value; None where threads have no priority of their own (not Linux) or 0 steps.

    On Linux a thread is a task with its own nice value, set through its native id; threads it
    starts inherit it. Lowering needs no privilege (raising it back would).
    """
    if steps <= 0 or not sys.platform.startswith("linux"):
        return None
    tid = threading.get_native_id()
    try:
        nice = min(19, _nice_of(tid) + steps)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as e:
        log.warning("could not lower the priority of thread %s: %s", threading.current_thread().name, e)
        return None
    return nice


class _Polite:
    """A helper thread that runs work `steps` nice levels below the thread that starts it."""

    def __init__(self, name: str, steps: int) -> None:
        self.base = _nice_of(threading.get_native_id())
        self.steps = steps
        self.cond = threading.Condition()
        self.job: tuple[Callable[[], object], Future[object]] | None = None
        self.woken: threading.Event | None = None  # the waiting sink thread's: the job ended, or `nudge`
        self.tid: int | None = None
        self.lowered: int | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        self.lowered = lower_thread_priority(self.steps)
        self.tid = threading.get_native_id()
        while True:
            with self.cond:
                while self.job is None and not self.stopping:
                    self.cond.wait()
                if self.job is None:
                    return
                # Taken before it runs: once its result is set the next job may come at once, and
                # clearing `job` after that lost it (the sink thread then waited forever).
                (work, future), self.job = self.job, None
            try:
                result = work()
            except BaseException as e:  # handed to the waiting sink thread, which raises it
                self._lower()
                future.set_exception(e)
            else:
                self._lower()
                future.set_result(result)

    def _lower(self) -> None:
        """Polite again after a job that was raised (in this thread: lowering needs no privilege)."""
        tid, lowered = self.tid, self.lowered
        if tid is not None and lowered is not None and _nice_of(tid) != lowered:
            os.setpriority(os.PRIO_PROCESS, tid, lowered)

    def run(self, work: Callable[[], T], behind: Callable[[], float]) -> T:
        """`work()` in the helper thread; `behind()` says how long until it should run at the
        requests' priority (<= 0: now), asked again at least every second and at each `nudge`."""
        future: Future[object] = Future()
        woken = threading.Event()
        future.add_done_callback(lambda _: woken.set())
        with self.cond:
            self.job, self.woken = (work, future), woken
            self.cond.notify_all()
        raised = False
        while not future.done():
            left = behind()
            if not raised and left <= 0:
                raised = True
                self._raise()
            woken.wait(timeout=None if raised else min(max(left, 0.005), 1.0))
            woken.clear()  # before `done()` is asked again: an end that comes after wakes the next wait
        return future.result()  # type: ignore[return-value]

    def nudge(self) -> None:
        """Have the sink thread waiting for a job ask `behind()` again now (a reader came to wait)."""
        with self.cond:
            if self.woken is not None:
                self.woken.set()

    def _raise(self) -> None:
        """Give the helper back the requests' priority, where the OS lets an unprivileged process."""
        if self.tid is None or self.lowered is None:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, self.tid, self.base)
        except OSError:
            pass  # no CAP_SYS_NICE: this apply finishes polite, the next runs at full speed

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout=60)


class Sink(Protocol):
    """What a worker needs of a sink (kbserver.services.following.follower.Sink has it all)."""

    name: str

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None: ...


S = TypeVar("S", bound=Sink)


class SinkWorker(Generic[S]):
    """The thread that applies one sink's deltas, and its own housekeeping when commits pause."""

    def __init__(
        self,
        sink: S,
        pace: Pace,
        poll_seconds: float,
        follow: Callable[[S, str], bool],
        due: Callable[[str, float], set[str]],
        covers: Callable[[str, str, str], bool],
    ) -> None:
        """`follow(sink, slug)` brings one KB to main's head (True: it applied a delta); `due(name,
        now)` names the KBs whose failed catch-up is due for a retry; `covers(name, slug, version)`
        says whether the sink covers a version a reader waits for."""
        self.follow = follow
        self.due = due
        self.covers = covers
        self.sink = sink
        self.pace = pace
        self.poll = poll_seconds
        self.cond = threading.Condition()
        self.pending: set[str] = set()
        self.stopping = False
        self.last_apply = 0.0
        self.idle_stage = 0
        # Batching: when the pending set last went from empty to not, whether the commit before
        # came less than batch_seconds earlier (commits are streaming), and when the last came.
        self.first_arrival = 0.0
        self.last_arrival = float("-inf")
        self.streaming = False
        self.hurried: dict[str, set[str]] = {}  # versions readers wait for, by KB: no settling
        self.applying: set[str] = set()  # the KBs of the round under way
        self.tidying = False  # housekeeping under way (an index merge can take seconds)
        self.urgent = False  # a reader waits for the round under way: it runs at the requests' priority
        # The lag: commits handed in and not yet applied, and when the oldest of them came.
        self.waiting = 0
        self.oldest = 0.0
        self.catching_up = False  # past the bound: full speed until nothing waits
        self.polite: _Polite | None = None
        self.thread = threading.Thread(target=self._loop, name=f"kbserver-sink-{sink.name}", daemon=True)

    def add(self, slugs: set[str], commits: int) -> None:
        now = time.monotonic()
        with self.cond:
            if not self.pending:
                self.first_arrival = now
                self.streaming = now - self.last_arrival < self.pace.batch_seconds
            if commits and not self.waiting:
                self.oldest = now
            self.waiting += commits
            self.last_arrival = now
            self.pending |= slugs
            self.cond.notify_all()
            polite = self.polite if self.tidying and commits else None
        if polite is not None:
            polite.nudge()  # housekeeping under way gives way to them: at full speed (`_raise_in`)

    def hurry(self, wanted: list[tuple[str, str]]) -> None:
        """Readers wait for these (KB, version)s: apply them now, at the requests' priority. A hurry
        for a KB being applied raises that apply, as it does housekeeping under way (the round that
        serves the reader waits for it); each is kept until the sink covers its version
        (its commit may still be on its way), and one covered already counts for nothing."""
        with self.cond:
            for slug, version in wanted:
                self.hurried.setdefault(slug, set()).add(version)
                self.urgent = self.urgent or self.tidying or slug in self.applying
            self.cond.notify_all()
            polite = self.polite if self.urgent else None
        if polite is not None:
            polite.nudge()  # a polite apply under way: raise it now, not at its next look

    def _waited_for(self, slugs: set[str]) -> bool:
        """Whether a reader waits for a version of `slugs` this sink does not cover (cond held);
        forgets the versions it covers."""
        waited = False
        for slug in slugs & self.hurried.keys():
            versions = {v for v in self.hurried[slug] if not self.covers(self.sink.name, slug, v)}
            if versions:
                self.hurried[slug], waited = versions, True
            else:
                del self.hurried[slug]
        return waited

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def lag(self) -> tuple[int, float]:
        """(commits waiting, seconds since the oldest of them came; 0 when none waits)."""
        with self.cond:
            if self.waiting <= 0:
                return 0, 0.0
            return self.waiting, time.monotonic() - self.oldest

    def _left(self) -> float:
        """Seconds until this sink is past its lag bound (<= 0: it is)."""
        with self.cond:
            if self.waiting <= 0:
                return float("inf")
            if self.waiting >= self.pace.lag_commits:
                return 0.0
            return self.oldest + self.pace.lag_seconds - time.monotonic()

    def _settle(self) -> None:
        """While commits stream in, wait (cond held) until none came for a while, or the batch is due;
        never while catching up (it applies everything pending at once) nor once a reader waits for
        a pending KB."""
        batch = self.pace.batch_seconds
        if not self.pending or not self.streaming or batch <= 0:
            return
        due = self.first_arrival + batch
        while not self.stopping and not self._waited_for(self.pending):
            if self.catching_up or self.pace.behind(time.monotonic() - self.oldest, self.waiting):
                self.catching_up = True
                return
            wake = min(self.last_arrival + batch * SETTLE_SHARE, due)
            left = wake - time.monotonic()
            if left <= 0:
                return
            self.cond.wait(timeout=left)

    def _next_wake(self) -> float:
        """Seconds until this worker has something to do unasked: its housekeeping, or a look for
        failed catch-ups due for a retry (at most RETRY_LOOK_SECONDS late; the first retry waits 1 s).
        Commits wake it at once (`add`): no polling in between."""
        wake = RETRY_LOOK_SECONDS
        if self.idle_stage < 1:
            wake = min(wake, self.last_apply + SHORT_PAUSE_SECONDS - time.monotonic())
        elif self.idle_stage < 2:
            wake = min(wake, self.last_apply + IDLE_SECONDS - time.monotonic())
        return max(wake, self.poll)

    def _raise_in(self) -> float:
        """Seconds until a polite apply under way should run at the requests' priority (<= 0: now);
        housekeeping that commits wait for, now: it gives up within milliseconds, at that speed."""
        with self.cond:
            if self.urgent or (self.tidying and self.waiting > 0):
                return 0.0
        return self._left()

    def _run(self, work: Callable[[], T]) -> T:
        """`work()` polite while close behind and nobody waits for it, else at the requests'
        priority in this thread."""
        if self.urgent or self.polite is None:
            return work()
        if self.catching_up or self._left() <= 0:
            self.catching_up = self.waiting > 0
            return work()
        return self.polite.run(work, self._raise_in)

    def _loop(self) -> None:
        if self.pace.nice > 0 and sys.platform.startswith("linux"):
            self.polite = _Polite(f"kbserver-sink-{self.sink.name}-polite", self.pace.nice)
        try:
            while self._round():
                pass
        finally:
            if self.polite is not None:
                self.polite.stop()

    def _round(self) -> bool:
        with self.cond:
            if not self.pending and not self.stopping:
                self.cond.wait(timeout=self._next_wake())
            self._settle()
            if self.stopping:
                return False
            slugs, self.pending = set(self.pending), set()
            self.urgent = self._waited_for(slugs)  # this round serves a reader: at its priority
            self.applying = slugs
            taken = self.waiting  # what this round covers: every commit handed in so far
        slugs = slugs | self.due(self.sink.name, time.monotonic())  # `applying` is read under cond
        for slug in sorted(slugs):
            if self._run(functools.partial(self.follow, self.sink, slug)):
                self.last_apply, self.idle_stage = time.monotonic(), 0
        with self.cond:
            self.applying, self.urgent = set(), False
            self.waiting -= taken
            if self.waiting <= 0:
                self.waiting, self.catching_up = 0, False  # caught up: polite again
            else:
                self.oldest = self.first_arrival  # the oldest left came after this round began
        quiet = time.monotonic() - self.last_apply
        if self.idle_stage < 1 and quiet >= SHORT_PAUSE_SECONDS:
            self.idle_stage = 1  # a breath between commits: what cannot wait for a pause
            self._housekeeping(paused=False)
        if self.idle_stage < 2 and quiet >= IDLE_SECONDS:
            self.idle_stage = 2  # commits paused: everything
            self._housekeeping(paused=True)
        return True

    def _commits_wait(self) -> bool:
        """Whether commits wait that no round applied yet (or the worker stops); a KB handed in
        with no commit (a read of a node that follows what it serves, the periodic reconcile) is
        not one. Asked by housekeeping under way, from its thread: unlocked (an int read is atomic)."""
        return self.waiting > 0 or self.stopping

    def _housekeeping(self, paused: bool) -> None:
        with self.cond:
            self.tidying = True
        try:
            self._run(lambda: self.sink.idle(paused, self._commits_wait))
        except Exception:
            log.exception("housekeeping of sink %s failed; it will be retried", self.sink.name)
        finally:
            with self.cond:
                self.tidying, self.urgent = False, False  # the next round sees what readers want
                if self.waiting > 0:  # maybe cut short for them: again at the next pause, even
                    self.idle_stage = 1 if paused else 0  # if they turn out to change nothing
