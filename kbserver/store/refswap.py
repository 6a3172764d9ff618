"""Moving main by compare-and-swap under git's ref lock, fenced by the writer's lease.

Git's protocol takes `main.lock` exclusively, writes the new id into it and renames it onto main. A
writer frozen between its checks and that rename would, once it runs again, rename whatever file
then bears the name `main.lock`, also the one of the writer that took its lease over. So here each
writer writes the new id into a file of its own, `main.f<token>.lock` (git ignores `*.lock` names),
links it in as `main.lock` (link fails when the name exists: the same exclusion for C git and for
us), re-reads main and checks its lease's token under that lock, and renames its own file onto main.
A writer holding the current lease that meets the `main.lock` of a stale token removes that
writer's own file first, then the lock: the stale writer's rename then fails (its commit refused),
and nothing of the new holder's can be renamed by it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from kbserver.store.lease import Lease

__all__ = ["RefLocked", "StaleRefWriter", "swap_main"]

_MINE = re.compile(r"main\.f(\d+)\.lock")


class RefLocked(Exception):
    """`main.lock` is another program's (C git's, or a writer's we cannot prove stale)."""


class StaleRefWriter(Exception):
    """This writer's lease was taken over: main was not moved."""


def swap_main(
    ref: str,
    read: Callable[[], bytes | None],
    old: str | None,
    new: str,
    lease: Lease,
    flush: Callable[[str], None] | None,
) -> bool:
    """Move `ref` (refs/heads/main's path) from `old` (None: it must not exist) to `new`; False when
    main is no longer `old`. `read()` reads main's id; `flush(path)` makes the new ref file's bytes
    durable (with the objects) before anything is renamed. Raises RefLocked and StaleRefWriter."""
    mine = f"{ref}.f{lease.token}.lock"
    lock = ref + ".lock"
    os.makedirs(os.path.dirname(ref), exist_ok=True)
    with open(mine, "wb") as f:
        f.write(new.encode() + b"\n")
    try:
        if flush is not None:
            flush(mine)
        ino = os.stat(mine).st_ino
        try:
            os.link(mine, lock)
        except FileExistsError:
            if not _break_stale(ref, lease):
                raise RefLocked(lock) from None
            os.link(mine, lock)  # FileExistsError again: another was quicker, the caller retries
        try:
            current = read()
            if current != (old.encode() if old is not None else None):
                return False
            if not lease.current():
                raise StaleRefWriter(lease.repo)
            try:
                os.rename(mine, ref)
            except FileNotFoundError:  # the new holder of the lease removed it: refused
                raise StaleRefWriter(lease.repo) from None
            return True
        finally:
            _unlink_if(lock, ino)
    finally:
        try:
            os.remove(mine)
        except FileNotFoundError:
            pass  # renamed onto main (or removed by the lease's new holder)


def _unlink_if(path: str, ino: int) -> None:
    try:
        if os.stat(path).st_ino == ino:
            os.remove(path)
    except FileNotFoundError:
        pass


def _break_stale(ref: str, lease: Lease) -> bool:
    """Remove the `main.lock` of a writer whose token is older than `lease`'s (which must be current):
    its own file first, so its rename fails. True when the lock is gone (or was only a leftover of a
    rename that already happened); False when it is someone else's."""
    lock = ref + ".lock"
    try:
        held = os.stat(lock).st_ino
    except FileNotFoundError:
        return True
    try:
        if os.stat(ref).st_ino == held:  # renamed onto main already; only its lock name is left
            _unlink_if(lock, held)
            return True
    except FileNotFoundError:
        pass
    folder = os.path.dirname(ref)
    for name in os.listdir(folder):
        found = _MINE.fullmatch(name)
        if found is None or int(found.group(1)) >= lease.token:
            continue
        path = os.path.join(folder, name)
        try:
            if os.stat(path).st_ino != held:
                continue
        except FileNotFoundError:
            continue
        if not lease.current():
            return False
        try:
            os.remove(path)  # now its rename fails: that write is refused
        except FileNotFoundError:
            return True  # it renamed first: main moved, the caller's compare sees it
        _unlink_if(lock, held)
        return True
    return False
