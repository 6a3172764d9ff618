"""Error rendering for HTTP: every error is `{"error": {"code", "message", ...details}}`."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kbserver.core.errors import Busy, KBError

__all__ = ["EXCEPTION_HANDLERS", "error_response"]

log = logging.getLogger("kbserver.api")

_HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "invalid_request",
    413: "too_large",
}


def error_response(err: KBError) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="kbserver"'} if err.status == 401 else None
    if headers is not None and "retry_after" in err.details:  # a throttled client
        headers["Retry-After"] = str(err.details["retry_after"])
    if isinstance(err, Busy):
        headers = {"Retry-After": str(err.retry_after)}
    elif err.status == 503:  # unavailable: the control store unreachable, the server going away
        headers = {"Retry-After": str(err.details.get("retry_after", 5))}
    return JSONResponse({"error": err.to_dict()}, status_code=err.status, headers=headers)


async def _kb_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KBError)
    request.state.error_code = exc.code
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "invalid_request")
    message = "no such endpoint; see /openapi.json" if exc.status_code == 404 else str(exc.detail)
    if exc.status_code == 405:
        message = f"method {request.method} is not allowed here; see /openapi.json"
    status = exc.status_code if exc.status_code < 500 else 400
    headers = {"Allow": exc.headers["Allow"]} if exc.headers and "Allow" in exc.headers else None
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(
        {"error": {"code": "internal", "message": "an internal error occurred; it has been logged"}},
        status_code=500,
    )


EXCEPTION_HANDLERS = {KBError: _kb_error, HTTPException: _http_error, Exception: _unexpected}
