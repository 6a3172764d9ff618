"""The folder of bare repositories: create, open (one reader and one writer per KB), recover."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from dulwich.repo import Repo

from kbserver.core.errors import AlreadyExists, NotFound, Unavailable
from kbserver.core.model import SLUG_PATTERN
from kbserver.core.pool import LeasePool
from kbserver.store.packing import mark_deltified, pack_stats, repack
from kbserver.store.repo import KBRepo
from kbserver.store.verify import verify
from kbserver.store.writer import WAIT_SECONDS, CommitPlan, Writer, kb_lock, recover_locks

__all__ = ["Repos"]

_SLUG = re.compile(SLUG_PATTERN)


class Repos:
    """`{root}/{slug}.git` for every KB; opened lazily, kept in `pool` while recently used.

    An evicted repository is closed, and stays usable by whoever still holds it (dulwich reopens
    its packs); the next `get` opens a fresh one with empty caches.
    """

    def __init__(
        self, root: Path, *, fsync: bool = True, pool: LeasePool | None = None, wait: float = WAIT_SECONDS
    ) -> None:
        self.root = root
        self._fsync = fsync
        self._wait = wait
        root.mkdir(parents=True, exist_ok=True)
        self._pool = pool if pool is not None else LeasePool(1 << 62)
        self._open = self._pool.kind("repo", self._open_repo, _close, _weigh)

    def path(self, slug: str) -> Path:
        """`{root}/{slug}.git`. Raises NotFound for anything but a slug (`../outside` never leaves root)."""
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            raise NotFound(f"KB {slug} does not exist", slug=slug)
        return self.root / f"{slug}.git"

    def exists(self, slug: str) -> bool:
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            return False
        return (self.path(slug) / "HEAD").is_file()

    def slugs(self) -> list[str]:
        return sorted(p.name[:-4] for p in self.root.glob("*.git") if (p / "HEAD").is_file())

    def create(self, slug: str, readme: bytes, author: str, message: str) -> str:
        """Create the bare repository with its first version holding README.md; returns the version.

        Raises AlreadyExists when the repository is there already.
        """
        path = self.path(slug)
        if path.exists():
            raise AlreadyExists(f"a KB named {slug} already exists", slug=slug)
        # A folder of its own per attempt: two creates of one slug must never share a half-made repo.
        tmp = Path(tempfile.mkdtemp(prefix=f".{slug}.git.creating-", dir=self.root))
        tmp.chmod(0o755)  # mkdtemp makes it 0700; a repository is as readable as any other folder
        with Repo.init_bare(str(tmp), default_branch=b"main") as git:
            config = git.get_config()
            config.set((b"core",), b"logallrefupdates", False)
            config.set((b"kbserver",), b"slug", slug.encode())
            config.write_to_path()
        mark_deltified(str(tmp))  # nothing of it will ever be packed whole (store.packing)
        try:
            repo = KBRepo(str(tmp))
            writer = Writer(repo, fsync=self._fsync)
            try:
                version, _, _ = writer.submit(
                    lambda _tip: CommitPlan(
                        {"README.md": readme}, message, author, {"Kb-Actor": "admin", "Kb-Kind": "create"}
                    )
                )
            finally:
                writer.close()
                repo.close()
            # atomic: a KB is either fully there or not at all; renaming onto a repository that
            # another create put there first fails (the target folder is not empty)
            os.rename(tmp, path)
        except OSError:
            if not self.exists(slug):
                raise
            raise AlreadyExists(f"a KB named {slug} already exists", slug=slug) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return version

    def _open_repo(self, slug: str) -> tuple[KBRepo, Writer]:
        if not self.exists(slug):
            raise NotFound(f"KB {slug} does not exist", slug=slug)
        repo = KBRepo(str(self.path(slug)))
        return repo, Writer(repo, fsync=self._fsync, wait=self._wait)

    def get(self, slug: str) -> tuple[KBRepo, Writer]:
        """The open repository and writer of `slug`. Raises NotFound."""
        return self._open.get(slug)

    def repo(self, slug: str) -> KBRepo:
        return self.get(slug)[0]

    def recover(self, slug: str) -> list[str]:
        """Remove lock files a crashed writer left, holding the KB's flock so no live writer is hurt."""
        path = str(self.path(slug))
        with kb_lock(path):
            return recover_locks(path)

    def verify(self, slug: str) -> list[str]:
        """Problems C git's fsck (or a reachability walk) finds in the KB's repository."""
        return verify(str(self.path(slug)))

    def repack(self, slug: str, *, full: bool = False) -> str | None:
        """Repack the KB now (store.packing); a summary line, None when another repack runs. Raises
        NotFound, and Unavailable when git fails (nothing is lost)."""
        if not self.exists(slug):
            raise NotFound(f"KB {slug} does not exist", slug=slug)
        try:
            result = repack(str(self.path(slug)), full=full)
        except subprocess.CalledProcessError as err:
            detail = (err.stderr or b"").decode("utf-8", "replace").strip()[-300:]
            message = f"git repack of {slug} failed (nothing was lost): {detail}"
            raise Unavailable(message, slug=slug) from None
        if result is None:
            return None
        self.repo(slug).drop_deleted_packs()
        b, a = result.before, result.after
        return (
            f"{b.total_bytes:,} bytes ({b.loose_objects} loose objects, {b.packs} packs) -> "
            f"{a.total_bytes:,} bytes ({a.loose_objects} loose, {a.packs} packs) in {result.seconds:.1f} s"
            f" ({result.method})"
        )

    def disk_usage(self, slug: str) -> int:
        """Bytes of the KB's objects on disk (loose and packed: its whole history). Raises NotFound."""
        if not self.exists(slug):
            raise NotFound(f"KB {slug} does not exist", slug=slug)
        return pack_stats(str(self.path(slug))).total_bytes

    def close(self) -> None:
        self._open.close_all()


def _close(opened: tuple[KBRepo, Writer]) -> None:
    opened[1].close()  # stops a running repack first: it would reopen the packs it deletes
    opened[0].close()


def _weigh(opened: tuple[KBRepo, Writer]) -> int:
    return opened[0].weight()
