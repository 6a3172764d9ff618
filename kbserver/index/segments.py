"""Index segments opened for searching without mmap: each part a reader opens is read once.

Whoosh maps a compound segment file into memory and copies every part it opens into a BytesIO, so
an open index was held twice (the mapped pages count in the process's RSS as well as the copies).
`ReadStorage` opens segment files unmapped and reads each part with one `pread` into a bytes object,
which BufferFile's BytesIO shares rather than copies: one copy, read as fast as before. A segment
file stays open while its reader is (a merge that deletes it meanwhile does not disturb reads), so
an open index holds one file descriptor per segment, closed with its searcher.
"""

from __future__ import annotations

import os
from typing import Any

from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import BufferFile, StructFile

__all__ = ["ReadStorage"]

_COMPOUND = ".seg"  # Whoosh's compound segment files (W3Segment.COMPOUND_EXT)


class _SegmentFile(StructFile):  # type: ignore[misc]
    """A compound segment file whose parts are read into memory, each on its own, when opened."""

    def subset(self, position: int, length: int, name: str | None = None) -> Any:
        return BufferFile(os.pread(self.file.fileno(), length, position), name=name)


class ReadStorage(FileStorage):  # type: ignore[misc]
    """An index generation's folder opened for searching: its segments are read, never mapped."""

    def __init__(self, path: str) -> None:
        super().__init__(path, supports_mmap=False)

    def open_file(self, name: str, **kwargs: Any) -> Any:
        if not name.endswith(_COMPOUND):
            return super().open_file(name, **kwargs)
        return _SegmentFile(open(os.path.join(self.folder, name), "rb"), name=name, **kwargs)
