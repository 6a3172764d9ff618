"""index/bulk.py's one-block term writer writes the bytes Whoosh's own term writing writes."""

from __future__ import annotations

import random
from typing import Any

import pytest
from whoosh.filedb.filestore import RamStorage

from kbserver.index import private
from kbserver.index.bulk import _OneBlockTerms
from kbserver.index.codec import CODEC
from kbserver.index.schema import make_schema

SEGMENT = CODEC.new_segment(RamStorage(), "x")  # one name for both writers: the same file names


def _terms(field: str, seed: int) -> list[tuple[bytes, list[Any]]]:
    """Terms of every kind a segment holds: one posting to several blocks, weights all 1, all equal
    or mixed, values present or empty, ids sparse or dense."""
    rng = random.Random(seed)
    terms = []
    for k, count in enumerate([1, 1, 2, 5, 15, 16, 17, 40, 127, 128, 129, 300, 3, 1]):
        ids = sorted(rng.sample(range(400), count))
        kind = k % 3
        weights = [1.0 if kind == 0 else 2.5 if kind == 1 else float(rng.randint(1, 6)) for _ in ids]
        values = [
            b"" if field == "path" else bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 5)))
            for _ in ids
        ]
        flat = [x for triple in zip(ids, weights, values, strict=True) for x in triple]
        terms.append((f"t{k:03d}{field}".encode(), flat))
    return terms


def _write(fast: bool) -> dict[str, bytes]:
    storage = RamStorage()
    schema = make_schema()
    writer = CODEC.field_writer(storage, SEGMENT)
    lengths = [(d * 7) % 23 for d in range(400)]
    written = 0
    for field in ("body", "chars", "path"):
        writer.start_field(field, schema[field])
        one_block = _OneBlockTerms(writer)
        for text, flat in _terms(field, len(field)):
            if fast and one_block.write(text, flat, lengths):
                written += 1
                continue
            writer.start_term(text)
            private.add_block_postings(private.postings_writer(writer), flat, lengths)
            writer.finish_term()
        writer.finish_field()
    writer.close()
    assert written == (36 if fast else 0)  # every term of one block (up to 128 postings) the fast way
    return {name: bytes(storage.open_file(name).read()) for name in storage.list()}


def test_one_block_terms_write_whooshs_bytes() -> None:
    fast, whooshs = _write(True), _write(False)
    assert fast.keys() == whooshs.keys() and len(fast) >= 2
    for name in fast:
        assert fast[name] == whooshs[name], name


@pytest.mark.parametrize("count", [0, 129])
def test_other_terms_are_left_to_whoosh(count: int) -> None:
    writer = CODEC.field_writer(RamStorage(), SEGMENT)
    writer.start_field("body", make_schema()["body"])
    assert _OneBlockTerms(writer).write(b"kiwi", [7, 1.0, b""] * count, [0] * 10) is False
