"""Private memories: a file under `memories/` whose front matter names an `agentId` is that agent's.

The rule, enforced here for every surface rather than in each tool: such a file is read, listed,
found, shown in versions and diffs, and cloned only by its agent and the admin. Another agent
(whatever its permission) gets `not_found` for it, does not see it in listings or search, does not
see the versions that changed it, and may not write it or write a memory carrying another agent's
`agentId` (`forbidden`); `git clone` of a KB whose history holds another agent's private memory is
`forbidden` for an agent (a clone carries every version, and rewriting history would change every
version id). A memory without `agentId` is the KB's, as any file.

Who owns a file is read from its front matter; owners are remembered per content id (git blob ids
never change meaning), so a listing reads each memory once per process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from kbserver.changes import Applied, Tree
from kbserver.core.errors import Forbidden, NotFound
from kbserver.core.frontmatter import split_front_matter
from kbserver.core.model import Caller
from kbserver.services.parts import Repository

__all__ = [
    "PRIVATE_FOLDER",
    "check_clone",
    "check_read",
    "check_writes",
    "hidden",
    "hides_version",
    "other_owners",
    "owner_of",
]

PRIVATE_FOLDER = "memories/"
_CACHE_SIZE = 1 << 17
_owners: OrderedDict[str, str | None] = OrderedDict()  # blob id -> the agentId its front matter names
_history: dict[str, tuple[str, frozenset[str]]] = {}  # repository key -> (head scanned, owners seen)
_lock = threading.Lock()


def owner_of(path: str, data: bytes | None) -> str | None:
    """The agent a file belongs to: the `agentId` of a `memories/` file's YAML front matter, else None.

    Read by the parser the memory tools use (kbserver.core.frontmatter), never by a search of the
    bytes, so that whatever those tools read as the owner is the owner here too."""
    if data is None or not path.startswith(PRIVATE_FOLDER) or not data.startswith(b"---\n"):
        return None
    try:
        split = split_front_matter(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None  # the memory tools read no such file either (kbserver.services.reading.files.texts_at)
    if split is None:
        return None
    value = {str(k): v for k, v in split[0].items()}.get("agentId")
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else str(value)
    return text.strip() or None


def _hides(caller: Caller, owner: str | None) -> bool:
    return owner is not None and not caller.is_human and owner != caller.name


def _blob_owner(repo: Repository, path: str, blob: str | None) -> str | None:
    if blob is None or not path.startswith(PRIVATE_FOLDER):
        return None
    with _lock:
        if blob in _owners:
            _owners.move_to_end(blob)
            return _owners[blob]
    try:
        owner = owner_of(path, repo.blob(blob))
    except KeyError:
        return None
    with _lock:
        _owners[blob] = owner
        while len(_owners) > _CACHE_SIZE:
            _owners.popitem(last=False)
    return owner


def hidden(caller: Caller, repo: Repository, path: str, blob: str | bytes | None) -> bool:
    """True when `path` (with content id `blob`) is another agent's private memory for `caller`."""
    if caller.is_human or not path.startswith(PRIVATE_FOLDER):
        return False
    blob_id = blob.decode() if isinstance(blob, bytes) else blob
    return _hides(caller, _blob_owner(repo, path, blob_id))


def check_read(caller: Caller, path: str, data: bytes | str) -> None:
    """Raises NotFound (as for a missing file) when `path` is another agent's private memory."""
    if caller.is_human or not path.startswith(PRIVATE_FOLDER):
        return  # nobody's private memory: no copy of the content to encode
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if _hides(caller, owner_of(path, raw)):
        raise NotFound(f"no file {path} in this KB; list the files to see what exists", path=path)


def hides_version(caller: Caller, repo: Repository, changes: Iterable[object]) -> bool:
    """True when a version with `changes` (store Changes) touched another agent's private memory,
    before or after: its message and diff are that agent's."""
    if caller.is_human:
        return False
    for ch in changes:
        path = getattr(ch, "path", "")
        if path.startswith(PRIVATE_FOLDER) and (
            hidden(caller, repo, path, getattr(ch, "old_blob", None))
            or hidden(caller, repo, path, getattr(ch, "new_blob", None))
        ):
            return True
    return False


def check_writes(caller: Caller, tip: Tree, applied: Sequence[Applied]) -> list[Applied]:
    """`applied`, unless it changes another agent's private memory or writes a memory in another
    agent's name (raises Forbidden). The admin may write any."""
    if caller.is_human:
        return list(applied)
    for a in applied:
        if not a.path.startswith(PRIVATE_FOLDER):
            continue
        if _hides(caller, owner_of(a.path, tip.read(a.path))):
            raise Forbidden(
                f"{a.path} is another agent's private memory (its agentId names that agent); only "
                "that agent and the admin may change it",
                path=a.path,
            )
        new_owner = owner_of(a.path, a.content)
        if _hides(caller, new_owner):
            raise Forbidden(
                f"{a.path} would be a memory of agent {new_owner}; write agentId: {caller.name} "
                "(yours) or none (the KB's)",
                path=a.path,
            )
    return list(applied)


def _history_owners(repo: Repository, key: str) -> frozenset[str]:
    """Every agent whose private memory some version of the KB holds (remembered per head)."""
    head = repo.head()
    if head is None:
        return frozenset()
    with _lock:
        known = _history.get(key)
    if known is not None and known[0] == head:
        return known[1]
    owners: set[str] = set()
    stop = known[0] if known is not None else None
    for version in repo.first_parents(head):
        if version == stop:  # scanned before: what it held still holds
            owners |= known[1] if known is not None else frozenset()
            break
        for ch in repo.changes(repo.commit_info(version).parent, version):
            owner = _blob_owner(repo, ch.path, ch.new_blob)
            if owner is not None:
                owners.add(owner)
    found = frozenset(owners)
    with _lock:
        _history[key] = (head, found)
    return found


def other_owners(caller: Caller, repo: Repository, key: str) -> list[str]:
    """The agents besides `caller` whose private memories some version of the KB holds (none for the
    admin); `key` names the repository (its folder)."""
    if caller.is_human:
        return []
    return sorted(_history_owners(repo, key) - {caller.name})


def check_clone(caller: Caller, repo: Repository, key: str) -> None:
    """Raises Forbidden when an agent clones a KB whose history holds another agent's private memory."""
    others = other_owners(caller, repo, key)
    if others:
        raise Forbidden(
            "this KB's history holds private memories of other agents (memories/ files with their "
            "agentId), and a clone carries every version; only the admin may clone it. Read it with "
            "the API or the MCP tools, which leave those memories out",
            agents=len(others),
        )
