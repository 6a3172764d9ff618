"""YAML front matter: the one reading of a Markdown file's `---` block that every part shares.

The memory tools decide what a memory says with it, and the privacy rule decides with it whom a memory
belongs to: two readings (a byte search for `agentId`, a different end of the block) let a YAML escape
or a `---y` line hide an owner from one and show it to the other.
"""

from __future__ import annotations

import yaml

__all__ = ["split_front_matter"]

# libyaml's safe loader when PyYAML has it: the same documents, parsed in C (a catalogue of 10,000
# memories is parsed when a KB is first used).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def split_front_matter(text: str) -> tuple[dict[object, object], str] | None:
    """(front matter, body) of `text`: a first line `---`, YAML up to the first line `---`, then the
    body after it. None when the file has no such block or its YAML is not a mapping."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end == -1:
        return None
    try:
        front = yaml.load(text[4 : end + 1], Loader=_LOADER)
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
        return None
    if not isinstance(front, dict):
        return None
    return front, text[end + 5 :]
