"""Web fixtures: a TestClient logged in to the admin."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.web.live import admin_tab, api, browser, server, tab  # noqa: F401  (browser fixtures)
from tests.web.session import log_in


@pytest.fixture
def web(client: TestClient) -> tuple[TestClient, str]:
    """`client` logged in as the admin, and its CSRF token."""
    return client, log_in(client)
