"""The git edge in-process: refusals and their shapes, request bodies, pkt-lines, disconnects."""

from __future__ import annotations

import asyncio
import gzip
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient
from starlette.types import Message

from kbserver.gitweb import GitEdge
from kbserver.gitweb.pktline import encode, parse_v2_request, split
from kbserver.gitweb.upload_pack import UploadPack, protocol_version
from kbserver.services import Services
from tests.helpers import ADMIN_TOKEN, make_agent

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs C git on the PATH")
AUTH = ("kb", ADMIN_TOKEN)
REQUEST = {"Content-Type": "application/x-git-upload-pack-request"}


def edge_client(services: Services, git: str | None, **kw: int) -> TestClient:
    app = Starlette(routes=[Mount("/git", app=GitEdge(services, ADMIN_TOKEN, git=git, **kw))])
    return TestClient(app, raise_server_exceptions=True)


@pytest.fixture
def gitweb(services: Services, kb: str) -> Iterator[TestClient]:
    with edge_client(services, GIT) as c:
        yield c


def v0_want(commit: str) -> bytes:
    return encode(f"want {commit} side-band-64k ofs-delta\n".encode()) + b"0000" + encode(b"done\n")


def test_without_c_git_the_answer_is_503_after_auth(services: Services, kb: str) -> None:
    with edge_client(services, None) as c:
        refs = f"/git/{kb}.git/info/refs?service=git-upload-pack"
        assert c.get(refs).status_code == 401
        r = c.get(refs, auth=AUTH)
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "unavailable" and "C git" in r.json()["error"]["message"]


def test_refusals_have_the_json_error_shape(gitweb: TestClient, kb: str) -> None:
    base = f"/git/{kb}.git"
    cases = [
        ("GET", "/info/refs", {}, 403, "forbidden"),  # dumb HTTP
        ("GET", "/info/refs?service=git-upload-archive", {}, 403, "forbidden"),
        ("POST", "/info/refs?service=git-upload-pack", REQUEST, 405, "invalid_request"),
        ("GET", "/git-upload-pack", {}, 405, "invalid_request"),
        ("POST", "/git-upload-pack", {"Content-Type": "application/json"}, 415, "invalid_request"),
        ("POST", "/git-upload-pack", {**REQUEST, "Content-Encoding": "br"}, 415, "invalid_request"),
        ("GET", "/info/refs?service=git-receive-pack", {}, 403, "forbidden"),
        ("GET", "/objects/info/packs", {}, 404, "not_found"),
    ]
    for method, path, headers, status, code in cases:
        r = gitweb.request(method, base + path, headers=headers, auth=AUTH, content=b"0000")
        assert r.status_code == status, (method, path, r.text)
        assert r.json()["error"]["code"] == code
    assert gitweb.get(base + "/git-upload-pack").headers["allow"] == "POST"
    assert gitweb.get("/git/").status_code == 404


