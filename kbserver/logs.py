"""One JSON log format for every logger on stderr: kbserver's, uvicorn's and the MCP SDK's.

A composition-root helper (cli.py configures it once per process). Each line is one JSON object:
`time`, `level`, `logger`, `message`, the record's `fields` (the access log's method, route,
status, ...) and, for a bug, `exception` with the traceback inside the same line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

__all__ = ["JsonFormatter", "configure"]


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if k not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(level: str | int = "INFO", stream: TextIO | None = None) -> None:
    """Send every logger through one JSON handler on stderr, replacing any handler set up before
    (a library's basicConfig, e.g. the MCP SDK's rich handler, is a no-op once the root has one)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp"):
        named = logging.getLogger(name)
        for old in list(named.handlers):
            named.removeHandler(old)
        named.propagate = True
