"""KB descriptions follow the rules of commit messages (no NUL, ESC, CR, bidi overrides), on every edge."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.cli.test_cli_errors import assert_one_error_line, run

BAD = ["a\x00b", "red \x1b[31mtext", "one\rtwo", "abc\u202edcba", "zero\u200bwidth", "x" * 5000, "\x7f"]


@pytest.mark.parametrize("description", BAD)
def test_a_bad_description_is_refused_over_http(
    client: TestClient, services: Services, admin: dict[str, str], description: str
) -> None:
    answer = client.post("/api/v1/kbs", json={"slug": "team", "description": description}, headers=admin)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and "description" in error["message"], error
    assert not services.repos.exists("team")
    assert client.get("/api/v1/kbs", headers=admin).json() == []


@pytest.mark.parametrize("description", BAD[1:4])  # an argv cannot hold NUL
def test_a_bad_description_is_refused_by_the_cli(tmp_path: Path, description: str) -> None:
    data = tmp_path / "data"
    assert run("kb", "create", "first", "--data", str(data)).returncode == 0
    proc = run("kb", "create", "team", "--description", description, "--data", str(data))
    assert_one_error_line(proc, "invalid_request", "description")
    assert not (data / "kbs" / "team.git").exists()


def test_plain_descriptions_still_work(client: TestClient, services: Services, admin: dict[str, str]) -> None:
    description = "Shared memory of the planning agents\n\tmulti-line, 中文 and émoji 🙂 are fine"
    answer = client.post("/api/v1/kbs", json={"slug": "team", "description": description}, headers=admin)
    assert answer.status_code == 201, answer.text
    readme = client.get("/api/v1/kbs/team/files/README.md", headers=admin).json()["content"]
    assert description in readme