@needs_git
def test_gzip_request_bodies_are_unpacked(gitweb: TestClient, services: Services, kb: str) -> None:
    head = services.repos.repo(kb).head()
    assert head is not None
    headers = {**REQUEST, "Content-Encoding": "gzip"}
    r = gitweb.post(
        f"/git/{kb}.git/git-upload-pack", content=gzip.compress(v0_want(head)), headers=headers, auth=AUTH
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-git-upload-pack-result"
    assert b"PACK" in r.content
    r = gitweb.post(f"/git/{kb}.git/git-upload-pack", content=b"not gzip", headers=headers, auth=AUTH)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


@needs_git
def test_request_bodies_are_bounded(services: Services, kb: str) -> None:
    with edge_client(services, GIT, max_body_bytes=1000) as c:
        url = f"/git/{kb}.git/git-upload-pack"
        assert c.post(url, content=b"0" * 1001, headers=REQUEST, auth=AUTH).status_code == 413
        bomb = gzip.compress(b"0" * 100_000)
        assert len(bomb) < 1000
        r = c.post(url, content=bomb, headers={**REQUEST, "Content-Encoding": "gzip"}, auth=AUTH)
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"


@needs_git
def test_info_refs_prefix_and_content_type(gitweb: TestClient, kb: str) -> None:
    url = f"/git/{kb}.git/info/refs?service=git-upload-pack"
    r = gitweb.get(url, auth=AUTH)
    assert r.headers["content-type"] == "application/x-git-upload-pack-advertisement"
    assert r.headers["cache-control"].startswith("no-cache")
    assert r.content.startswith(b"001e# service=git-upload-pack\n0000")
    assert b"refs/heads/main" in r.content
    r = gitweb.get(url, auth=AUTH, headers={"Git-Protocol": "version=2"})
    assert r.content.startswith(b"000eversion 2\n")


@needs_git
def test_v2_commands_other_than_ls_refs_and_fetch_are_refused(
    gitweb: TestClient, services: Services, kb: str
) -> None:
    head = services.repos.repo(kb).head()
    body = (
        encode(b"command=object-info\n")
        + b"0001"
        + encode(b"size\n")
        + encode(f"oid {head}\n".encode())
        + b"0000"
    )
    headers = {**REQUEST, "Git-Protocol": "version=2"}
    r = gitweb.post(f"/git/{kb}.git/git-upload-pack", content=body, headers=headers, auth=AUTH)
    assert r.status_code == 200
    assert b"ERR upload-pack: command 'object-info' is not served here" in r.content
    body = encode(b"command=fetch\n") + b"0001" + encode(b"want-ref refs/heads/main\n") + b"0000"
    r = gitweb.post(f"/git/{kb}.git/git-upload-pack", content=body, headers=headers, auth=AUTH)
    assert b"ERR upload-pack: want-ref is not allowed" in r.content


@needs_git
def test_an_agent_with_read_may_fetch_and_a_bad_basic_password_is_401(
    gitweb: TestClient, services: Services, kb: str
) -> None:
    headers = make_agent(services, "reader", {kb: "read"})
    r = gitweb.get(f"/git/{kb}.git/info/refs?service=git-upload-pack", headers=headers)
    assert r.status_code == 200
    assert (
        gitweb.get(f"/git/{kb}.git/info/refs?service=git-upload-pack", auth=("reader", "nope")).status_code
        == 401
    )


def test_pkt_lines_and_v2_requests() -> None:
    assert encode(b"done\n") == b"0009done\n"
    assert split(b"0009done\n000000010002") == [b"done", 0, 1, 2]
    for bad in (b"000", b"zzzz", b"0003", b"0010short"):
        with pytest.raises(ValueError):
            split(bad)
    oid = "A" * 40
    body = (
        encode(b"agent=git/2.39\n")
        + encode(b"command=fetch\n")
        + b"0001"
        + encode(f"want {oid}\n".encode())
        + encode(f"want {'b' * 40} trailing\n".encode())
        + encode(b"done\n")
        + b"0000"
    )
    request = parse_v2_request(body)
    assert request.command == "fetch" and request.wants == ("a" * 40, "b" * 40) and not request.want_refs
    with pytest.raises(ValueError):
        parse_v2_request(encode(b"command=fetch\n") + b"0001" + encode(b"want xyz\n") + b"0000")
    with pytest.raises(ValueError):
        parse_v2_request(encode(b"command=fetch\n") + encode(b"command=ls-refs\n") + b"0000")
    assert parse_v2_request(b"0000").command is None


def test_protocol_version_is_the_highest_requested() -> None:
    assert protocol_version(None) == 0
    assert protocol_version("version=2") == 2
    assert protocol_version("version=1:version=2") == 2
    assert protocol_version("version=2:version=1") == 2
    assert protocol_version("version=9") == 0
    assert protocol_version("foo=bar") == 0


def test_a_client_disconnect_kills_the_subprocess(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"

    class Sleeper(UploadPack):
        """A stand-in for git that records its pid and sleeps, so a disconnect has something to kill."""

        def argv(self, *, advertise: bool) -> list[str]:
            code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
            return [sys.executable, "-c", code]

    pack = Sleeper(git="git", repo=tmp_path, hide_proposals=True, git_protocol=None)
    sent: list[Message] = []

    async def receive() -> Message:
        while not pidfile.exists() or not pidfile.read_text():
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(pack.advertise(receive, send), timeout=60))
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    assert sent[0]["status"] == 200 and sent[-1].get("more_body", False) is True  # never finished
