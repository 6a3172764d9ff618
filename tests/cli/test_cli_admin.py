"""CLI administration: list KBs and agents, rotate and delete tokens, unlink, decide proposals."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbserver.cli.parser import build
from kbserver.core.errors import Unauthorized
from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import authenticate, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.cli.test_cli import kbserver
from tests.cli.test_cli_errors import assert_one_error_line
from tests.helpers import ADMIN_TOKEN, git_fsck, state


@contextlib.contextmanager
def opened(data: Path) -> Iterator[Services]:
    services = open_services(data)
    try:
        yield services
    finally:
        services.close()


def _token(data: Path, name: str) -> str:
    return kbserver(data, "agent", "create", name).stdout.strip().splitlines()[-1]


def test_kb_list_and_agent_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kbserver(data, "kb", "create", "team", "--description", "Team memory")
    kbserver(data, "kb", "create", "ops")
    _token(data, "bob")
    kbserver(data, "link", "bob", "team", "--permission", "read_write")
    listed = kbserver(data, "kb", "list").stdout.splitlines()
    assert [line.split("\t")[0] for line in listed] == ["ops", "team"]
    assert listed[1].endswith("\tTeam memory")
    as_json = json.loads(kbserver(data, "kb", "list", "--json").stdout)
    assert [(k["slug"], len(k["head"])) for k in as_json] == [("ops", 40), ("team", 40)]
    agents = kbserver(data, "agent", "list").stdout.splitlines()
    assert agents == ["bob\ttools=context\tlinks=team:read_write"]
    agents_json = json.loads(kbserver(data, "agent", "list", "--json").stdout)
    assert agents_json["agents"][0]["links"] == [{"kb": "team", "permission": "read_write"}]


def test_agent_token_rotates_and_delete_revokes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kbserver(data, "kb", "create", "team")
    old = _token(data, "bob")
    out = kbserver(data, "agent", "token", "bob").stdout.strip().splitlines()
    new = out[-1]
    assert new.startswith("kbs_") and " " not in new and new != old
    with opened(data) as services:
        assert authenticate(services, new, ADMIN_TOKEN).name == "bob"
        with pytest.raises(Unauthorized):
            authenticate(services, old, ADMIN_TOKEN)
    kbserver(data, "agent", "delete", "bob")
    with opened(data) as services:
        with pytest.raises(Unauthorized):
            authenticate(services, new, ADMIN_TOKEN)
    for args in (["agent", "token", "bob"], ["agent", "delete", "bob"]):
        assert_one_error_line(kbserver(data, *args, check=False), "not_found", "bob")


def test_unlink(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kbserver(data, "kb", "create", "team")
    _token(data, "bob")
    kbserver(data, "link", "bob", "team", "--permission", "read")
    kbserver(data, "unlink", "bob", "team")
    assert kbserver(data, "agent", "list").stdout.splitlines() == ["bob\ttools=context\tlinks=-"]
    assert_one_error_line(kbserver(data, "unlink", "bob", "team", check=False), "not_found", "team")


def _propose(data: Path, path: str) -> str:
    with opened(data) as services:
        caller = caller_for(services, "ask")
        run = runs.start(services, caller, interactive=True)
        req = WriteRequest(files=[Create(path=path, mode="create", content="proposed\n")], run_id=run.id)
        out = writes.submit(services, caller, "team", req)
        assert isinstance(out, ProposalAccepted)
        return out.proposal.id


def test_proposals_approve_and_reject(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kbserver(data, "kb", "create", "team")
    _token(data, "ask")
    kbserver(data, "link", "ask", "team", "--permission", "read_write_ask")
    first, second = _propose(data, "a.md"), _propose(data, "b.md")
    rows = kbserver(data, "proposals", "team", "--status", "pending").stdout.splitlines()
    assert sorted(r.split("\t")[0] for r in rows) == sorted([first, second])
    assert all("\tpending\task\t" in r for r in rows) and any(r.endswith("create a.md") for r in rows)

    with opened(data) as services:
        before = state(services, "team")
    out = kbserver(data, "approve", "team", first).stdout
    with opened(data) as services:
        head, files = state(services, "team")
    assert head is not None and head in out and "a.md" in files and head != before[0]

    kbserver(data, "reject", "team", second, "--reason", "not needed")
    decided = json.loads(kbserver(data, "proposals", "team", "--json").stdout)["proposals"]
    by_id = {p["id"]: p for p in decided}
    assert by_id[first]["status"] == "approved" and by_id[first]["version"] == head
    assert by_id[second]["status"] == "rejected" and by_id[second]["reason"] == "not needed"

    # deciding again or an unknown id is one error line, and changes nothing
    for args in (["approve", "team", first], ["reject", "team", second], ["approve", "team", "prop_nope"]):
        proc = kbserver(data, *args, check=False)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
        with opened(data) as services:
            assert state(services, "team") == (head, files)
    git_fsck(data / "kbs" / "team.git")


def _actions(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _actions(child, f"{prog} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((prog, action))
    return found


def test_every_option_and_argument_has_help() -> None:
    actions = _actions(build(), "kbserver")
    assert len(actions) > 40
    missing = [f"{prog} {a.dest}" for prog, a in actions if not a.help]
    assert not missing


def test_new_commands_are_listed() -> None:
    actions = _actions(build(), "kbserver")
    progs = {prog for prog, _ in actions}
    for prog in (
        "kbserver kb list",
        "kbserver agent list",
        "kbserver agent token",
        "kbserver agent delete",
        "kbserver unlink",
        "kbserver proposals",
        "kbserver approve",
        "kbserver reject",
    ):
        assert prog in progs
