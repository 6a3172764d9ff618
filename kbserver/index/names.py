"""Whoosh's file names (segment ids, sort runs, compound temp files) from our own generator.

Whoosh names every new segment, sort run and compound temp file with `whoosh.util.random_name`,
which draws from the global `random` module. Anything that seeds that module (Hypothesis does, for
every example; so does any library calling `random.seed`) makes the next names repeat the ones
already on disk: the next `commit(merge=False)` then finds its new segment's files already there
(`AssertionError` in `create_compound_file`) or overwrites a live segment. Each module imported
the function by name, so the replacement is installed in every module that holds it; `install`
fails loudly if a Whoosh release moves one, rather than silently leaving the global `random` in use.
"""

from __future__ import annotations

import secrets
from types import ModuleType

import whoosh.codec.base
import whoosh.filedb.compound
import whoosh.filedb.filestore
import whoosh.multiproc
import whoosh.util
import whoosh.writing

__all__ = ["install", "random_name"]

# Whoosh's alphabet for names: lowercase letters, digits and underscore.
_ALPHABET = whoosh.util.IDCHARS
# Every module that does `from whoosh.util import random_name`.
_HOLDERS: tuple[ModuleType, ...] = (
    whoosh.util,
    whoosh.codec.base,
    whoosh.filedb.compound,
    whoosh.filedb.filestore,
    whoosh.multiproc,
    whoosh.writing,
)


def random_name(size: int = 28) -> str:
    """A name of `size` characters from Whoosh's alphabet, drawn from the OS (never the `random` module)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(size))


def install() -> None:
    """Make every Whoosh module name its files with `random_name` (idempotent)."""
    for module in _HOLDERS:
        if not callable(getattr(module, "random_name", None)):
            raise RuntimeError(f"{module.__name__}.random_name is gone: check kbserver.index.names")
        module.random_name = random_name  # type: ignore[attr-defined]
