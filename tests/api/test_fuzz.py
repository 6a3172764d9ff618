"""Fuzz: no input produces a 5xx or a traceback, and every error has the contract's shape."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import state

CODES = {
    "invalid_request",
    "unauthorized",
    "forbidden",
    "not_found",
    "already_exists",
    "stale",
    "no_match",
    "ambiguous_match",
    "too_large",
    "secret_detected",
    "approval_unavailable",
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
file_change = st.fixed_dictionaries(
    {
        "path": st.one_of(st.text(max_size=30), st.sampled_from(["README.md", "a.md", "x/../y", ".git/x"])),
        "mode": st.sampled_from(["create", "append", "edit", "overwrite", "delete", "bogus"]),
    },
    optional={
        "content": st.text(max_size=50),
        "old_string": st.text(max_size=5),
        "new_string": st.text(max_size=5),
        "expected_sha256": st.one_of(st.text(max_size=64), st.just("0" * 64)),
        "extra": json_values,
    },
)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"files": st.lists(file_change, max_size=4)}, optional={"message": json_values, "run_id": json_values}
    ),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def check(r: Any) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        body = r.json()
        assert set(body) == {"error"} and body["error"]["code"] in CODES, body
        assert isinstance(body["error"]["message"], str) and "Traceback" not in r.text


@FUZZ
@given(body=bodies)
def test_write_bodies(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], body: Any
) -> None:
    before = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/write", content=json.dumps(body), headers=agent)
    check(r)
    if r.status_code != 200:
        assert state(services, kb) == before


@FUZZ
@given(raw=st.binary(max_size=200))
def test_raw_bytes(client: TestClient, kb: str, agent: dict[str, str], raw: bytes) -> None:
    for url in (f"/api/v1/kbs/{kb}/write", f"/api/v1/kbs/{kb}/revert", "/api/v1/runs", "/api/v1/kbs"):
        check(client.post(url, content=raw, headers=agent))


@FUZZ
@given(
    segment=st.text(max_size=40),
    params=st.dictionaries(
        st.sampled_from(
            [
                "q",
                "limit",
                "offset",
                "prefix",
                "version",
                "path",
                "cursor",
                "wait_for",
                "timeout",
                "status",
                "x",
            ]
        ),
        st.text(max_size=20),
        max_size=4,
    ),
)
def test_paths_and_queries(
    client: TestClient, kb: str, agent: dict[str, str], segment: str, params: dict[str, str]
) -> None:
    segment = quote(segment, safe="/")
    for url in (
        f"/api/v1/kbs/{kb}/files/{segment}",
        f"/api/v1/kbs/{kb}/versions/{segment}",
        f"/api/v1/kbs/{segment}",
        f"/api/v1/kbs/{kb}/search",
        f"/api/v1/kbs/{kb}/versions",
        f"/api/v1/kbs/{kb}/files",
        f"/api/v1/kbs/{kb}/proposals",
        f"/api/v1/runs/{segment}/kbs/{kb}/files",
    ):
        if "timeout" in params:
            params = {**params, "timeout": "0"}
        check(client.get(url, params=params, headers=agent))
