"""People fixtures: two KBs (`mine`, reviewed by the reviewer, and `other`), and one person of each
role with a personal token."""

from __future__ import annotations

import pytest

from kbserver.services import Services, kbs, people
from kbserver.services.auth import ADMIN

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
