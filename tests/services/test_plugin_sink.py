"""A sink from an installed package: the toy sink (tests/services/toy_sink), installed with pip and
found through its `kbserver.sinks` entry point, follows main like the search index does."""

from __future__ import annotations

import json
import os
import subprocess
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


def _old_idle(tmp_path: Path) -> dict[str, str]:
    """The toy sink as written for the protocol before `idle` took `stop`, installed in its own folder."""
    source = (TOY / "toy_sink.py").read_text()
    new = "def idle(self, paused: bool, stop: Callable[[], bool]) -> None:"
    assert new in source
    old = source.replace(new, "def idle(self, paused: bool) -> None:").encode()
    return install_wheel(build_wheel(TOY, tmp_path, {"toy_sink.py": old}), tmp_path / "site")


OLD_IDLE = (
    "sink toy_count (toy_sink:make) (entry point of kbserver.sinks): is not a sink: its "
    "idle(paused: bool) cannot be called as idle(paused: bool, stop: Callable[[], bool])"
)


def test_a_sink_written_for_the_old_idle_is_refused_at_start(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its housekeeping would fail at every pause, logged; it is one error naming it at start instead."""
    _old_idle(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "toy_sink", raising=False)  # a test before imported the good one
    with pytest.raises(InvalidRequest) as caught:
        open_services(settings.data, settings.options())
    assert OLD_IDLE in str(caught.value)


def test_serve_with_an_old_sink_stops_with_one_error_naming_it(tmp_path: Path) -> None:
    env = _old_idle(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(tmp_path / "data"), "--port", "0"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.count("error: ") == 1 and OLD_IDLE in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
