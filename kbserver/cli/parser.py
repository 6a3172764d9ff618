"""The argument parser: every command, its options and the function that runs it."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import NoReturn

from kbserver import __version__

__all__ = ["build"]


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """`kbserver.cli.{module}.{name}`, imported when the command runs: a command that talks to a
    server over HTTP (`mount --url`, `run`) starts without importing the storage, the index and the
    embedder that the data-folder commands need."""

    def run(args: argparse.Namespace) -> int:
        fn: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(f"kbserver.cli.{module}"), name
        )
        return fn(args)

    return run


class _Parser(argparse.ArgumentParser):
    """argparse with one `error: invalid_request: ...` line (and exit 1) instead of usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: invalid_request: {self.prog}: {message} (see {self.prog} --help)\n")


def build() -> argparse.ArgumentParser:
    """The parser of every command. It imports no command's module: each is imported when it runs
    (`_lazy`), so help, a refused argument and the HTTP commands never import the services."""
    parser = _Parser(prog="kbserver", description="Versioned memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"kbserver {__version__}")
    # --data also before the command (`kbserver --data D agent list`); its own dest, since the
    # command's --data default (None) would otherwise overwrite it.
    parser.add_argument("--data", dest="data_first", default=None, help="the data folder (as COMMAND --data)")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str,
        fn: Callable[[argparse.Namespace], int],
        help_: str,
        parent: argparse._SubParsersAction[_Parser] | None = None,
        creates_data: bool = False,
    ) -> argparse.ArgumentParser:
        p = (parent or sub).add_parser(name, help=help_, description=help_)
        where = "created when missing" if creates_data else "must exist"
        p.add_argument(
            "--data", default=None, help=f"data folder (default ./kbdata or $KBSERVER_DATA; {where})"
        )
        p.set_defaults(fn=fn, creates_data=creates_data, long_running=name in ("serve", "worker", "mcp"))
        return p

    p = command(
        "serve", _lazy("serve", "serve"), "run the server (HTTP API, MCP, git clone)", creates_data=True
    )
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1, or $KBSERVER_HOST)")
    p.add_argument(
        "--port", type=int, default=None, help="port to listen on (default 8765, or $KBSERVER_PORT)"
    )

    kb = sub.add_parser("kb", help="manage KBs", description="manage KBs")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    p = command("create", _lazy("admin", "kb_create"), "create a KB and say where", kb_sub, creates_data=True)
    p.add_argument("slug", help="the KB's name: lowercase letters, digits and dashes")
    p.add_argument("--description", default="", help="what the KB is for (goes into its README.md)")
    p.add_argument("--json", action="store_true", help="print the KB as JSON")
    p = command("list", _lazy("admin", "kb_list"), "list every KB: slug, head version, description", kb_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = command("limits", _lazy("admin", "kb_limits"), "set a KB's write limits (prints them)", kb_sub)
    p.add_argument("slug", help="the KB")
    p.add_argument("--max-file-bytes", type=int, default=None, help="size limit of one file after a change")
    p.add_argument("--max-files", type=int, default=None, help="files per write")

    agent = sub.add_parser("agent", help="manage agents", description="manage agents and their tokens")
    agent_sub = agent.add_subparsers(dest="agent_command", required=True)
    p = command(
        "create",
        _lazy("admin", "agent_create"),
        "create an agent; prints its token on the last line",
        agent_sub,
    )
    p.add_argument("name", help="the agent's name: lowercase letters, digits, dashes and underscores")
    p.add_argument("--parent", default=None, help="an existing agent whose auto memory this one may read")
    p.add_argument("--tools", default=None, help="comma-separated tool sets (default: context)")
    p.add_argument("--auto-record", action="store_true", help="teach the agent to record what it learns")
    p = command("list", _lazy("admin", "agent_list"), "list agents with their tool sets and links", agent_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = command(
        "token",
        _lazy("admin", "agent_token"),
        "give an agent a new token (the old one stops working); prints it last",
        agent_sub,
    )
    p.add_argument("name", help="the agent")
    p = command(
        "delete",
        _lazy("admin", "agent_delete"),
        "delete an agent and its links; its token stops working",
        agent_sub,
    )
    p.add_argument("name", help="the agent")

    person = sub.add_parser("person", help="manage people", description="manage people and their tokens")
    person_sub = person.add_subparsers(dest="person_command", required=True)
    p = command(
        "create",
        _lazy("people", "person_create"),
        "create a person (owner, reviewer of some KBs, or viewer)",
        person_sub,
    )
    p.add_argument("name", help="the person's name: lowercase letters, digits, dashes and underscores")
    p.add_argument("--email", required=True, help="their email (unique; sign-in and single sign-on match it)")
    p.add_argument("--role", required=True, choices=["owner", "reviewer", "viewer"], help="what they may do")
    p.add_argument(
        "--kb", action="append", default=None, help="a KB a reviewer decides on (repeatable; reviewers only)"
    )
    p.add_argument(
        "--password-stdin", action="store_true", help="read their password as one line of standard input"
    )
    p = command("list", _lazy("people", "person_list"), "list people: name, email, role, KBs", person_sub)
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p = command(
        "delete",
        _lazy("people", "person_delete"),
        "delete a person; their token and sessions stop working",
        person_sub,
    )
    p.add_argument("name", help="the person")
    p = command(
        "token",
        _lazy("people", "person_token"),
        "give a person a new personal token (printed last)",
        person_sub,
    )
    p.add_argument("name", help="the person")

    p = command(
        "link", _lazy("admin", "link"), "give an agent a permission on a KB (replaces an earlier one)"
    )
    p.add_argument("agent", help="the agent")
    p.add_argument("slug", help="the KB")
    p.add_argument(
        "--permission",
        required=True,
        choices=["read", "read_write", "read_write_ask"],
        help="read; read_write; read_write_ask (writes become proposals an admin approves)",
    )
    p = command("unlink", _lazy("admin", "unlink"), "take an agent's permission on a KB away")
    p.add_argument("agent", help="the agent")
    p.add_argument("slug", help="the KB")

    p = command("proposals", _lazy("admin", "list_proposals"), "list a KB's proposals, newest first")
    p.add_argument("slug", help="the KB")
    p.add_argument(
        "--status",
        default=None,
        choices=["pending", "approved", "rejected"],
        help="only proposals in this state",
    )
    p.add_argument("--json", action="store_true", help="print the proposals (with their diffs) as JSON")
    p = command("approve", _lazy("admin", "approve"), "apply a pending proposal as a new version")
    p.add_argument("slug", help="the KB")
    p.add_argument("id", help="the proposal's id (prop_...)")
    p = command("reject", _lazy("admin", "reject"), "reject a pending proposal")
    p.add_argument("slug", help="the KB")
    p.add_argument("id", help="the proposal's id (prop_...)")
    p.add_argument("--reason", default=None, help="why, for the agent to read")

    p = command(
        "mount",
        _lazy("sandbox", "mount_command"),
        "write a read-only copy of a version to a folder: from the data folder (SLUG DIR), or over "
        "HTTP from a server (--url with --kb or --run), or bring such a copy to the head (--update DIR)",
    )
    p.add_argument(
        "where",
        nargs="+",
        metavar="[SLUG] DIR",
        help="SLUG DIR on the data folder; DIR alone with --url or --update",
    )
    p.add_argument("--version", dest="version", default=None, help="the version (default: the head)")
    p.add_argument("--url", default=None, help="a kbserver's URL: copy over HTTP (default $KBSERVER_URL)")
    p.add_argument("--token", default=None, help="the agent's token (default $KBSERVER_TOKEN); never stored")
    p.add_argument("--kb", default=None, help="with --url: the KB to copy into DIR")
    p.add_argument("--run", default=None, help="with --url: copy each KB this run pinned into DIR/{slug}/")
    p.add_argument(
        "--update",
        action="store_true",
        help="bring the copy in DIR (made with --url) to the KB's head, writing only the files that changed",
    )

    p = command(
        "run",
        _lazy("sandbox", "run_command"),
        "start a run, mount its KBs read-only, run COMMAND with the run in its environment and MCP "
        "configuration, end the run when COMMAND exits (its status is this command's)",
    )
    p.add_argument("--url", default=None, help="the kbserver's URL (default $KBSERVER_URL)")
    p.add_argument("--token", default=None, help="the agent's token (default $KBSERVER_TOKEN)")
    p.add_argument("--kb", action="append", default=None, help="a KB to pin (repeatable; default: every KB)")
    p.add_argument(
        "--interactive", action="store_true", help="a person follows the run (asks become proposals)"
    )
    p.add_argument(
        "--mount-root",
        default=None,
        help="where the KBs go, a folder each (default /mnt/context/contexts if possible, else ./context)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG]...", help="the command to run")

    p = command(
        "import",
        _lazy("admin", "import_folder"),
        "import a folder's text files as one version (changed files; --delete mirrors)",
    )
    p.add_argument("slug", help="the KB (created when missing)")
    p.add_argument("folder", help="the folder to import")
    p.add_argument("--description", default="", help="the description of a KB created by the import")
    p.add_argument(
        "--delete",
        action="store_true",
        help="also delete the KB's files that the folder does not hold (mirror it), in the same version",
    )

    p = command("reindex", _lazy("admin", "reindex"), "rebuild the search index of one or every KB")
    p.add_argument("slug", nargs="?", help="the KB (default: every KB)")

    command(
        "migrate",
        _lazy("serve", "migrate"),
        "apply the control store's migrations (serve also does at start)",
    )
    command("fsck", _lazy("admin", "fsck"), "check every repository and the control plane (exit 2 on damage)")
    p = command(
        "repack",
        _lazy("admin", "repack"),
        "pack one KB's (or every KB's) history with deltas now (git repack)",
    )
    p.add_argument("slug", nargs="?", help="the KB (default: every KB)")
    p.add_argument("--full", action="store_true", help="compute every delta again (slower, smallest)")

    p = command(
        "worker",
        _lazy("serve", "worker"),
        "follow main into the search index in this process (set KBSERVER_FOLLOWER=worker for serve)",
    )
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # serve's child: end with that process

    p = command("mcp", _lazy("serve", "mcp"), "serve MCP over stdio for one agent")
    p.add_argument("--agent", required=True, help="the agent whose tools and permissions the client gets")
    return parser
