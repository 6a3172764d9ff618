"""The OpenAPI 3.1 document, generated from the endpoint table and its pydantic models."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kbserver import __version__
from kbserver.api.routes import ENDPOINTS
from kbserver.api.schemas import ErrorOut
from kbserver.core.model import AGENT_PATTERN, SLUG_PATTERN, VERSION_PATTERN
from kbserver.core.paths import MAX_PATH_BYTES, PATH_PATTERN

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_PARAM = re.compile(r"\{([a-z_]+)(?::path)?\}")
# What the server checks in each path parameter (a value outside it is 400 or 404, never 5xx).
_PATH_PARAMS: dict[str, dict[str, Any]] = {
    "slug": {"type": "string", "pattern": SLUG_PATTERN},
    "name": {"type": "string", "pattern": AGENT_PATTERN},
    "version": {"type": "string", "pattern": VERSION_PATTERN},
    "path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_BYTES, "pattern": PATH_PATTERN},
    "proposal": {"type": "string", "minLength": 1},
    "run": {"type": "string", "minLength": 1},
}
_ERRORS = {
    "400": "invalid_request",
    "401": "unauthorized",
    "403": "forbidden · approval_unavailable",
    "404": "not_found",
    "409": "already_exists · not_pending · stale",
    "413": "too_large",
    "422": "no_match · ambiguous_match · secret_detected",
}


def openapi_document(prefix: str = "/api/v1") -> dict[str, Any]:
    models: set[type[BaseModel]] = {ErrorOut}
    bodies: set[type[BaseModel]] = set()
    for e in ENDPOINTS:
        models.update(m for m in (e.response, *(e.extra or {}).values()) if m is not None)
        if e.body is not None:
            bodies.add(e.body)
    keyed, defs = models_json_schema(
        [(m, "serialization") for m in sorted(models, key=lambda m: m.__name__)]
        + [(m, "validation") for m in sorted(bodies, key=lambda m: m.__name__)],
        ref_template=_REF,
    )

    def ref(model: type[BaseModel], mode: str) -> dict[str, Any]:
        return dict(keyed[(model, mode)])  # type: ignore[index]

    error = {"content": {"application/json": {"schema": ref(ErrorOut, "serialization")}}}
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        op: dict[str, Any] = {
            "summary": e.summary,
            "operationId": f"{e.method.lower()}_{e.handler.__name__}",
            "security": [{"bearer": []}],
            "responses": {
                str(e.status): {
                    "description": "success",
                    "content": {
                        e.media_type: {
                            "schema": ref(e.response, "serialization")
                            if e.response is not None
                            else {"type": "string", "format": "binary"}
                        }
                    },
                },
                **{
                    str(code): {
                        "description": "accepted",
                        "content": {"application/json": {"schema": ref(m, "serialization")}},
                    }
                    for code, m in (e.extra or {}).items()
                },
                **{code: {"description": codes, **error} for code, codes in _ERRORS.items()},
            },
        }
        if e.admin:
            op["description"] = "Admin token only."
        params = [
            {"name": name, "in": "path", "required": True, "schema": _PATH_PARAMS[name]}
            for name in _PARAM.findall(e.path)
        ]
        if e.query is not None:
            schema = e.query.model_json_schema()
            required = set(schema.get("required", []))
            params += [
                {"name": name, "in": "query", "required": name in required, "schema": prop}
                for name, prop in schema.get("properties", {}).items()
            ]
        if params:
            op["parameters"] = params
        if e.body is not None:
            # A body whose every field has a default may be left out (handlers read it as `{}`).
            op["requestBody"] = {
                "required": bool(e.body.model_json_schema().get("required")),
                "content": {"application/json": {"schema": ref(e.body, "validation")}},
            }
        path = prefix + _PARAM.sub(lambda m: "{" + m.group(1) + "}", e.path)
        paths.setdefault(path, {})[e.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kbserver",
            "version": __version__,
            "description": "Versioned, reviewable memory for AI agents: every KB is a git repository.",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
