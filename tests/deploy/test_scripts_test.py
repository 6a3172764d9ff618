"""scripts/test installs into the active virtual environment or ./.venv, never the first python3 on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

# A python3 that records how it is called; `-m venv DIR` makes DIR/bin/python and lint-imports
# that record their calls too. Nothing is installed anywhere.
FAKE_PYTHON = """#!/bin/bash
echo "$0 $*" >> "$CALLS"
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  for tool in python lint-imports; do
    printf '#!/bin/bash\\necho "$0 $*" >> "$CALLS"\\n' > "$3/bin/$tool"
    chmod +x "$3/bin/$tool"
  done
fi
"""


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("needs /usr/bin/chromium (else scripts/test runs apt-get)")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "test", repo / "scripts" / "test")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON)
    (fake / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update({"PATH": f"{fake}:/usr/bin:/bin", "CALLS": str(tmp_path / "calls")})
    return repo, env


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_without_a_venv_it_makes_dot_venv_and_uses_only_it(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path)
    script = [repo / "scripts" / "test", "-x"]
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = _calls(tmp_path)
    system = [c for c in calls if c.startswith(f"{tmp_path}/bin/python3")]
    # The first python3 on PATH only makes the venv.
    assert system == [f"{tmp_path}/bin/python3 -m venv {repo}/.venv"], calls
    venv = f"{repo}/.venv/bin/"
    assert all(c.startswith(venv) for c in calls[1:]), calls
    assert f"{venv}python -m pip install --quiet --disable-pip-version-check -e .[dev]" in calls
    assert f"{venv}lint-imports " in calls and calls[-1] == f"{venv}python -m pytest -x", calls
    # A second run reuses the venv instead of making it again.
    (tmp_path / "calls").unlink()
    assert subprocess.run(script, env=env, capture_output=True, timeout=60).returncode == 0
    assert not any("python3" in c for c in _calls(tmp_path))


def test_an_active_virtual_environment_is_used_as_it_is(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path)
    active = tmp_path / "active"
    subprocess.run([tmp_path / "bin" / "python3", "-m", "venv", active], env=env, check=True)
    (tmp_path / "calls").unlink()
    env["VIRTUAL_ENV"] = str(active)
    done = subprocess.run([repo / "scripts" / "test"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = _calls(tmp_path)
    assert calls and all(c.startswith(f"{active}/bin/") for c in calls), calls
    assert not (repo / ".venv").exists()


def test_a_failing_step_fails_the_script(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path)
    subprocess.run([tmp_path / "bin" / "python3", "-m", "venv", repo / ".venv"], env=env, check=True)
    lint = repo / ".venv" / "bin" / "lint-imports"
    lint.write_text("#!/bin/bash\nexit 3\n")
    done = subprocess.run([repo / "scripts" / "test"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and not any(" -m pytest" in c for c in _calls(tmp_path))
