"""Logs: one JSON object per stderr line for every logger, and no traceback for a client's mistake."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from kbserver.logs import JsonFormatter
from tests.helpers import ADMIN_TOKEN


def test_a_record_is_one_json_line_with_its_fields_and_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord("x.y", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    record.fields = {"route": "/a", "message": "cannot mask the message"}
    line = JsonFormatter().format(record)
    assert "\n" not in line
    out = json.loads(line)
    assert out["logger"] == "x.y" and out["level"] == "ERROR" and out["message"] == "failed here"
    assert out["route"] == "/a" and "RuntimeError: boom" in out["exception"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", out["time"])


def _mcp(client: httpx.Client, url: str, n: int, method: str, params: dict[str, object]) -> str:
    r = client.post(url, json={"jsonrpc": "2.0", "id": n, "method": method, "params": params})
    assert r.status_code == 200, r.text
    return r.text


@pytest.mark.slow
def test_server_stderr_is_json_only_and_client_mistakes_leave_no_traceback(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(tmp_path / "d"), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**env, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, "KBSERVER_SAMPLE": "false"},
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            match = re.search(r"on (http://\S+)", first)
            assert match, first
            base = match.group(1)
            headers = {
                "Authorization": f"Bearer {ADMIN_TOKEN}",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2025-11-25",
            }
            with httpx.Client(headers=headers, timeout=60) as c:
                assert c.get(base + "/api/v1/kbs").status_code == 200
                assert c.get(base + "/api/v1/kbs/nope").status_code == 404
                init = c.post(
                    base + "/mcp",
                    json={
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"},
                        },
                    },
                )
                assert init.status_code == 200, init.text
                c.headers["mcp-session-id"] = init.headers["mcp-session-id"]
                c.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                answer = _mcp(c, base + "/mcp", 1, "prompts/get", {"name": "nope"})
                assert '"code":-32602' in answer and "not_found" in answer  # the client's mistake, said so
                _mcp(c, base + "/mcp", 2, "tools/call", {"name": "nope", "arguments": {}})
                _mcp(c, base + "/mcp", 3, "resources/read", {"uri": "kb://nope/x.md"})
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    lines = stderr.read_text().splitlines()
    assert lines
    parsed = []
    for line in lines:
        out = json.loads(line)  # every line, whichever logger wrote it
        assert {"time", "level", "logger", "message"} <= set(out), line
        assert "exception" not in out, line
        parsed.append(out)
    assert "Traceback" not in stderr.read_text()
    loggers = {p["logger"] for p in parsed}
    assert "kbserver.access" in loggers
    assert any(name.startswith("mcp.") for name in loggers), loggers  # the SDK's lines are JSON too
    access = [p for p in parsed if p["logger"] == "kbserver.access"]
    assert {"route": "/api/v1/kbs/{slug}", "status": 404, "error": "not_found"}.items() <= access[1].items()
