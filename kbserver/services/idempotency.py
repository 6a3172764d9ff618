"""Idempotency-Key of writes: a repeat with the same key and body answers the first result.

Keys are scoped by caller and KB and kept 24 hours in the control store. A key is reserved before
the write runs, so two concurrent repeats never both write; a write that fails changes nothing,
so it frees its key and may be retried under it. A reservation is a lease with a fencing token:
taken over from a write that seems dead, the old write can no longer commit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence

from kbserver.core.errors import Busy, InvalidRequest
from kbserver.core.model import Caller, WriteRequest, WriteResult
from kbserver.services.context import Services
from kbserver.services.models import ProposalAccepted, WriteOutcome
from kbserver.store import Fence

__all__ = ["KEY_PATTERN", "KEY_TTL_SECONDS", "header_key", "once"]

KEY_TTL_SECONDS = 24 * 3600.0
KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"  # visible ASCII, as HTTP header values travel safely
_KEY = re.compile(KEY_PATTERN)
_WAIT_SECONDS = 70.0  # a write holding the key ends within the writer's own bound (~60 s)
# A reservation without a result this old belongs to a process that died mid-write: taken over.
ABANDON_SECONDS = 600.0

log = logging.getLogger(__name__)


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
    deadline = time.monotonic() + _WAIT_SECONDS
    while True:
        held = services.control.reserve_key(
            caller.actor, slug, key, body, time.time(), KEY_TTL_SECONDS, ABANDON_SECONDS
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
        if time.monotonic() > deadline:
            raise Busy("the first write with this Idempotency-Key is still running; retry in a moment")
        time.sleep(0.05)

    def check() -> None:
        if not services.control.key_fence_current(caller.actor, slug, key, token):
            raise Busy(
                "this write waited so long that a repeat with its Idempotency-Key took over; "
                "send the request again to read the result",
                field="Idempotency-Key",
            )

    try:
        result = write(Fence(token, check))
    except BaseException:
        services.control.release_key(caller.actor, slug, key, token)
        raise
    status, data = 200 if isinstance(result, WriteResult) else 202, result.model_dump(mode="json")
    try:
        if not services.control.finish_key(caller.actor, slug, key, status, data, token):
            log.warning("KB %s: Idempotency-Key %r was taken over after its write committed", slug, key)
    except Exception:  # the write is committed: its caller hears of it, whatever the key's fate
        log.exception("KB %s: could not record the result of Idempotency-Key %r", slug, key)
    return result
