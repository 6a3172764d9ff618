"""Store: repacking with deltas beside live writers and readers; a killed repack loses nothing."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.store import CommitPlan, KBRepo, Repos
from kbserver.store.packing import DELTIFIED, deltified, kill, pack_stats, repack
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"
FOLDER = 1000  # files in one folder: a 45 kB tree, rewritten by every add


def put(changes: dict[str, bytes | None]) -> object:
    return lambda _tip: CommitPlan(changes, "write", AUTHOR, {"Kb-Kind": "agent_write"})


@pytest.fixture
def repos(tmp_path: Path) -> Iterator[Repos]:
    r = Repos(tmp_path / "kbs", fsync=False)
    r.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    _, writer = r.get("demo")
    writer.packer.every_commits = 10**9  # the tests start repacks themselves, unless they say so
    writer.packer.every_bytes = 10**12
    writer.submit(put({f"memories/{i:016x}.md": f"memory {i}\n".encode() for i in range(FOLDER)}))
    yield r
    r.close()


def add_memories(repos: Repos, start: int, count: int) -> dict[str, tuple[str, bytes]]:
    """`count` adds of one memory each; {version: (path, bytes)}."""
    _, writer = repos.get("demo")
    out = {}
    for i in range(start, start + count):
        path, data = f"memories/new{i:013x}.md", f"added memory {i}\n".encode()
        version, _, _ = writer.submit(put({path: data}))
        out[version] = (path, data)
    return out


def assert_all_readable(repo: KBRepo, added: dict[str, tuple[str, bytes]]) -> None:
    for version, (path, data) in added.items():
        assert repo.view(version).read(path) == data
    head = repo.head()
    assert head is not None
    assert sum(1 for _ in repo.view(head).walk("memories/")) >= FOLDER + len(added)


def assert_fresh_reader_reads(path: str, added: dict[str, tuple[str, bytes]]) -> None:
    reader = KBRepo(path)
    try:
        assert_all_readable(reader, added)
    finally:
        reader.close()


def deleted_packs_held(path: Path) -> list[str]:
    """Deleted pack files of `path` this process still holds (open or mapped)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor, closed by now
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
    with open("/proc/self/maps") as maps:
        held += [line.split(None, 5)[-1].strip() for line in maps]
    return [h for h in held if str(path) in h and "/pack/" in h and h.endswith("(deleted)")]


