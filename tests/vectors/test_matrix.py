"""The in-memory matrix follows the folder change by change and ranks exactly as a full reload."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbserver.vectors.store as store_module
from kbserver.vectors import Ranking, VectorStore
from kbserver.vectors.matrix import Rows

_TEXTS = ["tea", "coffee", "green tea", "a dentist appointment", "会议", "the VPN setup"]
_PATHS = [f"{folder}/m{i}.md" for folder in ("memories", "notes") for i in range(5)]


class _Hashed:
    """Deterministic unit vectors from a text's hash: fast, and equal texts get equal vectors."""

    name = "hashed-test-embedder"
    dim = 8

    def _vector(self, text: str) -> np.ndarray:  # type: ignore[type-arg]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def passages(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[type-arg]
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def query(self, text: str) -> np.ndarray:  # type: ignore[type-arg]
        return self._vector(text)


def _same(a: Ranking, b: Ranking) -> None:
    assert [(h.path, h.score) for h in a.hits] == [(h.path, h.score) for h in b.hits]
    assert a.covered == b.covered
    assert a.floor == b.floor
    assert a.ranked == b.ranked


_batch = st.tuples(
    st.dictionaries(st.sampled_from(_PATHS), st.sampled_from(_TEXTS), max_size=6),  # upserts
    st.lists(st.sampled_from(_PATHS), max_size=4),  # deletes
    st.booleans(),  # whether the other process's reader searches after this batch
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(_batch, min_size=1, max_size=12),
    query=st.sampled_from(_TEXTS),
    prefix=st.sampled_from([None, "memories/", "notes/m1"]),
    limit=st.integers(1, 6),
    include=st.lists(st.sampled_from(_PATHS), max_size=3),
    log_keep=st.sampled_from([3, 50_000]),
    allowing=st.sampled_from(["everything", "a test", "a set", "a set of all"]),
)
def test_incremental_matrix_ranks_as_a_full_reload(
    tmp_path: Path,
    batches: list[tuple[dict[str, str], list[str], bool]],
    query: str,
    prefix: str | None,
    limit: int,
    include: list[str],
    log_keep: int,
    allowing: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_module, "_LOG_KEEP", log_keep)  # small: readers fall behind the log
    where = tmp_path / f"v{abs(hash((str(batches), query, prefix, limit, str(include), log_keep)))}"
    embedder = _Hashed()

    # The same files allowed as a test (the fresh store's) and as one set object search after search
    # (the others', which check it against their paths once per state).
    def test(path: str) -> bool:
        return allowing in ("everything", "a set of all") or not path.endswith("m3.md")

    allow = {
        "everything": None,
        "a test": test,
        "a set": frozenset(p for p in _PATHS if test(p)),
        "a set of all": frozenset(_PATHS),
    }[allowing]
    with VectorStore(where, embedder) as writer, VectorStore(where, embedder) as reader:
        writer.compact_from = reader.compact_from = 2  # compact often
        writer.ranked(query, limit=limit)  # loaded before the changes: followed from here on
        reader.ranked(query, limit=limit)
        for number, (upserts, deletes, look) in enumerate(batches):
            writer.update(f"{number:040d}", upserts, deletes)
            got = writer.ranked(query, limit=limit, prefix=prefix, allow=allow, include=include)
            with VectorStore(where, embedder) as fresh:  # loads every vector
                want = fresh.ranked(query, limit=limit, prefix=prefix, allow=test, include=include)
                ranked = [p for p in fresh.paths() if test(p) and (prefix is None or p.startswith(prefix))]
                assert want.ranked == len(ranked)
                digests = [*fresh.paths().values(), "0" * 64]
                assert writer.cached(digests).keys() == fresh.cached(digests).keys()
            _same(got, want)  # this process's own writes
            if look:  # another process's writes, maybe several batches at once
                _same(reader.ranked(query, limit=limit, prefix=prefix, allow=allow, include=include), want)
        assert writer.paths() == reader.paths()


def test_rows_changed_keeps_older_states_intact() -> None:
    """A search holding an older state sees it unchanged while newer states are built."""
    v = np.eye(5, dtype=np.float32)
    first = Rows.build(5, [("a", "da", v[0]), ("b", "db", v[1])])
    roomy = first.changed([("c", "dc")], {"dc": v[2]}.get)  # a bigger buffer, with room to append
    second = roomy.changed([("d", "dd"), ("a", None)], {"dd": v[3]}.get)  # appended in place
    third = roomy.changed([("b", "de")], {"de": v[4]}.get)  # from the older state again
    assert dict(first.row_of) == {"a": 0, "b": 1} and first.n == 2
    assert dict(roomy.row_of) == {"a": 0, "b": 1, "c": 2} and roomy.n == 3
    assert roomy.matrix[:3].tolist() == v[:3].tolist()
    assert second.covered == {"b", "c", "d"} and second.dead == 1
    assert second.matrix[second.row_of["d"]].tolist() == v[3].tolist()  # not overwritten by third
    assert third.covered == {"a", "b", "c"}
    assert third.matrix[third.row_of["b"]].tolist() == v[4].tolist()
    assert [second.paths[r] for r in second.live_rows] == ["b", "c", "d"]
    compacted = second.compacted()
    assert (compacted.n, compacted.paths, compacted.dead) == (3, ["b", "c", "d"], 0)
    assert compacted.matrix.tolist() == v[1:4].tolist()
