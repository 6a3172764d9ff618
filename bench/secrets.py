"""Time the secret scan on 256 KiB texts: ordinary notes, base64, and inputs that make naive
credential regexes backtrack (they took seconds to minutes with detect-secrets' `findall`).

    python -m bench.secrets [--kib 256] [--rounds 5]

Prints, per input, the best of `--rounds` runs of `scan_secrets` (one text) and of `new_secret`
(the whole file after an append, against the file before it: what every write pays).
"""

from __future__ import annotations

import argparse
import base64
import random
import time
from collections.abc import Callable
from functools import partial

from kbserver.changes.secrets import new_secret, scan_secrets


def _inputs(n: int) -> dict[str, str]:
    rng = random.Random(7)
    prose = "An ordinary line of notes about the project, its plans and a https://example.com/a link.\n"
    return {
        "prose": (prose * (n // len(prose) + 1))[:n],
        "base64 blob": base64.b64encode(rng.randbytes(n * 3 // 4)).decode()[:n],
        "中文笔记": ("我们在周一的会议上讨论了知识库的结构。\n" * n)[: n // 3],
        "eyJ": "eyJ" * (n // 3),
        "//": "//" * (n // 2) + "/:_authToken=",
        "sk-": "sk-" * (n // 3) + "T3BlbkFJ",
        "password + spaces": "password" + " " * n,
        "aws key": "aws key " * (n // 8),
        "aws_secret_access_key=": "aws_secret_access_key=" * (n // 22),
        "://": "a://" * (n // 4),
        "x://u:": "x://u:" + "p" * n,
        "-----BEGIN ": "-----BEGIN " * (n // 11),
        "PRIVATE KEY": "BEGIN A PRIVATE KEY " * (n // 20),
        "npm_/kbs_": "npm_kbs_sk_test_" * (n // 16),
        "digits:": "1234567890:" * (n // 11),
        "password=": "password=" * (n // 9),
        "a_password=": "a_password=" * (n // 11),
        "password=" + "a" * 3: "password=" + "a" * n,
        "password: word": "password: word1 " * (n // 16),
        "a" * 3: "a" * n,
    }


def _best(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"| input ({args.kib} KiB) | scan_secrets ms | new_secret after an append ms | found |")
    print("|---|---|---|---|")
    for name, text in _inputs(args.kib * 1024).items():
        before = text[: len(text) - 100]
        scan = _best(partial(scan_secrets, text), args.rounds)
        whole = _best(partial(new_secret, before, text), args.rounds)
        print(f"| {name} | {scan:.1f} | {whole:.1f} | {scan_secrets(text) or '-'} |")


if __name__ == "__main__":
    main()
