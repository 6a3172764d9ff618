"""What every command opens: its settings and data folder, the services, and progress bars on stderr."""

from __future__ import annotations

import argparse
import os

from kbserver import logs
from kbserver.cli.bars import progress_bar, progress_bars
from kbserver.config import Settings
from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.services import Services
from kbserver.wiring import open_services

__all__ = ["closing", "progress_bar", "progress_bars", "services_of", "settings_of"]


def settings_of(args: argparse.Namespace, **options: object) -> Settings:
    """Settings from the environment and the command's options; checks the data folder.

    Every command but `serve` and `kb create` refuses a data folder that does not exist, so a typo
    in --data is an error instead of a new, empty data folder.
    """
    settings = Settings.from_env(data=args.data or args.data_first, **options)
    # A one-shot command prints what it did; its INFO logs (a repack's, say) would only repeat it as
    # JSON on the terminal, unless KBSERVER_LOG_LEVEL asks for them.
    quiet = not args.long_running and "KBSERVER_LOG_LEVEL" not in os.environ
    logs.configure("WARNING" if quiet and settings.log_level in ("DEBUG", "INFO") else settings.log_level)
    data = settings.data
    if data.exists() and not data.is_dir():
        raise InvalidRequest(f"data folder {data} is not a folder; pass --data DIR", data=str(data))
    if not args.creates_data and not data.is_dir():
        raise NotFound(
            f"data folder {data} does not exist; pass the right --data DIR (or set KBSERVER_DATA), "
            "or make one with `kbserver serve` or `kbserver kb create`",
            data=str(data),
        )
    return settings


def services_of(args: argparse.Namespace) -> tuple[Settings, Services]:
    settings = settings_of(args)
    return settings, open_services(settings.data, settings.options())


class closing:
    """`with closing(services):` closes the services when the command is done, whatever happened."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def __enter__(self) -> Services:
        return self.services

    def __exit__(self, *exc: object) -> None:
        self.services.close()
