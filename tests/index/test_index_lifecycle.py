"""Updates, versions, atomic rebuilds, corrupt folders and concurrent writers."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbserver.index import IndexCorrupt, SearchIndex
from kbserver.index.document import sha256


def test_new_index_is_empty_with_no_version(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "a" / "ix") as ix:
        assert ix.indexed_version() is None
        assert ix.paths() == {}
        assert ix.search("").total == 0
        assert ix.search("anything").version is None


def test_update_replaces_deletes_and_records_version(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"a.md": "apple", "b.md": "banana"}, [])
        assert ix.indexed_version() == "v1"
        ix.update("v2", {"a.md": "cherry"}, ["b.md", "missing.md"])
        assert ix.indexed_version() == "v2"
        assert ix.paths() == {"a.md": sha256("cherry")}
        assert ix.search("apple").total == 0
        assert ix.search("banana").total == 0
        assert [h.path for h in ix.search("cherry").hits] == ["a.md"]
        ix.update("v3", {}, [])
        assert ix.indexed_version() == "v3"


def test_path_in_upserts_and_deletes_is_indexed(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"a.md": "one"}, [])
        ix.update("v2", {"a.md": "two"}, ["a.md"])
        assert ix.paths() == {"a.md": sha256("two")}


def test_many_updates_keep_exactly_one_copy_of_each_file(tmp_path: Path) -> None:
    # Whoosh's own Searcher.refresh() would show replaced documents twice; ours must not.
    with SearchIndex(tmp_path / "ix") as ix:
        ix.rebuild("v0", ((f"f{i}.md", f"common word{i}") for i in range(300)))
        expected = {f"f{i}.md": sha256(f"common word{i}") for i in range(300)}
        for round_ in range(12):
            path = f"f{round_ * 7}.md"
            ix.update(f"v{round_ + 1}", {path: f"common edited{round_}"}, [f"f{round_ * 7 + 1}.md"])
            expected[path] = sha256(f"common edited{round_}")
            expected.pop(f"f{round_ * 7 + 1}.md")
            result = ix.search("common", limit=1000)
            assert result.total == len(expected) == len({h.path for h in result.hits})
            assert ix.search(f"word{round_ * 7}").total == 0
            assert ix.search(f"edited{round_}").total == 1
        assert ix.paths() == expected


def test_other_instance_sees_updates(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as reader, SearchIndex(tmp_path / "ix") as writer:
        assert reader.search("apple").total == 0
        writer.update("v1", {"a.md": "apple"}, [])
        assert reader.search("apple").total == 1
        assert reader.indexed_version() == "v1"
        writer.rebuild("v2", [("b.md", "banana")])
        assert reader.search("apple").total == 0
        assert reader.search("banana").total == 1
        reader.update("v3", {"c.md": "cherry"}, [])  # writes into the rebuilt generation
        assert writer.paths().keys() == {"b.md", "c.md"}


@pytest.mark.parametrize("limit", [1, 4 << 20])
def test_updates_with_scratch_on_disk_or_in_memory_index_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """An update smaller than the limit keeps Whoosh's scratch files in memory, a larger one on disk."""
    import kbserver.index.writing as writing

    monkeypatch.setattr(writing, "SMALL_UPDATE_BYTES", limit)
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {f"n{i}.md": f"walrus {i} " + "kelp " * 50 for i in range(40)}, [])
        ix.update("v2", {"n3.md": "otter"}, ["n4.md"])
        assert ix.merge() and ix.indexed_version() == "v2"
        assert ix.search("walrus", limit=100).total == 38 and ix.search("otter").total == 1
        assert len(ix.paths()) == 39
    assert [p.name for p in (tmp_path / "ix").rglob("*.tmp")] == []  # no scratch folder left


def test_version_after_own_commits_and_after_another_instance_wrote(tmp_path: Path) -> None:
    """indexed_version answers from this instance's last commit only while nothing else wrote since:
    an update, a merge or a rebuild by another instance (another process) is seen at once."""
    with SearchIndex(tmp_path / "ix") as one, SearchIndex(tmp_path / "ix") as other:
        one.update("v1", {"a.md": "apple"}, [])
        assert one.indexed_version() == "v1"
        other.update("v2", {"b.md": "banana"}, [])
        assert one.indexed_version() == "v2"
        one.update("v3", {"c.md": "cherry"}, [])
        assert one.merge() and one.indexed_version() == "v3"  # its own merge keeps its version
        assert other.indexed_version() == "v3"
        one.update("v4", {"d.md": "date"}, [])
        other.update("v5", {"e.md": "elder"}, [])
        assert one.merge() and one.indexed_version() == "v5"  # merged after the other's update
        other.rebuild("v6", [("f.md", "fig")])
        assert one.indexed_version() == "v6"
        one.update("v7", {"g.md": "grape"}, [])  # into the rebuilt generation
        assert other.indexed_version() == "v7" and one.indexed_version() == "v7"
        one.rebuild("v8", [("h.md", "hazel")])
        assert one.indexed_version() == "v8" and other.indexed_version() == "v8"


