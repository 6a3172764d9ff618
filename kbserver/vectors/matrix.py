"""The in-memory matrix of a vector folder, kept in step with the folder row by row.

Reloading every vector after each change is too slow at 10,000 files (and the follower changes the
folder after every write; docs/performance.md, "Measurements behind the code"), so a change appends
rows instead: a new or changed file gets a row at the end, a changed or deleted file's old row is
marked dead, and once dead rows make up a quarter of the matrix it is compacted. Each state
(`Rows`) is immutable once made: a search holds the one it started with, without a lock, while the
next one is built beside it (rows are only ever appended past the end that older states see, and
each state has its own `live` mask and maps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

__all__ = ["Rows", "cosines"]

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, eq=False)
class Rows:
    """Rows 0..n-1 of `matrix` hold the vectors of `paths[i]` (content sha256 `digests[i]`); the
    live ones are those of `row_of` (path -> row), the others dead. Never changed once made."""

    matrix: npt.NDArray[np.float32]  # (capacity, dim): rows from n on belong to no state yet
    n: int
    paths: list[str]  # append-only and shared with later states: only the first n are this state's
    digests: list[str]
    row_of: Mapping[str, int]

    @classmethod
    def build(cls, dim: int, entries: Sequence[tuple[str, str, Vector]]) -> Rows:
        """A compact state of `entries` (path, sha256, vector), in their order."""
        matrix = np.zeros((len(entries), dim), dtype=np.float32)
        for i, (_path, _digest, vector) in enumerate(entries):
            matrix[i] = vector
        paths = [e[0] for e in entries]
        return cls(matrix, len(entries), paths, [e[1] for e in entries], {p: i for i, p in enumerate(paths)})

    @cached_property
    def live_rows(self) -> npt.NDArray[np.int64]:
        """The live rows, ascending."""
        return np.fromiter(sorted(self.row_of.values()), dtype=np.int64, count=len(self.row_of))

    @cached_property
    def covered(self) -> frozenset[str]:
        return frozenset(self.row_of)

    @cached_property
    def by_digest(self) -> dict[str, int]:
        """sha256 -> a live row holding that content's vector."""
        return {self.digests[row]: row for row in self.row_of.values()}

    @property
    def dead(self) -> int:
        return self.n - len(self.row_of)

    def changed(
        self,
        changes: Sequence[tuple[str, str | None]],
        vector_of: Callable[[str], Vector | None],
        *,
        compact_from: int = 1024,
    ) -> Rows:
        """The state after `changes` (path, new sha256 or None: deleted), in order (the last change of
        a path wins). `vector_of(sha256)` gives a new content's vector; a content without one leaves
        its path out (as a full load does). Compacted when more than `compact_from` rows and a
        quarter of all rows are dead."""
        final: dict[str, str | None] = {}
        for path, digest in changes:
            final[path] = digest
        row_of = dict(self.row_of)
        added: list[tuple[str, str, Vector]] = []
        for path, digest in final.items():
            old = row_of.get(path)
            if old is not None and digest is not None and self.digests[old] == digest:
                continue  # same content: the row stays
            if old is not None:
                del row_of[path]  # its row is dead from this state on
            if digest is None:
                continue
            vector = vector_of(digest)
            if vector is not None:
                added.append((path, digest, vector))
        matrix, n = self.matrix, self.n
        paths, digests = self.paths, self.digests
        if added:
            if n + len(added) > len(matrix) or len(paths) > n:
                # A buffer of its own (bigger, or another state already appended past this one's
                # rows); the older states keep theirs.
                grown = np.zeros((max(2 * n, n + len(added), 64), matrix.shape[1]), np.float32)
                grown[:n] = matrix[:n]
                matrix, paths, digests = grown, paths[:n], digests[:n]
            for path, digest, vector in added:
                matrix[n] = vector
                paths.append(path)
                digests.append(digest)
                row_of[path] = n
                n += 1
        state = Rows(matrix, n, paths, digests, row_of)
        if state.dead > compact_from and 4 * state.dead > state.n:
            return state.compacted()
        return state

    def compacted(self) -> Rows:
        """The same live rows in a matrix of their own, in path order."""
        order = sorted(self.row_of.items())
        rows = np.fromiter((r for _p, r in order), dtype=np.int64, count=len(order))
        matrix = self.matrix[rows] if len(rows) else np.zeros((0, self.matrix.shape[1]), np.float32)
        paths = [p for p, _r in order]
        digests = [self.digests[r] for _p, r in order]
        return Rows(matrix, len(paths), paths, digests, {p: i for i, p in enumerate(paths)})


def cosines(matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """matrix @ vector (rows and vector of unit length: their cosines) on the calling thread, without BLAS.

    OpenBLAS splits a product this size over a thread per core whose workers spin while they wait,
    which on a busy machine is slower than one thread; einsum's own loop never starts a thread
    (docs/performance.md, "Measurements behind the code").
    """
    out: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, vector)
    return out
