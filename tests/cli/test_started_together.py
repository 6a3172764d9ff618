"""Several processes started at once on one empty data folder: they agree on one admin token (none
reads a half-written `admin-token`) and the sample KB is imported once, with no process failing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers import free_port, git_fsck, wait_healthy

ROOT = Path(__file__).resolve().parents[2]

TOKENS = """
import json, os, sys, time
from pathlib import Path
from kbserver.config import Settings, admin_token
base, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
print(json.dumps([admin_token(Settings(data=base / str(n))) for n in range(int(sys.argv[3]))]))
"""

BOOTSTRAP = """
import sys, time
from pathlib import Path
from kbserver.app import bootstrap
from kbserver.config import Settings
from kbserver.wiring import open_services
settings = Settings(data=Path(sys.argv[1]), embedder="none")
services = open_services(settings.data, settings.options())
go = Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
print("imported" if bootstrap(settings, services) else "not imported", flush=True)
services.close()
"""


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    return {**base, "PYTHONPATH": str(ROOT), "KBSERVER_EMBEDDER": "none", **extra}


def test_processes_making_the_admin_token_at_once_agree_on_it(tmp_path: Path) -> None:
    go, folders = tmp_path / "go", 300
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TOKENS, str(tmp_path), str(go), str(folders)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    time.sleep(1.0)  # all of them imported kbserver and wait for the start
    go.touch()
    seen = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        seen.append(json.loads(out))
    for n in range(folders):
        on_disk = (tmp_path / str(n) / "admin-token").read_text().strip()
        tokens = {got[n] for got in seen}
        assert tokens == {on_disk} and on_disk.startswith("kba_"), (n, tokens)  # today: "" beside it
        assert (tmp_path / str(n) / "admin-token").stat().st_mode & 0o777 == 0o600
        assert [p.name for p in (tmp_path / str(n)).iterdir()] == ["admin-token"]  # no temp file left


def test_processes_bootstrapping_one_empty_folder_at_once_import_the_sample_once(tmp_path: Path) -> None:
    data, go = tmp_path / "data", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP, str(data), str(go)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:  # each has its services open: only the import races
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.communicate()
    go.touch()
    said = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err  # today: AlreadyExists in all but one
        said.append(out.strip())
    assert sorted(said) == ["imported"] + ["not imported"] * 3, said
    git_fsck(data / "kbs" / "sample.git")


def test_servers_started_at_once_on_an_empty_folder_all_serve_one_sample(tmp_path: Path) -> None:
    data, go = tmp_path / "data", tmp_path / "go"
    ports = [free_port() for _ in range(3)]
    logs = [tmp_path / f"server-{port}.log" for port in ports]
    start = (
        f"import pathlib, runpy, sys, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.001)\n"
    )
    start += "sys.argv = ['kbserver', *sys.argv[1:]]\nrunpy.run_module('kbserver.cli', run_name='__main__')\n"
    procs = []
    for port, log in zip(ports, logs, strict=True):
        with log.open("wb") as f:
            cmd = [sys.executable, "-c", start, "serve", "--data", str(data), "--port", str(port)]
            procs.append(subprocess.Popen(cmd, env=_env(KBSERVER_FOLLOWER="embedded"), stdout=f, stderr=f))
    try:
        time.sleep(1.0)
        go.touch()
        for proc, port, log in zip(procs, ports, logs, strict=True):
            wait_healthy(proc, f"http://127.0.0.1:{port}", "server", lambda log=log: log.read_text(), 120)
        tokens = set()
        for log in logs:
            found = re.search(r"^admin token: (\S*)$", log.read_text(), re.M)
            assert found, log.read_text()
            tokens.add(found.group(1))
        (token,) = tokens
        assert token == (data / "admin-token").read_text().strip() and token.startswith("kba_")
        auth = {"Authorization": f"Bearer {token}"}
        for port in ports:
            kbs = httpx.get(f"http://127.0.0.1:{port}/api/v1/kbs", headers=auth, timeout=60).json()
            assert [kb["slug"] for kb in kbs] == ["sample"]
        versions = httpx.get(
            f"http://127.0.0.1:{ports[0]}/api/v1/kbs/sample/versions", headers=auth, timeout=60
        )
        kinds = [v["message"].split(" ", 1)[0] for v in versions.json()["versions"]]
        assert kinds.count("import") == 1, versions.text  # imported once
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    git_fsck(data / "kbs" / "sample.git")
