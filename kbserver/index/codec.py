"""Whoosh's W3 codec, writing the posting blocks of rare terms uncompressed.

W3 zlib-compresses every posting block, however small (its check for "under 20 bytes, don't
bother" is overwritten on the next line). CJK text makes most terms rare, a bigram in one or two
notes, so a segment of Chinese notes is mostly one-posting blocks, and compressing each one was
~15% of an update's and a merge's CPU for a saving of a few bytes. Each block records its own
compression level and W3's reader honours it, so segments written either way read the same, and
the segment records a stock W3Codec: an index written here is read by any Whoosh W3 reader.
"""

from __future__ import annotations

from typing import Any

from whoosh.codec.whoosh3 import W3Codec, W3PostingsWriter, W3Segment

__all__ = ["CODEC", "COMPRESS_FROM"]

COMPRESS_FROM = 16  # postings in a block from which it is compressed (W3's blocks hold up to 128)


class _PostingsWriter(W3PostingsWriter):  # type: ignore[misc]
    def _write_block(self, last: bool = False) -> None:
        this: Any = self
        level = this._compression
        if len(this._ids) < COMPRESS_FROM:
            this._compression = 0  # recorded in the block's info: read back uncompressed
        try:
            super()._write_block(last)
        finally:
            this._compression = level


class _Codec(W3Codec):  # type: ignore[misc]
    def postings_writer(self, dbfile: Any, byteids: bool = False) -> Any:
        return _PostingsWriter(
            dbfile,
            blocklimit=self._blocklimit,
            byteids=byteids,
            compression=self._compression,
            inlinelimit=self._inlinelimit,
        )

    def new_segment(self, storage: Any, indexname: str) -> Any:
        return W3Segment(W3Codec(), indexname)  # the TOC names only Whoosh's own classes


CODEC: Any = _Codec()
"""The codec every writer of ours uses (updates, merges, rebuilds)."""
