"""A KB's vector folder: passage vectors cached by content sha256, the paths they cover, the version.

```
vectors/{slug}/vectors.db   SQLite (WAL), one per KB:
  meta(key, value)          embedder name, dim, covered version
  blob(sha256, vector)      float32 vectors of contents, kept across versions (a revert re-embeds nothing)
  path(path, sha256)        the files of the covered version that have a vector
  change(seq, path, sha256) the latest changes of `path`, in order (sha256 NULL: deleted), so that
                            readers follow by row; meta `trimmed` is the last seq no longer kept
```
One writer (the follower's sink) and any number of readers, in any processes: SQLite's own locking
and WAL make that safe. A reader notices another process's commit by `PRAGMA data_version` before
each search and brings its in-memory matrix along by the changes logged since it last looked
(kbserver.vectors.matrix); it reloads every vector only when it fell behind what the log keeps or
the folder changed in a way the log does not say. Search is exact cosine similarity over one numpy
matrix (fine to ~10^5 files per KB; see the README for what replaces it past that).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kbserver.vectors.embedder import Embedder
from kbserver.vectors.matrix import Rows, cosines
from kbserver.vectors.similar import Known

__all__ = ["Ranking", "VectorHit", "VectorStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blob (sha256 TEXT PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS path (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS change (seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, sha256 TEXT);
"""
_LOG_KEEP = 50_000  # changes kept for readers in other processes (more behind: they reload all)
_BATCH = 32  # passages per embedder call: big enough to amortise the call, small enough to show progress


@dataclass(frozen=True)
class VectorHit:
    path: str
    score: float  # cosine similarity in [-1, 1]


