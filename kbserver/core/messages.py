"""Commit messages callers may give: short, plain text, and never a trailer of the server's."""

from __future__ import annotations

import re

from kbserver.core.errors import InvalidRequest

__all__ = ["MAX_MESSAGE_BYTES", "check_description", "check_message"]

MAX_MESSAGE_BYTES = 4096
# C0 controls but tab and newline, DEL, C1 controls: git stores them, but fsck (NUL) and every
# terminal that shows `git log` (escape sequences) suffer. Lone surrogates are not text at all.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# git reads trailer keys case-insensitively, so `kb-actor:` would pass for the server's `Kb-Actor:`.
_TRAILER = re.compile(r"^[ \t]*kb-[^:\n]*:", re.IGNORECASE | re.MULTILINE)


# Invisible characters that reorder or hide text (bidirectional overrides, zero-width ones).
_FORMAT = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def check_description(description: str) -> None:
    """Refuse a KB description that a commit message could not be, or that hides or reorders text.

    It lands in the KB's README.md and in every agent's instructions. Raises InvalidRequest
    (details `field: description`).
    """
    if len(description.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise InvalidRequest(
            f"description must be at most {MAX_MESSAGE_BYTES} bytes of UTF-8; shorten it", field="description"
        )
    bad = _CONTROL.search(description) or _FORMAT.search(description)
    if bad:
        raise InvalidRequest(
            f"description holds the character U+{ord(bad.group()):04X}; use plain text (of the control "
            "characters only newline and tab are allowed, and no invisible formatting characters)",
            field="description",
        )


def check_message(message: str | None) -> None:
    """Refuse a message over 4 KiB, with a control character, or with a `Kb-…:` line.

    Raises InvalidRequest (details `field: message`).
    """
    if message is None:
        return
    if len(message.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise InvalidRequest(
            f"message must be at most {MAX_MESSAGE_BYTES} bytes of UTF-8; shorten it", field="message"
        )
    bad = _CONTROL.search(message)
    if bad:
        raise InvalidRequest(
            f"message holds the character U+{ord(bad.group()):04X}; of the control characters only"
            " newline and tab are allowed",
            field="message",
        )
    if _TRAILER.search(message):
        raise InvalidRequest(
            "message has a line starting with `Kb-…:`; those trailers are written by the server alone",
            field="message",
        )
