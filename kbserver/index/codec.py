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

from whoosh.codec.whoosh3 import W3Codec, W3Segment

from kbserver.index import private

__all__ = ["CODEC", "COMPRESS_FROM"]

COMPRESS_FROM = 16  # postings in a block from which it is compressed (W3's blocks hold up to 128)


class _Codec(W3Codec):  # type: ignore[misc]
    def postings_writer(self, dbfile: Any, byteids: bool = False) -> Any:
        return private.plain_small_blocks_writer(self, dbfile, byteids, COMPRESS_FROM)

    def new_segment(self, storage: Any, indexname: str) -> Any:
        return W3Segment(W3Codec(), indexname)  # the TOC names only Whoosh's own classes


CODEC: Any = _Codec()
"""The codec every writer of ours uses (updates, merges, rebuilds)."""
