"""`kbserver mount --url`: a read-only copy of a KB version from a remote server, over HTTP only.

A fresh mount streams the version's archive into a hidden folder beside DIR, checks every member
against the version's listing (a KB path, a regular file, the listed size and sha256) before and as
its bytes arrive, and renames the folder into place once complete: a reader never sees half a mount,
and an archive that breaks a rule leaves nothing behind. `--update` moves a copy to another version
by the difference of the two listings, touching only the files that changed. The copy's source
(URL, slug, version; never the token) is a small JSON file beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from kbserver.cli.remote import Remote
from kbserver.core.errors import InvalidRequest, KBError, NotFound
from kbserver.core.paths import check_path

__all__ = ["InvalidArchive", "Mounted", "Source", "mount", "read_source", "source_file", "update"]

Progress = Callable[[int, int], None]

_CHUNK = 1 << 16
_BY_FILE = 64
"""An update of at most this many files reads each one alone; more stream the archive once."""


class InvalidArchive(KBError):
    """The server's archive or listing breaks a rule of a KB copy; nothing was written."""

    code: ClassVar[str] = "invalid_archive"


@dataclass(frozen=True)
class Source:
    """Where a copy came from (the file beside it): never the token."""

    url: str
    slug: str
    version: str | None
    run: str | None = None


@dataclass(frozen=True)
class Mounted:
    slug: str
    version: str | None
    files: int  # in the copy
    written: int  # files written by this call
    deleted: int
    folder: Path


def source_file(folder: Path) -> Path:
    """The JSON file beside `folder` that says where its copy came from."""
    return folder.parent / f".{folder.name}.kbserver-mount.json"


