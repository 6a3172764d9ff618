"""Idempotency-Key of writes: a repeat with the same key and body answers the first result.

Keys are scoped by caller and KB and kept 24 hours in the control store. A key is reserved before
the write runs, so two concurrent repeats never both write; a write that fails changes nothing,
so it frees its key and may be retried under it. A reservation is a lease with a fencing token:
taken over from a write that seems dead, the old write can no longer commit.

A write that committed and then died before its result was recorded is found again: its commit (or
its proposal's) carries `Kb-Idempotency`, a hash of caller, key and body. A repeat that meets a
reservation without a result looks for it (on main since the reservation, and among the caller's
proposals since then) and answers the version found. It takes a reservation over once that is
older than a live write can hold it (`abandon_seconds`: the writer's own bound, about a minute),
and only under the KB's writer lock: first the new token, then one more look for the old write's
outcome. The old write, if it lives on, cannot commit any more (the writer checks its token under
that lock, before main moves) nor record a proposal (the control store checks the token in the
transaction that adds it): it gets `busy`, never an acknowledgment of a write that a repeat made
again. A takeover too early is therefore still safe; it only fails a slow write with `busy`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kbserver.changes import sha256_hex
from kbserver.control import IdempotencyRow
from kbserver.core.errors import Busy, InvalidRequest
from kbserver.core.model import Caller, FileResult, WriteRequest, WriteResult
from kbserver.services.context import Services
from kbserver.services.models import ProposalAccepted, ProposalPending, WriteOutcome
from kbserver.store import Fence

__all__ = [
    "KEY_PATTERN",
    "KEY_TTL_SECONDS",
    "KeyFence",
    "abandon_seconds",
    "header_key",
    "once",
    "taken_over",
]

KEY_TTL_SECONDS = 24 * 3600.0
KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"  # visible ASCII, as HTTP header values travel safely
_KEY = re.compile(KEY_PATTERN)
# The time a write's control store calls may take besides the writer's bound (a lock wait, a queue
# wait, then its batch's retries: twice `write_wait_seconds`).
_SLACK_SECONDS = 5.0
# A repeat that meets a reservation without a result looks for its commit at most this often.
_LOOK_SECONDS = 1.0
# How far the clocks of two nodes may differ: the look back on main reaches this far before the
# reservation (a commit's time comes from the clock of the node that committed it).
CLOCK_SKEW_SECONDS = 60.0
MARK_TRAILER = "Kb-Idempotency"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyFence(Fence):
    """The fence of a key's reservation, naming the key: a proposal is recorded only while the
    reservation is current (`ControlStore.add_proposal` checks it in the same transaction)."""

    actor: str = ""
    key: str = ""


def abandon_seconds(services: Services) -> float:
    """How old a reservation without a result must be to be taken over: a live write holding it has
    committed, failed (freeing it) or given up with `busy` by then (the writer's own bound)."""
    return 2 * services.options.write_wait_seconds + _SLACK_SECONDS


def _wait_seconds(services: Services) -> float:
    """How long a repeat waits for the write holding its key: past its abandonment, so a repeat
    sent right after a crash is answered, not told `busy`."""
    return abandon_seconds(services) + _SLACK_SECONDS


def taken_over() -> Busy:
    return Busy(
        "this write waited so long that a repeat with its Idempotency-Key took over; "
        "send the request again to read the result",
        field="Idempotency-Key",
    )


def header_key(values: Sequence[str]) -> str | None:
    """The key of a request's `Idempotency-Key` header values: None without one.

    Raises InvalidRequest for two or more: which one the write was keyed by would be a guess.
    """
    if len(values) > 1:
        raise InvalidRequest(f"send one Idempotency-Key header, not {len(values)}", field="Idempotency-Key")
    return values[0] if values else None


def _body_sha256(req: WriteRequest) -> str:
    """What a repeat must match: the write itself, parsed and normalised (paths NFC, defaults filled)
    as every edge parses it, without the run it was made in (HTTP names none unless asked; an MCP
    session names its own), so one write sent over HTTP and over MCP compares equal."""
    write = req.model_dump(mode="json", exclude={"run_id"})
    canonical = json.dumps(write, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _mark(caller: Caller, key: str, body: str) -> str:
    """What the commit of a keyed write records: names caller, key and body, reveals none of them."""
    return hashlib.sha256(f"{caller.actor}\n{key}\n{body}".encode()).hexdigest()[:32]


def _committed(
    services: Services, caller: Caller, slug: str, mark: str, req: WriteRequest, since: float
) -> WriteOutcome | None:
    """The outcome of the write marked `mark` if it landed after `since`: its version on main (the
    answer rebuilt from the commit and the request) or its pending proposal; None when it did not."""
    repo = services.repos.repo(slug)
    head = repo.head()
    oldest = since - CLOCK_SKEW_SECONDS
    if head is not None:
        for version in repo.first_parents(head):
            info = repo.commit_info(version)
            if info.seconds < oldest:
                break
            if info.trailers.get(MARK_TRAILER) == mark:
                view = repo.view(version)
                files = []
                for f in req.files:
                    data = None if f.mode == "delete" else view.read(f.path)
                    files.append(
                        FileResult(
                            path=f.path, mode=f.mode, sha256=sha256_hex(data) if data is not None else None
                        )
                    )
                return WriteResult(version=version, parent=info.parent, files=files)
    for p in services.control.proposals(slug, None):
        if p.created < oldest:
            break  # newest first
        if (
            caller.made(p.agent, p.agent_id)
            and repo.commit_info(p.ref_commit).trailers.get(MARK_TRAILER) == mark
        ):
            return ProposalAccepted(proposal=ProposalPending(id=p.id, status="pending"))
    return None


def _recovered(
    services: Services,
    caller: Caller,
    slug: str,
    key: str,
    mark: str,
    req: WriteRequest,
    held: IdempotencyRow,
) -> WriteOutcome | None:
    """The outcome of the write holding `held` when it landed (and is now recorded under the key)."""
    found = _committed(services, caller, slug, mark, req, held.created)
    if found is None:
        return None
    status = 200 if isinstance(found, WriteResult) else 202
    if services.control.finish_key(
        caller.actor, slug, key, status, found.model_dump(mode="json"), held.fence
    ):
        log.warning(
            "KB %s: Idempotency-Key %r: found its version on main before its write recorded it", slug, key
        )
    return found


def once(
    services: Services,
    caller: Caller,
    slug: str,
    key: str,
    req: WriteRequest,
    write: Callable[[Fence], WriteOutcome],
) -> WriteOutcome:
    """`write(fence)` unless `key` answered this caller's same write to `slug` within 24 h.

    `write` must hand `fence` (the key's reservation) to the writer, which refuses to commit once
    another request took the reservation over.

    Raises InvalidRequest for a malformed key or a key used with another body, Busy when the
    first write with the key is still running after a minute, and whatever `write` raises.
    """
    if not isinstance(key, str) or not _KEY.match(key):
        raise InvalidRequest(
            "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID is a good key)",
            field="Idempotency-Key",
        )
    body = _body_sha256(req)
    mark = _mark(caller, key, body)
    abandon = abandon_seconds(services)
    deadline = time.monotonic() + _wait_seconds(services)
    looked = -math.inf
    while True:
        # Never taken over here: only under the writer lock below, before a last look at main.
        held = services.control.reserve_key(
            caller.actor, slug, key, body, time.time(), KEY_TTL_SECONDS, math.inf
        )
        if isinstance(held, int):
            token = held
            break
        if held.body_sha256 != body:
            raise InvalidRequest(
                "this Idempotency-Key was used for another write in the last 24 hours; "
                "send a new key for a new write",
                field="Idempotency-Key",
            )
        if held.result is not None:
            if held.status == 200:
                return WriteResult.model_validate(held.result)
            return ProposalAccepted.model_validate(held.result)
        if time.monotonic() - looked >= _LOOK_SECONDS:
            looked = time.monotonic()
            found = _recovered(services, caller, slug, key, mark, req, held)
            if found is not None:
                return found
            if time.time() - held.created >= abandon:
                taken = _take_over(services, caller, slug, key, body, mark, req, abandon)
                if isinstance(taken, int):
                    token = taken
                    break
                if taken is not None:
                    return taken
        if time.monotonic() > deadline:
            raise Busy("the first write with this Idempotency-Key is still running; retry in a moment")
        time.sleep(0.05)

    def check() -> None:
        if not services.control.key_fence_current(caller.actor, slug, key, token):
            raise taken_over()

    try:
        result = write(KeyFence(token, check, {MARK_TRAILER: mark}, caller.actor, key))
    except BaseException:
        services.control.release_key(caller.actor, slug, key, token)
        raise
    status, data = 200 if isinstance(result, WriteResult) else 202, result.model_dump(mode="json")
    try:
        if not services.control.finish_key(caller.actor, slug, key, status, data, token):
            log.info(
                "KB %s: Idempotency-Key %r was recorded by a repeat or taken over after its commit", slug, key
            )
    except Exception:  # the write is committed: its caller hears of it, whatever the key's fate
        log.exception("KB %s: could not record the result of Idempotency-Key %r", slug, key)
    return result


def _take_over(
    services: Services,
    caller: Caller,
    slug: str,
    key: str,
    body: str,
    mark: str,
    req: WriteRequest,
    abandon: float,
) -> int | WriteOutcome | None:
    """Take over the key from a write that seems dead: a new token, or the dead write's outcome when
    it landed after all; None when the key is answered or held anew meanwhile (the loop goes on).

    Under the KB's writer lock, so the old write (if it lives on) cannot move main meanwhile. The
    new token comes first and the last look after it: from the takeover on, the old write can
    neither commit (the writer checks its token) nor record a proposal (`add_proposal` checks it),
    so what the look does not find never lands.
    """
    _, writer = services.repos.get(slug)
    with writer.locked():
        held = services.control.reserve_key(
            caller.actor, slug, key, body, time.time(), KEY_TTL_SECONDS, math.inf
        )
        if isinstance(held, int):
            return held  # released meanwhile: a fresh reservation
        if held.result is not None or held.body_sha256 != body:
            return None  # the loop answers it
        taken = services.control.reserve_key(
            caller.actor, slug, key, body, time.time(), KEY_TTL_SECONDS, abandon
        )
        if not isinstance(taken, int):
            return None
        found = _committed(services, caller, slug, mark, req, held.created)
    if found is None:
        return taken
    status = 200 if isinstance(found, WriteResult) else 202
    services.control.finish_key(caller.actor, slug, key, status, found.model_dump(mode="json"), taken)
    log.warning("KB %s: Idempotency-Key %r: took it over and found its write landed after all", slug, key)
    return found
