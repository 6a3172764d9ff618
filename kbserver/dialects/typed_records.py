"""Pure parts of the `typed` tool set: records and their files, safe names, compiled files, archives.

No I/O: records in, text out. `kbserver.dialects.typed` reads and writes them through the write path.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from kbserver.core.errors import InvalidRequest
from kbserver.core.paths import check_path
from kbserver.core.words import CJK, CJK_FUNCTION_CHARS, COMMON_WORDS, QUESTION_WORDS, fold, is_cjk, words

__all__ = [
    "COMPILED",
    "RECORD_TYPES",
    "SAVED_KINDS",
    "Day",
    "Record",
    "check_date",
    "compile_context",
    "compile_user",
    "match_key",
    "merge_day",
    "parse_day",
    "parse_record",
    "query_words",
    "record_path",
    "render_day",
    "render_record",
    "safe_name",
    "score",
    "terms",
]

RecordType = Literal["self", "relationship", "topic", "saved"]
RECORD_TYPES: tuple[str, ...] = ("self", "relationship", "topic", "saved")
SAVED_KINDS = ("conversation_ref", "source_ref", "text_note", "arrangement")
COMPILED = {"self": "USER.md", "relationship": "USER.md", "topic": "CONTEXT.md", "saved": "CONTEXT.md"}
"""The compiled file each record type feeds (saved records only when they are arrangements)."""

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_NAME = 60
_DEVICES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


class Record(BaseModel):
    """One typed memory. `id` is its path below `{type}/` without `.md`; front matter holds all but the
    summary, which is the Markdown body."""

    model_config = ConfigDict(extra="forbid")
    type: RecordType
    id: str
    summary: str
    title: str | None = None
    name: str | None = None
    category: str | None = None
    key: str | None = None
    saved_kind: str | None = None
    saved_reason: str | None = None
    source_refs: list[dict[str, str]] | None = None
    created: str
    updated: str

    @property
    def label(self) -> str:
        """How an index entry names the record."""
        if self.title:
            return self.title
        if self.name:
            return self.name
        if self.category is not None and self.key is not None:
            return f"{self.category}: {self.key}"
        return one_line(self.summary)[:80]


def one_line(text: str) -> str:
    """`text` with every run of whitespace (newlines included) turned into one space."""
    return " ".join(text.split())


def match_key(*parts: str) -> str:
    """What records are matched by: NFC, case-folded, whitespace collapsed (`Alice ` is `alice`)."""
    return "\x1f".join(one_line(unicodedata.normalize("NFC", p)).casefold() for p in parts)


def safe_name(text: str) -> str:
    """A file name for a name: letters (any script) and digits kept, the rest `-`, at most 60 chars.

    Stable (the same name always gives the same file) and safe on every OS and in git.
    """
    folded = one_line(unicodedata.normalize("NFC", text)).casefold()
    kept = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in folded)
    kept = re.sub(r"-{2,}", "-", kept).strip("-._")[:_MAX_NAME].strip("-._")
    if not kept:
        kept = "x"
    if kept.split(".", 1)[0] in _DEVICES:
        kept += "_"
    return kept


def _hashed(name: str, key: str) -> str:
    return f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def record_ids(kind: str, category: str | None, key: str | None, name: str | None) -> tuple[str, str, str]:
    """(match key, first-choice id, id when another record holds the first) of a matched record."""
    if kind == "self":
        assert category is not None and key is not None
        matched = match_key(category, key)
        first = f"{safe_name(category)}/{safe_name(key)}"
        return matched, first, f"{safe_name(category)}/{_hashed(safe_name(key), matched)}"
    assert name is not None
    matched = match_key(name)
    return matched, safe_name(name), _hashed(safe_name(name), matched)


def record_key(record: Record) -> str:
    if record.type == "self":
        return match_key(record.category or "", record.key or "")
    return match_key(record.name or "")


def record_path(kind: str, record_id: str) -> str:
    """`{type}/{id}.md`. Raises InvalidRequest for an id that is no safe path."""
    return check_path(f"{kind}/{record_id}.md")


# -- front matter -----------------------------------------------------------------------------------
_ORDER = ("id", "type", "name", "category", "key", "title", "saved_kind", "saved_reason", "source_refs")


def render_record(record: Record) -> str:
    """The record as Markdown with YAML front matter (deterministic: fixed field order, no folding)."""
    data = record.model_dump(exclude_none=True)
    summary = data.pop("summary")
    front = {k: data[k] for k in (*_ORDER, "created", "updated") if k in data}
    dumped = yaml.safe_dump(front, allow_unicode=True, sort_keys=False, width=float("inf"))
    return f"---\n{dumped}---\n\n{summary}\n"


def parse_record(text: str) -> Record:
    """The record of a file written by render_record. Raises InvalidRequest when it is not one."""
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise InvalidRequest("not a typed memory file (no YAML front matter)")
    end = text.index("\n---\n", 3)
    try:
        front = yaml.safe_load(text[4 : end + 1])
    except yaml.YAMLError:
        raise InvalidRequest("the front matter of this typed memory file is not valid YAML") from None
    if not isinstance(front, dict):
        raise InvalidRequest("the front matter of this typed memory file is not a mapping")
    body = text[end + 5 :]
    body = body[1:] if body.startswith("\n") else body
    body = body[:-1] if body.endswith("\n") else body
    try:
        return Record.model_validate({**front, "summary": body})
    except ValueError:
        raise InvalidRequest("this typed memory file has missing or unknown fields") from None


# -- compiled files ---------------------------------------------------------------------------------
_NOTE = "Compiled by kbserver's typed memory tools from {folders}; do not edit: the next change rewrites it."


def _entry(label: str, record: Record, when: bool = False) -> str:
    date = f" ({record.updated[:10]})" if when else ""
    return f"- **{one_line(label)}**{date}: {one_line(record.summary)}"


def compile_user(records: Iterable[Record]) -> str:
    """USER.md: the self records by category and key, then the relationships by name."""
    records = list(records)
    mine = sorted((r for r in records if r.type == "self"), key=lambda r: (record_key(r), r.id))
    people = sorted((r for r in records if r.type == "relationship"), key=lambda r: (record_key(r), r.id))
    lines = ["# USER.md", "", _NOTE.format(folders="self/ and relationship/"), "", "## Self"]
    category = None
    for r in mine:
        if r.category != category:
            category = r.category
            lines += ["", f"### {one_line(category or '')}"]
        lines.append(_entry(r.key or "", r))
    if not mine:
        lines += ["", "(nothing yet)"]
    lines += ["", "## Relationships", ""]
    lines += [_entry(r.name or "", r) for r in people] or ["(nothing yet)"]
    return "\n".join(lines) + "\n"


def compile_context(records: Iterable[Record]) -> str:
    """CONTEXT.md: the topics, then the saved arrangements, each newest first."""
    records = list(records)

    def newest(kind: str, arrangement: bool = False) -> list[Record]:
        chosen = [r for r in records if r.type == kind and (not arrangement or r.saved_kind == "arrangement")]
        chosen.sort(key=lambda r: r.id)
        return sorted(chosen, key=lambda r: r.updated, reverse=True)

    lines = [
        "# CONTEXT.md",
        "",
        _NOTE.format(folders="topic/ and saved/ (arrangements)"),
        "",
        "## Topics",
        "",
    ]
    lines += [_entry(r.name or "", r, when=True) for r in newest("topic")] or ["(nothing yet)"]
    lines += ["", "## Saved arrangements", ""]
    lines += [_entry(r.label, r, when=True) for r in newest("saved", arrangement=True)] or ["(nothing yet)"]
    return "\n".join(lines) + "\n"


# -- archives ---------------------------------------------------------------------------------------
class Day(BaseModel):
    """One archived day, `archive/YYYY-MM-DD.json`."""

    model_config = ConfigDict(extra="forbid")
    date: str
    summary: str = ""
    diary: str = ""
    facts: list[str] = []


def check_date(value: object, field: str = "date") -> str:
    """`value` if it is a real calendar date written YYYY-MM-DD. Raises InvalidRequest."""
    if isinstance(value, str) and _DATE.match(value):
        try:
            datetime.date.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise InvalidRequest(f"{field} must be a date written YYYY-MM-DD, e.g. 2026-11-29", **{field: value})


def _merged_text(old: str, new: str | None) -> str:
    if not new or not new.strip():
        return old
    new = new.strip()
    if not old or new == old:
        return new if not old else old
    if new in old:
        return old
    if old in new:
        return new
    return f"{old}\n\n{new}"


def merge_day(
    old: Day | None, date: str, summary: str | None, diary: str | None, facts: Sequence[str] | None
) -> Day:
    """The day after archiving: a day written twice keeps both texts and every distinct fact."""
    base = old or Day(date=date)
    merged_facts = list(base.facts)
    for fact in facts or []:
        text = fact.strip()
        if text and text not in merged_facts:
            merged_facts.append(text)
    return Day(
        date=date,
        summary=_merged_text(base.summary, summary),
        diary=_merged_text(base.diary, diary),
        facts=merged_facts,
    )


def render_day(day: Day) -> str:
    return json.dumps(day.model_dump(), ensure_ascii=False, indent=2) + "\n"


def parse_day(text: str, path: str) -> Day:
    """Raises InvalidRequest when the file is not an archived day."""
    try:
        return Day.model_validate(json.loads(text))
    except ValueError:
        raise InvalidRequest(
            f"{path} is not an archived day (JSON with date, summary, diary, facts)", path=path
        ) from None


# -- matching ---------------------------------------------------------------------------------------
def terms(query: str) -> list[str]:
    """Words of a query, each once: the search index's tokenizer (core.words: words and digits
    NFKC-folded and lowercased, CJK runs as overlapping bigrams), without its stemming."""
    return list(dict.fromkeys(words(query)))


def query_words(query: str) -> list[str]:
    """The words `query_index` and `recall_raw` look for: the query's terms without question words and
    common words ("what", "is", "my", the "s" of "sister's", 什么) unless that leaves none; a CJK
    bigram holding a function character ("么车" of "什么车") keeps only its other character."""
    every = terms(query)
    kept: list[str] = []
    for word in every:
        if word in QUESTION_WORDS or word in COMMON_WORDS:
            continue
        if len(word) == 2 and is_cjk(word) and not CJK_FUNCTION_CHARS.isdisjoint(word):
            kept.extend(ch for ch in word if ch not in CJK_FUNCTION_CHARS)
        else:
            kept.append(word)
    return list(dict.fromkeys(kept)) or every


def _fold(word: str) -> str:
    """A latin word without a plural s, so "birthdays" finds "birthday" and "meetings" "meeting"."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@functools.lru_cache(maxsize=4096)
