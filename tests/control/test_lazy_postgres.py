"""A node on SQLite never imports psycopg (~9 MB of the serving process's memory at start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROBE = """
import sys
from pathlib import Path
from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.wiring import open_services
settings = Settings(data=Path(sys.argv[1]), sample=False, admin_token="t" * 32)
services = open_services(settings.data, settings.options())
try:
    create_app(settings, services)
finally:
    services.close()
print(sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "psycopg_pool")))
"""


def test_sqlite_services_and_app_leave_psycopg_unimported(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_postgres_names_still_import_from_control() -> None:
    from kbserver.control import HeadListener, PostgresControlStore, PostgresHeads, safe_url
    from kbserver.control.pg_heads import HeadListener as Listener
    from kbserver.control.postgres import PostgresControlStore as Store

    assert PostgresControlStore is Store and HeadListener is Listener
    assert PostgresHeads.__name__ == "PostgresHeads"
    assert "secret" not in safe_url("postgresql://u:secret@h/db")