@dataclass(frozen=True)
class Ranking:
    """The best files for a query and what a fusion needs to know about the rest."""

    hits: list[VectorHit]  # at least `limit` best (when there are), plus any tying with the last
    covered: frozenset[str]  # every path that has a vector (the others are not embedded yet)
    floor: float | None  # the lowest score among all the files ranked (None: none ranked)
    ranked: int = 0  # how many files were ranked: those under the prefix, allowed, with a vector


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorStore:
    """The vectors of one KB. Thread-safe; close it when done."""

    def __init__(self, folder: Path, embedder: Embedder) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.embedder = embedder
        self._db = sqlite3.connect(folder / "vectors.db", check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # disposable: a lost tail is re-embedded
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._seen_data_version: int | None = None
        self._rows: Rows | None = None  # the matrix as of change `_seq` (None: not loaded yet)
        self._seq = 0
        self._dirty = False  # this connection committed since the matrix was brought along
        self.compact_from = 1024  # dead rows tolerated before a compaction (see Rows.changed)
        self._allowed: tuple[Rows, AbstractSet[str], bool] | None = None  # see _allows_all
        if self._meta("embedder") not in (None, embedder.name):
            self._reset()  # another model's vectors cannot be compared with this one's

    # -- metadata -------------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _reset(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM path")
            self._db.execute("DELETE FROM blob")
            self._db.execute("DELETE FROM meta")
            self._db.execute("DELETE FROM change")
            # Readers that followed the log reload everything: nothing they saw is kept.
            last = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'change'").fetchone()
            self._db.execute("INSERT INTO meta VALUES ('trimmed', ?)", (str(last[0] if last else 0),))
            self._db.execute("COMMIT")
            self._dirty = True

    def covered_version(self) -> str | None:
        """The version whose files all have vectors here, or None before the first update."""
        with self._lock:
            return self._meta("version")

    def paths(self) -> dict[str, str]:
        """path -> sha256 of every file that has a vector."""
        with self._lock:
            return {str(p): str(s) for p, s in self._db.execute("SELECT path, sha256 FROM path")}

    # -- writing (the follower's sink) -----------------------------------------------------------

    def update(
        self,
        version: str,
        upserts: Mapping[str, str],
        deletes: Iterable[str],
        *,
        progress: Callable[[int, int], None] | None = None,
        made: Callable[[str], npt.NDArray[np.float32] | None] | None = None,
        fence: Callable[[], None] | None = None,
    ) -> int:
        """Move the folder to `version`: vectors for `upserts` (path -> text), none for `deletes`.

        Contents already embedded (same sha256, under any path, in any version) are not embedded
        again, nor those `made` knows (vectors this embedder made elsewhere, by content sha256).
        Embedding runs before the one transaction that records the result, so readers see
        either the old version or the new one. Returns the number of texts embedded.
        """
        wanted = {path: _sha256(text) for path, text in upserts.items()}
        with self._lock:
            known = {
                str(row[0])
                for chunk in _chunks(sorted(set(wanted.values())), 500)
                for row in self._db.execute(
                    f"SELECT sha256 FROM blob WHERE sha256 IN ({','.join('?' * len(chunk))})", chunk
                )
            }
        todo: dict[str, str] = {}
        reused: list[tuple[str, bytes]] = []
        for path, digest in wanted.items():
            if digest in known or digest in todo:
                continue
            vector = made(digest) if made is not None else None
            if vector is not None and vector.shape == (self.embedder.dim,):
                reused.append((digest, np.asarray(vector, dtype="<f4").tobytes()))
                known.add(digest)
            else:
                todo[digest] = upserts[path]
        embedded: list[tuple[str, bytes]] = []
        digests = list(todo)
        for start in range(0, len(digests), _BATCH):
            batch = digests[start : start + _BATCH]
            vectors = self.embedder.passages([todo[d] for d in batch])
            embedded.extend(
                (d, np.asarray(v, dtype="<f4").tobytes()) for d, v in zip(batch, vectors, strict=True)
            )
            if progress is not None:
                progress(len(embedded), len(digests))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO blob VALUES (?, ?)", [*embedded, *reused])
                self._db.executemany("DELETE FROM path WHERE path = ?", [(p,) for p in deletes])
                self._db.executemany("INSERT OR REPLACE INTO path VALUES (?, ?)", wanted.items())
                self._db.executemany(
                    "INSERT INTO change (path, sha256) VALUES (?, ?)",
                    [*((p, None) for p in deletes if p not in wanted), *wanted.items()],
                )
                self._trim_log()
                self._db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("embedder", self.embedder.name), ("dim", str(self.embedder.dim)), ("version", version)],
                )
                if fence is not None:
                    fence()  # under the write transaction, right before it commits: raising rolls back
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            finally:
                self._dirty = True  # data_version counts only other connections' commits
        return len(embedded)

    def _trim_log(self) -> None:
        """Keep the last _LOG_KEEP changes (inside the writer's transaction)."""
        last = self._db.execute("SELECT max(seq) FROM change").fetchone()[0]
        if last is not None and int(last) > _LOG_KEEP:
            cut = int(last) - _LOG_KEEP
            if int(self._meta("trimmed") or 0) < cut:
                self._db.execute("DELETE FROM change WHERE seq <= ?", (cut,))
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('trimmed', ?)", (str(cut),))

    def rebuild(
        self,
        version: str,
        files: Mapping[str, str],
        *,
        progress: Callable[[int, int], None] | None = None,
        fence: Callable[[], None] | None = None,
    ) -> int:
        """Make the folder hold exactly `files` at `version`; cached vectors of unchanged contents are
        reused, and vectors no file refers to any more are dropped. `fence` as for `update`."""
        stale = set(self.paths()) - set(files)
        count = self.update(version, files, stale, progress=progress, fence=fence)
        with self._lock:
            self._db.execute("DELETE FROM blob WHERE sha256 NOT IN (SELECT sha256 FROM path)")
        return count

    # -- reading ------------------------------------------------------------------------------

    def _fresh(self) -> Rows:
        """The matrix of the covered version (call with the lock held): brought along by the changes
        logged since it was last looked at, reloaded whole only when the log cannot say."""
        data_version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        rows = self._rows
        if rows is not None and data_version == self._seen_data_version and not self._dirty:
            return rows
        self._db.execute("BEGIN")  # one read snapshot for the log and the vectors
        try:
            trimmed = int(self._meta("trimmed") or 0)
            log = self._db.execute(
                "SELECT seq, path, sha256 FROM change WHERE seq > ? ORDER BY seq", (self._seq,)
            ).fetchall()
            moved = data_version != self._seen_data_version
            if rows is None or trimmed > self._seq or (moved and not log):
                rows = self._load()
            elif log:
                rows = self._follow(rows, [(str(p), None if d is None else str(d)) for _s, p, d in log])
                self._seq = int(log[-1][0])
        finally:
            self._db.execute("COMMIT")
        self._rows, self._seen_data_version, self._dirty = rows, data_version, False
        return rows

    def _load(self) -> Rows:
        """Every vector of the covered version, in path order (inside _fresh's read transaction)."""
        last = self._db.execute("SELECT max(seq) FROM change").fetchone()[0]
        self._seq = int(last or self._meta("trimmed") or 0)
        dim = self.embedder.dim
        entries = [
            (str(path), str(digest), np.frombuffer(vector, dtype="<f4"))
            for path, digest, vector in self._db.execute(
                "SELECT path.path, path.sha256, blob.vector FROM path JOIN blob USING (sha256)"
                " ORDER BY path.path"
            )
            if len(vector) == 4 * dim
        ]
        return Rows.build(dim, entries)

    def _follow(self, rows: Rows, changes: list[tuple[str, str | None]]) -> Rows:
        """`rows` after the logged `changes`, the new contents' vectors read from the folder."""
        known = rows.by_digest
        found = self._stored(sorted({d for _p, d in changes if d is not None and d not in known}))

        def vector_of(digest: str) -> npt.NDArray[np.float32] | None:
            row = known.get(digest)
            return rows.matrix[row] if row is not None else found.get(digest)

        return rows.changed(changes, vector_of, compact_from=self.compact_from)

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
    ) -> list[VectorHit]:
        """The `limit` files most similar to `query` (cosine, best first), among those under `prefix`
        and accepted by `allow` (a test, or the set of paths allowed). Ties are broken by path, so
        results are deterministic."""
        return self.ranked(query, limit=limit, prefix=prefix, allow=allow).hits[: max(0, limit)]

    def ranked(
        self,
        query: str,
        *,
        limit: int = 10,
        prefix: str | None = None,
        allow: Callable[[str], bool] | AbstractSet[str] | None = None,
        include: Collection[str] = (),
    ) -> Ranking:
        """The `limit` best files as in `search` plus those tying with the last and those of
        `include` (the other ranking's candidates, for a fusion), the paths that have a vector and
        the lowest score of all files under `prefix` accepted by `allow` (so a min-max normalisation
        of the few equals that of the whole ranking)."""
        with self._lock:
            rows = self._fresh()
        covered, row_of, paths = rows.covered, rows.row_of, rows.paths
        if limit <= 0 or not row_of:
            return Ranking([], covered, None)
        vector = self.embedder.query(query)
        keep = rows.live_rows
        test = allow.__contains__ if isinstance(allow, AbstractSet) else allow
        if isinstance(allow, AbstractSet) and self._allows_all(rows, allow):
            test = None  # every file with a vector is allowed: no check per file
        if prefix is not None or test is not None:
            keep = np.fromiter(
                (
                    i
                    for i in keep.tolist()
                    if (prefix is None or paths[i].startswith(prefix)) and (test is None or test(paths[i]))
                ),
                dtype=np.int64,
            )
        if not len(keep):
            return Ranking([], covered, None)
        # Rounded: two equal rows may give results that differ in the last bit, and equal contents
        # must tie, so that the path decides between them.
        scores = np.round(cosines(rows.matrix[: rows.n], vector), 6)[keep]
        count = len(keep)
        floor = float(scores.min())
        if len(keep) > limit:  # every row scoring at least the limit-th best, ties included
            worst = np.partition(-scores, limit - 1)[limit - 1]
            chosen = -scores <= worst
            if include:  # the positions in `keep` (sorted rows) of the rows of `include`
                wanted = np.fromiter((row_of[p] for p in include if p in row_of), dtype=np.int64)
                at = np.searchsorted(keep, wanted)
                inside = at < len(keep)
                at, wanted = at[inside], wanted[inside]
                chosen[at[keep[at] == wanted]] = True
            keep, scores = keep[chosen], scores[chosen]
        ranked = sorted(zip((-scores).tolist(), (paths[i] for i in keep.tolist()), strict=True))
        return Ranking([VectorHit(path, -score) for score, path in ranked], covered, floor, count)

    def _allows_all(self, rows: Rows, allow: AbstractSet[str]) -> bool:
        """Whether `allow` holds every path of `rows`; remembered for the same two objects (a caller
        passing the same unchanging set search after search saves checking 10,000 paths each time)."""
        memo = self._allowed
        if memo is not None and memo[0] is rows and memo[1] is allow:
            return memo[2]
        answer = rows.covered <= allow
        self._allowed = (rows, allow, answer)
        return answer

    def cached(self, digests: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors this folder holds for the contents whose sha256 are `digests` (under any path,
        also contents embedded for a version since left behind); the others are missing."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, npt.NDArray[np.float32]] = {}
        with self._lock:
            rows = self._fresh()
            for digest in wanted:
                row = rows.by_digest.get(digest)
                if row is not None:
                    found[digest] = rows.matrix[row]
            found.update(self._stored([d for d in wanted if d not in found]))  # e.g. of a version left behind
        return found

    def _stored(self, digests: list[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The vectors the folder's table holds for `digests` (under the lock)."""
        found: dict[str, npt.NDArray[np.float32]] = {}
        dim = self.embedder.dim
        for chunk in _chunks(digests, 500):
            for digest, vector in self._db.execute(
                f"SELECT sha256, vector FROM blob WHERE sha256 IN ({','.join('?' * len(chunk))})", chunk
            ):
                if len(vector) == 4 * dim:
                    found[str(digest)] = np.frombuffer(vector, dtype="<f4")
        return found

    def known(self, digests: Sequence[str], *, also: Sequence[str] = ()) -> Known:
        """The vectors this folder holds for the contents whose sha256 are `digests`, for `similarities`:
        rows of the live matrix (which never changes once made, so it is read without the lock), and
        those of contents kept only for versions left behind; the vectors of `also` (such as the text
        compared with the others) go to `loose` wherever they are kept."""
        with self._lock:
            rows = self._fresh()
            by_digest = rows.by_digest
            at = np.fromiter((by_digest.get(d, -1) for d in digests), dtype=np.int64, count=len(digests))
            loose = {d: rows.matrix[by_digest[d]] for d in also if d in by_digest}
            rest = [digests[i] for i in np.flatnonzero(at < 0).tolist()] + [d for d in also if d not in loose]
            if rest:
                loose.update(self._stored(list(dict.fromkeys(rest))))
        return Known(loose=loose, matrix=rows.matrix[: rows.n], rows=at)

    def weight(self) -> int:
        """Bytes this open folder holds in memory (its matrix, SQLite's page cache): for a pool's budget."""
        rows = self._rows
        return (0 if rows is None else int(rows.matrix.nbytes)) + 2 * 1024 * 1024

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
