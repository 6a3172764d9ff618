"""Memory of the server while a client sends it one huge request body.

    python -m bench.body_rss [--mb 400]

Starts `kbserver serve` in a subprocess on a free loopback port, creates an agent that is linked to
no KB, then for each way of sending (`Content-Length`, then chunked) streams `--mb` MB of JSON-ish
bytes at `POST /api/v1/kbs/sample/write` as that agent, reading the answer as soon as it comes.
Prints the server's RSS (VmRSS) before and after, its peak (VmHWM), the status and how many bytes
the client had sent when the answer came.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mem(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _send(port: int, token: str, total: int, chunked: bool) -> tuple[str, int]:
    """Stream `total` bytes of body; return (status line, bytes sent when the answer arrived)."""
    head = (
        f"POST /api/v1/kbs/sample/write HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\n"
    )
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {total}\r\n\r\n"
    block = b"[" * (1024 * 1024)
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head.encode())
        sock.setblocking(False)
        answer = b""
        while sent < total:
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            if b"\r\n" in answer:
                break
            piece = block if not chunked else f"{len(block):x}\r\n".encode() + block + b"\r\n"
            try:
                sock.setblocking(True)
                sock.sendall(piece)
                sock.setblocking(False)
            except OSError:  # the server closed the connection after answering
                break
            sent += len(block)
        if chunked and sent >= total:
            sock.setblocking(True)
            sock.sendall(b"0\r\n\r\n")
        sock.setblocking(True)
        sock.settimeout(120)
        while b"\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    return answer.split(b"\r\n", 1)[0].decode(errors="replace"), sent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=400)
    args = parser.parse_args()
    total = args.mb * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        data, port = os.path.join(tmp, "data"), _free_port()
        env = {**os.environ, "KBSERVER_ADMIN_TOKEN": TOKEN, "KBSERVER_LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbserver.cli", "serve", "--data", data, "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("server did not start")
                time.sleep(0.2)
            admin = {"Authorization": f"Bearer {TOKEN}"}
            created = httpx.post(url + "/api/v1/agents", json={"name": "stranger"}, headers=admin, timeout=30)
            token = created.json()["token"]
            time.sleep(2)  # let the start-up index build settle
            print(f"| body ({args.mb} MB) | status | sent before answer (MB) | RSS before | after | peak |")
            print("|---|---|---|---|---|---|")
            for chunked in (False, True):
                before, _ = _mem(proc.pid)
                status, sent = _send(port, token, total, chunked)
                time.sleep(0.5)
                after, peak = _mem(proc.pid)
                how = "chunked" if chunked else "Content-Length"
                print(
                    f"| {how} | {status} | {sent / 2**20:.0f} "
                    f"| {before:.0f} MB | {after:.0f} MB | {peak:.0f} MB |"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
