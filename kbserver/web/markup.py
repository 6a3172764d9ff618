"""Untrusted KB text made safe for a page: Markdown without raw HTML, coloured diffs, search snippets.

markdown-it loads with the first Markdown rendered (an admin page), not with the server.
"""

from __future__ import annotations

import difflib
import functools
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

__all__ = [
    "DiffFile",
    "DiffLine",
    "highlight_snippet",
    "parse_patch",
    "render_markdown",
    "when",
    "when_short",
    "word_diff",
]

_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):", re.I)
_SAFE_SCHEMES = ("http", "https", "mailto")
_WORD = re.compile(r"\w+|\s+|[^\w\s]")
_MAX_WORD_DIFF = 2000  # characters of a line compared word by word; longer lines are marked whole


def when(stamp: object) -> str:
    """An ISO time as a person reads it: `4 Dec 2026, 18:40 UTC` (the raw text when it is not one)."""
    try:
        t = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return str(stamp)
    return f"{t.day} {t:%b %Y, %H:%M} UTC"


def when_short(stamp: object) -> str:
    """An ISO time in a list: `4 Dec 18:40` (UTC; the raw text when it is not one)."""
    try:
        t = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return str(stamp)
    return f"{t.day} {t:%b %H:%M}"


def _valid_link(url: str) -> bool:
    """http(s), mailto and relative links only: no javascript:, data:, file: or any other scheme."""
    m = _SCHEME.match(url.strip())
    return m is None or m.group(1).lower() in _SAFE_SCHEMES


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    if _SCHEME.match(href) or href.startswith("//"):
        token.attrSet("rel", "nofollow noopener noreferrer")
    elif href and not href.startswith(("/", "#", "?")) and env.get("files_url"):
        # A relative link inside a KB file points at another KB file: show that file's page.
        # markdown-it percent-encodes the href already (团 is %E5%9B%A2): decode it once, so that
        # the file page's address encodes the path once, as every list does.
        target, _, fragment = href.partition("#")
        relative = unquote(target.split("?", 1)[0])
        path = posixpath.normpath(posixpath.join(env.get("folder", ""), relative))
        if not path.startswith("..") and path != ".":
            token.attrSet("href", env["files_url"] + quote(path) + (f"#{fragment}" if fragment else ""))
    return self.renderToken(tokens, idx, options, env)


def _image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    # Images are never loaded (a tracking pixel would tell an outsider who reads the KB, and when).
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = str(token.attrGet("src") or "")
    return str(Markup('<span class="image">[image: {}] <code>{}</code></span>').format(alt, src))


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _valid_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    md.enable("table")
    md.enable("strikethrough")
    return md


def render_markdown(text: str, files_url: str = "", folder: str = "") -> Markup:
    """HTML of Markdown `text` with raw HTML escaped, unsafe links dropped and images not loaded.

    `files_url` (ending in /) and `folder` resolve relative links to other files' pages.
    """
    env: dict[str, Any] = {"files_url": files_url, "folder": folder}
    return Markup(_markdown().render(text, env))


def highlight_snippet(text: str, highlights: Sequence[tuple[int, int]]) -> Markup:
    """A plain search snippet with its [start, end) highlights as <mark>, everything else escaped."""
    out, cursor = Markup(""), 0
    for start, end in sorted(highlights):
        start, end = max(start, cursor), min(end, len(text))
        if start >= end:
            continue
        out += escape(text[cursor:start]) + Markup("<mark>{}</mark>").format(text[start:end])
        cursor = end
    return out + escape(text[cursor:])


@dataclass
class DiffLine:
    kind: str  # "add", "del", "ctx", "hunk", "note"
    old: int | None
    new: int | None
    html: Markup


@dataclass
class DiffFile:
    path: str
    change: str
    lines: list[DiffLine] = field(default_factory=list)
    added: int = 0
    deleted: int = 0


def word_diff(a: str, b: str) -> tuple[Markup, Markup]:
    """Two texts (a memory's, up to 20,000 characters each) with the words that differ marked."""
    return _words(a, b, 20_000)


def _words(a: str, b: str, longest: int = _MAX_WORD_DIFF) -> tuple[Markup, Markup]:
    """Both lines with the words that differ wrapped in <del> and <ins>."""
    if len(a) > longest or len(b) > longest:
        return escape(a), escape(b)
    wa, wb = _WORD.findall(a), _WORD.findall(b)
    old, new = Markup(""), Markup("")
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        left, right = "".join(wa[i1:i2]), "".join(wb[j1:j2])
        if op == "equal":
            old += escape(left)
            new += escape(right)
            continue
        if left:
            old += Markup("<del>{}</del>").format(left)
        if right:
            new += Markup("<ins>{}</ins>").format(right)
    return old, new


def _flush(out: list[DiffLine], dels: list[DiffLine], adds: list[DiffLine], raw: dict[int, str]) -> None:
    for d, a in zip(dels, adds, strict=False):
        d.html, a.html = _words(raw[id(d)], raw[id(a)])
    out.extend(dels)
    out.extend(adds)
    dels.clear()
    adds.clear()


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def parse_patch(path: str, change: str, patch: str) -> DiffFile:
    """One file's unified diff as lines to colour, with word-level highlights in changed lines."""
    f = DiffFile(path, change)
    dels: list[DiffLine] = []
    adds: list[DiffLine] = []
    raw: dict[int, str] = {}
    old_no = new_no = 0
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")) and old_no == new_no == 0:
            continue
        m = _HUNK.match(line)
        if m:
            _flush(f.lines, dels, adds, raw)
            old_no, new_no = int(m.group(1)), int(m.group(2))
            f.lines.append(DiffLine("hunk", None, None, escape(f"From line {max(new_no, 1)}:")))  # not @@
        elif line.startswith("-"):
            d = DiffLine("del", old_no, None, escape(line[1:]))
            raw[id(d)] = line[1:]
            dels.append(d)
            old_no += 1
            f.deleted += 1
        elif line.startswith("+"):
            a = DiffLine("add", None, new_no, escape(line[1:]))
            raw[id(a)] = line[1:]
            adds.append(a)
            new_no += 1
            f.added += 1
        elif line.startswith("\\"):
            _flush(f.lines, dels, adds, raw)
            f.lines.append(DiffLine("note", None, None, escape(line)))
        else:
            _flush(f.lines, dels, adds, raw)
            f.lines.append(DiffLine("ctx", old_no, new_no, escape(line[1:])))
            old_no += 1
            new_no += 1
    _flush(f.lines, dels, adds, raw)
    return f
