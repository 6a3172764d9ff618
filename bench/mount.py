"""Benchmark `kbserver mount --url` and `mount --update` from another process, over HTTP only.

    python -m bench.mount [--files 1000,5000,10000] [--bytes 1500] [--repeat 3]

One `kbserver serve` (the follower left to a worker nobody runs, so indexing does not share the
CPU) holds one KB per size, seeded with C git fast-import: notes of about `--bytes` bytes in
folders of 100. Each mount is the real command in a fresh process (`python -m kbserver.cli mount
--url URL --token T --kb SLUG DIR`), timed from start to exit, with its memory peak (ru_maxrss of
the child from wait4). Then, per size, one file is changed through the API and `mount --update DIR`
is timed the same way (it lists the two versions and fetches the changed file alone), and once more
in this process (`kbserver.cli.mounts.update`), without the interpreter's start.

Prints medians: files/s and MB/s of a fresh mount, the peak memory, and the update's time. The
time of the bare interpreter start (`python -c pass` importing kbserver.cli) is printed apart, since
every row includes it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/mount.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
ADMIN = "bench-admin-token-0123456789abcdef"


def _docs(n: int, size: int) -> list[tuple[str, str]]:
    words = "alpha beta gamma delta notes memory version agent review search 记忆 笔记".split()
    out = []
    for i in range(n):
        line = " ".join(words[(i + k) % len(words)] for k in range(12))
        body = f"# note {i}\n\n" + (line + "\n") * max(1, size // (len(line) + 1))
        out.append((f"notes/{i // 100:03d}/{i:05d}.md", body))
    return out


def _call(url: str, method: str, path: str, token: str, body: object = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url + "/api/v1" + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command in a fresh process (GNU time's %M: a child of
    this process would report this process's own peak, inherited through fork)."""
    report = tempfile.NamedTemporaryFile(suffix=".rss", delete=False)
    report.close()
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", report.name, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr}")
    peak_kb = int(Path(report.name).read_text().split()[-1])
    os.unlink(report.name)
    return wall, peak_kb / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--files", default="1000,5000,10000", help="KB sizes, comma-separated")
    parser.add_argument("--bytes", type=int, default=1500, help="about this many bytes a file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.files.split(",")]

    from bench.search import seed
    from kbserver.cli.mounts import update
    from kbserver.wiring import open_services

    work = Path(tempfile.mkdtemp(prefix="bench-mount-"))
    data = work / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    env.update({"PYTHONPATH": str(ROOT), "KBSERVER_ADMIN_TOKEN": ADMIN, "KBSERVER_SAMPLE": "false"})
    server = None
    try:
        data.mkdir()
        services = open_services(data)
        megabytes: dict[int, float] = {}
        try:
            for n in sizes:
                docs = _docs(n, args.bytes)
                megabytes[n] = sum(len(b.encode()) for _, b in docs) / 1e6
                seed(services, f"kb{n}", docs)
        finally:
            services.close()
        port = 20000 + os.getpid() % 20000
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(data), "--port", str(port)],
            env={**env, "KBSERVER_FOLLOWER": "worker"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.2)
        token = str(_call(url, "POST", "/agents", ADMIN, {"name": "bench"})["token"])  # type: ignore[index]
        for n in sizes:
            _call(url, "POST", "/agents/bench/links", ADMIN, {"kb": f"kb{n}", "permission": "read_write"})
        cli = [sys.executable, "-m", "kbserver.cli"]
        start_only = statistics.median(
            _timed([sys.executable, "-c", "import kbserver.cli.sandbox"], env)[0] for _ in range(args.repeat)
        )
        rows = []
        for n in sizes:
            mounts, peaks, updates = [], [], []
            for r in range(args.repeat):
                target = work / f"copy{n}-{r}"
                wall, peak = _timed(
                    [*cli, "mount", "--url", url, "--token", token, "--kb", f"kb{n}", str(target)], env
                )
                mounts.append(wall)
                peaks.append(peak)
            target = work / f"copy{n}-0"
            inside = []
            for r in range(args.repeat):
                change = {"path": f"notes/000/{r:05d}.md", "mode": "append", "content": f"change {r}\n"}
                _call(url, "POST", f"/kbs/kb{n}/write", token, {"files": [change]})
                wall, _ = _timed([*cli, "mount", "--update", str(target), "--token", token], env)
                updates.append(wall)
                other = f"notes/001/{100 + r:05d}.md"
                change = {"path": other, "mode": "append", "content": f"change {r}\n"}
                _call(url, "POST", f"/kbs/kb{n}/write", token, {"files": [change]})
                t = time.perf_counter()
                done = update(target, token)
                inside.append(time.perf_counter() - t)
                assert done.written == 1, done
            m = statistics.median(mounts)
            rows.append(
                (
                    n,
                    megabytes[n],
                    m,
                    n / m,
                    megabytes[n] / m,
                    max(peaks),
                    statistics.median(updates),
                    statistics.median(inside),
                )
            )
        print(f"interpreter start with kbserver.cli imported: {start_only:.2f} s (in every row)")
        print(
            "| files | MB | mount s | files/s | MB/s | peak RSS MB | --update after 1 change, s "
            "| the same in-process (no interpreter start), s |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for n, mb, m, fps, mbps, peak, upd, inner in rows:
            print(
                f"| {n:,} | {mb:.1f} | {m:.2f} | {fps:,.0f} | {mbps:.1f} | {peak:.0f} | {upd:.2f} "
                f"| {inner:.2f} |"
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        for path in [work, *work.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
