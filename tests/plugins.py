"""Plug-in packages for the tests: a wheel built by hand from a folder's pyproject.toml and modules,
installed with pip into a folder of its own that a subprocess (or sys.path) can see."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.helpers import REPO_ROOT

__all__ = ["build_wheel", "install_wheel"]


def build_wheel(src: Path, out: Path, modules: dict[str, bytes] | None = None) -> Path:
    """A wheel of the package in `src` (its pyproject.toml's name, version and entry points; its
    py-modules), built by hand: the test machine may have no build backend or network."""
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    name, version = project["name"].replace("-", "_"), project["version"]
    dist = f"{name}-{version}.dist-info"
    files = modules or {p.name: p.read_bytes() for p in sorted(src.glob("*.py"))}
    points = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())
        for group, entries in project["entry-points"].items()
    )
    files = {
        **files,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: kbserver-tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        f"{dist}/entry_points.txt": points.encode(),
    }

    def record(data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"sha256={digest},{len(data)}"

    lines = [f"{path},{record(data)}" for path, data in files.items()] + [f"{dist}/RECORD,,"]
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{dist}/RECORD", "\n".join(lines) + "\n")
    return wheel


def install_wheel(wheel: Path, site: Path) -> dict[str, str]:
    """pip installs `wheel` into `site`; returns the environment of a process that sees it."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    path = os.pathsep.join(p for p in (str(site), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}
