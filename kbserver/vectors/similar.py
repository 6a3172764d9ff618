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

import numpy as np
import numpy.typing as npt

from kbserver.vectors.embedder import Embedder

__all__ = ["PassageCache", "content_digest", "similarities"]

Vector = npt.NDArray[np.float32]


def content_digest(text: str) -> str:
    """The key of a content's vector: the sha256 of the text the vector sink embeds."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


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
    known: Mapping[str, Vector],
    embed_limit: int,
) -> list[float | None]:
    """The cosine similarity of `text` to each of `others`, in order.

    `as_query`: `text` is a search query (e5's query side) rather than a stored passage. `known` are
    vectors by content digest (the KB's folder). At most `embed_limit` of `others` that have no vector
    yet are embedded here; the rest answer None (the caller falls back to another measure).
    """
    digests = [content_digest(o) for o in others]
    wanted: dict[str, str] = {}
    missing = 0
    for digest, other in zip(digests, others, strict=True):
        if digest in wanted or digest in known:
            continue
        if cache.get(digest) is None:
            if missing >= embed_limit:
                continue
            missing += 1
        wanted[digest] = other.strip()
    vectors = {**{d: known[d] for d in digests if d in known}, **_passages(embedder, cache, wanted, known)}
    if as_query:
        target = np.asarray(embedder.query(text), dtype=np.float32)
    else:
        mine = content_digest(text)
        target = _passages(embedder, cache, {mine: text.strip()}, known)[mine]
    present = [i for i, d in enumerate(digests) if d in vectors]
    out: list[float | None] = [None] * len(digests)
    if present:
        scores = np.round(np.stack([vectors[digests[i]] for i in present]) @ target, 6)
        for i, value in zip(present, scores.tolist(), strict=True):
            out[i] = float(value)
    return out
