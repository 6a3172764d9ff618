"""A bounded schemathesis run (`--checks all`) against the live server, as the admin and as an agent.

schemathesis generates requests from /openapi.json (examples, coverage of every constraint, random
fuzzing and stateful sequences through the links it infers), sends them to `kbserver serve` on a
loopback port and checks every response: no 5xx, status codes, content types, headers (`Allow` on
405), response schemas, that schema-violating requests are refused and schema-valid ones accepted
(tests/api/schemathesis.toml lists the business rules a schema cannot state). The seed is fixed and
the examples bounded (a few hundred cases per token), so the run is reproducible. It runs on both
control stores; on PostgreSQL with fewer examples (each case costs round trips to the database).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer

CONFIG = Path(__file__).with_name("schemathesis.toml")
# The admin reaches every operation, so its run covers every constraint (the coverage phase, which
# tries each boundary and each wrong method); the agent's run fuzzes and chains calls as an agent.
PHASES = {"admin": "examples,coverage", "agent": "fuzzing,stateful"}


def _agent_token(live: LiveServer) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    created = httpx.post(f"{live.url}/api/v1/agents", json={"name": "fuzzer"}, headers=admin, timeout=30)
    assert created.status_code == 201, created.text
    link = httpx.post(
        f"{live.url}/api/v1/agents/fuzzer/links",
        json={"kb": "sample", "permission": "read_write"},
        headers=admin,
        timeout=30,
    )
    assert link.status_code == 200, link.text
    return str(created.json()["token"])


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str:
    """The control store of the run: SQLite, or PostgreSQL (a fresh database: its URL)."""
    return str(request.getfixturevalue("postgres_url")) if request.param == "postgres" else "sqlite"


@pytest.fixture
def quiet_live(tmp_path: Path, store: str) -> Iterator[LiveServer]:
    """The live server without access logs: hundreds of lines would fill its stdout pipe."""
    env = {"KBSERVER_LOG_LEVEL": "WARNING"}
    if store != "sqlite":
        env["KBSERVER_CONTROL_URL"] = store
    server = LiveServer(tmp_path / "live", env=env).start()
    yield server
    server.stop()


@pytest.mark.parametrize("who", ["admin", "agent"])
def test_schemathesis_all_checks(quiet_live: LiveServer, tmp_path: Path, who: str, store: str) -> None:
    live = quiet_live
    examples = "4" if store == "sqlite" else "2"
    token = ADMIN_TOKEN if who == "admin" else _agent_token(live)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(CONFIG),
            "--no-color",
            "run",
            f"{live.url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            examples,
            "--phases",
            PHASES[who],
            "--seed",
            "20261201",
            "--generation-deterministic",
            "--header",
            f"Authorization: Bearer {token}",
            "--request-timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in out and "generated" in out, out[-2000:]
    print(out[out.rfind("Test cases:") :])  # how many cases ran (shown with -s)
