"""deploy/compose.yaml and deploy/haproxy.cfg parse, and run what tests/cluster runs.

No container can start here (no images), so the files are checked instead: compose.yaml is valid
YAML with three nodes, PostgreSQL, a migration step and HAProxy; its node command and settings are
the ones tests/cluster gives its nodes (tests/cluster/harness.py); every node mounts the shared
volume and a cache volume of its own; HAProxy's config is the very file the cluster test runs,
and HAProxy accepts it with compose's addresses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbserver.config import ENV_PREFIX, Settings
from tests.cluster.harness import HAPROXY_CFG, migrate_command, node_env, serve_command
from tests.helpers import REPO_ROOT

COMPOSE = REPO_ROOT / "deploy" / "compose.yaml"
NODES = ("node1", "node2", "node3")


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _interpolate(value: str) -> str:
    """Compose's `${VAR:?message}` and `${VAR:-default}`, with example values for the required ones."""
    return re.sub(r"\$\{(\w+)(?::[?-]([^}]*))?\}", lambda m: f"<{m.group(1)}>", value)


def test_three_nodes_postgres_migrate_and_haproxy() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "migrate", *NODES, "haproxy"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["haproxy"]["image"].startswith("haproxy:")
    for name in NODES:
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_nodes_run_the_cluster_tests_command_and_settings() -> None:
    services = _compose()["services"]
    for name in NODES:
        node = services[name]
        assert node["command"] == serve_command("/data", 8765, host="0.0.0.0")
        env = {k: _interpolate(str(v)) for k, v in node["environment"].items()}
        expected = node_env("<url>", "/cache", "<token>", "<host>")
        assert set(env) == set(expected)  # no setting the cluster test does not run with
        assert env["KBSERVER_CACHE_DIR"] == "/cache" and env["KBSERVER_SAMPLE"] == expected["KBSERVER_SAMPLE"]
        assert (
            env["KBSERVER_CONTROL_URL"].startswith("postgresql://")
            and "@postgres:5432/" in env["KBSERVER_CONTROL_URL"]
        )
        for key in env:  # each is a real setting
            assert key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :].lower() in Settings.model_fields, key
    assert services["migrate"]["command"] == migrate_command("/data")
    assert services["migrate"]["environment"] == services["node1"]["environment"]


def test_every_node_mounts_the_shared_volume_and_a_cache_of_its_own() -> None:
    compose = _compose()
    caches = []
    for name in NODES:
        mounts = dict(m.split(":", 1) for m in compose["services"][name]["volumes"])
        assert mounts["kbdata"] == "/data" and len(mounts) == 2
        caches.append(next(v for v, target in mounts.items() if target == "/cache"))
    assert len(set(caches)) == 3 and {"kbdata", *caches} <= set(compose["volumes"])


def test_haproxy_runs_the_cluster_tests_config_with_composes_addresses() -> None:
    haproxy = _compose()["services"]["haproxy"]
    source, target = haproxy["volumes"][0].split(":")[:2]
    assert (COMPOSE.parent / source).resolve() == HAPROXY_CFG.resolve()
    assert target == "/usr/local/etc/haproxy/haproxy.cfg"
    assert haproxy["ports"] == ["8765:8765"] and haproxy["environment"]["KB_BIND"] == ":8765"
    exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(exe).exists():
        pytest.skip("needs HAProxy (apt-get install -y haproxy; scripts/test does)")
    env = {**os.environ, **{k: str(v) for k, v in haproxy["environment"].items()}}
    env.update({f"KB_NODE{n}": f"127.0.0.1:{8765 + n}" for n in (1, 2, 3)})  # names resolve only in compose
    checked = subprocess.run([exe, "-c", "-f", str(HAPROXY_CFG)], env=env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = HAPROXY_CFG.read_text()
    assert "option httpchk GET /healthz" in text and "stick match req.hdr(Mcp-Session-Id)" in text
