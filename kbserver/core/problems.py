"""Pydantic's validation errors in words a client can show: the field as a path (`files[0].mode`),
what is wrong with it and what is allowed, never the library's own phrasing."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

__all__ = ["Problem", "field_of", "problems"]

Problem = dict[str, str]  # {"field", "problem"}

_PATTERNS = {
    "^[0-9a-f]{64}$": "must be a sha256: 64 lowercase hex digits, as a read of the file returned it",
    "^[0-9a-f]{40}$": "must be 40 lowercase hex digits",
}
_MODES = ("create", "append", "edit", "overwrite", "delete")  # the write's tagged union leaves these in loc
_TYPES = {
    "string_type": "must be text (a JSON string)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "list_type": "must be a list (a JSON array)",
    "dict_type": "must be an object (a JSON object with named fields)",
    "model_type": "must be an object (a JSON object with named fields)",
    "model_attributes_type": "must be an object (a JSON object with named fields)",
    "missing": "is required",
    "extra_forbidden": "is not a field here; check its spelling against the documented fields",
}


def _names(listed: str) -> list[str]:
    """`'a', 'b'` (pydantic's list of tags or literals) as ['a', 'b']."""
    return re.findall(r"'([^']*)'", listed) or [listed]


def _either(options: Sequence[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


def field_of(loc: Sequence[int | str], where: str) -> str:
    """`('files', 0, 'edit', 'old_string')` as `files[0].old_string` (`where` for the whole input)."""
    out = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(previous, int) and part in _MODES:
            pass  # the tag pydantic names the union member by
        else:
            out += f".{part}" if out else str(part)
        previous = part
    return out or where


def _problem(e: dict[str, object]) -> str:
    kind = str(e["type"])
    raw = e.get("ctx")
    ctx: dict[str, object] = raw if isinstance(raw, dict) else {}
    if kind == "union_tag_invalid":
        disc = _names(str(ctx.get("discriminator", "")))[0]
        tags = _names(str(ctx.get("expected_tags", "")))
        return f"'{ctx.get('tag')}' is not a {disc}; use {_either(tags)}"
    if kind == "union_tag_not_found":
        disc = _names(str(ctx.get("discriminator", "")))[0]
        return f"is missing; use {_either(list(_MODES))}" if disc == "mode" else "is missing"
    if kind == "string_pattern_mismatch":
        return _PATTERNS.get(str(ctx.get("pattern")), "does not have the form this field takes")
    if kind == "literal_error":
        return f"is not allowed; use {_either(_names(str(ctx.get('expected', ''))))}"
    if kind in ("string_too_short", "too_short"):
        least = ctx.get("min_length")
        return "is empty; give at least one" if least in (1, "1") else f"is too short: at least {least}"
    if kind in ("string_too_long", "too_long"):
        return f"is too long: at most {ctx.get('max_length')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bounds = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
        limit = " and ".join(f"{bounds[k]} {v}" for k, v in ctx.items() if k in bounds)
        return f"is out of range: it must be {limit}"
    if kind in _TYPES:
        return _TYPES[kind]
    return str(e["msg"]).replace("Value error, ", "")


def problems(err: ValidationError, where: str) -> list[Problem]:
    """Each error of `err` as {field, problem}, in words (no input echoed back beyond a bad tag)."""
    out = []
    for e in err.errors(include_url=False):
        field = field_of(e["loc"], where)
        if str(e["type"]).startswith("union_tag_"):  # the tag is the field that is wrong
            ctx = e.get("ctx") or {}
            field += "." + _names(str(ctx.get("discriminator", "")))[0]
        out.append({"field": field, "problem": _problem(dict(e))})
    return out
