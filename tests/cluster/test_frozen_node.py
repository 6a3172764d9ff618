"""A node SIGSTOPped past every lease holds nothing hostage, and comes back by itself.

Two nodes on one data folder and one PostgreSQL. Node A streams writes to one KB; the test freezes
A's whole process group (the server, its follower child, any git it runs) at a moment A holds the
KB's writer lock: it watches /proc/locks for A's flock on the KB's `kbserver.lock`, stops A, and
checks again that A, stopped, still holds the flock and the current, unreleased writer lease (a
stop that missed is undone and tried again, a bounded number of times). The second case also
requires A to be inside its update of main (its own `main.f<token>.lock` exists: objects written,
being flushed, or the ref lock taken), where its commit must be refused at the ref. So that A is
frozen holding the lock is verified, not hoped for; exactly where in its write it stopped (e.g.
before or after it took `main.lock`) is not chosen, and may differ from run to run.

While A stays frozen for longer than every bound a node's leases and waits have (FREEZE_SECONDS: the
writer lease's takeover, a ref lock's staleness, PostgreSQL's idle-in-transaction limit, the gap
readers of the heads table wait for), node B's writes to the same KB keep being acknowledged, each
within BOUND_SECONDS (the takeover plus the contract's 10 s, with a 2x margin: the only timing
asserted). Then A is thawed: it answers /healthz and a write again by itself, its index covers B's
writes, every write it had in flight was either acknowledged and is on main or answered 503 (or
reset unread: RESET), never acknowledged and missing (one answered `busy` is not on main), every
acknowledged write is on main with its content, and `git fsck --strict` is clean. Idempotency
keys (taken over after twice the write wait) are not used here.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from kbserver.control.pg_heads import GAP_SECONDS
from kbserver.control.pg_watch import LIMITS
from kbserver.store.lease import FOLDER as LEASE_FOLDER
from kbserver.store.lease import STALE_SECONDS
from kbserver.store.locks import LOCK_STALE_SECONDS
from tests.cluster.harness import Node, migrate, node_env, writer_agent
from tests.helpers import ADMIN_TOKEN, git_fsck

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks"),
]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
KB = "team"
CONTRACT_SECONDS = 10.0  # a request waits on another node (or on PostgreSQL) at most this long
BOUND_SECONDS = 2 * (STALE_SECONDS + CONTRACT_SECONDS)  # each of B's writes, with a 2x margin for CI
# Past every lease and stale bound of a node (the longest: the heads table's gap), with a margin.
FREEZE_SECONDS = (
    max(STALE_SECONDS, LOCK_STALE_SECONDS, LIMITS["idle_in_transaction_session_timeout"] / 1000, GAP_SECONDS)
    + 10
)
RECOVER_SECONDS = 90.0  # how long the thawed node may take to answer again
CATCH_TRIES = 200  # stops of A that missed its writer lock, undone, before the test gives up
STREAMS = 3  # A's writers: with a batch always queued, A holds the KB's lock most of the time


@dataclass
class Pair:
    a: Node  # frozen
    b: Node
    data: Path

    @property
    def repo(self) -> Path:
        return self.data / "kbs" / f"{KB}.git"


# A request sent on a kept-alive connection while A was frozen may get no answer, only a reset:
# thawed, uvicorn's keep-alive timer (5 s, on a clock that ran on) is overdue and closes the
# connection before the request waiting in it is read. The node never saw that write: a client
# retries it (it was not acknowledged, so it is not one that could go missing).
RESET = "reset"


@dataclass
class Answers:
    """What A's writers were told: path -> "ok", or the error's code (a transport error's repr)."""

    told: dict[str, str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tell(self, path: str, r: httpx.Response | httpx.HTTPError) -> None:
        if isinstance(r, (httpx.ReadError, httpx.RemoteProtocolError)):
            told, text = RESET, repr(r)
        elif isinstance(r, httpx.HTTPError):
            told, text = repr(r), repr(r)
        elif r.status_code == 200:
            told, text = "ok", ""
        else:
            told, text = f"{r.status_code} {_code(r)}", r.text
        with self.lock:
            self.told[path] = told
            if text:
                self.texts.append(f"{path}: {text}")


@pytest.fixture
def pair(tmp_path: Path, postgres_url: str) -> Iterator[Pair]:
    data, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    env_a = node_env(postgres_url, str(tmp_path / "ca"), ADMIN_TOKEN, "127.0.0.1")
    a = Node("a", data, logs, env_a, own_group=True)
    b = Node("b", data, logs, node_env(postgres_url, str(tmp_path / "cb"), ADMIN_TOKEN, "127.0.0.1"))
    migrate(data, b.env)
    try:
        b.launch().wait_healthy()
        a.launch().wait_healthy()
        yield Pair(a, b, data)
    finally:
        for node in (a, b):
            node.stop()  # thaws A first


def _word(path: str) -> str:
    """A word only `path`'s content holds (letters: the index keeps it as it is)."""
    digits = str(int(hashlib.sha256(path.encode()).hexdigest()[:12], 16))
    return "zq" + "".join(chr(ord("a") + int(d)) for d in digits) + "zq"


def _content(path: str) -> str:
    return f"content of {path} {_word(path)}\n"


def _write(http: httpx.Client, auth: dict[str, str], path: str) -> httpx.Response:
    body = {"files": [{"path": path, "mode": "create", "content": _content(path)}]}
    return http.post(f"/api/v1/kbs/{KB}/write", json=body, headers=auth)


def _stream(url: str, auth: dict[str, str], name: str, stop: threading.Event, answers: Answers) -> None:
    """Write new files through `url` one after another until `stop`; record every answer."""
    with httpx.Client(base_url=url, timeout=FREEZE_SECONDS + 180) as http:
        for n in range(100_000):
            if stop.is_set():
                return
            path = f"{name}-{n}.md"
            try:
                answers.tell(path, _write(http, auth, path))
            except httpx.HTTPError as err:
                answers.tell(path, err)


def _code(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "not an error of the contract"


def _flock_holders(lock_file: Path) -> set[int]:
    """The processes holding a flock on `lock_file` now (/proc/locks; waiters are left out)."""
    inode = os.stat(lock_file).st_ino
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
            holders.add(int(fields[4]))
    return holders


def _lease_held(repo: Path) -> bool:
    """Whether the KB's current writer lease is a flock holder's and not released."""
    names = os.listdir(repo / LEASE_FOLDER)
    tokens = sorted(n for n in names if n.isdigit())
    if not tokens:
        return False
    kind = (repo / LEASE_FOLDER / tokens[-1]).read_text().strip() or "flock"
    return kind == "flock" and f"{tokens[-1]}.free" not in names


def _in_ref_update(repo: Path) -> bool:
    """Whether a writer is inside its update of main: its own `main.f<token>.lock` exists (written
    before its objects are flushed, removed once main moved; store.refswap)."""
    return any(name.startswith("main.f") for name in os.listdir(repo / "refs" / "heads"))


def _freeze(pair: Pair, where: str) -> int:
    """SIGSTOP A's process group at a moment it holds the KB's writer lock, and for `where` "ref
    update" also is inside its update of main (both checked again once stopped); returns how many
    stops it took."""
    assert pair.a.proc is not None
    pid, lock_file = pair.a.proc.pid, pair.repo / "kbserver.lock"

    def caught() -> bool:
        if where == "ref update" and not _in_ref_update(pair.repo):
            return False
        return pid in _flock_holders(lock_file)

    for tries in range(1, CATCH_TRIES + 1):
        deadline = time.monotonic() + 10
        while not caught() and time.monotonic() < deadline:
            time.sleep(0.001)
        pair.a.signal(signal.SIGSTOP)
        time.sleep(0.2)  # every process of the group has stopped (SIGSTOP is delivered at once)
        if caught() and _lease_held(pair.repo):
            return tries
        pair.a.signal(signal.SIGCONT)  # missed: the write ended in between
        time.sleep(0.05)
    raise AssertionError(f"node A was never stopped in its {where} ({CATCH_TRIES} tries)")


def _healthz(url: str) -> int:
    try:
        return httpx.get(f"{url}/healthz", timeout=CONTRACT_SECONDS).status_code
    except httpx.TransportError:
        return 0


def _head(repo: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _show(repo: Path, path: str) -> str:
    """`path`'s content on main ("" when it is not there)."""
    return subprocess.run(["git", "show", f"main:{path}"], cwd=repo, capture_output=True, text=True).stdout


def _on_main(repo: Path, paths: list[str]) -> None:
    for path in paths:
        assert _show(repo, path) == _content(path), f"{path} was acknowledged and is not on main"


@pytest.mark.parametrize("where", ["writer lock", "ref update"])
def test_a_node_frozen_holding_the_writer_lock_holds_nothing_hostage(pair: Pair, where: str) -> None:
    auth = writer_agent(pair.b.url, KB, ADMIN_TOKEN)
    acked: list[str] = []
    with httpx.Client(base_url=pair.a.url, timeout=60) as http:
        assert _write(http, auth, "before-a.md").status_code == 200
        acked.append("before-a.md")

    stop, answers = threading.Event(), Answers()
    streams = [
        threading.Thread(target=_stream, args=(pair.a.url, auth, f"a{s}", stop, answers), daemon=True)
        for s in range(STREAMS)
    ]
    for t in streams:
        t.start()
    during: list[str] = []
    try:
        started = time.monotonic()  # past the first writes: A's writers in their stride
        while len(answers.told) < 5 * STREAMS and time.monotonic() - started < 120:
            time.sleep(0.05)
        tries = _freeze(pair, where)
        ref_lock = os.path.exists(pair.repo / "refs" / "heads" / "main.lock")  # A's, if any: only A writes
        frozen_at = time.monotonic()
        with httpx.Client(base_url=pair.b.url, timeout=BOUND_SECONDS + 60) as http:
            n, slowest = 0, 0.0
            while time.monotonic() - frozen_at < FREEZE_SECONDS:
                path = f"during-{n}.md"
                started = time.monotonic()
                r = _write(http, auth, path)
                took = time.monotonic() - started
                slowest = max(slowest, took)
                assert r.status_code == 200, r.text
                assert took < BOUND_SECONDS, f"node B's write took {took:.1f} s while node A was frozen"
                during.append(path)
                n += 1
        assert _healthz(pair.b.url) == 200
        stop.set()  # A's writers end once their write in flight is answered
    finally:
        stop.set()
        pair.a.signal(signal.SIGCONT)
    for t in streams:
        t.join(timeout=FREEZE_SECONDS + 240)
        assert not t.is_alive(), "a write through node A was never answered after it thawed"
    assert "taken over" in pair.b.log.read_text(errors="replace")  # B took A's lease, not waited it out

    started = time.monotonic()  # A answers again by itself
    while _healthz(pair.a.url) != 200:
        assert time.monotonic() - started < RECOVER_SECONDS, f"node A never answered again: {pair.a.tail()}"
        time.sleep(0.25)
    with httpx.Client(base_url=pair.a.url, timeout=60) as http:
        r = _write(http, auth, "after-a.md")
        assert r.status_code == 200, r.text
        acked.append("after-a.md")
        head = _head(pair.repo)
        r = http.get(f"/api/v1/kbs/{KB}/index", params={"wait_for": head, "timeout": 60}, headers=ADMIN)
        assert r.status_code == 200 and r.json()["indexed_version"] == head, r.text
        for path in (during[0], during[-1]):  # node A's search finds what node B wrote meanwhile
            hits = http.get(f"/api/v1/kbs/{KB}/search", params={"q": _word(path)}, headers=ADMIN)
            assert hits.status_code == 200, hits.text
            assert path in [h["path"] for h in hits.json()["hits"]], hits.text

    # what A's writers were told: acknowledged (then on main) or refused, never lost
    assert answers.told, "node A's writers got no answer"
    busy = [path for path, told in answers.told.items() if told == "503 busy"]
    for path, told in answers.told.items():
        assert told in ("ok", "503 busy", "503 unavailable", RESET), (path, told, answers.texts)
        if told == "ok":
            acked.append(path)
    print(
        f"A frozen after {tries} stop(s) (holding main.lock: {ref_lock}); "
        f"B wrote {len(during)} (slowest {slowest:.1f} s); "
        f"A's writes: {len(answers.told)}, refused: {answers.texts}"
    )
    for path in busy:  # `busy` says nothing was committed
        assert _show(pair.repo, path) == "", f"{path} was answered busy and is on main"
    _on_main(pair.repo, acked + during)
    git_fsck(pair.repo)
