"""kbserver.index.private against the installed Whoosh: each private accessor agrees with the public API."""

from __future__ import annotations

import copy
import importlib.metadata
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index
from whoosh import query as q
from whoosh.codec import whoosh3
from whoosh.codec.whoosh3 import W3Codec, W3LeafMatcher, W3TermInfo
from whoosh.fields import UnknownFieldError
from whoosh.filedb.filestore import FileStorage, RamStorage
from whoosh.index import FileIndex
from whoosh.matching import FilterMatcher
from whoosh.system import pack_ushort
from whoosh.util.numeric import byte_to_length
from whoosh.writing import IndexingError

from kbserver.index import private
from kbserver.index.codec import CODEC, COMPRESS_FROM
from kbserver.index.schema import make_schema

DOCS = 700  # enough postings of "kiwi" for several blocks
DELETED = {3, 150, 299, 600}


@pytest.fixture
def ix(tmp_path: Path) -> Iterator[Any]:
    index = whoosh_index.create_in(str(tmp_path), make_schema())
    with index.writer() as w:
        for i in range(DOCS):
            body = "kiwi " * (1 + i % 4) + f"word{i % 7} " * (i % 3)
            w.add_document(path=f"n{i}.md", body=body)
    yield index
    index.close()


def _delete(index: Any, docs: set[int]) -> None:
    with index.writer() as w:
        for d in docs:
            w.delete_document(d)


def _leaf(reader: Any) -> Any:
    leaves = [r for r, _ in reader.leaf_readers()]
    assert len(leaves) == 1
    return leaves[0]


def test_the_installed_whoosh_is_the_tested_and_pinned_one() -> None:
    assert importlib.metadata.version("whoosh-reloaded") == private.TESTED
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    pins = re.findall(r'"whoosh-reloaded([^"]*)"', pyproject)
    assert pins == [f"=={private.TESTED}"], pins


def test_raw_blocks_decode_to_the_public_postings_deleted_included(ix: Any) -> None:
    _delete(ix, DELETED)
    with ix.reader() as reader:
        leaf = _leaf(reader)
        stepped = private.raw_matcher(leaf, "body", b"kiwi")
        public_ids, public_weights = [], []
        while stepped.is_active():
            public_ids.append(stepped.id())
            public_weights.append(stepped.weight())
            stepped.next()
        assert public_ids == list(range(DOCS))  # no deletion filter: the deleted are there
        m = private.raw_matcher(leaf, "body", b"kiwi")
        assert type(m) is W3LeafMatcher and not private.byte_ids(m)
        assert private.leaf_term(m) == ("body", b"kiwi")
        ids: list[int] = []
        weights: list[float] = []
        blocks = 0
        while m.is_active():
            assert private.leaf_position(m) == 0
            raw, w = private.block_ids_and_weights(m)
            block = list(private.block_ids(m))
            decoded = [raw[0]]  # each block's first id is absolute, then deltas
            for delta in raw[1:]:
                decoded.append(decoded[-1] + delta)
            assert decoded == block
            assert private.block_max_id(m) == block[-1] == m.block_max_id()
            weights.extend(
                [1.0] * len(block) if w is None else [w] * len(block) if isinstance(w, float) else w
            )
            ids.extend(block)
            blocks += 1
            private.next_block(m)
        assert blocks > 1
        assert ids == public_ids and weights == pytest.approx(public_weights)


def test_leaf_position_follows_next(ix: Any) -> None:
    with ix.reader() as reader:
        m = private.raw_matcher(_leaf(reader), "body", b"kiwi")
        assert private.leaf_position(m) == 0
        m.next()
        m.next()
        assert private.leaf_position(m) == 2 and m.id() == 2


def test_length_column_bytes_are_the_public_field_lengths(ix: Any) -> None:
    with ix.reader() as reader:
        leaf = _leaf(reader)
        column = private.length_column(leaf, "body")
        assert column is not None
        raw = private.column_bytes(column)
        assert len(raw) == leaf.doc_count_all() == DOCS
        assert [byte_to_length(b) for b in raw] == [leaf.doc_field_length(d, "body") for d in range(DOCS)]
        assert private.length_column(leaf, "nosuchfield") is None


