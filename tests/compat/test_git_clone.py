"""A real `git` CLI against a live `kbserver serve`: clone, fetch, auth, push refused, hidden proposals."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer, git_fsck

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs C git on the PATH")

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GIT_ENV = {
    **os.environ,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
}
_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("git-live") / "data", env={"KBSERVER_SAMPLE": "false"})
    live.start()
    yield live
    live.stop()


class Api:
    """The HTTP API of the live server."""

    def __init__(self, server: LiveServer) -> None:
        self.http = httpx.Client(base_url=server.url + "/api/v1", timeout=60)
        self.names: dict[str, str] = {}  # token -> agent name

    def call(self, method: str, path: str, headers: dict[str, str], **kw: Any) -> Any:
        r = self.http.request(method, path, headers=headers, **kw)
        assert r.status_code < 300, r.text
        return r.json()

    def kb(self) -> str:
        slug = f"kb-{next(_names)}"
        self.call("POST", "/kbs", ADMIN, json={"slug": slug, "description": "git edge test"})
        return slug

    def agent(self, links: dict[str, str]) -> str:
        name = f"agent-{next(_names)}"
        token: str = self.call("POST", "/agents", ADMIN, json={"name": name})["token"]
        for slug, permission in links.items():
            self.call("POST", f"/agents/{name}/links", ADMIN, json={"kb": slug, "permission": permission})
        self.names[token] = name
        return token

    def write(self, slug: str, token: str, path: str, content: str, **extra: Any) -> httpx.Response:
        body = {"files": [{"path": path, "mode": "create", "content": content}], **extra}
        return self.http.post(f"/kbs/{slug}/write", json=body, headers={"Authorization": f"Bearer {token}"})

    def head(self, slug: str) -> str:
        head: str = self.call("GET", f"/kbs/{slug}", ADMIN)["head"]
        return head


@pytest.fixture(scope="module")
def api(server: LiveServer) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.http.close()


def git(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, timeout=120, check=False
    )
    if check:
        assert proc.returncode == 0, f"git {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc


def url(server: LiveServer, slug: str, token: str | None = None) -> str:
    auth = f"kb:{token}@" if token else ""
    return f"http://{auth}127.0.0.1:{server.port}/git/{slug}.git"


def bearer(token: str) -> list[str]:
    return ["-c", f"http.extraHeader=Authorization: Bearer {token}"]


def test_clone_with_basic_auth_has_the_full_history(server: LiveServer, api: Api, tmp_path: Path) -> None:
    slug = api.kb()
    token = api.agent({slug: "read_write"})
    for i in range(3):
        assert api.write(slug, token, f"notes/{i}.md", f"note {i}\n").status_code == 200
    clone = tmp_path / "clone"
    git("clone", url(server, slug, token), str(clone))
    assert git("rev-parse", "HEAD", cwd=clone).stdout.strip() == api.head(slug)
    assert git("rev-list", "--count", "HEAD", cwd=clone).stdout.strip() == "4"  # create + 3 writes
    git_fsck(clone)
    assert (clone / "notes" / "2.md").read_text() == "note 2\n"
    trailers = "%(trailers:key=Kb-Actor,valueonly,separator=)|%(trailers:key=Kb-Kind,valueonly,separator=)"
    rows = git("log", f"--format={trailers}", cwd=clone).stdout.split()
    assert rows == [f"agent:{api.names[token]}|agent_write"] * 3 + ["admin|create"]


def test_clone_with_a_bearer_header_then_fetch_gets_new_writes(
    server: LiveServer, api: Api, tmp_path: Path
) -> None:
    slug = api.kb()
    token = api.agent({slug: "read"})
    writer = api.agent({slug: "read_write"})
    clone = tmp_path / "clone"
    git(*bearer(token), "clone", url(server, slug), str(clone))
    assert git("rev-list", "--count", "HEAD", cwd=clone).stdout.strip() == "1"
    assert api.write(slug, writer, "new.md", "fresh\n").status_code == 200
    git(*bearer(token), "fetch", "origin", cwd=clone)
    assert git("rev-parse", "origin/main", cwd=clone).stdout.strip() == api.head(slug)
    git("merge", "--ff-only", "origin/main", cwd=clone)
    assert (clone / "new.md").read_text() == "fresh\n"
    git_fsck(clone)


@pytest.mark.parametrize("version", ["0", "2"])
def test_protocol_versions_0_and_2_both_work(
    server: LiveServer, api: Api, tmp_path: Path, version: str
) -> None:
    slug = api.kb()
    token = api.agent({slug: "read_write"})
    assert api.write(slug, token, "a.md", "a\n").status_code == 200
    clone = tmp_path / "clone"
    proc = subprocess.run(
        ["git", "-c", f"protocol.version={version}", "clone", url(server, slug, token), str(clone)],
        env={**GIT_ENV, "GIT_TRACE_PACKET": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert ("< version 2" in proc.stderr) == (version == "2")  # v2 was really spoken, not a fallback
    assert git("rev-parse", "HEAD", cwd=clone).stdout.strip() == api.head(slug)
    assert git("rev-list", "--count", "HEAD", cwd=clone).stdout.strip() == "2"
    git_fsck(clone)


def test_wrong_or_missing_token_is_401(server: LiveServer, api: Api, tmp_path: Path) -> None:
    slug = api.kb()
    proc = git("clone", url(server, slug, "not-a-token"), str(tmp_path / "c1"), check=False)
    assert proc.returncode != 0 and "Authentication failed" in proc.stderr
    proc = git("clone", url(server, slug), str(tmp_path / "c2"), check=False)
    assert proc.returncode != 0 and "terminal prompts disabled" in proc.stderr
    assert not (tmp_path / "c1").exists() and not (tmp_path / "c2").exists()
    refs = f"{server.url}/git/{slug}.git/info/refs?service=git-upload-pack"
    for auth in (None, ("kb", "not-a-token"), ("kb", "")):
        r = httpx.get(refs, auth=auth, timeout=60)
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == 'Basic realm="kbserver"'
        assert r.json()["error"]["code"] == "unauthorized"
    r = httpx.get(refs, headers={"Authorization": "Bearer not-a-token"}, timeout=60)
    assert r.status_code == 401


def test_a_kb_the_agent_cannot_see_is_404_like_a_missing_one(
    server: LiveServer, api: Api, tmp_path: Path
) -> None:
    slug = api.kb()
    other = api.kb()
    token = api.agent({other: "read_write"})
    for target in (slug, "no-such-kb"):
        proc = git("clone", url(server, target, token), str(tmp_path / target), check=False)
        assert proc.returncode != 0 and "not found" in proc.stderr
        r = httpx.get(
            f"{server.url}/git/{target}.git/info/refs?service=git-upload-pack", auth=("kb", token), timeout=60
        )
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_push_is_refused_and_changes_nothing(server: LiveServer, api: Api, tmp_path: Path) -> None:
    slug = api.kb()
    head = api.head(slug)
    clone = tmp_path / "clone"
    git("clone", url(server, slug, ADMIN_TOKEN), str(clone))
    (clone / "pushed.md").write_text("no\n")
    git("add", "pushed.md", cwd=clone)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-m", "try a push", cwd=clone)
    proc = git("push", "origin", "HEAD:main", cwd=clone, check=False)
    assert proc.returncode != 0 and "403" in proc.stderr
    # git prints the server's own line, not only a bare status
    assert "remote: kbserver is read-only: write through the API" in proc.stderr, proc.stderr
    assert api.head(slug) == head
    base = f"{server.url}/git/{slug}.git"
    auth = ("kb", ADMIN_TOKEN)
    for method, path in [
        ("GET", "/info/refs?service=git-receive-pack"),
        ("GET", "/info/refs?service=git-receive%2Dpack"),
        ("POST", "/git-receive-pack"),
        ("GET", "/git-receive-pack"),
        ("PUT", "/git-receive-pack"),
        ("POST", "/git-upload-pack?service=git-receive-pack"),
    ]:
        r = httpx.request(method, base + path, auth=auth, content=b"0000", timeout=60)
        assert r.status_code == 403, (method, path, r.status_code)
        assert r.json()["error"]["code"] == "forbidden"
    assert api.head(slug) == head


def test_path_traversal_and_odd_names_are_404(server: LiveServer, api: Api) -> None:
    slug = api.kb()
    auth = ("kb", ADMIN_TOKEN)
    for path in [
        f"/git/..%2f{slug}.git/info/refs",
        f"/git/..%2f..%2fkbs%2f{slug}.git/info/refs",
        f"/git/%2e%2e/kbs/{slug}.git/info/refs",
        f"/git/{slug}.git/..%2f..%2f{slug}.git/info/refs",
        f"/git/{slug.upper()}.git/info/refs",
        f"/git/{slug}/info/refs",
        "/git/.git/info/refs",
        f"/git/-{slug}.git/info/refs",
        f"/git/{slug}%0a.git/info/refs",
        f"/git/{slug}.git/HEAD",
        f"/git/{slug}.git/objects/info/packs",
        f"/git/{slug}.git/config",
    ]:
        r = httpx.get(server.url + path + "?service=git-upload-pack", auth=auth, timeout=60)
        assert r.status_code == 404, (path, r.status_code)


def _pending_proposal(api: Api) -> tuple[str, str, str]:
    """A KB with one pending proposal: (slug, the asking agent's token, the proposal id)."""
    slug = api.kb()
    token = api.agent({slug: "read_write_ask"})
    auth = {"Authorization": f"Bearer {token}"}
    run = api.call("POST", "/runs", auth, json={"interactive": True})
    r = api.write(slug, token, "idea.md", "please add me\n", run_id=run["id"])
    assert r.status_code == 202, r.text
    return slug, token, r.json()["proposal"]["id"]


@pytest.mark.parametrize("version", ["0", "2"])
def test_pending_proposals_are_hidden_unless_the_admin_asks(
    server: LiveServer, api: Api, version: str
) -> None:
    slug, token, proposal = _pending_proposal(api)
    proto = ["-c", f"protocol.version={version}"]
    ask = ["-c", "http.extraHeader=X-KB-Proposals: 1"]
    for who in (token, ADMIN_TOKEN):
        refs = git(*proto, "ls-remote", url(server, slug, who)).stdout
        assert "refs/heads/main" in refs and "refs/proposals" not in refs
        refs = git(*proto, "ls-remote", url(server, slug, who), "refs/proposals/*").stdout
        assert refs == ""
    refs = git(*proto, *ask, "ls-remote", url(server, slug, token)).stdout
    assert "refs/proposals" not in refs  # an agent asking gets the default
    refs = git(*proto, *ask, "ls-remote", url(server, slug, ADMIN_TOKEN)).stdout
    assert f"refs/proposals/{proposal}" in refs and "refs/heads/main" in refs


def test_a_hidden_commit_cannot_be_fetched_by_id(server: LiveServer, api: Api, tmp_path: Path) -> None:
    slug, token, proposal = _pending_proposal(api)
    ask = ["-c", "http.extraHeader=X-KB-Proposals: 1"]
    line = git(*ask, "ls-remote", url(server, slug, ADMIN_TOKEN), f"refs/proposals/{proposal}").stdout
    commit = line.split()[0]
    repo = tmp_path / "repo"
    git("init", "-q", str(repo))
    for version in ("0", "2"):
        for who in (token, ADMIN_TOKEN):
            proc = git(
                "-c",
                f"protocol.version={version}",
                "fetch",
                url(server, slug, who),
                commit,
                cwd=repo,
                check=False,
            )
            assert proc.returncode != 0, (version, proc.stderr)
            # v2: the edge refuses ("remote error: upload-pack: not our ref"); v0: the client already does.
            assert ("not our ref" if version == "2" else "unadvertised object") in proc.stderr
            assert git("cat-file", "-e", commit, cwd=repo, check=False).returncode != 0
    # The v0 client refuses an unadvertised want by itself; the server refuses it too.
    base = f"{server.url}/git/{slug}.git/git-upload-pack"
    want = f"want {commit} multi_ack_detailed side-band-64k ofs-delta\n"
    body = f"{len(want) + 4:04x}{want}00000009done\n".encode()
    headers = {"Content-Type": "application/x-git-upload-pack-request"}
    r = httpx.post(base, content=body, headers=headers, auth=("kb", token), timeout=60)
    assert r.status_code == 200 and b"not our ref" in r.content and b"PACK" not in r.content
    # A commit a visible ref reaches may still be fetched by id.
    first = git("ls-remote", url(server, slug, token), "refs/heads/main").stdout.split()[0]
    for version in ("0", "2"):
        git("-c", f"protocol.version={version}", "fetch", url(server, slug, token), first, cwd=repo)
    # The admin who asks for proposals may fetch one.
    git(*ask, "fetch", url(server, slug, ADMIN_TOKEN), f"refs/proposals/{proposal}", cwd=repo)
    assert git("cat-file", "-t", commit, cwd=repo).stdout.strip() == "commit"
    message = git("log", "-1", "--format=%B", commit, cwd=repo).stdout
    assert f"Kb-Proposal: {proposal}" in message and "Kb-Kind: proposal" in message


def test_clones_writes_and_reads_beside_repacks_see_every_version(
    server: LiveServer, api: Api, tmp_path: Path
) -> None:
    """Repacks run by another process (the writer's own, and full ones that delete every pack)
    while the server clones, writes and reads: nothing is lost, on either side."""
    from kbserver.store.packing import repack

    slug = api.kb()
    token = api.agent({slug: "read_write"})
    expected = {f"notes/{i}.md": f"note {i}\n" for i in range(30)}
    for p, text in expected.items():
        assert api.write(slug, token, p, text).status_code == 200
    repo = str(server.data / "kbs" / f"{slug}.git")
    done = threading.Event()
    results: list[object] = []

    def repacks() -> None:
        for i in range(6):  # bounded
            results.append(repack(repo, full=i % 2 == 1))
            if done.is_set():
                return

    failures: list[str] = []

    def writes() -> None:
        for i in range(10):
            p, text = f"during/{i}.md", f"written during a repack {i}\n"
            answer = api.write(slug, token, p, text)
            if answer.status_code != 200:
                failures.append(answer.text)
            expected[p] = text

    threads = [threading.Thread(target=repacks), threading.Thread(target=writes)]
    for t in threads:
        t.start()
    for n in range(2):
        clone = tmp_path / f"during-{n}"
        git("clone", "-q", url(server, slug, token), str(clone))
        git_fsck(clone)
    for t in threads[1:]:
        t.join(timeout=600)
    done.set()
    threads[0].join(timeout=600)
    assert failures == [], (failures, server.log.read_text(errors="replace")[-4000:])
    assert any(r is not None for r in results)
    clone = tmp_path / "after"
    git("clone", "-q", url(server, slug, token), str(clone))
    git_fsck(clone)
    git_fsck(Path(repo))
    assert git("rev-parse", "HEAD", cwd=clone).stdout.strip() == api.head(slug)
    assert git("rev-list", "--count", "HEAD", cwd=clone).stdout.strip() == str(1 + len(expected))
    auth = {"Authorization": f"Bearer {token}"}
    for p, text in expected.items():
        assert (clone / p).read_text() == text
        assert api.call("GET", f"/kbs/{slug}/files/{p}", auth)["content"] == text
    versions = api.call("GET", f"/kbs/{slug}/versions?limit=100", auth)["versions"]
    assert len(versions) == 1 + len(expected)
    for v in versions:  # every version's diff reads its blobs through the server's store
        api.call("GET", f"/kbs/{slug}/versions/{v['version']}", auth)
