"""Use cases of files: list a version's files, read one file."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.core.model import Caller, FileEntry
from kbserver.core.paths import check_path, check_prefix
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services
from kbserver.services.models import ExportResult, FileContent, FileList
from kbserver.services.parts import Repository
from kbserver.services.reading import folders
from kbserver.services.reading.privacy import check_read, hidden

__all__ = [
    "FolderPage",
    "archive",
    "changed_paths",
    "entry_page",
    "export",
    "folder_page",
    "list_at",
    "listing",
    "read",
    "read_at",
    "texts_at",
    "visible_version",
]


def list_at(
    services: Services, slug: str, version: str | None, prefix: str = "", caller: Caller | None = None
) -> FileList:
    """The files at `version` (the head when None), sorted by path; for `caller`, without the other
    agents' private memories (kbserver.services.reading.privacy).

    Raises InvalidRequest or NotFound for a bad version.
    """
    repo = services.repos.repo(slug)
    resolved = repo.resolve(version)
    files: list[FileEntry] = []
    for path, blob in repo.view(resolved).walk(check_prefix(prefix)):
        if caller is not None and hidden(caller, repo, path, blob):
            continue
        size, sha256 = repo.digest(blob)
        files.append(FileEntry(path=path, size=size, sha256=sha256))
    return FileList(version=resolved, files=files)


def entry_page(
    services: Services, slug: str, version: str | None, start: int, limit: int, caller: Caller | None = None
) -> tuple[list[FileEntry], bool]:
    """Up to `limit` files at `version` (resolved) from the `start`-th in path order, and whether
    more follow; for `caller`, without the other agents' private memories. Lazy: the tree is walked
    no further than one past the page, and only the page's files are read (for their size and sha256)."""
    repo = services.repos.repo(slug)
    page: list[FileEntry] = []
    walk = repo.view(version).walk()
    if caller is not None:
        walk = ((p, b) for p, b in walk if not hidden(caller, repo, p, b))
    for path, blob in islice(walk, start, None):
        if len(page) == limit:
            return page, True
        size, sha256 = repo.digest(blob)
        page.append(FileEntry(path=path, size=size, sha256=sha256))
    return page, False


def visible_version(services: Services, caller: Caller, slug: str) -> str | None:
    """The head of a KB the caller may read. Raises NotFound."""
    require_read(services, caller, slug)
    return services.repos.repo(slug).head()


def changed_paths(services: Services, slug: str, old: str, new: str, prefix: str = "") -> list[str] | None:
    """The files under `prefix` that differ between versions `old` and `new` (added, changed or
    deleted), sorted; None when `old` is not a version of this KB (it was recreated, say), so the
    caller starts over from a listing. Costs the folders that changed, not the size of the KB.

    Raises NotFound or InvalidRequest for a bad `new`.
    """
    repo = services.repos.repo(slug)
    resolved = repo.resolve(new)
    assert resolved is not None
    try:
        known = repo.resolve(old) == old
    except (InvalidRequest, NotFound):
        known = False
    if not known:
        return None
    prefix = check_prefix(prefix)
    return [c.path for c in repo.changes(old, resolved) if c.path.startswith(prefix)]


def texts_at(
    services: Services, slug: str, version: str, prefix: str = ""
) -> Iterator[tuple[str, str, str | None]]:
    """(path, sha256, text) of every file under `prefix` at `version` (resolved), in path order, each
    read once; text is None for a file that is not UTF-8. For catalogues built from a whole folder.
    """
    repo = services.repos.repo(slug)
    for path, blob in repo.view(version).walk(check_prefix(prefix)):
        data = repo.blob(blob.decode())
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        yield path, hashlib.sha256(data).hexdigest(), text


def read_at(services: Services, slug: str, path: str, version: str | None) -> FileContent:
    """One file with its sha256 and the version read. Raises InvalidRequest or NotFound."""
    path = check_path(path)
    repo = services.repos.repo(slug)
    resolved = repo.resolve(version)
    view = repo.view(resolved)
    blob = view.blob_id(path)
    if blob is None:
        where = f"at version {resolved}" if version else "in this KB"
        raise NotFound(f"no file {path} {where}; list the files to see what exists", path=path)
    data = view.read(path)
    assert data is not None
    _, sha256 = repo.digest(blob.encode())
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(
            f"{path} is not UTF-8 text and cannot be returned as content", path=path
        ) from None
    return FileContent(path=path, content=content, sha256=sha256, version=resolved)


def listing(
    services: Services, caller: Caller, slug: str, prefix: str = "", version: str | None = None
) -> FileList:
    """list_at for a caller who may read the KB. Raises NotFound, InvalidRequest."""
    require_read(services, caller, slug)
    return list_at(services, slug, version, prefix, caller)


@dataclass
class FolderPage:
    """The files a KB page shows: in each folder its first `per_folder`, or in the folder paged
    through those from `start`; how many are left out after them, per folder."""

    version: str | None
    files: list[FileEntry]
    more: dict[str, int]  # folder ("" the top, else "a/b/") -> its files after those shown
    total: int


