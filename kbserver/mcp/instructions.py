"""The server instructions an agent gets at connection time: memory rules, its KBs, the learning policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbserver.core.model import Caller
from kbserver.services.models import KBSummary

__all__ = ["LEARNING_POLICY", "MEMORY_RULES", "instructions"]

MEMORY_RULES = """\
Memory rules:
- A knowledge base (KB) is the only storage that outlives this run: whatever you do not write to it is \
forgotten when the run ends.
- Read the KB's README.md first (read_context_file path="README.md") and follow its rules.
- Read a file before changing it and pass the sha256 you read as expected_sha256; on a `stale` error, \
read the file again and redo your change on the new content.
- Put one complete update in one write_context call (all its files change together in one version, \
or none does).
- Never write secrets, credentials, tokens or raw transcripts into a KB.
- KB files may have been written by other agents. If something looks wrong or contradicts itself, check \
the file's history with list_context_versions (path="...") and read an older version with \
read_context_file (version="...")."""

LEARNING_POLICY = """\
Learning policy (you record what you learn):
- Before you finish, record what is worth remembering for later runs: facts, decisions, practices that worked.
- Edit existing content rather than adding files; when you do add a file, add it to the KB's index \
(README.md or the index it names) in the same write_context call.
- Write facts and practices, never instructions to other agents.
- Summarise in your own words; do not paste conversations or tool output.
- Never claim to have remembered something unless write_context succeeded.
- In an unattended run, update memory as the last step."""


def _kb_lines(kbs: Sequence[KBSummary]) -> list[str]:
    lines = []
    for kb in kbs:
        description = kb.description.strip() or "(no description)"
        lines.append(f"- {kb.slug} ({kb.permission}): {description}")
    return lines


def instructions(
    caller: Caller,
    kbs: Sequence[KBSummary],
    run: tuple[str, Mapping[str, str]] | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The instructions for `caller`, who can reach `kbs`.

    `extra` are the parts of the caller's dialects (e.g. its MEMORY.md), added at the end."""
    who = "the admin" if caller.is_admin else f"agent {caller.name}"
    parts = [
        f"kbserver: versioned, reviewable memory. You are connected as {who}. Each KB is a git repository; "
        "every write_context call becomes one version that people can review and revert.",
        MEMORY_RULES,
    ]
    if kbs:
        reach = ["KBs you can reach (slug, permission: description):", *_kb_lines(kbs)]
        if len(kbs) == 1:
            reach.append(f"You can omit `kb` in every tool call: it defaults to {kbs[0].slug}.")
        else:
            reach.append("Pass `kb` (a slug above) in every tool call.")
        parts.append("\n".join(reach))
    else:
        parts.append("You cannot reach any KB yet; ask an admin to link you to one.")
    if any(kb.permission == "read_write_ask" for kb in kbs):
        parts.append(
            "Where your permission is read_write_ask, a write becomes a proposal that an admin approves or "
            "rejects; it is not part of the KB until then. get_proposal {id} tells you what became of it."
        )
    if run is not None:
        run_id, mounts = run
        parts.append(
            f"This session is run {run_id}. The resources kb://{{slug}}/{{path}} show the KBs as they were "
            "when it started (a fixed snapshot); read_context_file always shows the current file, including "
            "your own writes. kb://{slug}@{version}/{path} reads any version."
            + ("" if mounts else " No KB was mounted when it started.")
            + " You need no start_run: your calls belong to this run."
        )
    elif not caller.is_admin:
        ask = any(kb.permission == "read_write_ask" for kb in kbs)
        parts.append(
            "Runs: at the start of a task, call start_run"
            + (' {"interactive": true} (a person follows and can approve your writes)' if ask else "")
            + " and pass the `run` it returns as `run` in every later tool call. The run pins a snapshot "
            "of your KBs (kb://{slug}/{path}?run=RUN reads it) and names your writes in the history."
            + (" Without an interactive run your writes to read_write_ask KBs are refused." if ask else "")
        )
    if caller.auto_record:
        parts.append(LEARNING_POLICY)
    parts.extend(extra)
    return "\n\n".join(parts)
