"""A KB at a glance: the 30-day chart of versions per author (server-rendered SVG), and the week page."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from kbserver.services.reviewing import activity
from kbserver.services.reviewing.activity import Activity
from kbserver.web import records
from kbserver.web.page import call, render, services_of
from kbserver.web.session import require_admin

__all__ = ["COLOURS", "Bar", "Chart", "chart", "size_text", "week_page"]

# Distinct at a glance and each at least 3:1 against white (WCAG's contrast for graphics).
COLOURS = ("#0550ae", "#bc4c00", "#116329", "#8250df", "#cf222e", "#4d2d00", "#1b7c83", "#57606a")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 600, 180, 34, 22, 8


@dataclass(frozen=True)
class Bar:
    """One author's part of one day's bar."""

    day: str
    author: str
    count: int
    x: float
    y: float
    width: float
    height: float
    colour: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    legend: list[tuple[str, str, int]]  # (author, colour, versions in the window)
    ticks: list[tuple[float, int]]  # (y, count) of the horizontal grid lines
    labels: list[tuple[float, str, str]]  # (x, "MM-DD", text-anchor) under some days
    peak: int
    total: int
    left: int
    base: float  # y of the baseline


def chart(glance: Activity) -> Chart:
    """The stacked bars of `glance.counts`: one column a day, one colour an author (the eighth and
    later authors share the last colour)."""
    peak = max(glance.totals, default=0)
    top = max(peak, 1)
    step = max(1, -(-top // 4))  # at most 4 grid lines, on whole numbers
    top = step * -(-top // step)
    plot_h = HEIGHT - BOTTOM - TOP
    slot = (WIDTH - LEFT) / len(glance.days)
    colours = {a: COLOURS[min(i, len(COLOURS) - 1)] for i, a in enumerate(glance.counts)}
    bars: list[Bar] = []
    for d, day in enumerate(glance.days):
        y = float(HEIGHT - BOTTOM)
        for author, per_day in glance.counts.items():
            n = per_day[d]
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            bars.append(Bar(day, author, n, LEFT + d * slot + 1, y, slot - 2, h, colours[author]))
    ticks = [(HEIGHT - BOTTOM - plot_h * v / top, v) for v in range(0, top + 1, step)]
    last = len(glance.days) - 1
    labels = [  # today and every 7th day before it; today's ends at the right edge
        (LEFT + d * slot + slot / 2 if d < last else WIDTH, day[5:], "middle" if d < last else "end")
        for d, day in enumerate(glance.days)
        if (last - d) % 7 == 0
    ]
    legend = [(a, colours[a], sum(c)) for a, c in glance.counts.items()]
    return Chart(WIDTH, HEIGHT, bars, legend, ticks, labels, peak, sum(glance.totals), LEFT, HEIGHT - BOTTOM)


def size_text(n: int) -> str:
    """Bytes for people: 1.2 MB, 980 kB, 12 bytes."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


async def week_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = str(request.path_params["slug"]), services_of(request)
    found = await call(activity.week, services, who, slug)
    listed = [f for kind in found.files.values() for f in kind]
    named = await call(records.titles, services, slug, [f.path for f in listed], found.head)
    superseded = await call(records.superseded, services, slug, listed, found.base, found.head)
    marked = Counter(s.authors[-1] for s in superseded)  # the author of the version that marked it
    return render(
        request, "week.html", slug=slug, week=found, titles=named, superseded=superseded, marked=marked
    )
