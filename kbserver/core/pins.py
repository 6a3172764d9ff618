"""What the fences of third-party internals share: the installed version of a distribution, and
whether a class or module still has, or its code still names, the private parts we rely on.

kbserver.index.private (Whoosh) and kbserver.mcp.sdk (the MCP SDK) check their library with these at
import, so a changed library is one clear error at start, never a silent fallback.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterator, Mapping
from types import CodeType, ModuleType
from typing import Any

__all__ = ["code_of", "installed", "missing_attributes", "missing_strings", "missing_uses"]


def installed(dist: str) -> str | None:
    """The installed version of the distribution `dist`, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def code_of(owner: type | ModuleType) -> Iterator[CodeType]:
    """The code of every function of a class (and its bases, nested functions included), or of a
    module's functions and the classes it defines."""
    if isinstance(owner, ModuleType):
        for value in vars(owner).values():
            if isinstance(value, type) and value.__module__ == owner.__name__:
                yield from code_of(value)
            elif isinstance(getattr(value, "__code__", None), CodeType):
                yield from _codes(value.__code__)
        return
    for klass in owner.__mro__[:-1]:
        for value in vars(klass).values():
            func = getattr(value, "fget", None) or getattr(value, "__func__", None) or value
            code = getattr(func, "__code__", None)
            if isinstance(code, CodeType):
                yield from _codes(code)


def missing_attributes(has: Mapping[Any, tuple[str, ...]]) -> list[str]:
    """A problem per owner (class or module) that lacks any of its names."""
    problems = []
    for owner, names in has.items():
        missing = [name for name in names if not hasattr(owner, name)]
        if missing:
            problems.append(f"{getattr(owner, '__qualname__', owner.__name__)} has no {', '.join(missing)}")
    return problems


def missing_uses(uses: Mapping[type, tuple[str, ...]]) -> list[str]:
    """A problem per class whose methods' code no longer names one of its instance attributes."""
    problems = []
    for cls, names in uses.items():
        used = {name for code in code_of(cls) for name in code.co_names}
        missing = [name for name in names if name not in used]
        if missing:
            problems.append(f"{cls.__qualname__} no longer uses {', '.join(missing)}")
    return problems


def missing_strings(strings: tuple[tuple[str, str], ...]) -> list[str]:
    """A problem per (module name, string) whose module's code no longer holds the string."""
    problems = []
    for module, text in strings:
        if text not in {c for code in code_of(importlib.import_module(module)) for c in code.co_consts}:
            problems.append(f"{module} no longer logs {text!r}")
    return problems
