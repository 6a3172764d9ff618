"""`kbserver mount --url` against a tiny hostile server: an archive or listing that breaks a rule of
a KB copy is refused with one line, and nothing is left behind (not in DIR, not beside it, not
outside it)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO_ROOT

SLUG = "evil"
GOOD = b"# evil\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Member = Callable[[tarfile.TarFile], None]


def _file(name: str, data: bytes, size: int | None = None) -> Member:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data) if size is None else size
        tar.addfile(info, io.BytesIO(data + b"\0" * max(0, info.size - len(data))))

    return add


def _special(name: str, kind: bytes, target: str = "") -> Member:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        tar.addfile(info)

    return add


def _archive(members: list[Member]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for add in members:
            add(tar)
    return out.getvalue()


class _Hostile:
    """Answers the listing and the archive of KB `evil` as it is told to."""

    def __init__(self, listing: list[dict[str, Any]], archive: bytes) -> None:
        body = json.dumps({"version": "a" * 40, "files": listing}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith(f"/api/v1/kbs/{SLUG}/files"):
                    self._answer(body, "application/json")
                elif self.path.startswith(f"/api/v1/kbs/{SLUG}/archive"):
                    self._answer(archive, "application/gzip")
                else:
                    self.send_error(404)

            def _answer(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _entry(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "size": len(data), "sha256": _sha(data)}


README = _entry("README.md", GOOD)
CASES: dict[str, tuple[list[dict[str, Any]], list[Member]]] = {
    "dotdot": ([README], [_file(f"{SLUG}/README.md", GOOD), _file(f"{SLUG}/../escape.md", b"x")]),
    "dotdot-in-the-listing": (
        [README, _entry("../escape.md", b"x")],
        [_file(f"{SLUG}/README.md", GOOD), _file(f"{SLUG}/../escape.md", b"x")],
    ),
    "absolute": ([README], [_file("/tmp/escape.md", b"x")]),
    "absolute-in-the-listing": ([README, _entry("/escape.md", b"x")], [_file(f"{SLUG}/README.md", GOOD)]),
    "symlink": ([README], [_special(f"{SLUG}/README.md", tarfile.SYMTYPE, "/etc/passwd")]),
    "hard-link": ([README], [_special(f"{SLUG}/README.md", tarfile.LNKTYPE, "/etc/passwd")]),
    "char-device": ([README], [_special(f"{SLUG}/README.md", tarfile.CHRTYPE)]),
    "fifo": ([README], [_special(f"{SLUG}/README.md", tarfile.FIFOTYPE)]),
    "larger-than-listed": ([README], [_file(f"{SLUG}/README.md", GOOD + b"more bytes\n")]),
    "sha-mismatch": ([README], [_file(f"{SLUG}/README.md", b"# EVIL\n")]),
    "not-in-the-listing": ([README], [_file(f"{SLUG}/README.md", GOOD), _file(f"{SLUG}/extra.md", b"x")]),
    "missing-from-the-archive": ([README, _entry("b.md", b"b")], [_file(f"{SLUG}/README.md", GOOD)]),
    "outside-the-slug": ([README], [_file("other/README.md", GOOD)]),
    "twice": ([README], [_file(f"{SLUG}/README.md", GOOD), _file(f"{SLUG}/README.md", GOOD)]),
}


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    yield work


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_archive_is_refused_and_leaves_nothing(place: Path, tmp_path: Path, case: str) -> None:
    listing, members = CASES[case]
    with _Hostile(listing, _archive(members)) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
        env["PYTHONPATH"] = str(REPO_ROOT)  # this checkout, wherever the command runs
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kbserver.cli",
                "mount",
                "--url",
                url,
                "--token",
                "t",
                "--kb",
                SLUG,
                "copy",
            ],
            capture_output=True,
            text=True,
            cwd=place,
            env=env,
            timeout=120,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().startswith("error: invalid_archive: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "nothing was written" in done.stderr
    assert list(place.iterdir()) == []  # no copy, no staging folder, no source file
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == [] and not Path("/tmp/escape.md").exists()


def test_the_hostile_server_serves_a_good_archive_too(place: Path) -> None:
    """The harness is sound: the same server with a well-formed archive gives a copy."""
    with _Hostile([README], _archive([_file(f"{SLUG}/README.md", GOOD)])) as url:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kbserver.cli",
                "mount",
                "--url",
                url,
                "--token",
                "t",
                "--kb",
                SLUG,
                "copy",
            ],
            capture_output=True,
            text=True,
            cwd=place,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert (place / "copy" / "README.md").read_bytes() == GOOD
