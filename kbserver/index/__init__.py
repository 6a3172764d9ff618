"""Index: full-text search over a KB's files (the only package that imports whoosh).

Owns the Whoosh schema, the English + CJK-bigram analyzer, query parsing, snippets, the on-disk
folder (generations swapped atomically, writer lock across threads and processes) and the version
an index covers. It gets plain data (paths and texts) and must not import git/dulwich or any
kbserver package other than kbserver.core; nothing outside this package may import whoosh, so the
engine can be swapped behind `SearchIndex`.
"""

from kbserver.index.engine import Hit, IndexCorrupt, SearchIndex, SearchResult
from kbserver.index.storage import index_exists

__all__ = ["Hit", "IndexCorrupt", "SearchIndex", "SearchResult", "index_exists"]