def test_filter_set_and_null_query() -> None:
    matcher = FilterMatcher(q.NullQuery.matcher(None), frozenset({1, 2}), exclude=True)
    assert private.filter_set(matcher) == (frozenset({1, 2}), True)
    assert private.filter_set(FilterMatcher(q.NullQuery.matcher(None), {7}))[1] is False
    assert private.is_null_query(q.NullQuery) and private.is_null_query(q.Or([]).normalize())
    assert not private.is_null_query(q.Term("body", "kiwi"))


def test_toc_and_rebind_see_the_newer_deletions(ix: Any) -> None:
    old = ix.reader()
    try:
        _delete(ix, DELETED)
        toc = private.read_toc(ix)
        assert toc.generation == ix.latest_generation()
        fresh = ix.reader()
        try:
            assert [s.segment_id() for s in toc.segments] == [
                r.segment().segment_id() for r, _ in fresh.leaf_readers()
            ]
            segment = toc.segments[0]
            view = private.rebind(_leaf(old), segment, toc.generation)
            assert set(view.deleted_docs_set) == set(_leaf(fresh).deleted_docs_set) == DELETED
            assert view.generation() == toc.generation and view.doc_count() == DOCS - len(DELETED)
            assert not _leaf(old).has_deletions()  # the old reader is left as it was
        finally:
            fresh.close()
    finally:
        old.close()


# -- the import-time check ------------------------------------------------------------------------------
def test_the_check_passes_on_the_installed_whoosh() -> None:
    private.check(importlib.metadata.version("whoosh-reloaded"))


def test_another_whoosh_version_is_one_loud_error() -> None:
    with pytest.raises(private.WhooshChanged) as err:
        private.check("2.7.6")
    message = str(err.value)
    assert message.startswith("whoosh-reloaded: version 2.7.6 found, 2.7.5 required")
    assert "whoosh-reloaded==2.7.5" in message
    with pytest.raises(private.WhooshChanged, match="version not installed found"):
        private.check(None)


def test_a_missing_attribute_is_named_in_the_same_error() -> None:
    with pytest.raises(private.WhooshChanged) as err:
        private.check(
            "2.8.0",
            has={FileIndex: ("_read_toc", "_read_toc_v2"), whoosh3: ("NO_SUCH_COLUMN",)},
            uses={FilterMatcher: ("_ids", "_members")},
        )
    message = str(err.value)
    assert "version 2.8.0 found" in message
    assert "FileIndex has no _read_toc_v2" in message and "_read_toc," not in message
    assert "whoosh.codec.whoosh3 has no NO_SUCH_COLUMN" in message
    assert "FilterMatcher no longer uses _members" in message


def test_every_attribute_the_module_relies_on_is_in_the_check() -> None:
    """Each private name this module reads is listed in HAS or USES (so the check covers it)."""
    source = Path(private.__file__).read_text()
    body = source[source.index("def length_column") :]
    read = set(re.findall(r"\.(_[A-Za-z]\w*)", body))
    listed = {n for names in private.HAS.values() for n in names} | {
        n for names in private.USES.values() for n in names
    }
    assert len(read) > 30 and read - listed == set(), read - listed


# -- patches ----------------------------------------------------------------------------------------
def test_the_cached_reader_patch_answers_as_whooshs_own(ix: Any) -> None:
    _delete(ix, {1})
    with ix.reader() as reader:
        leaf = _leaf(reader)
        assert whoosh3.W3PerDocReader._cached_reader is private._cached_reader
        for field in ("body", "path", "title", "nosuchfield"):
            ours = private._cached_reader(copy.copy(leaf._perdoc), f"_{field}_len", whoosh3.LENGTHS_COLUMN)
            whooshs = private._WHOOSHS_CACHED_READER(
                copy.copy(leaf._perdoc), f"_{field}_len", whoosh3.LENGTHS_COLUMN
            )
            assert (ours is None) == (whooshs is None), field
            if ours is not None:
                assert list(ours) == list(whooshs)
        assert [leaf.doc_field_length(d, "path") for d in range(5)] == [0] * 5  # no column: the default


