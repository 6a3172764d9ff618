"""axe-core in a page a test has open, and the widths a reviewer's screens have."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

AXE = Path(os.environ.get("KBSERVER_AXE_JS", Path(__file__).parent / ".axe/node_modules/axe-core/axe.min.js"))
needs_axe = pytest.mark.skipif(
    not AXE.exists(), reason=f"needs axe-core's axe.min.js at {AXE} (scripts/test installs it with npm)"
)
SCREENS = {"desktop": (1280, 800), "phone": (375, 812)}


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical findings on the page now (the context must bypass the CSP)."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def fits(page: Any, width: int) -> None:
    """Nothing forces sideways scrolling at `width`."""
    scroll = page.evaluate("() => document.documentElement.scrollWidth")
    assert scroll <= width, (page.url, scroll, width)
