"""The web admin shows each signed-in person only the actions their role may take (as the services
decide them): a viewer, and a reviewer on a KB not theirs, see no Edit, Delete, Revert, Undo, Mark
reviewed, Approve or Reject, and only owners see the Agents link; the refused POSTs stay 403
(test_web_roles.py)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from kbserver.core.model import WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.writing import writes
from tests.helpers import make_agent
from tests.people.conftest import ROLES, allowed, count, proposal
from tests.people.test_web_roles import EMAILS, sign_in


def _agent_write(services: Services, slug: str) -> tuple[str, str]:
    """A new version of `slug` by agent `writer` (an agent write to review): (version, path)."""
    path = f"w{next(count)}.md"
    req = WriteRequest.model_validate({"files": [{"path": path, "mode": "create", "content": "note\n"}]})
    out = writes.submit(services, caller_for(services, "writer"), slug, req)
    return out.version, path  # type: ignore[union-attr]


def _actions(client: TestClient, services: Services, slug: str) -> dict[str, bool]:
    """Which action controls the pages of `slug` show to the person `client` signs in."""
    old, path = _agent_write(services, slug)
    _agent_write(services, slug)  # so `old` is not the head: its page offers Revert
    proposal(services, slug)
    base = f"/admin/kbs/{slug}"
    version = client.get(f"{base}/versions/{old}").text
    file = client.get(f"{base}/files/{path}").text
    files = client.get(base).text
    review = client.get(f"{base}/review").text
    proposals = client.get(f"{base}/proposals").text
    return {
        "revert": f'action="{base}/versions/{old}/revert"' in version,
        "edit": f'href="{base}/edit/{path}"' in file,
        "delete": f'href="{base}/delete/{path}"' in file,
        "new file": f'href="{base}/new' in file or f'href="{base}/new' in files,
        "mark reviewed": f'method="post" action="{base}/review"' in review,
        "mark these reviewed": "Mark these reviewed</button>" in review,
        "undo": '/undo" class="inline-form"' in review,
        "approve": '/approve" class="inline-form"' in proposals,
        "reject": '/reject" class="stack"' in proposals,
    }


@pytest.mark.parametrize("role", ROLES)
def test_pages_show_only_the_actions_the_role_may_take(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]], role: str
) -> None:
    make_agent(services, "writer", {"mine": "read_write", "other": "read_write"})
    make_agent(services, "asker", {"mine": "read_write_ask", "other": "read_write_ask"})
    sign_in(client, EMAILS[role])
    for slug in ("mine", "other"):
        may = allowed("decide", role, slug)
        shown = _actions(client, services, slug)
        assert shown == dict.fromkeys(shown, may), f"{role} on {slug}: {shown}"
    home = client.get("/admin/").text
    assert ('href="/admin/agents"' in home) == allowed("owner", role, "mine"), role


def test_the_admin_token_sees_every_action(client: TestClient, services: Services, two_kbs: object) -> None:
    from tests.web.session import log_in

    make_agent(services, "writer", {"other": "read_write"})
    make_agent(services, "asker", {"other": "read_write_ask"})
    log_in(client)
    shown = _actions(client, services, "other")
    assert all(shown.values()), shown
    assert 'href="/admin/agents"' in client.get("/admin/").text


@pytest.mark.parametrize("role", ROLES)
def test_undo_asks_first_only_whom_undo_lets_through(
    client: TestClient, services: Services, persons: dict[str, dict[str, str]], role: str
) -> None:
    make_agent(services, "writer", {"mine": "read_write", "other": "read_write"})
    csrf = sign_in(client, EMAILS[role])
    for slug in ("mine", "other"):
        version, _ = _agent_write(services, slug)
        r = client.post(f"/admin/kbs/{slug}/versions/{version}/undo", data={"csrf": csrf, "confirm": "ask"})
        assert r.status_code == (200 if allowed("decide", role, slug) else 403), f"{role} {slug}"
        assert ('/undo" class="inline-form"' in r.text) == allowed("decide", role, slug)
