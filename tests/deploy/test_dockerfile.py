"""The Dockerfile keeps its promises, checked without Docker (no image can be built or pulled here).

It is parsed with a real Dockerfile parser (dockerfile-parse) and its promises are checked: base
image, a non-root USER that owns the data volume, VOLUME, EXPOSE, HEALTHCHECK and CMD agreeing on
one port and one data folder. Then its steps run on this machine as the image would run them: the
build context is copied honouring .dockerignore, its `pip install` runs in a fresh venv, its CMD
runs as an unprivileged user on a fresh data folder, and its HEALTHCHECK command must pass.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from importlib import metadata as md
from pathlib import Path
from typing import Any

import httpx
import pytest
from dockerfile_parse import DockerfileParser
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import ADMIN_TOKEN, REPO_ROOT, free_port

DOCKERFILE = REPO_ROOT / "Dockerfile"


@pytest.fixture(scope="module")
def parsed() -> DockerfileParser:
    return DockerfileParser(path=str(DOCKERFILE))


def _instructions(parsed: DockerfileParser, name: str) -> list[str]:
    return [i["value"] for i in parsed.structure if i["instruction"] == name]


def _exec_form(value: str) -> list[str]:
    """A CMD/HEALTHCHECK command in JSON (exec) form; the shell form would lose signals (PID 1)."""
    form = json.loads(value)
    assert isinstance(form, list) and all(isinstance(a, str) for a in form), value
    return form


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _cmd(parsed: DockerfileParser) -> list[str]:
    (cmd,) = _instructions(parsed, "CMD")
    return _exec_form(cmd)


def _healthcheck(parsed: DockerfileParser) -> tuple[str, list[str]]:
    (value,) = _instructions(parsed, "HEALTHCHECK")
    options, _, command = value.partition("CMD")
    return options, _exec_form(command.strip())


def test_the_dockerfile_promises(parsed: DockerfileParser) -> None:
    # a slim official Python image that satisfies requires-python
    base = parsed.baseimage
    match = re.fullmatch(r"python:3\.(\d+)-slim(-\w+)?", base)
    assert match and int(match.group(1)) >= 11, base
    # git is installed: /git and fsck need C git
    assert any(
        "apt-get install" in run and re.search(r"\bgit\b", run) for run in _instructions(parsed, "RUN")
    )
    # a non-root user, created in the image, is the last USER (so CMD runs as it)
    users = _instructions(parsed, "USER")
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith(("root:", "0:"))
    user = users[-1].split(":")[0]
    assert any(re.search(rf"useradd\b.*\b{re.escape(user)}\b", run) for run in _instructions(parsed, "RUN"))
    # one data folder: the VOLUME, KBSERVER_DATA, CMD --data, owned by that user
    (volume,) = _instructions(parsed, "VOLUME")
    volumes = json.loads(volume) if volume.startswith("[") else volume.split()
    cmd = _cmd(parsed)
    data = _option(cmd, "--data")
    assert volumes == [data] and parsed.envs["KBSERVER_DATA"] == data
    assert any(f"chown {user}:{user} {data}" in run for run in _instructions(parsed, "RUN"))
    # one port: EXPOSE, CMD --port, the healthcheck's URL; listening on every interface
    (expose,) = _instructions(parsed, "EXPOSE")
    port = _option(cmd, "--port")
    assert expose.split() == [port] and _option(cmd, "--host") == "0.0.0.0"
    assert cmd[:2] == ["kbserver", "serve"]
    options, health = _healthcheck(parsed)
    assert f"http://127.0.0.1:{port}/healthz" in " ".join(health)
    for flag in ("--interval=", "--timeout=", "--start-period=", "--retries="):
        assert flag in options
    # the build context is small and never carries local state
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    for entry in (".git", "kbdata", "admin-token", "*.db"):
        assert entry in ignored


def _dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore rules as (exclude?, regex), in order; the last matching rule wins."""
    rules = []
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i : end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((not keep, re.compile(regex + "(?:/.*)?")))  # a folder's rule covers its contents
    return rules


def _copy_context(dest: Path) -> None:
    """`COPY . /app` of the build context, without what .dockerignore leaves out."""
    rules = _dockerignore()

    def excluded(rel: str) -> bool:
        verdict = False
        for exclude, regex in rules:
            if regex.fullmatch(rel):
                verdict = exclude
        return verdict

    for root, dirs, names in os.walk(REPO_ROOT):
        here = Path(root).relative_to(REPO_ROOT).as_posix()
        prefix = "" if here == "." else here + "/"
        dirs[:] = [d for d in dirs if not excluded(prefix + d)]
        for name in names:
            rel = prefix + name
            if not excluded(rel):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO_ROOT / rel, dest / rel)


def _unprivileged() -> tuple[int, int] | None:
    """(uid, gid) to run the CMD as: ourselves when we are not root, else `nobody`."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return nobody.pw_uid, nobody.pw_gid


def _as_user(uid: int, gid: int) -> dict[str, Any]:
    return {} if os.geteuid() != 0 else {"user": uid, "group": gid, "extra_groups": []}


def _python_for(uid: int, gid: int, cwd: Path) -> str | None:
    """A Python >= 3.11 that the user can run (this one may live under root's private home)."""
    for candidate in (sys.executable, "/usr/bin/python3.11", "/usr/bin/python3"):
        if not Path(candidate).exists():
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info >= (3, 11)"],
                capture_output=True,
                cwd=cwd,
                timeout=60,
                **_as_user(uid, gid),
            )
        except PermissionError:  # e.g. an interpreter under root's private home
            continue
        if probe.returncode == 0:
            return candidate
    return None