def read_source(folder: Path) -> Source:
    """The source of the copy in `folder`. Raises NotFound when `folder` is no remote mount."""
    where = source_file(folder)
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
        return Source(str(data["url"]), str(data["slug"]), data["version"], data.get("run"))
    except FileNotFoundError:
        raise NotFound(
            f"{folder} is not a copy made by `kbserver mount --url` (no {where.name} beside it)",
            folder=str(folder),
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InvalidRequest(f"cannot read {where}: {err}", folder=str(folder)) from None


def _write_source(folder: Path, source: Source) -> None:
    where = source_file(folder)
    data = {"url": source.url, "slug": source.slug, "version": source.version, "run": source.run}
    temp = where.with_name(where.name + ".tmp")
    temp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    temp.chmod(0o444)
    os.replace(temp, where)


Expected = dict[str, tuple[int, str]]


def _expected(listing: Any, slug: str) -> tuple[str | None, Expected]:
    """The version and `{path: (size, sha256)}` of a listing, every path a KB path."""
    try:
        version = listing["version"]
        entries = {str(f["path"]): (int(f["size"]), str(f["sha256"])) for f in listing["files"]}
    except (KeyError, TypeError, ValueError):
        raise InvalidArchive(f"the server's listing of {slug} is not a file listing") from None
    for path, (size, _) in entries.items():
        _checked(path, slug)
        if size < 0:
            raise InvalidArchive(f"the listing of {slug} gives {path} a negative size", path=path)
    return version, entries


def _checked(path: str, slug: str) -> str:
    try:
        if check_path(path) == path:
            return path
    except KBError:
        pass
    raise InvalidArchive(
        f"the server's copy of {slug} holds {path!r}, which is no KB path (absolute, '..', or "
        "otherwise outside the KB); nothing was written",
        path=path,
    )


def _listing(remote: Remote, slug: str, version: str | None, run: str | None) -> tuple[str | None, Expected]:
    if run is not None:
        return _expected(remote.call("GET", f"/runs/{run}/kbs/{slug}/files"), slug)
    query = {"version": version} if version else {}
    return _expected(remote.call("GET", f"/kbs/{slug}/files", **query), slug)


def _copy(src: IO[bytes], target: Path, size: int, sha256: str, path: str, slug: str) -> None:
    """Write `src` to the new file `target`: at most `size` bytes, whose sha256 must be `sha256`."""
    digest = hashlib.sha256()
    written = 0
    with open(target, "xb") as out:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            if written > size:
                raise InvalidArchive(
                    f"{path} of {slug} is larger than the {size} bytes its listing says; nothing was written",
                    path=path,
                )
            digest.update(chunk)
            out.write(chunk)
    if written != size or digest.hexdigest() != sha256:
        raise InvalidArchive(
            f"{path} of {slug} does not match its listing (sha256 or size differs); nothing was written",
            path=path,
        )
    target.chmod(0o444)


def _member_path(member: tarfile.TarInfo, slug: str, wanted: Expected) -> str:
    name = member.name
    prefix = f"{slug}/"
    if not name.startswith(prefix):
        raise InvalidArchive(
            f"the archive of {slug} holds {name!r}, outside {prefix}; nothing was written", path=name
        )
    path = name[len(prefix) :]
    if path not in wanted:  # every listed path was checked already
        path = _checked(path, slug)
    if not member.isreg():
        kind = "a link" if member.issym() or member.islnk() else "a device or special file"
        if member.isdir():
            kind = "a folder entry"
        raise InvalidArchive(
            f"the archive of {slug} holds {path} as {kind}, not a plain file; nothing was written",
            path=path,
        )
    return path


def _extract(
    body: IO[bytes],
    slug: str,
    wanted: Expected,
    into: Path,
    only: Iterable[str] | None,
    progress: Progress | None,
) -> dict[str, Path]:
    """Stream the archive `body`, checking every member against `wanted`; write the members of
    `only` (all when None) into `into` (as their paths, or numbered when `only` is given). Returns
    where each one was written. Raises InvalidArchive."""
    keep = set(wanted) if only is None else set(only)
    seen: set[str] = set()
    written: dict[str, Path] = {}
    try:
        with tarfile.open(fileobj=body, mode="r|gz") as tar:
            for member in tar:
                path = _member_path(member, slug, wanted)
                if path not in wanted or path in seen:
                    why = "twice" if path in seen else "though its listing does not"
                    raise InvalidArchive(f"the archive of {slug} holds {path} {why}; nothing was written")
                seen.add(path)
                size, sha256 = wanted[path]
                if member.size != size:
                    raise InvalidArchive(
                        f"{path} of {slug} is {member.size} bytes in the archive, {size} in its listing; "
                        "nothing was written",
                        path=path,
                    )
                if path not in keep:
                    continue
                target = into / path if only is None else into / str(len(written))
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None  # a regular file
                _copy(src, target, size, sha256, path, slug)
                written[path] = target
                if progress:
                    progress(len(written), len(keep))
    except (tarfile.TarError, EOFError, zlib.error) as err:
        raise InvalidArchive(f"the archive of {slug} is broken ({err}); nothing was written") from None
    missing = sorted(keep - seen)
    if missing:
        raise InvalidArchive(
            f"the archive of {slug} lacks {len(missing)} listed file(s), e.g. {missing[0]}; "
            "nothing was written",
            path=missing[0],
        )
    return written


def _writable(folder: Path) -> None:
    for d in [folder, *(p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink())]:
        with contextlib.suppress(OSError):
            d.chmod(0o755)


def _remove(tree: Path) -> None:
    if tree.exists():
        _writable(tree)
        shutil.rmtree(tree, ignore_errors=True)


def _read_only_folders(top: Path) -> None:
    for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        d.chmod(0o555)
    top.chmod(0o555)


def mount(
    remote: Remote,
    slug: str,
    folder: Path,
    version: str | None = None,
    run: str | None = None,
    progress: Progress | None = None,
) -> Mounted:
    """A read-only copy of `slug` at `version` (the head), or at the version `run` pinned, in the
    missing or empty `folder`. Raises the server's errors, InvalidArchive, InvalidRequest."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InvalidRequest(f"{folder} must be a missing or empty folder", folder=str(folder))
    resolved, wanted = _listing(remote, slug, version, run)
    staging = folder.parent / f".{folder.name}.kbserver-mount"
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove(staging)
    staging.mkdir()
    try:
        query = {"version": resolved} if resolved else {}
        if progress:
            progress(0, len(wanted))
        with remote.stream(f"/kbs/{slug}/archive", **query) as body:
            _extract(body, slug, wanted, staging, None, progress)
        _read_only_folders(staging)
        _write_source(folder, Source(remote.url, slug, resolved, run))
        try:
            os.replace(staging, folder)  # an empty folder is replaced as a whole
        except BaseException:
            source_file(folder).unlink(missing_ok=True)
            raise
    except BaseException:
        _remove(staging)
        raise
    return Mounted(slug, resolved, len(wanted), len(wanted), 0, folder)


def _fetch_each(
    remote: Remote, slug: str, version: str, changed: Expected, into: Path, progress: Progress | None
) -> dict[str, Path]:
    written: dict[str, Path] = {}
    for path, (size, sha256) in changed.items():
        found = remote.call("GET", f"/kbs/{slug}/files/{path}", version=version)
        data = str(found.get("content", "")).encode("utf-8") if isinstance(found, dict) else b""
        target = into / str(len(written))
        _copy(io.BytesIO(data), target, size, sha256, path, slug)
        written[path] = target
        if progress:
            progress(len(written), len(changed))
    return written


def update(
    folder: Path,
    token: str | None,
    version: str | None = None,
    progress: Progress | None = None,
    run: str | None = None,
) -> Mounted:
    """Move the copy in `folder` to `version` (the KB's head) by the difference of the two listings:
    files that changed are fetched and checked first (nothing in `folder` changes until all are
    here), then each is renamed into place and deleted files removed; unchanged files are not touched.
    `run`: the run the copy now serves (recorded beside it). Raises NotFound (no remote mount), the
    server's errors, InvalidArchive."""
    source = read_source(folder)
    if not folder.is_dir():
        raise NotFound(f"{folder} is no folder: mount it again", folder=str(folder))
    remote = Remote(source.url, token)
    slug = source.slug
    with ThreadPoolExecutor(2) as pool:  # both listings at once: the server answers them side by side
        asked_new = pool.submit(_listing, remote, slug, version, None)
        asked_old = pool.submit(_listing, remote, slug, source.version, None) if source.version else None
        target_version, new = asked_new.result()
        old = asked_old.result()[1] if asked_old is not None else {}
    if target_version == source.version:
        return Mounted(slug, target_version, len(new), 0, 0, folder)
    changed = {p: e for p, e in new.items() if old.get(p) != e}
    deleted = sorted(p for p in old if p not in new)
    staging = folder.parent / f".{folder.name}.kbserver-update"
    _remove(staging)
    staging.mkdir()
    try:
        if progress:
            progress(0, len(changed))
        fetched: dict[str, Path] = {}
        if changed and target_version:
            if len(changed) <= _BY_FILE:
                try:
                    fetched = _fetch_each(remote, slug, target_version, changed, staging, progress)
                except InvalidRequest:  # a file that is not UTF-8 text: the archive carries its bytes
                    _remove(staging)
                    staging.mkdir()
            if len(fetched) != len(changed):
                with remote.stream(f"/kbs/{slug}/archive", version=target_version) as body:
                    fetched = _extract(body, slug, new, staging, changed, progress)
        _apply(folder, fetched, deleted)
        _write_source(folder, Source(source.url, slug, target_version, run or source.run))
    finally:
        _remove(staging)
    return Mounted(slug, target_version, len(new), len(fetched), len(deleted), folder)


def _ancestors(folder: Path, path: str) -> list[Path]:
    """`folder` and the folders inside it that hold `path`, outermost first."""
    parts = path.split("/")[:-1]
    return [folder, *(folder.joinpath(*parts[: i + 1]) for i in range(len(parts)))]


def _apply(folder: Path, fetched: dict[str, Path], deleted: list[str]) -> None:
    """Remove the deleted files (and the folders they leave empty), then rename each fetched file
    into place, opening only the folders they are in for the time it takes."""
    opened: dict[Path, None] = {}

    def open_folder(d: Path) -> None:
        if d not in opened:
            d.chmod(0o755)
            opened[d] = None

    try:
        for path in deleted:
            for d in _ancestors(folder, path):
                if d.is_dir():
                    open_folder(d)
            with contextlib.suppress(FileNotFoundError):
                (folder / path).unlink()
        for path in deleted:  # folders left empty go too, innermost first
            for d in reversed(_ancestors(folder, path)[1:]):
                try:
                    d.rmdir()
                except OSError:
                    break
        for path, staged in fetched.items():
            target = folder / path
            for d in _ancestors(folder, path):
                if d.is_dir():
                    open_folder(d)
                else:
                    d.mkdir(mode=0o755)
                    opened[d] = None
            if target.is_dir() and not target.is_symlink():
                _remove(target)  # a folder that became a file
            os.replace(staged, target)
    finally:
        for d in sorted(opened, key=lambda p: len(p.parts), reverse=True):
            if d.is_dir() and not d.is_symlink():  # not a folder removed, or a file in its place now
                with contextlib.suppress(OSError):
                    d.chmod(0o555)
