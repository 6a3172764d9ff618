"""`kbserver person create|list|delete|token` in a subprocess, as a user runs them: the password on
standard input hashed with argon2id, one `error: CODE: MESSAGE` line for every refusal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from starlette.testclient import TestClient

from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.services.access import people
from kbserver.wiring import open_services
from tests.helpers import ADMIN_TOKEN


def kbserver(data: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args, "--data", str(data)],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=300,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _refused(proc: subprocess.CompletedProcess[str], code: str) -> str:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: {code}: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_person_commands(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _ok(kbserver(data, "kb", "create", "team"))
    out = _ok(
        kbserver(
            data,
            "person",
            "create",
            "ann",
            "--email",
            "Ann@Example.org",
            "--role",
            "reviewer",
            "--kb",
            "team",
            "--password-stdin",
            stdin="s3cret pass phrase\n",
        )
    )
    assert "ann" in out and "reviewer of team" in out
    _ok(kbserver(data, "person", "create", "bob", "--email", "bob@example.org", "--role", "owner"))
    listed = json.loads(_ok(kbserver(data, "person", "list", "--json")))["people"]
    assert [(p["name"], p["email"], p["role"], p["kbs"], p["password"], p["token"]) for p in listed] == [
        ("ann", "Ann@Example.org", "reviewer", ["team"], True, False),
        ("bob", "bob@example.org", "owner", [], False, False),
    ]
    assert "ann\tAnn@Example.org\treviewer\tkbs=team" in _ok(kbserver(data, "person", "list"))
    stored = b"".join(f.read_bytes() for f in data.glob("control.db*"))
    assert b"s3cret pass phrase" not in stored and b"$argon2id$" in stored

    first = _ok(kbserver(data, "person", "token", "ann")).strip().splitlines()[-1]
    second = _ok(kbserver(data, "person", "token", "ann")).strip().splitlines()[-1]
    assert first.startswith("kbp_") and " " not in first and first != second
    assert first.encode() not in b"".join(f.read_bytes() for f in data.glob("control.db*"))
    settings = Settings(data=data, admin_token=ADMIN_TOKEN, sample=False)
    services = open_services(data, settings.options())
    try:
        assert people.check_password(services, "ANN@example.org", "s3cret pass phrase") is not None
        assert people.check_password(services, "ann@example.org", "wrong password") is None
        with TestClient(create_app(settings, services)) as client:
            assert client.get("/api/v1/kbs", headers={"Authorization": f"Bearer {first}"}).status_code == 401
            assert client.get("/api/v1/kbs", headers={"Authorization": f"Bearer {second}"}).status_code == 200
    finally:
        services.close()

    _refused(
        kbserver(data, "person", "create", "ann2", "--email", "ann@EXAMPLE.org", "--role", "viewer"),
        "already_exists",
    )
    _refused(
        kbserver(data, "person", "create", "ann", "--email", "x@example.org", "--role", "viewer"),
        "already_exists",
    )
    _refused(
        kbserver(data, "person", "create", "cy", "--email", "cy@example.org", "--role", "reviewer"),
        "invalid_request",
    )
    _refused(
        kbserver(
            data, "person", "create", "cy", "--email", "cy@example.org", "--role", "reviewer", "--kb", "nope"
        ),
        "not_found",
    )
    _refused(
        kbserver(
            data, "person", "create", "cy", "--email", "cy@example.org", "--role", "viewer", "--kb", "team"
        ),
        "invalid_request",
    )
    _refused(
        kbserver(data, "person", "create", "cy", "--email", "not-an-email", "--role", "viewer"),
        "invalid_request",
    )
    _refused(
        kbserver(data, "person", "create", "Cy!", "--email", "cy@example.org", "--role", "viewer"),
        "invalid_request",
    )
    _refused(
        kbserver(data, "person", "create", "cy", "--email", "cy@example.org", "--role", "boss"),
        "invalid_request",
    )
    _refused(
        kbserver(
            data,
            "person",
            "create",
            "cy",
            "--email",
            "cy@example.org",
            "--role",
            "viewer",
            "--password-stdin",
            stdin="short\n",
        ),
        "invalid_request",
    )
    _refused(
        kbserver(
            data,
            "person",
            "create",
            "cy",
            "--email",
            "cy@example.org",
            "--role",
            "viewer",
            "--password-stdin",
            stdin="",
        ),
        "invalid_request",
    )
    _refused(kbserver(data, "person", "token", "nobody"), "not_found")
    _refused(kbserver(data, "person", "delete", "nobody"), "not_found")
    assert [p["name"] for p in json.loads(_ok(kbserver(data, "person", "list", "--json")))["people"]] == [
        "ann",
        "bob",
    ]
    _ok(kbserver(data, "person", "delete", "ann"))
    assert [p["name"] for p in json.loads(_ok(kbserver(data, "person", "list", "--json")))["people"]] == [
        "bob"
    ]