def _dependencies() -> list[md.Distribution]:
    """The installed distributions that the project's dependencies need, transitively."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    todo = [(Requirement(r), "") for r in project["dependencies"]]
    found: dict[str, md.Distribution] = {}
    extras: dict[str, set[str]] = {}
    while todo:
        req, extra = todo.pop()
        if req.marker and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        wanted = {"", *req.extras}
        if name in found and wanted <= extras[name]:
            continue
        dist = found.get(name) or md.distribution(req.name)
        found[name] = dist
        extras[name] = extras.get(name, set()) | wanted
        todo += [(Requirement(r), e) for r in dist.requires or [] for e in sorted(wanted)]
    return list(found.values())


def _link_dependencies(site: Path) -> None:
    """Give the fresh venv this machine's installed dependencies, as hard links (no copies, no
    network): the image's `pip install` would download them; here pip finds them satisfied."""
    for dist in _dependencies():
        base = Path(str(dist.locate_file(""))).resolve()
        if not dist.files:
            pytest.skip(f"{dist.metadata['Name']} was installed without a RECORD; cannot give it to a venv")
        for entry in dist.files:
            source = Path(os.path.normpath(base / entry))
            if base not in source.parents or not source.is_file():
                continue  # scripts outside site-packages, or a listed .pyc never written
            target = site / source.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                continue
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder every user can enter (pytest's tmp_path is private to root)."""
    root = Path(tempfile.mkdtemp(prefix="kbserver-docker-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_the_image_steps_run_as_an_unprivileged_user(parsed: DockerfileParser, world: Path) -> None:
    who = _unprivileged()
    if who is None:
        pytest.skip("no unprivileged user to run the CMD as (running as root and there is no `nobody`)")
    if shutil.which("git") is None:
        pytest.skip("C git is missing (the image installs it with apt-get)")
    uid, gid = who
    app, venv, data, home = world / "app", world / "venv", world / "data", world / "home"
    _copy_context(app)
    assert (app / "sample_kb" / "README.md").is_file() and not (app / ".git").exists()

    python = _python_for(uid, gid, world)
    if python is None:
        pytest.skip(f"no Python >= 3.11 that uid {uid} may run (the image's own is world-readable)")

    # the install step, as root (before USER), into a fresh venv: `pip install --no-cache-dir .`
    (install,) = [run for run in _instructions(parsed, "RUN") if "pip install" in run]
    pip_step = next(step.strip() for step in install.split("&&") if step.strip().startswith("pip install"))
    pip = shlex.split(pip_step)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300, capture_output=True)
    (site,) = venv.glob("lib/python3.*/site-packages")
    _link_dependencies(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBSERVER_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(parsed.envs)
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), *pip[1:]], cwd=app, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # only kbserver itself was installed: every declared dependency was satisfied
    assert re.search(r"^Successfully installed kbserver-\S+$", proc.stdout, re.M), proc.stdout[-2000:]
    data.mkdir()
    home.mkdir()
    for path in (data, home):
        os.chown(path, uid, gid)  # `chown kbserver:kbserver /data`

    # the CMD, as the unprivileged user, on the fresh data folder; the same port everywhere
    port = str(free_port())
    cmd = _cmd(parsed)
    image_port, image_data = _option(cmd, "--port"), _option(cmd, "--data")
    cmd = [
        {image_port: port, image_data: str(data), "0.0.0.0": "127.0.0.1"}.get(arg, arg) for arg in cmd
    ]  # loopback only: this is a shared machine, not a container
    run_env = {
        **env,
        "KBSERVER_DATA": str(data),
        "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN,
        "PATH": f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
    }
    as_user = _as_user(uid, gid)
    log = world / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(cmd, cwd=app, env=run_env, stdout=out, stderr=subprocess.STDOUT, **as_user)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            healthy = False
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    healthy = httpx.get(url + "/healthz", timeout=5).status_code == 200
                except httpx.HTTPError:
                    pass
                if healthy:
                    break
                time.sleep(0.2)
            assert healthy, log.read_text()[-3000:]
            # the HEALTHCHECK's own command passes, with the python and user of the image
            _, health = _healthcheck(parsed)
            health = [arg.replace(f":{image_port}/", f":{port}/") for arg in health]
            check = subprocess.run(
                health, env=run_env, cwd=app, timeout=60, capture_output=True, text=True, **as_user
            )  # type: ignore[call-overload]
            assert check.returncode == 0, check.stderr
            # the first start imported sample_kb/ (found next to WORKDIR) and the user owns the data
            kbs = httpx.get(
                url + "/api/v1/kbs", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
            )
            assert [kb["slug"] for kb in kbs.json()] == ["sample"]
            assert (data / "kbs" / "sample.git").stat().st_uid == uid
            installed = subprocess.run(
                [str(venv / "bin" / "python"), "-c", "import kbserver; print(kbserver.__file__)"],
                capture_output=True,
                text=True,
                cwd=world,
                timeout=60,
            ).stdout
            assert installed.startswith(str(venv)), installed  # the image's install, not this checkout
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
    # docker stop sends SIGTERM: uvicorn shuts down cleanly, then exits by that signal (143)
    assert server.returncode in (0, -signal.SIGTERM), log.read_text()[-3000:]
    assert "Traceback" not in log.read_text() and "shutting down" in log.read_text()
