"""A sink from an installed package: the toy sink (tests/services/toy_sink), installed with pip and
found through its `kbserver.sinks` entry point, follows main like the search index does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kbserver.config import Settings
from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Create, WriteRequest
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.writing import writes
from kbserver.wiring import open_services
from tests.plugins import build_wheel, install_wheel

TOY = Path(__file__).parent / "toy_sink"


def test_an_installed_sink_follows_main(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_wheel(build_wheel(TOY, tmp_path), tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    services = open_services(settings.data, settings.options())
    try:
        services.start()
        assert "toy_count" in services.sinks and "index" in services.sinks
        kbs.create(services, ADMIN, "notes", "Team notes")
        files = [Create(mode="create", path=f"{n}.md", content="x\n") for n in range(3)]
        version = writes.submit(services, ADMIN, "notes", WriteRequest(files=files)).version  # type: ignore[arg-type,union-attr]
        assert services.progress.wait_blocking("notes", version, 60, ["toy_count"])
        counts = json.loads((settings.data / "sinks" / "toy_count" / "counts.json").read_text())
        every = len(list(services.repos.repo("notes").view(version).walk()))  # README.md and the three
        assert counts["notes"] == {"version": version, "files": every} and every == 4
    finally:
        services.close()


def test_a_broken_sink_is_one_clear_error_at_start(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = b"def make(folder, options):\n    class S:\n        name = 'index'\n    return S()\n"
    install_wheel(build_wheel(TOY, tmp_path, {"toy_sink.py": source}), tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(
        sys.modules, "toy_sink", raising=False
    )  # a test before may have imported the good one
    with pytest.raises(
        InvalidRequest, match=r"sink toy_count \(toy_sink:make\).*is not a sink: lacks covered"
    ):
        open_services(settings.data, settings.options())