def _pattern(word: str) -> re.Pattern[str]:
    """Where the query term `word` occurs in folded text: a CJK term anywhere (CJK has no word
    breaks); a latin word as a whole word, with or without a plural s, as `_fold` reads words."""
    if is_cjk(word):
        return re.compile(re.escape(word))
    stem = _fold(word)
    plural = "s?" if len(stem) >= 3 and not stem.endswith("s") else ""
    letter = rf"[^\W_{CJK}]"
    return re.compile(rf"(?<!{letter}){re.escape(stem)}{plural}(?!{letter})")


def _count(word: str, text: str, most: int) -> int:
    found = 0
    for _ in _pattern(word).finditer(text):
        found += 1
        if found == most:
            break
    return found


def score(words: Sequence[str], *texts: str, boost: Sequence[str] = ()) -> float:
    """How well `texts` match `words` (0 when no word occurs); words in `boost` texts count double.

    A latin word matches whole words only ("tea" is not in "team"; a plural s is ignored); a CJK
    term (a bigram or one character) matches anywhere in CJK text, which has no word breaks.
    """
    body = fold(" ".join(texts))
    strong = fold(" ".join(boost))
    total = 0.0
    for word in words:
        total += _count(word, body, 5) + 2 * _count(word, strong, 2)
    return total


def dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
