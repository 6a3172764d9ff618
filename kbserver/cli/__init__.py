"""Command line: `kbserver serve`, KB and agent management, import, mount, reindex, fsck, repack, mcp.

`parser` names the commands, `serve` holds the long-running ones, `admin` the one-shot ones, and
`context` what they all open. `main` maps every KBError to one `error: CODE: MESSAGE` line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from kbserver.cli.parser import build
from kbserver.core.errors import KBError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        code: int = args.fn(args)
        sys.stdout.flush()  # here, so output closed early (`| head`) is caught below
    except BrokenPipeError:  # the reader has what it wanted: no error, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a tool killed by it
    except KBError as err:
        print(f"error: {err.code}: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:  # the data folder or a target folder cannot be used (permissions, disk full)
        print(f"error: io_error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code
