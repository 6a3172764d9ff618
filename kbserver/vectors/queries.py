"""Query vectors: an LRU cache in front of an embedder, fed by one worker from per-caller queues."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from kbserver.core.errors import Unavailable
from kbserver.vectors.embedder import Embedder, Matrix

__all__ = ["MAX_QUERY_CHARS", "QueryCache", "asking", "query_text"]


MAX_QUERY_CHARS = 1000
"""Only this many characters of a query are embedded (~250 English words, two of e5's 512-token
windows of Chinese): the engine's time grows with the text (a long paste takes seconds), and a
question's meaning is in its start. The keyword side of a search still reads the whole query."""


def query_text(text: str) -> str:
    """What of a query is embedded: its first MAX_QUERY_CHARS characters, stripped."""
    return text.strip()[:MAX_QUERY_CHARS].strip()


@dataclass(frozen=True)
class _Asker:
    who: str
    waiting: Callable[[], bool]


_asker: contextvars.ContextVar[_Asker | None] = contextvars.ContextVar("kbserver_query_asker", default=None)


@contextlib.contextmanager
def asking(who: str, waiting: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """Queries embedded on this thread meanwhile are `who`'s (its own queue: callers take turns),
    and are given up once `waiting()` is False (the caller left: request cancelled, client gone)."""
    token = _asker.set(_Asker(who, waiting))
    try:
        yield
    finally:
        _asker.reset(token)


class _Job:
    """One query text to embed, for everyone waiting on it."""

    def __init__(self, text: str, who: str) -> None:
        self.text = text
        self.who = who
        self.future: Future[Matrix] = Future()
        self.waiting = 0  # callers waiting on it (a prepare counts as one until its query comes)
        self.started = False


class QueryCache:
    """An embedder whose query vectors are kept in a least-recently-used cache (agents repeat queries),
    made on one thread of its own from one queue per caller, taken in turns.

    - Only `query_text` of a query is embedded (MAX_QUERY_CHARS).
    - A question asked again while it waits or runs joins that embedding instead of making another
      (so a search can start its question's embedding early, see `prepare`).
    - Callers (the `who` of `asking`, else "") take turns: the worker takes the next job of the next
      caller in a round, and a caller with nothing queued goes first, so one caller's burst of
      queries delays another's by the one embedding under way at most.
    - A caller that leaves (its `waiting()` turns False while it waits) detaches; a job nobody waits
      for any more is dropped before it starts. One that runs finishes (the engine cannot be
      stopped midway; the cap bounds it).
    - `stop()` fails every waiting job as `Unavailable` at once and refuses new ones: a server that
      shuts down waits for the one embedding under way at most.

    `misses` counts the embeddings made, `hits` the queries answered from the cache or by joining.
    """

    poll_seconds = 0.1  # how often a waiting caller checks that it still waits

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._size = size
        self._cache: OrderedDict[str, Matrix] = OrderedDict()
        self._jobs: dict[str, _Job] = {}  # text -> its job, queued or running
        self._queues: OrderedDict[str, deque[_Job]] = OrderedDict()  # caller -> its queued jobs, in turn
        self._lock = threading.Condition()
        self._worker: threading.Thread | None = None
        self._stopped = False
        self._prepared = threading.local()  # text -> the job this thread's prepare() waits on
        self.hits = 0
        self.misses = 0
        self.dropped = 0  # jobs given up before they started: their callers left

    def passages(self, texts: Sequence[str]) -> Matrix:
        out = self.inner.passages(texts)
        self.dim = self.inner.dim
        return out

    def query(self, text: str) -> Matrix:
        """The query's vector; raises Unavailable when the caller left or the server stops."""
        text = query_text(text)
        prepared: dict[str, _Job] = getattr(self._prepared, "jobs", {})
        job = prepared.pop(text, None)
        if job is None:
            found = self._join(text)
            if not isinstance(found, _Job):
                return found
            job = found
        return self._wait(job)

    def prepare(self, text: str) -> None:
        """Start embedding `text` now, unless it is cached or under way: the engine gives up the GIL
        while it runs, so the caller's own work (a keyword search) goes on meanwhile on another core,
        and its `query(text)` on this thread then waits only for what is left (as the one waiter the
        prepare counted)."""
        text = query_text(text)
        jobs: dict[str, _Job] | None = getattr(self._prepared, "jobs", None)
        if jobs is None:
            jobs = self._prepared.jobs = {}
        if not text or (text in jobs and not jobs[text].future.done()):
            return  # nothing to embed, or this thread's prepare of it still stands
        jobs.pop(text, None)
        try:
            found = self._join(text)
        except Unavailable:
            return  # stopped: the query that follows says so
        if isinstance(found, _Job):
            for done in [t for t, j in jobs.items() if j.future.done()]:
                del jobs[done]  # prepared, never asked for (the request failed first): forgotten
            jobs[text] = found

    def _join(self, text: str) -> Matrix | _Job:
        """The cached vector, or the job of `text` (queued for the asking caller if new) with one
        more waiter."""
        asker = _asker.get()
        who = asker.who if asker is not None else ""
        with self._lock:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
                self.hits += 1
                return vector
            if self._stopped:
                raise Unavailable("the server is shutting down; ask again once it is back")
            job = self._jobs.get(text)
            if job is None:
                job = self._jobs[text] = _Job(text, who)
                queue = self._queues.get(who)
                if queue is None:  # a caller with nothing queued goes first: the others had turns
                    queue = self._queues[who] = deque()
                    self._queues.move_to_end(who, last=False)
                queue.append(job)
                if self._worker is None:
                    self._worker = threading.Thread(target=self._work, name="kbserver-query", daemon=True)
                    self._worker.start()
                self._lock.notify_all()
            else:
                self.hits += 1
            job.waiting += 1
            return job

    def _wait(self, job: _Job) -> Matrix:
        asker = _asker.get()
        while True:
            try:
                return job.future.result(timeout=self.poll_seconds)
            except FutureTimeout:
                pass
            if asker is not None and not asker.waiting():
                self._leave(job)
                raise Unavailable("the query was not embedded: its request was cancelled")

    def _leave(self, job: _Job) -> None:
        """One waiter fewer; a job nobody waits for is dropped if it has not started."""
        with self._lock:
            job.waiting -= 1
            if job.waiting > 0 or job.started or job.future.done():
                return
            queue = self._queues.get(job.who)
            if queue is not None and job in queue:
                queue.remove(job)
                if not queue:
                    del self._queues[job.who]
            self._jobs.pop(job.text, None)
            self.dropped += 1
        job.future.set_exception(Unavailable("the query was not embedded: nobody waits for it"))

    def _next(self) -> _Job | None:
        """The next caller's next job, in turn (None once stopped); call with the lock held."""
        while not self._stopped:
            if self._queues:
                who, queue = next(iter(self._queues.items()))
                job = queue.popleft()
                del self._queues[who]
                if queue:
                    self._queues[who] = queue  # to the end of the round
                job.started = True
                return job
            self._lock.wait()
        return None

    def _work(self) -> None:
        while True:
            with self._lock:
                job = self._next()
            if job is None:
                return
            try:
                vector = self.inner.query(job.text)
                vector.setflags(write=False)
            except BaseException as exc:  # handed to the waiters: the worker keeps serving
                with self._lock:
                    self._jobs.pop(job.text, None)
                job.future.set_exception(exc)
                continue
            with self._lock:
                self.misses += 1
                self.dim = self.inner.dim
                self._cache[job.text] = vector
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
                self._jobs.pop(job.text, None)
            job.future.set_result(vector)

    def stop(self) -> None:
        """Refuse new queries and fail the queued ones at once (`Unavailable`); the one under way
        finishes for its waiters. Safe to call more than once, from any thread."""
        with self._lock:
            self._stopped = True
            queued = [job for queue in self._queues.values() for job in queue]
            self._queues.clear()
            for job in queued:
                self._jobs.pop(job.text, None)
            self._lock.notify_all()
        for job in queued:
            job.future.set_exception(Unavailable("the server is shutting down; ask again once it is back"))

    def close(self) -> None:
        """stop(), then wait for the embedding under way."""
        self.stop()
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join()
