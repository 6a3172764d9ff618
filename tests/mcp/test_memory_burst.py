"""A burst of memory_add through a real `kbserver serve` (follower embedded, or in `kbserver worker`):
every task ends covered by the index and the vectors, and only the follower's threads run lowered."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.wiring import open_services
from tests.helpers import LiveServer, make_agent
from tests.mcp.clients import http_client, ok

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NICE = 7
BIRDS = "plover dunlin godwit whimbrel sanderling turnstone knot redshank curlew avocet".split()


def _nice_of_tasks(pid: int) -> dict[int, int]:
    """Every thread (task) of process `pid` with its nice value, from /proc."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # a thread that just ended
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
        out[int(task.name)] = int(fields[16])  # field 19: nice
    return out


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    data = tmp_path / "data"
    services = open_services(data)
    try:
        kbs.create(services, ADMIN, "notes")
        headers = make_agent(services, "rememberer", {"notes": "read_write"}, tools=["memory"])
    finally:
        services.close()
    yield data, headers


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread priorities from /proc")
@pytest.mark.parametrize("follower", ["embedded", "worker"])
async def test_a_burst_of_adds_ends_covered_and_only_the_follower_runs_lowered(
    setup: tuple[Path, dict[str, str]], follower: str
) -> None:
    data, headers = setup
    env = {"KBSERVER_SAMPLE": "false", "KBSERVER_FOLLOWER_NICE": str(NICE), "KBSERVER_FOLLOWER": follower}
    server = LiveServer(data, env)
    worker: subprocess.Popen[bytes] | None = None
    server.start()
    try:
        if follower == "worker":
            with (data.parent / "worker.log").open("ab") as log:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "kbserver.cli", "worker", "--data", str(data)],
                    env=server.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        async with http_client(server.url, headers) as client:
            added = []
            for bird in BIRDS:  # one after another, as fast as the server answers
                content = f"Saw a {bird} on the mudflats."
                result = ok(await client.call_tool("memory_add", {"content": content}))
                added.append((bird, result["id"], result["taskId"]))
            for _, _, task in added:  # each task: done once the index and the vectors cover it
                status = "pending"
                for _ in range(10):  # a minute each at most
                    waited = ok(await client.call_tool("memory_task_wait", {"taskId": task, "timeout": 60}))
                    status = waited["status"]
                    if status == "done":
                        break
                assert status == "done", task
            for bird, memory_id, _ in added:  # the index has each...
                found = ok(await client.call_tool("memory_search", {"search": bird, "mode": "keyword"}))
                assert [m["id"] for m in found["memories"]] == [memory_id]
            found = ok(await client.call_tool("memory_search", {"search": "wading birds seen at low tide"}))
            assert "unembedded" not in found  # ...and so do the vectors: every memory is ranked by meaning
            assert found["total"] == len(BIRDS)
            assert {m["id"] for m in found["memories"]} <= {memory_id for _, memory_id, _ in added}

        assert server.proc is not None
        processes = [server.proc.pid] + ([worker.pid] if worker is not None else [])
        for pid in processes:  # serve beside a worker keeps its sink threads standing by, lowered too
            tasks = _nice_of_tasks(pid)
            base = tasks[pid]  # the main thread: the event loop, where requests arrive
            lowered = [tid for tid, nice in tasks.items() if nice != base]
            assert len(lowered) == 2, tasks  # the index's and the vectors' threads, nothing else
            assert all(tasks[tid] == min(19, base + NICE) for tid in lowered)
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=30)
        server.stop()
    assert os.path.isdir(data / "vectors" / "notes")
