"""Whoosh's W3 codec, writing the posting blocks of rare terms uncompressed.

W3 zlib-compresses every posting block however small, and most terms of CJK text are rare, so
compressing one-posting blocks cost CPU for a few bytes (docs/performance.md). Each block records
its level and segments name a stock W3Codec, so any W3 reader reads what is written here.
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
