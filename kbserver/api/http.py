"""Request plumbing shared by the API handlers: caller, body and query parsing, JSON answers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from kbserver.core.errors import InvalidRequest, TooLarge
from kbserver.core.inputs import check_input
from kbserver.core.model import Caller
from kbserver.core.problems import problems
from kbserver.services import Services
from kbserver.services.access.auth import authenticate, client_address

__all__ = [
    "MAX_BODY_BYTES",
    "body",
    "call",
    "caller",
    "optional_body",
    "query",
    "read_body",
    "respond",
    "services_of",
    "validation_error",
]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

MAX_BODY_BYTES = 8 * 1024 * 1024


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def caller(request: Request) -> Caller:
    """The authenticated caller. Raises Unauthorized."""
    address = client_address(request.scope)
    who = await call(
        authenticate, services_of(request), bearer(request), request.app.state.admin_token, address, True
    )
    request.state.caller = who.actor
    return who


def validation_error(err: ValidationError, where: str) -> InvalidRequest:
    """A pydantic error as `invalid_request`, naming each bad field and why (no input echoed back)."""
    found = problems(err, where)
    said = "; ".join(f"{p['field']}: {p['problem']}" for p in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return InvalidRequest(f"invalid {where}: {said}{more}", errors=found)


def _too_large(limit: int) -> TooLarge:
    return TooLarge(
        f"the request body is over {limit} bytes; send fewer or smaller files per call",
        max_body_bytes=limit,
    )


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The raw body, refused with TooLarge before more than `limit` bytes of it are read.

    A `Content-Length` over the limit is refused before a byte is read; a chunked body is counted
    while it streams in. Raises TooLarge, InvalidRequest (a Content-Length that is not a number).
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise InvalidRequest("the Content-Length header must be a number of bytes")
        if int(declared) > limit:
            raise _too_large(limit)
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise _too_large(limit)
    return bytes(received)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError("number out of range")
    return number


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _parse(raw: bytes) -> object:
    """Strict JSON: UTF-8 only, finite numbers, bounded nesting. Raises InvalidRequest."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("the request body is not UTF-8; send JSON encoded as UTF-8") from None
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise InvalidRequest(f"the request body is not valid JSON: {err.msg} at line {err.lineno}") from None
    except RecursionError:
        raise InvalidRequest("the request body is nested too deeply") from None
    except ValueError:  # an integer of more than 4300 digits, a float out of range, NaN or Infinity
        raise InvalidRequest("the request body holds a number that is too long or out of range") from None


async def body(request: Request, model: type[M]) -> M:
    """The JSON body parsed into `model`. Raises InvalidRequest, TooLarge."""
    return _validate(_parse(await read_body(request)), model)


async def optional_body(request: Request, model: type[M]) -> M:
    """As `body`, but an empty body means `{}` (every field of `model` has a default)."""
    raw = await read_body(request)
    return _validate(_parse(raw) if raw.strip() else {}, model)


def _validate(data: object, model: type[M]) -> M:
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    check_input(data)  # NUL and lone surrogates, in any field, before any store sees them
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, "body") from None
    except RecursionError:
        raise InvalidRequest("the request body is nested too deeply") from None


def query(request: Request, model: type[M]) -> M:
    """The query string parsed into `model`. Raises InvalidRequest."""
    params = request.query_params
    repeated = [k for k in params if len(params.getlist(k)) > 1]
    if repeated:
        raise InvalidRequest(f"query parameter {repeated[0]} is given more than once")
    check_input(dict(params))
    try:
        return model.model_validate(dict(params))
    except ValidationError as err:
        raise validation_error(err, "query") from None


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a (blocking) service function in the thread pool."""
    return await run_in_threadpool(fn, *args, **kwargs)


def respond(data: BaseModel, status: int = 200) -> JSONResponse:
    """A service's answer as JSON: the model dumped as it is (its field order is the key order)."""
    return JSONResponse(data.model_dump(mode="json"), status_code=status)
