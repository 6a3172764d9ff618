"""A toy sink: follows main and keeps, per KB, the number of files and the version it counted, in one
JSON file of its folder. The entry point `toy_count` in the group `kbserver.sinks` names `make`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbserver.services.following.follower import Delta


class FileCount:
    name = "toy_count"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "counts.json"

    def _load(self) -> dict[str, Any]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def covered(self, slug: str) -> str | None:
        entry = self._load().get(slug)
        return None if entry is None else str(entry["version"])

    def apply(self, delta: Delta) -> None:
        counts = self._load()
        files = 0 if delta.base is None else int(counts.get(delta.slug, {}).get("files", 0))
        for change in delta.changes:
            files += {"added": 1, "deleted": -1}.get(change.change, 0)
        delta.fence()
        counts[delta.slug] = {"version": delta.version, "files": files}
        self.path.write_text(json.dumps(counts))

    def reset(self, slug: str) -> None:
        counts = self._load()
        counts.pop(slug, None)
        self.path.write_text(json.dumps(counts))

    def idle(self, paused: bool, stop: Callable[[], bool]) -> None:
        pass

    def close(self) -> None:
        pass


def make(folder: Path, options: object) -> FileCount:
    return FileCount(folder)
