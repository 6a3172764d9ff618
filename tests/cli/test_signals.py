"""Signal handlers only set flags: `kbserver worker` (serve's follower child) and `kbserver serve`
stop on SIGTERM, and no handler takes a lock while it runs (tests/cli/signal_probe.py reports one
that does: such a handler deadlocks its process when the signal lands while the main thread holds
that lock, as a follower child that then ignored SIGTERM and kept the follower lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, free_port, wait_healthy

PROBE = [sys.executable, str(Path(__file__).with_name("signal_probe.py"))]
ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    return {**base, "PYTHONPATH": str(ROOT), "KBSERVER_EMBEDDER": "none", **extra}


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, path.read_text(errors="replace")
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path.read_text(errors='replace')}")


def _ends(proc: subprocess.Popen[bytes], seconds: float = 60) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        return None


def test_the_follower_childs_sigterm_handler_takes_no_lock_and_it_stops(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", "kb", "create", "x", "--data", str(data)],
        env=_env(),
        capture_output=True,
    )
    assert made.returncode == 0, made.stderr
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("wb") as o, err.open("wb") as e:
        # --parent: as serve starts it (a parent-death signal, and the parent checked in its loop)
        proc = subprocess.Popen(
            [*PROBE, "worker", "--data", str(data), "--parent", str(os.getpid())],
            env=_env(),
            stdout=o,
            stderr=e,
        )
    try:
        _wait_for(out, "following main", proc)
        proc.send_signal(signal.SIGTERM)
        code = _ends(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = err.read_text(errors="replace")
    assert "PROBE" not in log, log  # today: Event.set in the handler (Condition.__enter__)
    assert code == 0, log  # it stopped by itself, within the bound, through its own shutdown


@pytest.mark.parametrize("drain", ["0", "1"])
def test_the_servers_signal_handler_takes_no_lock_and_it_stops(tmp_path: Path, drain: str) -> None:
    data, port, log = tmp_path / "data", free_port(), tmp_path / "log"
    env = _env(KBSERVER_ADMIN_TOKEN=ADMIN_TOKEN, KBSERVER_SAMPLE="false", KBSERVER_DRAIN_SECONDS=drain)
    with log.open("wb") as f:
        proc = subprocess.Popen(
            [*PROBE, "serve", "--data", str(data), "--port", str(port)], env=env, stdout=f, stderr=f
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, "server", lambda: log.read_text(errors="replace"), timeout=90)
        proc.send_signal(signal.SIGTERM)
        if drain != "0":  # draining: still serving, /healthz says 503 until the drain ends
            deadline = time.monotonic() + 30
            while httpx.get(url + "/healthz", timeout=10).status_code != 503:
                assert time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.05)
        code = _ends(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text(errors="replace")
    assert "PROBE" not in text, text  # today: a Timer or a thread started inside the handler
    assert code is not None, text