def test_install_replaces_every_random_name_and_is_idempotent() -> None:
    private.install()
    private.install()
    for module in private._NAME_HOLDERS:
        assert module.random_name is private.random_name, module.__name__
    assert whoosh3.W3PerDocReader._cached_reader is private._cached_reader


# -- writing ------------------------------------------------------------------------------------------
def _postings(write: Any, compress_from: int | None = None) -> tuple[bytes, Any]:
    """The postings file and term info of one term written by `write`, through W3's own postings
    writer (compress_from None) or through plain_small_blocks_writer."""
    codec = W3Codec(blocklimit=8)
    storage = RamStorage()
    postfile = storage.create_file("postings")
    if compress_from is None:
        writer = codec.postings_writer(postfile)
    else:
        writer = private.plain_small_blocks_writer(codec, postfile, False, compress_from)
    info = W3TermInfo()
    writer.start_postings(make_schema()["body"].format, info)
    write(writer)
    writer.finish_postings()
    postfile.close()
    data = bytes(storage.open_file("postings").read())
    return data, (info.weight(), info.doc_frequency(), info.max_id(), info.min_length(), info.max_length())


def test_add_block_postings_writes_what_add_posting_writes() -> None:
    ids = list(range(0, 60, 3))
    weights = [float(1 + i % 4) for i in range(len(ids))]
    values = [bytes([i % 5]) if i % 3 else b"" for i in range(len(ids))]
    lengths = [(d * 7) % 11 for d in range(60)]

    def one_by_one(writer: Any) -> None:
        for d, w, v in zip(ids, weights, values, strict=True):
            writer.add_posting(d, w, v, lengths[d])

    def blockwise(writer: Any) -> None:
        flat = [x for triple in zip(ids, weights, values, strict=True) for x in triple]
        private.add_block_postings(writer, flat, lengths)

    assert _postings(blockwise, compress_from=0) == _postings(one_by_one)


def test_postings_writer_is_the_field_writers_writer_of_the_term(tmp_path: Path) -> None:
    storage = FileStorage(str(tmp_path))
    segment = W3Codec().new_segment(storage, "x")
    fieldwriter = W3Codec().field_writer(storage, segment)
    fieldwriter.start_field("body", make_schema()["body"])
    fieldwriter.start_term(b"kiwi")
    postings = private.postings_writer(fieldwriter)
    assert isinstance(postings, whoosh3.W3PostingsWriter)
    fieldwriter.add(0, 1.0, b"", 1)  # the public way in goes to that same writer
    assert len(postings) == 1
    fieldwriter.finish_term()
    fieldwriter.finish_field()
    fieldwriter.close()


def test_plain_small_blocks_writer_keeps_the_codecs_settings() -> None:
    """With nothing to leave plain it writes byte for byte what W3's own writer does; blocks under
    its threshold differ (not compressed) but give the same term statistics (test_index_codec.py
    reads them back through Whoosh's reader)."""

    def write(writer: Any) -> None:
        for d in range(20):  # blocks of 8, 8 and 4 postings
            writer.add_posting(d, 1.0 + d % 3, b"", 1 + d % 5)

    stock = _postings(write)
    assert _postings(write, compress_from=0) == stock
    plain = _postings(write, compress_from=5)  # the last block, of 4, is left plain
    assert plain[1] == stock[1] and plain[0] != stock[0]


def test_segment_writer_base_is_whooshs_writer_with_public_names(tmp_path: Path) -> None:
    index = whoosh_index.create_in(str(tmp_path), make_schema())
    writer = private.SegmentWriterBase(index)
    assert writer.doc_boost({"_boost": 2.0}) == writer._doc_boost({"_boost": 2.0}) == 2.0
    fields = {"_body_boost": 3.0}
    assert writer.field_boost(fields, "body", 2.0) == writer._field_boost(fields, "body", 2.0) == 3.0
    assert writer.field_boost(fields, "title", 2.0) == writer._field_boost(fields, "title", 2.0) == 2.0
    with pytest.raises(UnknownFieldError):
        writer.check_fields(writer.schema, ["nosuchfield"])
    writer.add_document(path="a.md", body="kiwi")  # flush_segment: Whoosh's own by default
    writer.commit()
    with pytest.raises(IndexingError):
        writer.check_state()  # a committed writer is closed
    with index.searcher() as searcher:
        assert [h["path"] for h in searcher.search(q.Term("body", "kiwi"))] == ["a.md"]
    index.close()


