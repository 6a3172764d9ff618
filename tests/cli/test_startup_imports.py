"""A command's help and parsing import none of the services, the storage or the index: those cost
seconds on a busy machine, and only the command that runs needs them (kbserver.cli.parser._lazy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import python_probe

HEAVY = ("kbserver.services", "kbserver.store", "kbserver.index", "kbserver.vectors", "kbserver.wiring")


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["kb", "list", "--help"], ["person", "create", "--help"], ["agent", "list", "--help"]],
)
def test_help_imports_no_services(argv: list[str], tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from kbserver.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as stop:\n"
        "    code = stop.code\n"
        f"print(code, sorted(m for m in sys.modules if m.startswith({HEAVY!r})))\n"
    )
    done = python_probe(probe, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr
    assert "usage: kbserver" in done.stdout
