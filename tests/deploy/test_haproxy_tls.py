"""deploy/haproxy-tls.cfg: HAProxy ends TLS with a certificate from a path and forwards the client's
scheme and address to a node that trusts it (a throwaway certificate, a real node, a real HAProxy)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cluster.harness import HAPROXY_CFG, Node
from tests.helpers import ADMIN_TOKEN, free_port, stop_process
from tests.web.session import csrf_of

TLS_CFG = HAPROXY_CFG.parent / "haproxy-tls.cfg"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(HAPROXY) or not shutil.which("openssl"), reason="haproxy, openssl"),
]


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (HAProxy's PEM with the key, the client's CA file)."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    both = folder / "kbserver.pem"
    both.write_text(cert.read_text() + key.read_text())
    return both, cert


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the HTTPS URL of HAProxy in front of one node, the CA file that verifies it)."""
    pem, ca = _certificate(tmp_path)
    env = {
        "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN,
        "KBSERVER_SAMPLE": "false",
        "KBSERVER_TRUSTED_PROXIES": "127.0.0.1",
    }
    node = Node("node", tmp_path / "data", tmp_path, env).launch().wait_healthy()
    port = free_port()
    haproxy_env = {
        **os.environ,
        "KB_BIND": f"127.0.0.1:{free_port()}",
        "KB_TLS_BIND": f"127.0.0.1:{port}",
        "KB_CERT": str(pem),  # the certificate path, as an operator gives it
        **{f"KB_NODE{n}": f"127.0.0.1:{node.port}" for n in (1, 2, 3)},
    }
    files = ["-f", str(HAPROXY_CFG), "-f", str(TLS_CFG)]
    checked = subprocess.run([HAPROXY, "-c", *files], env=haproxy_env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    log = tmp_path / "haproxy.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [HAPROXY, "-db", *files], env=haproxy_env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if (
                    httpx.get(
                        f"{url}/healthz", verify=ssl.create_default_context(cafile=str(ca)), timeout=10
                    ).status_code
                    == 200
                ):
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError(f"HAProxy with TLS did not reach the node: {log.read_text()[-2000:]}")
        yield url, ca
    finally:
        stop_process(proc)
        node.stop()


def test_tls_at_haproxy_reaches_the_node_as_https(tls: tuple[str, Path]) -> None:
    url, ca = tls
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(ca)), timeout=60) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert "strict-transport-security" in client.get("/healthz").headers
        csrf = csrf_of(client.get("/admin/login").text)
        r = client.post("/admin/login", data={"csrf": csrf, "token": ADMIN_TOKEN})
        assert r.status_code == 303, r.text
        # the node learnt the scheme from the trusted proxy: the session cookie is Secure
        assert "secure" in r.headers["set-cookie"].lower().split("; ")