def test_mark_added_makes_commit_write_a_segment(tmp_path: Path) -> None:
    index = whoosh_index.create_in(str(tmp_path), make_schema())
    flushed: list[int] = []

    class Recording(private.SegmentWriterBase):  # type: ignore[misc]
        def flush_segment(self) -> None:
            flushed.append(self.docnum)
            super().flush_segment()

    Recording(index).commit()  # nothing added: no segment
    assert flushed == []
    writer = Recording(index)
    writer.add_document(path="a.md", body="kiwi")
    writer.commit()
    assert flushed == [1]
    writer = Recording(index)
    writer.mark_added()
    writer.commit()
    assert flushed == [1, 0]
    index.close()


def test_length_scorer_scores_with_score_of(ix: Any) -> None:
    class Lengths(private.LengthScorer):
        def __init__(self, searcher: Any) -> None:
            self.setup(searcher, "body", "kiwi")

        def score_of(self, weight: float, length: float) -> float:
            return 1000 * weight + length

    with ix.searcher() as searcher:
        scorer = Lengths(searcher)
        leaf = _leaf(searcher.reader())
        m = private.raw_matcher(leaf, "body", b"kiwi")
        for _ in range(5):
            expected = 1000 * m.weight() + leaf.doc_field_length(m.id(), "body")
            assert scorer.score(m) == expected
            m.next()


def test_term_blocks_are_every_terms_public_postings_deleted_included(ix: Any) -> None:
    _delete(ix, DELETED)
    with ix.reader() as reader:
        leaf = _leaf(reader)
        read: dict[tuple[str, bytes], list[tuple[int, float, bytes | None]]] = {}
        blocks: dict[tuple[str, bytes], int] = {}
        order = []
        for field, text, ids, weights, values in private.term_blocks(leaf):
            if (field, text) not in read:
                order.append((field, text))
            read.setdefault((field, text), []).extend(zip(ids, weights, values, strict=True))
            blocks[(field, text)] = blocks.get((field, text), 0) + 1
        assert set(read) == set(leaf.all_terms())
        fields = [field for i, (field, _) in enumerate(order) if i == 0 or order[i - 1][0] != field]
        assert len(fields) == len(set(fields))  # each field's terms together, each in order
        assert all(order[i] < order[i + 1] for i in range(len(order) - 1) if order[i][0] == order[i + 1][0])
        assert blocks[("body", b"kiwi")] > 1
        for (field, text), postings in read.items():
            m = private.raw_matcher(leaf, field, text)
            public = []
            while m.is_active():
                public.append((m.id(), m.weight(), m.value()))
                m.next()
            assert postings == public  # deleted documents' postings included
        assert {d for d, _, _ in read[("body", b"kiwi")]} == set(range(DOCS))


