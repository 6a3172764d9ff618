"""Service functions answer typed results (pydantic models, core models), never loose dicts."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

import kbserver.services


def _loose(hint: object) -> bool:
    """Whether `hint` is, or holds, a dict of str to object/Any (an untyped answer)."""
    if hint is dict or typing.get_origin(hint) is dict:
        args = typing.get_args(hint)
        if not args or args[1] in (object, typing.Any):
            return True
    return any(_loose(arg) for arg in typing.get_args(hint))


def _public_functions() -> list[tuple[str, object]]:
    found = []
    # Every module of every room (walk_packages goes into the subpackages).
    for info in pkgutil.walk_packages(kbserver.services.__path__, prefix="kbserver.services."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            fn = getattr(module, name)
            if inspect.isfunction(fn) and fn.__module__ == module.__name__:
                found.append((f"{info.name.removeprefix('kbserver.services.')}.{name}", fn))
    return found


def test_no_service_function_answers_a_loose_dict() -> None:
    functions = _public_functions()
    assert len(functions) > 40  # the walk found the service functions
    loose = [name for name, fn in functions if _loose(typing.get_type_hints(fn).get("return"))]
    assert loose == []


def test_the_check_sees_a_loose_dict() -> None:
    assert _loose(dict[str, object]) and _loose(list[dict[str, typing.Any]]) and _loose(dict)
    assert not _loose(dict[str, int]) and not _loose(list[str])
