"""Cosine similarities of one text to a few others, for rules that compare records with each other
(the `semantic` set's supersede and search) rather than search a whole folder.

Vectors come from the KB's vector folder when the follower made them, else from a small in-process
cache of passages embedded on a request's path, else from the embedder (at most `embed_limit` per
call). Nothing here writes a vector folder: the follower's sink stays its only writer.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kbserver.vectors.embedder import Embedder
from kbserver.vectors.matrix import cosines

__all__ = ["Known", "PassageCache", "content_digest", "similarities"]

Vector = npt.NDArray[np.float32]

# The digests of contents seen lately. A search of the semantic set asks for the similarity to every
# memory of a user, 10,000 contents at 10,000 memories, and hashing them all again on every call is
# measurable (docs/performance.md, "Measurements behind the code").
# The keys are the records' own strings (their hash is cached on the object), so a lookup is a dict
# probe; the table is emptied once its keys hold _DIGEST_CHARS characters, which bounds what it keeps
# alive of contents no record holds any more.
_DIGEST_CHARS = 32 * 1024 * 1024
_digests: dict[str, str] = {}
_digest_chars = 0
_digest_lock = threading.Lock()


def content_digest(text: str) -> str:
    """The key of a content's vector: the sha256 of the text the vector sink embeds."""
    global _digest_chars
    digest = _digests.get(text)
    if digest is None:
        digest = hashlib.sha256(text.strip().encode("utf-8")).hexdigest()
        with _digest_lock:
            if _digest_chars + len(text) > _DIGEST_CHARS:
                _digests.clear()
                _digest_chars = 0
            if text not in _digests:
                _digests[text] = digest
                _digest_chars += len(text)
    return digest


@dataclass(frozen=True)
class Known:
    """The vectors a KB's folder holds for the texts a `similarities` call asks about: the i-th text's
    is row `rows[i]` of `matrix` (-1: not there), or `loose[its digest]` (a content the folder keeps
    only for a version left behind, or one a caller has at hand)."""

    loose: Mapping[str, Vector] = field(default_factory=dict)
    matrix: npt.NDArray[np.float32] | None = None
    rows: npt.NDArray[np.int64] | None = None


class PassageCache:
    """The passage vectors embedded in this process lately, by content sha256 (least recently used out)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._items: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> Vector | None:
        with self._lock:
            vector = self._items.get(digest)
            if vector is not None:
                self._items.move_to_end(digest)
            return vector

    def put(self, digest: str, vector: Vector) -> None:
        with self._lock:
            self._items[digest] = vector
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _passages(
    embedder: Embedder, cache: PassageCache, texts: Mapping[str, str], known: Mapping[str, Vector]
) -> dict[str, Vector]:
    """digest -> vector for `texts` (digest -> text), embedding those neither known nor cached."""
    out: dict[str, Vector] = {}
    todo: list[str] = []
    for digest in texts:
        vector = known.get(digest)
        if vector is None:
            vector = cache.get(digest)
        if vector is None:
            todo.append(digest)
        else:
            out[digest] = vector
    if todo:
        made = embedder.passages([texts[d] for d in todo])
        for digest, vector in zip(todo, made, strict=True):
            kept = np.asarray(vector, dtype=np.float32)
            kept.setflags(write=False)
            cache.put(digest, kept)
            out[digest] = kept
    return out


def similarities(
    embedder: Embedder,
    cache: PassageCache,
    text: str,
    others: Sequence[str],
    *,
    as_query: bool,
    known: Known,
    embed_limit: int,
) -> list[float | None]:
    """The cosine similarity of `text` to each of `others`, in order, rounded to 6 decimals.

    `as_query`: `text` is a search query (e5's query side) rather than a stored passage. `known` are
    the KB folder's vectors of `others`. At most `embed_limit` of `others` that have no vector yet
    are embedded here; the rest answer None (the caller falls back to another measure).
    """
    if as_query:
        target = np.asarray(embedder.query(text), dtype=np.float32)
    else:
        mine = content_digest(text)
        target = _passages(embedder, cache, {mine: text.strip()}, known.loose)[mine]
    scores = np.full(len(others), np.nan, dtype=np.float64)
    if known.matrix is not None and known.rows is not None and len(known.matrix):
        # One product over the folder's whole matrix is cheaper than gathering its rows first.
        inside = known.rows >= 0
        scores[inside] = np.round(cosines(known.matrix, target), 6)[known.rows[inside]]
        rest = np.flatnonzero(~inside).tolist()
    else:
        rest = list(range(len(others)))
    if rest:
        wanted: dict[str, str] = {}
        missing = 0
        digests = {i: content_digest(others[i]) for i in rest}
        for i in rest:
            digest = digests[i]
            if digest in wanted or digest in known.loose:
                continue
            if cache.get(digest) is None:
                if missing >= embed_limit:
                    continue
                missing += 1
            wanted[digest] = others[i].strip()
        vectors = {d: known.loose[d] for d in digests.values() if d in known.loose}
        vectors.update(_passages(embedder, cache, wanted, known.loose))
        present = [i for i in rest if digests[i] in vectors]
        if present:
            found = np.round(cosines(np.stack([vectors[digests[i]] for i in present]), target), 6)
            scores[present] = found
    return [None if value != value else value for value in scores.tolist()]  # NaN: no vector