def test_rebuild_replaces_everything_and_reports_progress(tmp_path: Path) -> None:
    seen: list[int] = []
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"old.md": "old"}, [])
        ix.rebuild("v2", ((f"n{i}.md", f"note {i}") for i in range(1203)), seen.append)
        assert seen == [500, 1000, 1203]
        assert ix.indexed_version() == "v2"
        assert len(ix.paths()) == 1203
        assert ix.search("old").total == 0
    assert len([p for p in (tmp_path / "ix").iterdir() if p.name.startswith("gen-")]) == 1


def test_rebuild_that_fails_midway_leaves_the_old_index(tmp_path: Path) -> None:
    def docs() -> Iterator[tuple[str, str]]:
        yield "new1.md", "new"
        yield "new2.md", "new"
        raise RuntimeError("git read failed")

    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"old.md": "old"}, [])
        with pytest.raises(RuntimeError):
            ix.rebuild("v2", docs())
        assert ix.indexed_version() == "v1"
        assert ix.paths() == {"old.md": sha256("old")}
        with pytest.raises(ValueError):
            ix.rebuild("v3", [("a.md", "x"), ("a.md", "y")])
        assert ix.indexed_version() == "v1"
    assert len([p for p in (tmp_path / "ix").iterdir() if p.name.startswith("gen-")]) == 1
    with SearchIndex(tmp_path / "ix") as again:
        assert again.search("old").total == 1


def test_leftovers_of_a_crashed_rebuild_are_ignored(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"old.md": "old"}, [])
    (tmp_path / "ix" / "gen-0123456789abcdef").mkdir()  # half-built generation, never published
    (tmp_path / "ix" / "gen-0123456789abcdef" / "junk").write_text("x")
    (tmp_path / "ix" / "CURRENT.tmp-dead").write_text("gen-0123456789abcdef")
    with SearchIndex(tmp_path / "ix") as ix:
        assert ix.indexed_version() == "v1"
        ix.rebuild("v2", [("a.md", "a")])  # cleans them up
    assert not (tmp_path / "ix" / "gen-0123456789abcdef").exists()
    assert not (tmp_path / "ix" / "CURRENT.tmp-dead").exists()


def _live_generation(folder: Path) -> Path:
    return folder / (folder / "CURRENT").read_text().strip()


def test_folder_with_garbage_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / "notes.txt").write_text("not an index")
    with pytest.raises(IndexCorrupt):
        SearchIndex(tmp_path / "ix")


def test_bad_pointer_is_corrupt(tmp_path: Path) -> None:
    SearchIndex(tmp_path / "ix").close()
    (tmp_path / "ix" / "CURRENT").write_text("../../etc")
    with pytest.raises(IndexCorrupt):
        SearchIndex(tmp_path / "ix")
    (tmp_path / "ix" / "CURRENT").write_text("gen-ffffffffffffffff")
    with pytest.raises(IndexCorrupt):
        SearchIndex(tmp_path / "ix")


@pytest.mark.parametrize("victim", [".toc", ".seg"])
def test_truncated_index_is_corrupt(tmp_path: Path, victim: str) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {f"{i}.md": f"text {i}" for i in range(50)}, [])
    for file in _live_generation(tmp_path / "ix").iterdir():
        if file.suffix == victim:
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 3])
    with pytest.raises(IndexCorrupt):
        SearchIndex(tmp_path / "ix")


def test_emptied_generation_is_corrupt(tmp_path: Path) -> None:
    SearchIndex(tmp_path / "ix").close()
    for file in _live_generation(tmp_path / "ix").iterdir():
        file.unlink()
    with pytest.raises(IndexCorrupt):
        SearchIndex(tmp_path / "ix")