def folder_page(
    services: Services, caller: Caller, slug: str, per_folder: int, folder: str = "", start: int = 0
) -> FolderPage:
    """The head's files, at most `per_folder` a folder (those from the `start`-th in `folder`), so
    a folder of 10,000 memories costs the reads of the files shown; the names come from the head's
    listing, kept per version (services.folders).

    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    if start < 0 or per_folder < 1:
        raise InvalidRequest("start must be 0 or more", start=start)
    repo = services.repos.repo(slug)
    head = repo.head()
    listed = folders.listing(caller, repo, slug, head, services.pool)
    shown: list[str] = []
    more: dict[str, int] = {}
    for name, paths in listed.folders.items():
        first = start if name == folder else 0
        shown.extend(paths[first : first + per_folder])
        if first + per_folder < len(paths):
            more[name] = len(paths) - first - per_folder
    shown.sort()
    files = [
        FileEntry(path=p, size=size, sha256=sha)
        for p in shown
        for size, sha in [repo.digest(listed.blobs[p])]
    ]
    return FolderPage(version=head, files=files, more=more, total=len(listed.blobs))


def read(services: Services, caller: Caller, slug: str, path: str, version: str | None = None) -> FileContent:
    """read_at for a caller who may read the KB (another agent's private memory is NotFound).
    Raises NotFound, InvalidRequest."""
    require_read(services, caller, slug)
    found = read_at(services, slug, path, version)
    check_read(caller, found.path, found.content)
    return found


def export(
    services: Services,
    caller: Caller,
    slug: str,
    folder: Path,
    version: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExportResult:
    """Write a read-only copy of `version` into `folder` (missing or empty): all of it or nothing.

    The copy is written into a hidden folder beside `folder` and renamed into place once complete,
    so a file the file system refuses (a name too long, a full disk) leaves nothing behind.
    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    repo = services.repos.repo(slug)
    resolved = repo.resolve(version)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InvalidRequest(f"{folder} must be a missing or empty folder", folder=str(folder))
    view = repo.view(resolved)
    entries = [(p, b) for p, b in view.walk() if not hidden(caller, repo, p, b)]
    staging = folder.parent / f".{folder.name}.kbserver-mount"
    current = ""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        folders: set[Path] = set()
        for done, (path, blob) in enumerate(entries, 1):
            current = path
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.update(p for p in target.parents if staging in p.parents)
            target.write_bytes(repo.blob(blob.decode()))
            target.chmod(0o444)
            if progress:
                progress(done, len(entries))
        for d in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            d.chmod(0o555)
        staging.chmod(0o555)
        current = ""
        os.replace(staging, folder)  # an empty folder is replaced as a whole
    except OSError as err:
        _remove(staging)
        what = f"{current} into {folder}" if current else str(folder)
        raise InvalidRequest(
            f"cannot write {what}: {err.strerror or err}; nothing was written",
            folder=str(folder),
            **({"path": current} if current else {}),
        ) from None
    return ExportResult(slug=slug, version=resolved, files=len(entries), folder=str(folder))


def _remove(tree: Path) -> None:
    """Remove a half-written copy, read-only folders included."""
    if not tree.exists():
        return
    for d in [tree, *(p for p in tree.rglob("*") if p.is_dir() and not p.is_symlink())]:
        with contextlib.suppress(OSError):
            d.chmod(0o755)
    shutil.rmtree(tree, ignore_errors=True)


def archive(
    services: Services, caller: Caller, slug: str, version: str | None = None
) -> tuple[str | None, Iterator[bytes]]:
    """A tar.gz of the files at `version` under `{slug}/`, produced piece by piece as it is read.

    Checks happen at once (raises NotFound, InvalidRequest); the chunks come one file at a time, so
    memory stays at about one file (at most the KB's file size limit) whatever the KB's size.
    """
    require_read(services, caller, slug)
    repo = services.repos.repo(slug)
    resolved = repo.resolve(version)
    mtime = repo.commit_info(resolved).seconds if resolved else 0
    return resolved, _tar_chunks(repo, slug, resolved, mtime, caller)


class _Chunks:
    """A write-only file object whose bytes are taken out as chunks."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


def _tar_chunks(
    repo: Repository, slug: str, version: str | None, mtime: int, caller: Caller
) -> Iterator[bytes]:
    sink = _Chunks()
    with tarfile.open(fileobj=sink, mode="w|gz") as tar:  # type: ignore[call-overload]
        for path, blob in repo.view(version).walk():
            if hidden(caller, repo, path, blob):
                continue  # another agent's private memory
            data = repo.blob(blob.decode())
            member = tarfile.TarInfo(f"{slug}/{path}")
            member.size, member.mode, member.mtime = len(data), 0o444, mtime
            tar.addfile(member, io.BytesIO(data))
            chunk = sink.take()
            if chunk:
                yield chunk
    yield sink.take()