def test_written_files_and_term_files_are_what_the_field_writer_writes(tmp_path: Path) -> None:
    """The files, field number, format and postings limits the accessors give are the ones Whoosh's
    own field writer writes with: a term written through them by hand reads back, through Whoosh's
    terms reader, as that field's term with its postings."""
    storage = FileStorage(str(tmp_path))
    codec = W3Codec(blocklimit=8, compression=2, inlinelimit=1)
    segment = codec.new_segment(storage, "x")
    schema = make_schema()
    fieldwriter = codec.field_writer(storage, segment)
    fieldwriter.start_field("path", schema["path"])  # field number 0
    fieldwriter.start_term(b"a.md")
    fieldwriter.add(0, 1.0, b"", 0)
    fieldwriter.finish_term()
    fieldwriter.finish_field()
    fieldwriter.start_field("body", schema["body"])  # field number 1

    postfile, termfile = private.written_files(fieldwriter)
    files_postings, table, fieldid, fmt, limits = private.term_files(fieldwriter)
    assert files_postings is postfile and table.dbfile is termfile
    assert fmt is schema["body"].format and fieldid == 1
    assert limits == (8, 1, 2, 0, False)  # the codec's block limit, inline limit and level; none plain

    before = postfile.tell(), termfile.tell()
    fieldwriter.start_term(b"kiwi")  # the public way: postings and a terms row go to those files
    for d in range(20):
        fieldwriter.add(d, 1.0, b"", 1)
    fieldwriter.finish_term()
    assert postfile.tell() > before[0] and termfile.tell() > before[1]

    fieldwriter.start_term(b"zebra")  # by hand, as index/bulk.py's one-block terms write one
    postings = private.postings_writer(fieldwriter)
    for d in (2, 5, 9):
        postings.add_posting(d, 1.0, b"", 1)
    info = postings.finish_postings()
    table.add(pack_ushort(fieldid) + b"zebra", info.to_bytes())
    fieldwriter.finish_field()
    fieldwriter.close()

    reader = codec.terms_reader(storage, segment)
    try:
        assert ("body", b"zebra") in reader and ("path", b"zebra") not in reader
        assert reader.doc_frequency("body", b"zebra") == 3
        assert list(reader.matcher("body", b"zebra", fmt).all_ids()) == [2, 5, 9]
        assert list(reader.matcher("body", b"kiwi", fmt).all_ids()) == list(range(20))
    finally:
        reader.close()


def test_term_files_names_the_size_under_which_blocks_stay_plain(tmp_path: Path) -> None:
    storage = FileStorage(str(tmp_path))
    codec = CODEC  # kbserver's codec: its postings writer is plain_small_blocks_writer
    segment = W3Codec().new_segment(storage, "y")
    fieldwriter = codec.field_writer(storage, segment)
    fieldwriter.start_field("body", make_schema()["body"])
    *_, limits = private.term_files(fieldwriter)
    assert limits == (128, 1, 3, COMPRESS_FROM, False)
    fieldwriter.finish_field()
    fieldwriter.close()


def test_replace_pool_gets_the_postings_whooshs_add_document_makes(tmp_path: Path) -> None:
    class Pool:
        def __init__(self) -> None:
            self.added: list[Any] = []

        def add(self, item: Any) -> None:
            self.added.append(item)

        def cleanup(self) -> None:  # what the writer calls as it closes the segment
            self.added.clear()

    index = whoosh_index.create_in(str(tmp_path), make_schema())
    writer = private.SegmentWriterBase(index)
    pool = Pool()
    private.replace_pool(writer, pool)
    assert writer.pool is pool
    writer.add_document(path="a.md", body="kiwi kiwi")  # Whoosh's own add_document
    assert [(field, text, docnum) for field, text, docnum, *_ in pool.added if field == "body"] == [
        ("body", b"kiwi", 0)
    ]
    writer.cancel()
    index.close()


def test_wrap_written_files_sees_every_write_of_whooshs_field_writer(tmp_path: Path) -> None:
    class Spy:
        def __init__(self, file: Any) -> None:
            self.file, self.written = file, 0

        def write(self, data: Any) -> int:
            self.written += len(data)
            return int(self.file.write(data))

        def __getattr__(self, name: str) -> Any:
            return getattr(self.file, name)

    storage = FileStorage(str(tmp_path))
    codec = W3Codec(blocklimit=8)
    segment = codec.new_segment(storage, "x")
    fieldwriter = codec.field_writer(storage, segment)
    spies: list[Spy] = []
    private.wrap_written_files(fieldwriter, lambda file: spies.append(Spy(file)) or spies[-1])
    assert [structfile.file for structfile in private.written_files(fieldwriter)] == spies
    fieldwriter.start_field("body", make_schema()["body"])
    fieldwriter.start_term(b"kiwi")
    for d in range(20):
        fieldwriter.add(d, 1.0, b"", 1)
    fieldwriter.finish_term()
    fieldwriter.finish_field()
    written = [spy.written for spy in spies]
    fieldwriter.close()
    assert all(n > 0 for n in written), written  # the postings and the terms row went through them
    reader = codec.terms_reader(storage, segment)
    try:
        assert list(reader.matcher("body", b"kiwi", make_schema()["body"].format).all_ids()) == list(
            range(20)
        )
    finally:
        reader.close()
