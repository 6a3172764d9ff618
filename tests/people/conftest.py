"""People fixtures: two KBs (`mine`, reviewed by the reviewer, and `other`), and one person of each
role with a personal token."""

from __future__ import annotations

import itertools

import pytest

from kbserver.core.model import WriteRequest
from kbserver.services import Services, kbs
from kbserver.services.access import people
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import writes
from tests.helpers import make_agent, state
from tests.web.live import api, browser, server, tab  # noqa: F401  (browser fixtures)

PASSWORD = "correct horse battery"
ROLES = ("owner", "reviewer", "viewer")


@pytest.fixture
def two_kbs(services: Services) -> tuple[str, str]:
    kbs.create(services, ADMIN, "mine", "The reviewer's KB")
    kbs.create(services, ADMIN, "other", "Another team's KB")
    return "mine", "other"


@pytest.fixture
def persons(services: Services, two_kbs: tuple[str, str]) -> dict[str, dict[str, str]]:
    """role -> the Authorization header of a person of that role (`owen`, `rita` of `mine`, `vic`)."""
    names = {"owner": "owen", "reviewer": "rita", "viewer": "vic"}
    headers = {}
    for role, name in names.items():
        kb = ["mine"] if role == "reviewer" else None
        people.create(services, ADMIN, name, f"{name}@example.org", role, kb, PASSWORD)
        _, token = people.rotate(services, ADMIN, name)
        headers[role] = {"Authorization": f"Bearer {token}"}
    return headers


count = itertools.count()


def write(services: Services, slug: str) -> str:
    """A new version of `slug` made by the admin: a file of its own."""
    n = next(count)
    req = WriteRequest.model_validate(
        {"files": [{"path": f"f{n}.md", "mode": "create", "content": f"{n}\n"}]}
    )
    out = writes.submit(services, ADMIN, slug, req)
    return out.version  # type: ignore[union-attr]


def proposal(services: Services, slug: str) -> str:
    """A pending proposal of agent `asker` to `slug`."""
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    n = next(count)
    req = WriteRequest.model_validate(
        {"run_id": run.id, "files": [{"path": f"p{n}.md", "mode": "create", "content": "idea\n"}]}
    )
    out = writes.submit(services, asker, slug, req)
    assert isinstance(out, ProposalAccepted)
    return out.proposal.id


def run_of(services: Services, slug: str) -> str:
    return runs.start(services, caller_for(services, "asker"), ["mine"]).id


def new_agent(services: Services, linked: str | None = None) -> str:
    name = f"a{next(count)}"
    make_agent(services, name, {linked: "read"} if linked else {})
    return name


def snapshot(services: Services) -> tuple[object, ...]:
    control = services.control
    agents = [(a.name, sorted(a.links.items())) for a in control.agents()]
    pending = [sorted((p.id, p.status) for p in control.proposals(s, None)) for s in ("mine", "other")]
    marks = [control.reviewed(s) for s in ("mine", "other")]
    return state(services, "mine"), state(services, "other"), agents, pending, marks, services.repos.slugs()


def allowed(rule: str, role: str, slug: str) -> bool:
    """Whether `role` may call a route of `rule` on KB `slug` (the rules of CONTRACT.md section 8)."""
    if rule == "read":
        return True
    if rule == "decide":
        return role == "owner" or (role == "reviewer" and slug == "mine")
    if rule == "owner":
        return role == "owner"
    return False  # runs belong to agents