def test_closed_index_refuses_work(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    ix.close()
    with pytest.raises(RuntimeError):
        ix.search("x")
    with pytest.raises(RuntimeError):
        ix.update("v", {}, [])


def test_bad_paths_are_refused(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix, pytest.raises(ValueError):
        ix.update("v", {"\x00meta": "x"}, [])


def test_threads_writing_and_searching_at_once(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with SearchIndex(tmp_path / "ix") as ix, SearchIndex(tmp_path / "ix") as other:

        def write(who: str, target: SearchIndex) -> None:
            try:
                for i in range(15):
                    target.update(f"{who}{i}", {f"{who}/{i}.md": f"shared {who} {i}"}, [])
            except BaseException as e:
                errors.append(e)

        def read() -> None:
            try:
                for _ in range(60):
                    result = ix.search("shared", limit=100)
                    assert result.total == len({h.path for h in result.hits})
            except BaseException as e:
                errors.append(e)

        threads = [
            threading.Thread(target=write, args=("a", ix)),
            threading.Thread(target=write, args=("b", ix)),
            threading.Thread(target=write, args=("c", other)),
            threading.Thread(target=read),
            threading.Thread(target=read),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        assert len(ix.paths()) == 45
        assert ix.search("shared").total == 45


def _write_many(folder: str, who: str, count: int, start: Any) -> None:
    with SearchIndex(Path(folder)) as ix:
        start.wait(30)  # both processes write at the same time
        for i in range(count):
            ix.update(f"{who}{i}", {f"{who}/{i}.md": f"both {who} {i}"}, [])


@pytest.mark.slow
def test_two_processes_updating_at_once_lose_nothing(tmp_path: Path) -> None:
    SearchIndex(tmp_path / "ix").close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path / "ix"), who, 40, start)) for who in "pq"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=90)
    for p in procs:
        if p.is_alive():
            p.kill()
        assert p.exitcode == 0
    with SearchIndex(tmp_path / "ix") as ix:
        assert len(ix.paths()) == 80
        assert ix.search("both").total == 80
        assert ix.indexed_version() in {"p39", "q39"}


def test_writer_lock_wait_is_bounded(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix", lock_timeout=0.2) as ix:
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with ix._folder.write_lock(5):
                held.set()
                release.wait(5)

        t = threading.Thread(target=hold)
        t.start()
        held.wait(5)
        try:
            with pytest.raises(TimeoutError):
                ix.update("v", {"a.md": "a"}, [])
        finally:
            release.set()
            t.join()
        ix.update("v", {"a.md": "a"}, [])
        assert ix.indexed_version() == "v"


def test_writer_waits_for_a_lock_held_elsewhere_then_proceeds(tmp_path: Path) -> None:
    import fcntl
    import os

    with SearchIndex(tmp_path / "ix", lock_timeout=0.2) as ix:
        fd = os.open(tmp_path / "ix" / "LOCK", os.O_RDWR)  # another open file: as another process would
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            with pytest.raises(TimeoutError):
                ix.update("v1", {"a.md": "a"}, [])
            timer = threading.Timer(0.05, os.close, args=(fd,))
            timer.start()
            with SearchIndex(tmp_path / "ix", lock_timeout=5) as patient:
                patient.update("v2", {"a.md": "a"}, [])  # waits for the release, then writes
            timer.join()
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        assert ix.indexed_version() == "v2"


def test_lone_surrogates_in_texts_are_indexed_as_replacement(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"a.md": "broken \ud800 text"}, [])
        assert ix.paths() == {"a.md": sha256("broken \ud800 text")}
        assert ix.search("broken").total == 1
        with pytest.raises(ValueError):
            ix.update("v2", {"\udc00.md": "x"}, [])


def test_update_without_the_shared_searcher_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SearchIndex, "_docnums", lambda self, writer, paths: None)  # Whoosh's own lookup
    with SearchIndex(tmp_path / "ix") as ix:
        ix.update("v1", {"a.md": "apple", "b.md": "banana"}, [])
        ix.update("v2", {"a.md": "cherry"}, ["b.md"])
        assert ix.paths() == {"a.md": sha256("cherry")}
        assert ix.indexed_version() == "v2"


def test_updates_leave_merging_to_merge(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    try:
        for i in range(6):
            ix.update(f"v{i}", {f"n{i}.md": f"walrus number {i}"}, [])
        assert ix.merge() is True
        assert ix.merge() is False  # nothing left to merge
        result = ix.search("walrus", limit=20)
        assert result.total == 6 and result.version == "v5"
        assert sorted(ix.paths()) == [f"n{i}.md" for i in range(6)]
    finally:
        ix.close()
