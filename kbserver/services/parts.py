"""The interfaces `Services` holds: what the use cases need from repositories, search and events.

The composition root (`kbserver.wiring`) picks the implementations: bare git repositories on disk
(`kbserver.store.Repos`), Whoosh (`SearchSink`), the embedding vectors (`VectorSink`), the feed file
(`kbserver.store.feed.Feed`) and the follower (`Follower`). A remote or PostgreSQL-backed part only
has to satisfy these protocols (the control store has its own, `kbserver.control.ControlStore`);
mypy --strict checks the concrete ones where `open_services` builds `Services`.

No git word (commit, tree, blob, ref) is part of these names: a version is a 40-hex id on main, a
file is a path, and a content id (`blob_id`) is an opaque key of a file's bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, overload

from kbserver.changes import Tree
from kbserver.index import SearchResult
from kbserver.store import Change, CommitInfo, CommitPlan
from kbserver.store.feed import Record
from kbserver.vectors import Ranking, VectorHit

__all__ = [
    "EventReader",
    "Events",
    "Files",
    "Following",
    "Job",
    "Repositories",
    "Repository",
    "TextSearch",
    "VectorSearch",
    "Writer",
]


class Files(Tree, Protocol):
    """The files of one version (`version` None: no version, no files), read lazily by path.

    A `changes.Tree` (read, is_dir, names: what a write starts from) that also knows its version,
    each file's content id and how to walk them.
    """

    version: str | None

    def blob_id(self, path: str) -> str | None:
        """The content id of the file at `path` (None: no file there)."""
        ...

    def walk(self, prefix: str = "") -> Iterator[tuple[str, bytes]]:
        """(path, content id as ASCII bytes) of every file under `prefix`, in path order."""
        ...


class Repository(Protocol):
    """One KB's versions and files, read side. Thread-safe."""

    def head(self) -> str | None:
        """The current version of main (None: the KB has no version yet)."""
        ...

    @overload
    def resolve(self, version: str) -> str: ...
    @overload
    def resolve(self, version: None) -> str | None: ...
    def resolve(self, version: str | None) -> str | None:
        """`version` checked to be on main, or the head when None. Raises InvalidRequest, NotFound."""
        ...

    def expand(self, prefix: str) -> str:
        """The version on main starting with `prefix` (7+ hex). Raises InvalidRequest, NotFound."""
        ...

    def view(self, version: str | None) -> Files:
        """The files at `version` (a resolved id), or none when None."""
        ...

    def file_count(self, version: str | None) -> int: ...

    def blob(self, blob_id: str) -> bytes:
        """The bytes of a content id. Raises KeyError for an unknown one."""
        ...

    def digest(self, blob_id: bytes) -> tuple[int, str]:
        """(size, sha256) of the bytes of a content id (as `Files.walk` gives it)."""
        ...

    def commit_info(self, version: str) -> CommitInfo: ...

    def first_parents(self, start: str) -> Iterator[str]:
        """Versions from `start` back to the first one."""
        ...

    def reaches(self, start: str, version: str) -> bool:
        """Whether `version` is `start` or older than it on the same line."""
        ...

    def path_history(self, start: str, path: str) -> Iterator[str]:
        """Versions up to `start` that changed `path`, newest first."""
        ...

    def path_history_within(self, start: str, path: str, within: int) -> tuple[list[str], str | None]:
        """The versions among the `within` newest from `start` that changed `path`, newest first, and
        where the look stopped (None: at the first version)."""
        ...

    def changes(self, old: str | None, new: str) -> list[Change]:
        """Paths that differ between two versions (files only), sorted by path."""
        ...

    def version_changes(self, version: str) -> list[Change]:
        """What `version` changed against its first parent (cached: a version never changes)."""
        ...

    def patch(self, change: Change) -> str:
        """The unified diff of one change."""
        ...

    def text_patch(self, path: str, old: bytes | None, new: bytes | None) -> str:
        """The unified diff between two texts of `path` (None: no file)."""
        ...


Job = Callable[[Files], CommitPlan]
"""Computes one version from the files at the tip it is applied on."""


class Writer(Protocol):
    """Makes one KB's versions, one at a time within and across processes."""

    def submit(self, job: Job) -> tuple[str, str | None, object]:
        """Apply `job` as one new version of main; (version, parent, the plan's result)."""
        ...

    def propose(self, job: Job, ref: str) -> tuple[str, str | None, object]:
        """Make `job`'s version on the head but point only `ref` (never main) at it."""
        ...

    def locked(self) -> AbstractContextManager[object]:
        """Hold the KB's writer lock: main does not move meanwhile (to settle a lease from it)."""
        ...