def test_a_repack_with_deltas_keeps_a_fraction_of_what_loose_objects_take(
    repos: Repos, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(repos.path("demo"))
    added = add_memories(repos, 0, 40)
    before = pack_stats(path)
    with caplog.at_level(logging.INFO, logger="kbserver.store.packing"):
        result = repack(path)
    logged = [r.getMessage() for r in caplog.records if r.name == "kbserver.store.packing"]
    assert logged[0].startswith(f"repacking {path} (geometric): {before.loose_objects} loose objects")
    assert logged[-1].startswith(f"repacked {path} (git-geometric) in ")
    assert "-> 0 loose objects" in logged[-1]
    assert result is not None and result.method == "git-geometric"
    after = pack_stats(path)
    assert after.loose_objects == 0
    # 40 copies of a 45 kB tree: whole that is 1.8 MB; as deltas, a few whole copies and ~100 bytes each
    assert after.total_bytes * 10 < before.total_bytes, (before, after)
    assert result.before == before and result.after == after
    assert_all_readable(repos.repo("demo"), added)
    assert_fresh_reader_reads(path, added)
    git_fsck(repos.path("demo"))


def test_the_full_repack_merges_every_pack_and_keeps_unreachable_objects(repos: Repos) -> None:
    path = str(repos.path("demo"))
    repo, writer = repos.get("demo")
    added = add_memories(repos, 0, 10)
    repack(path)
    added |= add_memories(repos, 10, 10)
    proposal, _, _ = writer.propose(put({"p.md": b"proposed"}), "refs/proposals/p1")
    os.remove(repos.path("demo") / "refs" / "proposals" / "p1")  # now nothing reaches it
    repack(path)
    assert pack_stats(path).packs >= 2
    result = repack(path, full=True)
    assert result is not None and result.method == "git-full"
    assert result.after.packs == 1 and result.after.loose_objects == 0
    assert_all_readable(repo, added)
    assert repo.view(proposal).read("p.md") == b"proposed"  # unreachable, still there
    git_fsck(repos.path("demo"))


def test_writes_during_repacks_all_land(repos: Repos) -> None:
    """Writers and readers beside repacks (started by the writer itself, and by hand in a loop)
    lose nothing and fail nothing."""
    path = str(repos.path("demo"))
    repo, writer = repos.get("demo")
    writer.packer.every_commits = 7  # the writer starts its own repacks as well
    added: dict[str, tuple[str, bytes]] = {}
    lock = threading.Lock()
    stop = threading.Event()
    results = []

    def write(worker: int) -> None:
        for i in range(25):
            got = add_memories(repos, worker * 1000 + i, 1)
            with lock:
                added.update(got)

    def repacks() -> None:
        for _ in range(20):  # bounded
            if stop.is_set():
                return
            results.append(repack(path))

    errors: list[BaseException] = []

    def read() -> None:  # the writer's own repository, whose packs its packer drops after each repack
        for _ in range(200):  # bounded
            if stop.is_set():
                return
            with lock:
                known = list(added.items())
            try:
                for version, (p, data) in known[-20:]:
                    assert repo.view(version).read(p) == data
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    packer = threading.Thread(target=repacks)
    packer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    stop.set()
    packer.join(timeout=600)
    for t in readers:
        t.join(timeout=600)
    writer.packer.wait(timeout=600)
    assert errors == []
    assert len(added) == 75
    assert any(r is not None for r in results)
    assert writer.packer.failures == 0
    assert_all_readable(repo, added)
    assert_fresh_reader_reads(path, added)
    git_fsck(repos.path("demo"))


def test_a_killed_repack_leaves_a_complete_repository(repos: Repos) -> None:
    path = str(repos.path("demo"))
    repo = repos.repo("demo")
    added: dict[str, tuple[str, bytes]] = {}
    killed = 0
    for n, delay in enumerate([0.0, 0.02, 0.1, "tmp"]):
        added |= add_memories(repos, n * 100, 10)

        def stop_it(proc: subprocess.Popen[bytes], delay: object = delay) -> None:
            def later() -> None:
                if delay == "tmp":  # as soon as git writes its temporary pack
                    pack = Path(path) / "objects" / "pack"
                    for _ in range(2000):  # bounded: ~10 s
                        if any(p.name.startswith((".tmp-", "tmp_")) for p in pack.iterdir()):
                            break
                        time.sleep(0.005)
                else:
                    assert isinstance(delay, float)
                    time.sleep(delay)
                kill(proc)

            threading.Thread(target=later).start()

        try:
            repack(path, started=stop_it)
        except subprocess.CalledProcessError:
            killed += 1
        git_fsck(repos.path("demo"))
        assert_all_readable(repo, added)
        assert_fresh_reader_reads(path, added)
    assert killed >= 1  # some kill landed before git was done
    result = repack(path)  # the next one completes and cleans up
    assert result is not None and result.after.loose_objects == 0
    assert_all_readable(repo, added)
    git_fsck(repos.path("demo"))


def test_an_error_half_way_stops_git_and_leaves_a_complete_repository(repos: Repos) -> None:
    path = str(repos.path("demo"))
    added = add_memories(repos, 0, 20)
    procs: list[subprocess.Popen[bytes]] = []

    def fail(proc: subprocess.Popen[bytes]) -> None:
        procs.append(proc)
        raise RuntimeError("stopped half-way")

    with pytest.raises(RuntimeError):
        repack(path, started=fail)
    assert procs[0].poll() is not None  # git was stopped, not left running
    git_fsck(repos.path("demo"))
    assert_all_readable(repos.repo("demo"), added)
    result = repack(path)  # the lock was released
    assert result is not None and result.after.loose_objects == 0
    assert_all_readable(repos.repo("demo"), added)
    git_fsck(repos.path("demo"))


def test_a_reader_opened_before_a_repack_reads_after_it_and_lets_the_old_packs_go(repos: Repos) -> None:
    path = str(repos.path("demo"))
    added = add_memories(repos, 0, 10)
    repack(path)
    reader = KBRepo(path)  # another reader, beside the writer's repository
    try:
        assert_all_readable(reader, added)  # its packs are open now
        more = add_memories(repos, 10, 10)
        assert repack(path, full=True) is not None  # deletes every pack the reader holds
        for version, (p, data) in added.items():  # found in the deleted pack, still open
            assert reader.view(version).read(p) == data
        assert deleted_packs_held(repos.path("demo"))
        added |= more
        reader.drop_deleted_packs()
        repos.repo("demo").drop_deleted_packs()
        assert deleted_packs_held(repos.path("demo")) == []
        assert_all_readable(reader, added)
    finally:
        reader.close()


def test_the_writer_repacks_by_itself_and_drops_the_packs_it_deleted(repos: Repos) -> None:
    path = str(repos.path("demo"))
    repo, writer = repos.get("demo")
    writer.packer.every_bytes = 1  # every batch
    added = add_memories(repos, 0, 3)
    writer.packer.wait(timeout=600)
    for _ in range(100):  # bounded: the last batches may have started one more
        writer.packer.wait(timeout=600)
        if writer.packer.last is not None and pack_stats(path).loose_objects == 0:
            break
        writer.packer.start()
    assert writer.packer.last is not None and writer.packer.failures == 0
    assert pack_stats(path).loose_objects == 0
    writer.packer.every_bytes = 10**12
    assert repack(path, full=True) is not None
    assert_all_readable(repo, added)
    writer.packer.start()
    writer.packer.wait(timeout=600)
    assert deleted_packs_held(repos.path("demo")) == []
    git_fsck(repos.path("demo"))


def test_one_repack_at_a_time(repos: Repos) -> None:
    path = str(repos.path("demo"))
    add_memories(repos, 0, 30)
    second: list[object] = []

    def while_running(_proc: subprocess.Popen[bytes]) -> None:
        second.append(repack(path))  # the first holds the KB's repack lock

    assert repack(path, started=while_running) is not None
    assert second == [None]
    git_fsck(repos.path("demo"))


def test_without_git_the_loose_objects_are_packed_whole(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(repos.path("demo"))
    added = add_memories(repos, 0, 5)
    with monkeypatch.context() as m:
        m.setenv("PATH", "")
        result = repack(path)
    assert result is not None and result.method == "dulwich"
    assert result.after.loose_objects == 0
    assert_all_readable(repos.repo("demo"), added)
    git_fsck(repos.path("demo"))


def test_a_kb_packed_whole_before_gets_one_full_repack_then_geometric_ones(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(repos.path("demo"))
    repo, writer = repos.get("demo")
    assert deltified(path)  # a new KB never had anything packed whole
    os.remove(os.path.join(path, DELTIFIED))  # as a KB of an older kbserver
    added = add_memories(repos, 0, 20)
    with monkeypatch.context() as m:
        m.setenv("PATH", "")
        repack(path)  # what the older kbserver did: every tree packed whole
    whole = pack_stats(path)
    assert whole.loose_objects == 0
    writer.packer.start()
    writer.packer.wait(timeout=600)
    assert writer.packer.last is not None and writer.packer.last.method == "git-full"
    assert deltified(path)
    assert pack_stats(path).total_bytes * 5 < whole.total_bytes, (whole, pack_stats(path))
    added |= add_memories(repos, 20, 3)
    writer.packer.start()
    writer.packer.wait(timeout=600)
    assert writer.packer.last.method == "git-geometric"
    assert_all_readable(repo, added)
    git_fsck(repos.path("demo"))
