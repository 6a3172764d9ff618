"""The serving app, built as `kbserver serve` builds it, leaves unimported what only single sign-on
or a client metadata URL needs: Authlib, joserfc and httpx (with the rich and pygments httpx brings,
~7 MB of the serving process's memory at start), and what only an admin page needs: jinja2 and
markdown-it (~2.5 MB). They are imported at first use."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import python_probe

DEFERRED = ("httpx", "authlib", "joserfc", "jinja2", "markdown_it")

_PROBE = f"""
import sys
from pathlib import Path
from kbserver.app import create_app
from kbserver.config import Settings
from kbserver.wiring import open_services
settings = Settings(data=Path("data"), sample=False, admin_token="t" * 32)
services = open_services(settings.data, settings.options())
try:
    create_app(settings, services)
finally:
    services.close()
print(sorted(m for m in sys.modules if m.split(".")[0] in {DEFERRED!r}))
"""


def test_serving_app_leaves_sso_metadata_and_admin_page_modules_unimported(tmp_path: Path) -> None:
    done = python_probe(_PROBE, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_sso_app_imports_authlib_when_set_up(tmp_path: Path) -> None:
    probe = _PROBE.replace(
        'admin_token="t" * 32)',
        'admin_token="t" * 32, oidc_issuer="https://id.example", oidc_client_id="kb")',
    )
    done = python_probe(probe, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "authlib" in done.stdout.strip().splitlines()[-1], done.stdout + done.stderr
