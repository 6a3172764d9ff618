"""Runs: a snapshot of the KBs an agent can read, pinned when the run starts; reads through it."""

from __future__ import annotations

import secrets
import time

from kbserver.control import RunRow
from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import Caller, utc_iso
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services
from kbserver.services.models import FileContent, FileList, RunEnded, RunStarted
from kbserver.services.reading.files import list_at, read_at
from kbserver.services.reading.privacy import check_read

__all__ = ["MAX_LABEL", "end", "get", "list_files", "mounted", "owned_run", "read_file", "start"]

MAX_LABEL = 200


def start(
    services: Services,
    caller: Caller,
    kbs: list[str] | None = None,
    interactive: bool = False,
    label: str | None = None,
) -> RunStarted:
    """Pin the head of each KB the agent can read (or of `kbs`); `label` names the task for the
    reviewer's inbox. Raises Forbidden, NotFound, InvalidRequest."""
    if caller.is_human:
        raise Forbidden("runs belong to agents; call POST /runs with an agent's token")
    if kbs is not None:
        if len(set(kbs)) != len(kbs):
            raise InvalidRequest("kbs lists a KB twice")
        for slug in kbs:
            require_read(services, caller, slug)
        slugs = kbs
    else:
        slugs = [s for s in caller.links if services.repos.exists(s)]
    mounts = {slug: services.repos.repo(slug).head() or "" for slug in sorted(slugs)}
    now = time.time()
    run = RunRow(
        id="run_" + secrets.token_hex(12),
        agent=caller.name,
        created=now,
        expires=now + services.options.run_ttl_seconds,
        interactive=interactive,
        mounts=mounts,
        agent_id=caller.agent_id,
        label=_label(label),
    )
    services.control.add_run(run)
    return _shown(run)


def _label(label: str | None) -> str | None:
    """A label as stored: one line of at most MAX_LABEL characters, None when blank."""
    if label is None or not label.strip():
        return None
    if len(label) > MAX_LABEL or any(ch < " " or ch == "\x7f" for ch in label):
        raise InvalidRequest(f"label: one line of at most {MAX_LABEL} characters, without control characters")
    return label.strip()


def _shown(run: RunRow) -> RunStarted:
    return RunStarted(
        id=run.id, mounts=run.mounts, interactive=run.interactive, expires_at=utc_iso(run.expires)
    )


def owned_run(services: Services, caller: Caller, run_id: str) -> RunRow:
    """The caller's live run. Raises NotFound for unknown, ended, expired or someone else's runs,
    with words that say which of the caller's own runs ended and which expired."""
    run = services.control.run(run_id) if isinstance(run_id, str) else None
    if run is None or not caller.made(run.agent, run.agent_id):
        raise NotFound(f"run {run_id} does not exist; start a new run", run_id=run_id)
    if run.ended is not None:
        raise NotFound(
            f"run {run_id} was ended at {utc_iso(run.ended)}; start a new run", run_id=run_id, state="ended"
        )
    if run.expires < time.time():
        raise NotFound(
            f"run {run_id} expired at {utc_iso(run.expires)}; start a new run", run_id=run_id, state="expired"
        )
    return run


def get(services: Services, caller: Caller, run_id: str) -> RunStarted:
    """The caller's live run: what it mounted and until when. Raises NotFound (see owned_run)."""
    return _shown(owned_run(services, caller, run_id))


def end(services: Services, caller: Caller, run_id: str) -> RunEnded:
    """End the caller's run now: reads and writes naming it are `not_found` from then on. Ending an
    ended run again answers its first end (a retry is harmless). Raises NotFound (unknown, someone
    else's, or expired)."""
    run = services.control.run(run_id) if isinstance(run_id, str) else None
    if run is None or not caller.made(run.agent, run.agent_id) or run.ended is None:
        owned_run(services, caller, run_id)  # the reason it cannot be ended, or a live run
    ended = services.control.end_run(run_id, time.time())
    if ended is None or ended.ended is None:  # gone meanwhile (the cleanup of old runs)
        raise NotFound(f"run {run_id} does not exist; start a new run", run_id=run_id)
    return RunEnded(id=ended.id, ended_at=utc_iso(ended.ended))


def mounted(services: Services, caller: Caller, run_id: str, slug: str) -> str:
    """The version of `slug` the caller's run pinned. Raises NotFound."""
    run = owned_run(services, caller, run_id)
    version = run.mounts.get(slug)
    if version is None:
        raise NotFound(f"run {run_id} has no KB {slug} mounted", slug=slug)
    require_read(services, caller, slug)
    return version


def list_files(services: Services, caller: Caller, run_id: str, slug: str, prefix: str = "") -> FileList:
    """The files of `slug` at the run's pinned version. Raises NotFound."""
    return list_at(services, slug, mounted(services, caller, run_id, slug), prefix, caller)


def read_file(services: Services, caller: Caller, run_id: str, slug: str, path: str) -> FileContent:
    """One file of `slug` at the run's pinned version. Raises NotFound, InvalidRequest."""
    found = read_at(services, slug, path, mounted(services, caller, run_id, slug))
    check_read(caller, found.path, found.content)
    return found