class Repositories(Protocol):
    """Every KB's repository: create, open, recover, check."""

    def path(self, slug: str) -> Path:
        """Where the KB's bare repository lives (git over HTTP serves it from there). Raises NotFound."""
        ...

    def exists(self, slug: str) -> bool: ...

    def slugs(self) -> list[str]: ...

    def create(self, slug: str, readme: bytes, author: str, message: str) -> str:
        """A new KB whose first version holds README.md; returns the version. Raises AlreadyExists."""
        ...

    def get(self, slug: str) -> tuple[Repository, Writer]:
        """The KB's repository and its writer. Raises NotFound."""
        ...

    def repo(self, slug: str) -> Repository: ...

    def recover(self, slug: str) -> list[str]:
        """Remove what a crashed writer left behind; returns what was removed."""
        ...

    def verify(self, slug: str) -> list[str]:
        """Problems found in the KB's repository (empty when it is sound)."""
        ...

    def disk_usage(self, slug: str) -> int:
        """Bytes the KB's history takes on disk. Raises NotFound."""
        ...

    def repack(self, slug: str, *, full: bool = False) -> str | None:
        """Pack the KB's history with deltas now (`full`: every delta computed again); one line
        saying what it did, or None when a repack of the KB is running already. Raises NotFound."""
        ...

    def close(self) -> None: ...


class TextSearch(Protocol):
    """Full-text search of each KB, as far as the follower has indexed it."""

    def search(
        self,
        slug: str,
        q: str,
        *,
        limit: int = 10,
        offset: int = 0,
        prefix: str | None = None,
        filters: Mapping[str, str] | None = None,
        snippets: bool = True,
        coverage: bool = False,
        hide: tuple[str, str, Collection[str]] | None = None,
    ) -> SearchResult:
        """Hits for `q` (without `snippets`, hits carry no snippet nor fields; with `coverage`, each
        carries the share of `q`'s words it holds, as `coverage` gives it; `hide` = (folder, key,
        values) leaves out the files under folder whose filter field key is one of values). Raises
        Unavailable while the index is damaged (the follower rebuilds it)."""
        ...

    def paths(self, slug: str) -> dict[str, str]:
        """Every indexed path with the sha256 of its text (for checks)."""
        ...


class VectorSearch(Protocol):
    """Semantic search of each KB over the embedding vectors the follower made."""

    def prepare(self, query: str) -> None:
        """Start embedding `query` in the background for a search of it that follows soon."""
        ...

    def stop_queries(self) -> None:
        """Fail the queries waiting for an embedding (shutdown); the one under way finishes."""
        ...

    def search(
        self,
        slug: str,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
    ) -> tuple[list[VectorHit], str | None]:
        """The files most similar to `query` and the version the vectors cover. Raises Unavailable."""
        ...

    def similarities(
        self, slug: str, text: str, others: Sequence[str], *, as_query: bool, embed_limit: int = 32
    ) -> list[float | None]:
        """The cosine similarity of `text` (a query, or a passage) to each of `others`, in order (None:
        no vector yet, beyond `embed_limit` embedded on the spot). Raises Unavailable."""
        ...

    def ranked(
        self,
        slug: str,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
        include: Collection[str] = (),
    ) -> tuple[Ranking, str | None]:
        """The best `limit` files (plus ties with the last and those of `include`), which files have
        a vector, the lowest score of all (for a fusion), and the version covered. Raises Unavailable."""
        ...


class Watch(Protocol):
    """Tells a waiting thread that new events may be there (kbserver.store.watch.FolderWatch)."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until events may have come (True), or `timeout` passed or `close` was called."""
        ...

    def close(self) -> None:
        """Wake the waiting thread (its `wait` returns False)."""
        ...

    def release(self) -> None:
        """Free what the watch holds, once no thread waits any more."""
        ...


class EventReader(Protocol):
    """Tails the events from where it was opened."""

    def poll(self) -> tuple[list[Record], bool]:
        """(the records since the last poll, whether some may have been missed: then reconcile)."""
        ...

    def watch(self) -> Watch | None:
        """A watch that wakes when events come, so the reader is polled only then; None when every
        event cannot be seen coming (then poll every `index_poll_seconds`)."""
        ...

    def close(self) -> None: ...


class Events(Protocol):
    """The feed every process sees: new heads, what sinks cover, damaged sinks, sinks waited for."""

    def reader(self) -> EventReader:
        """A reader of the events from now on."""
        ...

    def head(self, slug: str, version: str) -> None:
        """`version` is main's new head of `slug`."""
        ...

    def covered(self, sink: str, slug: str, version: str) -> None: ...

    def damaged(self, sink: str, slug: str) -> None: ...

    def wanted(self, sink: str, slug: str, version: str) -> None:
        """A reader waits for `sink` to cover `version` of `slug` (the follower hurries it)."""
        ...

    def earlier(self) -> list[Record]:
        """This node's records before now, as far back as they are kept (one log file)."""
        ...


class Following(Protocol):
    """Turns new heads into deltas for the sinks, in this process or in the one that follows."""

    @property
    def leading(self) -> bool:
        """True while this process is the data folder's follower (else it stands by)."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def notify(self, slug: str) -> None:
        """`slug` has a new head (made in this process)."""
        ...

    def report_damaged(self, sink: str, slug: str) -> None:
        """A reader found `sink`'s storage of `slug` damaged: have it rebuilt."""
        ...

    def catch_up(
        self,
        slug: str,
        *,
        rebuild: bool = False,
        sinks: Sequence[str] | None = None,
        progress: Callable[[str, int, int | None], None] | None = None,
    ) -> str | None:
        """Bring `sinks` (default: all) of `slug` up to its head now; returns that head;
        `progress(sink, done, total)` follows a rebuild. Raises NotFound."""
        ...
