"""Integrity check of a bare repository: C git's fsck when present, else a reachability walk."""

from __future__ import annotations

import shutil
import stat
import subprocess

from dulwich.objects import Commit, ObjectID, Tree
from dulwich.repo import Repo

__all__ = ["verify"]

_GITLINK = 0o160000  # submodule entries point to commits of other repositories


def verify(path: str) -> list[str]:
    """Problems found in the repository at `path` (empty when it is sound)."""
    git = shutil.which("git")
    if git:
        proc = subprocess.run(
            [git, "fsck", "--full", "--strict", "--no-dangling", "--no-progress"],
            cwd=path,
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if proc.returncode != 0:
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            return lines or [f"git fsck exited with {proc.returncode}"]
        return []
    return _walk(path)


def _walk(path: str) -> list[str]:
    problems: list[str] = []
    with Repo(path) as repo:
        store = repo.object_store
        seen: set[ObjectID] = set()
        todo: list[ObjectID] = []
        for name, sha in repo.refs.as_dict().items():
            todo.append(sha)
            if sha not in store:
                problems.append(f"ref {name.decode()} points to missing object {sha.decode()}")
        while todo:
            sha = todo.pop()
            if sha in seen:
                continue
            seen.add(sha)
            try:
                obj = store[ObjectID(sha)]
            except KeyError:
                problems.append(f"missing object {sha.decode()}")
                continue
            if isinstance(obj, Commit):
                todo.append(obj.tree)
                todo.extend(obj.parents)
            elif isinstance(obj, Tree):
                for entry in obj.iteritems():
                    if stat.S_IFMT(entry.mode) != _GITLINK:
                        todo.append(entry.sha)
    return problems
