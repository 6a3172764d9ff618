"""Markdown text to an index document: YAML front matter becomes searchable, stored and filter fields."""

from __future__ import annotations

import datetime
import hashlib
import re
from dataclasses import dataclass
from typing import Any

import yaml

from kbserver.index.analysis import SPLIT_SEP
from kbserver.index.schema import CHARS, DIRS, FIELDS, FILTER_PREFIX, FORMAT, META_PATH, PATH, SHA

__all__ = ["Parsed", "meta_document", "parse", "sha256", "to_document", "valid_utf8"]

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")  # keys usable as filter names
_SEARCHED = ("title", "tags", "category")  # front-matter keys that are also searchable text
_MAX_STORED = 2000  # characters kept of one stored field value
_MAX_EXACT = 256  # longer values are stored but not filterable (no one filters on a paragraph)
# The libyaml loader is safe_load's loader in C, much faster per note than the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Parsed:
    """A Markdown text split into its body and its front-matter fields."""

    body: str
    fields: dict[str, str]  # stored: key -> string (lists joined by ", ")
    exact: dict[str, list[str]]  # filterable: key -> exact values (one per list item)


def valid_utf8(text: str) -> str:
    """`text` with lone surrogates (JSON can carry "\\ud800") made "?": Whoosh cannot encode them."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def sha256(text: str) -> str:
    """The sha256 (hex) of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, datetime.date):  # datetime is a date too
        return value.isoformat()
    return None  # None, mappings, nested lists: nothing to filter on


def _values(key: str, value: object) -> list[str]:
    if isinstance(value, list):
        items = [_scalar(v) for v in value]
        return [v for v in items if v]
    text = _scalar(value)
    if not text:
        return []
    if key == "tags":  # `tags: a, b` means two tags
        return [t.strip() for t in text.split(",") if t.strip()]
    return [text]


def _front_matter(text: str) -> tuple[dict[object, object], str]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    try:
        data = yaml.load(match.group(1), Loader=_LOADER)  # safe: _LOADER is a SafeLoader
    # PyYAML raises YAMLError, but also ValueError/OverflowError (bad dates), RecursionError (deep
    # nesting) and more; a note must stay searchable whatever its header, so fall back to plain text.
    except Exception:
        return {}, text
    if not isinstance(data, dict):
        return {}, text if data is not None else text[match.end() :]
    return data, text[match.end() :]


def parse(text: str) -> Parsed:
    """Split front matter from the body; never raises (bad YAML leaves the whole text as body)."""
    data, body = _front_matter(text)
    fields: dict[str, str] = {}
    exact: dict[str, list[str]] = {}
    for key, value in data.items():
        if not isinstance(key, str) or _KEY.match(key) is None:
            continue
        values = _values(key, value)
        if not values:
            continue
        fields[key] = ", ".join(values)[:_MAX_STORED]
        kept = [v for v in values if len(v) <= _MAX_EXACT and SPLIT_SEP not in v]
        if kept:
            exact[key] = kept
    return Parsed(body=body, fields=fields, exact=exact)


def _folders(path: str) -> str:
    parts = path.split("/")[:-1]
    return SPLIT_SEP.join("/".join(parts[: i + 1]) + "/" for i in range(len(parts)))


def to_document(path: str, text: str) -> dict[str, Any]:
    """The Whoosh fields of one file."""
    digest = sha256(text)
    text = valid_utf8(text)
    parsed = parse(text)
    doc: dict[str, Any] = {
        PATH: path,
        DIRS: _folders(path),
        SHA: bytes.fromhex(digest),  # 32 raw bytes: half the size of the hex
        FIELDS: parsed.fields,
        "path_text": path,
        "body": parsed.body,
    }
    searched = [parsed.fields[k] for k in _SEARCHED if k in parsed.fields]
    doc[CHARS] = "\n".join([path, *searched, parsed.body])
    for key in _SEARCHED:
        if key in parsed.fields:
            doc[key] = parsed.fields[key]
    for key, values in parsed.exact.items():
        doc[FILTER_PREFIX + key] = SPLIT_SEP.join(values)
    return doc


def meta_document(version: str | None) -> dict[str, Any]:
    """The document recording the covered version; it has no searchable text, so no query finds it."""
    return {PATH: META_PATH, "version": version, "format": FORMAT}
