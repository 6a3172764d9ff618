"""The day archive of the `typed` dialect: archive_day keeps one JSON file per day (a day written
twice is merged), recall_raw finds days by words and/or a date range."""

from __future__ import annotations

from collections.abc import Sequence

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Create, FileChange, Overwrite
from kbserver.dialects.results import (
    ArchiveResult,
    DayResult,
    RecallResult,
)
from kbserver.dialects.session import Current, DialectCall, retry_stale
from kbserver.dialects.typed_base import ARCHIVE, MAX_LIMIT, _parsed
from kbserver.dialects.typed_records import (
    Day,
    check_date,
    merge_day,
    parse_day,
    query_words,
    render_day,
    score,
)

__all__ = ["archive_day", "recall_raw"]


def _day(call: DialectCall, slug: str, date: str) -> tuple[Day, Current] | None:
    path = f"{ARCHIVE}/{date}.json"
    current = call.read(slug, path)
    if current is None:
        return None
    cached = _parsed.get(current.sha256)
    if isinstance(cached, Day):
        return cached, current
    day = parse_day(current.content, path)
    _parsed.put(current.sha256, day)
    return day, current


def archive_day(
    call: DialectCall,
    date: str,
    summary: str | None = None,
    diary: str | None = None,
    facts: Sequence[str] | None = None,
    *,
    kb: str | None = None,
) -> ArchiveResult:
    """Write (or merge into) `archive/{date}.json`, as one version."""
    day = check_date(date)
    if not any(v and v.strip() for v in (summary, diary, *(facts or []))):
        raise InvalidRequest("archive_day needs a summary, a diary or at least one fact")
    slug = call.kb(kb)
    path = f"{ARCHIVE}/{day}.json"

    def attempt() -> ArchiveResult:
        old = _day(call, slug, day)
        merged = merge_day(old[0] if old else None, day, summary, diary, facts)
        content = render_day(merged)
        change: FileChange = (
            Overwrite(path=path, mode="overwrite", content=content, expected_sha256=old[1].sha256)
            if old
            else Create(path=path, mode="create", content=content)
        )
        status = "merged" if old else "created"
        written = call.write(slug, [change], f"typed memory: archive {day} ({status})", "typed")
        return ArchiveResult(date=day, status=status, taskId=written.version, proposal=written.proposal)

    return retry_stale(attempt)


def recall_raw(
    call: DialectCall,
    query: str | None = None,
    startDate: str | None = None,
    endDate: str | None = None,
    limit: int = 10,
    *,
    kb: str | None = None,
) -> RecallResult:
    """Archived days matching `query` and/or within [startDate, endDate]: best match (or newest) first."""
    words = query_words(query) if query else []
    if query is not None and query.strip() and not words:
        raise InvalidRequest("query must hold at least one word to look for", query=query)
    start = check_date(startDate, "startDate") if startDate is not None else None
    end = check_date(endDate, "endDate") if endDate is not None else None
    if not words and start is None and end is None:
        raise InvalidRequest("recall_raw needs a query, a date range (startDate, endDate) or both")
    if start and end and start > end:
        raise InvalidRequest("startDate must not be after endDate", startDate=start, endDate=end)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    slug = call.kb_to_read(kb)
    found: list[tuple[float, Day]] = []
    for path, (_, sha256) in call.entries(slug, ARCHIVE + "/").items():
        name = path[len(ARCHIVE) + 1 :]
        if not name.endswith(".json") or "/" in name:
            continue
        try:
            date = check_date(name[:-5])
        except InvalidRequest:
            continue
        if (start and date < start) or (end and date > end):
            continue
        cached = _parsed.get(sha256)
        if isinstance(cached, Day) and cached.date == date:
            day = cached
        else:
            loaded = _day(call, slug, date)
            if loaded is None:
                continue
            day = loaded[0]
        value = score(words, day.summary, day.diary, *day.facts) if words else 1.0
        if value > 0:
            found.append((value, day))
    found.sort(key=lambda item: (-item[0], _neg(item[1].date)))
    return RecallResult(days=[_day_result(day) for _, day in found[:limit]])


def _day_result(day: Day) -> DayResult:
    return DayResult(date=day.date, summary=day.summary, diary=day.diary, facts=list(day.facts))


def _neg(date: str) -> tuple[int, ...]:
    return tuple(-int(p) for p in date.split("-"))
