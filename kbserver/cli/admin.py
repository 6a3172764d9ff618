"""The one-shot commands, run as the admin on the data folder: KBs, agents, links, proposals, import,
mount, reindex, fsck and repack. Each prints what it did and returns its exit code."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kbserver.cli.bars import memory_peak_mb
from kbserver.cli.context import closing, progress_bar, progress_bars, services_of
from kbserver.core.errors import AlreadyExists
from kbserver.services import health, kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files, search
from kbserver.services.writing import proposals

__all__ = [
    "agent_create",
    "agent_delete",
    "agent_list",
    "agent_token",
    "approve",
    "fsck",
    "import_folder",
    "kb_create",
    "kb_limits",
    "kb_list",
    "link",
    "list_proposals",
    "mount",
    "reindex",
    "reject",
    "repack",
    "unlink",
]


def kb_create(args: argparse.Namespace) -> int:
    settings, services = services_of(args)
    with closing(services):
        kb = kbs.create(services, ADMIN, args.slug, args.description)
    if args.json:
        print(json.dumps(kb.model_dump(mode="json")))
    else:
        about = f" ({kb.description})" if kb.description else ""
        print(f"created KB {kb.slug}{about} in data folder {settings.data.resolve()}")
    return 0


def kb_limits(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        kb = kbs.set_limits(services, ADMIN, args.slug, args.max_file_bytes, args.max_files)
    print(json.dumps(kb.limits.model_dump(mode="json")))
    return 0


def agent_create(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    with closing(services):
        try:
            agent, token = agents.create(services, ADMIN, args.name, args.parent, tools, args.auto_record)
        except AlreadyExists as err:  # a second run of the README's walkthrough: say how to get a token
            hint = f"; `kbserver agent token {args.name}` gives it a new token"
            raise AlreadyExists(err.message + hint, **err.details) from None
    print(f"created agent {agent.name} (tools: {', '.join(agent.tools)}); its token, shown once:")
    print(token)
    return 0


def kb_list(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        listing = kbs.visible(services, ADMIN)
    if args.json:
        print(json.dumps([kb.model_dump(mode="json") for kb in listing], ensure_ascii=False))
        return 0
    for kb in listing:
        head = (kb.head or "-")[:12]
        print(f"{kb.slug}\t{head}\t{kb.description}")
    return 0


def agent_list(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        listing = agents.listing(services, ADMIN)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), ensure_ascii=False))
        return 0
    for agent in listing.agents:
        links = ", ".join(f"{link.kb}:{link.permission}" for link in agent.links) or "-"
        print(f"{agent.name}\ttools={','.join(agent.tools)}\tlinks={links}")
    return 0


def agent_token(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        agent, token = agents.rotate(services, ADMIN, args.name)
    print(f"new token for agent {agent.name}; the old one stops working now. Shown once:")
    print(token)
    return 0


def agent_delete(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        agents.delete(services, ADMIN, args.name)
    print(f"deleted agent {args.name} and its links; its token stops working now")
    return 0


def unlink(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        agents.unlink(services, ADMIN, args.agent, args.slug)
    print(f"unlinked agent {args.agent} from KB {args.slug}")
    return 0


def list_proposals(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        listing = proposals.listing(services, ADMIN, args.slug, args.status)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), ensure_ascii=False))
        return 0
    for p in listing.proposals:
        paths = ", ".join(f"{f.mode} {f.path}" for f in p.files)
        print(f"{p.id}\t{p.status}\t{p.agent}\t{p.created}\t{paths}")
    return 0


def approve(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        out = proposals.approve(services, ADMIN, args.slug, args.id)
    print(f"approved proposal {args.id} of KB {args.slug} as version {out.version}")
    return 0


def reject(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        proposals.reject(services, ADMIN, args.slug, args.id, args.reason)
    print(f"rejected proposal {args.id} of KB {args.slug}")
    return 0


def link(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        agents.link(services, ADMIN, args.agent, args.slug, args.permission)
    print(f"linked agent {args.agent} to KB {args.slug} with {args.permission}")
    return 0


def import_folder(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services), progress_bar(f"importing {Path(args.folder).name}") as bar:
        result = kbs.import_folder(
            services, ADMIN, args.slug, Path(args.folder), bar, args.description, delete=args.delete
        )
    for skipped in result.skipped:
        print(f"skipped {skipped}", file=sys.stderr)
    if not result.changed:
        print(
            f"nothing changed: KB {result.slug} already holds these {result.unchanged} files "
            f"at version {result.version}; no version was made"
        )
        return 0
    deleted = f", deleted {result.deleted}" if result.deleted else ""
    print(
        f"imported {result.files} files{deleted} into KB {result.slug} as version {result.version}"
        f" ({result.unchanged} unchanged)"
    )
    return 0


def mount(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services), progress_bar(f"writing {Path(args.dir).name}") as bar:
        out = files.export(services, ADMIN, args.slug, Path(args.dir), args.version, bar)
    print(f"wrote {out.files} files of KB {args.slug} at version {out.version} to {args.dir} (read-only)")
    return 0


_STEPS = {"index": "indexing", "vectors": "embedding"}
"""What `reindex` shows for each sink's bar: the index counts files, the vectors count passages
embedded (contents already embedded are reused, so that bar shows only new ones)."""


def _labelled(
    bars: Callable[[str, int, int | None], None], slug: str
) -> Callable[[str, int, int | None], None]:
    def progress(sink: str, done: int, total: int | None) -> None:
        bars(f"{_STEPS.get(sink, sink)} {slug}", done, total)

    return progress


def reindex(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        slugs = [args.slug] if args.slug else kbs.slugs(services, ADMIN)
        for slug in slugs:
            kbs.describe(services, ADMIN, slug)  # NotFound for an unknown slug
            started = time.monotonic()
            with progress_bars() as bars:
                version = search.reindex(services, ADMIN, slug, _labelled(bars, slug))
            print(
                f"{slug}: index rebuilt at version {version} in {time.monotonic() - started:.1f} s"
                f" (memory peak {memory_peak_mb():.0f} MB)"
            )
    return 0


def fsck(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        problems = health.fsck(services)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print("fsck: ok" if not problems else f"fsck: {len(problems)} problem(s)")
    return 0 if not problems else 2


def repack(args: argparse.Namespace) -> int:
    _, services = services_of(args)
    with closing(services):
        health.repack(services, args.slug, args.full)
    return 0
