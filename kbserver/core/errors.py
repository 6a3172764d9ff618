"""One error hierarchy: each class is a contract error code with its HTTP status."""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AlreadyExists",
    "AmbiguousMatch",
    "ApprovalUnavailable",
    "Busy",
    "Forbidden",
    "InvalidRequest",
    "KBError",
    "NoMatch",
    "NotFound",
    "NotPending",
    "SecretDetected",
    "Stale",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
]


class KBError(Exception):
    """Base of every error a caller can see; `code` and `status` are part of the contract."""

    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, object]:
        """The body of the error as every edge renders it."""
        extra = {k: v for k, v in self.details.items() if k not in ("code", "message")}  # never masked
        return {"code": self.code, "message": self.message, **extra}


class InvalidRequest(KBError):
    code, status = "invalid_request", 400


class Unauthorized(KBError):
    code, status = "unauthorized", 401


class Forbidden(KBError):
    code, status = "forbidden", 403


class ApprovalUnavailable(KBError):
    code, status = "approval_unavailable", 403


class NotFound(KBError):
    code, status = "not_found", 404


class AlreadyExists(KBError):
    code, status = "already_exists", 409


class NotPending(KBError):
    """Approving or rejecting a proposal that is decided (or being approved) already."""

    code, status = "not_pending", 409


class Stale(KBError):
    code, status = "stale", 409


class TooLarge(KBError):
    code, status = "too_large", 413


class NoMatch(KBError):
    code, status = "no_match", 422


class AmbiguousMatch(KBError):
    code, status = "ambiguous_match", 422


class SecretDetected(KBError):
    code, status = "secret_detected", 422


class Unavailable(KBError):
    """The KB is busy beyond every retry (another process holds its lock for too long)."""

    code, status = "unavailable", 503


class Busy(KBError):
    """A bounded wait ran out (a KB's writer held too long, the control store): retry after a moment.

    `retry_after` (seconds) becomes the HTTP `Retry-After` header and a detail of the error body.
    """

    code, status = "busy", 503

    def __init__(self, message: str, retry_after: int = 1, **details: object) -> None:
        super().__init__(message, retry_after=retry_after, **details)
        self.retry_after = retry_after
