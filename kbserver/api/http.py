"""Request plumbing shared by the API handlers: caller, body and query parsing, JSON answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.services import Services
from kbserver.services.auth import authenticate

__all__ = ["body", "call", "caller", "query", "respond", "services_of", "validation_error"]

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
    who = await call(authenticate, services_of(request), bearer(request), request.app.state.admin_token)
    request.state.caller = who.actor
    return who


def validation_error(err: ValidationError, where: str) -> InvalidRequest:
    """A pydantic error as `invalid_request`, naming each bad field and why (no input echoed back)."""
    problems = [
        {"field": ".".join(str(p) for p in e["loc"]) or where, "problem": e["msg"]} for e in err.errors()
    ]
    first = problems[0]
    return InvalidRequest(f"invalid {where}: {first['field']}: {first['problem']}", errors=problems)


async def body(request: Request, model: type[M]) -> M:
    """The JSON body parsed into `model`. Raises InvalidRequest (or TooLarge-free 400 on huge bodies)."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest(f"the request body is over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise InvalidRequest("the request body is not UTF-8") from None
    except json.JSONDecodeError as err:
        raise InvalidRequest(f"the request body is not valid JSON: {err.msg} at line {err.lineno}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, "body") from None


def query(request: Request, model: type[M]) -> M:
    """The query string parsed into `model`. Raises InvalidRequest."""
    params = request.query_params
    repeated = [k for k in params if len(params.getlist(k)) > 1]
    if repeated:
        raise InvalidRequest(f"query parameter {repeated[0]} is given more than once")
    try:
        return model.model_validate(dict(params))
    except ValidationError as err:
        raise validation_error(err, "query") from None


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a (blocking) service function in the thread pool."""
    return await run_in_threadpool(fn, *args, **kwargs)


def respond(data: object, status: int = 200) -> JSONResponse:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    return JSONResponse(data, status_code=status)
