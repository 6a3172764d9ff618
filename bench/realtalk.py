"""REALTALK (real 21-day chats, questions with evidence turns) converted for bench/recall_public.py.

REALTALK (Lee et al., 2025, "REALTALK: A 21-Day Real-World Dataset for Long-Term Conversation",
github.com/danny911kr/REALTALK) holds 10 conversations between two people, 18-21 sessions each,
8,944 turns and 728 questions; each question names the turns (`dia_id`) that answer it and a
category (1 multi-hop, 2 temporal, 3 commonsense). Its repository carries no licence, so kbserver
ships no copy: convert a local checkout once, offline, into `bench/data/realtalk.json` (ignored by
git), then run the benchmark, which reads only that file:

    python -m bench.realtalk SOURCE [--out bench/data/realtalk.json]

SOURCE is the checkout's `data/` folder (the `Chat_*.json` files) or the repository's git folder
(read with `git show HEAD:data/...`, no work tree needed). Turns without text (a photo alone) are
dropped, and so are the questions none of whose evidence turns is left.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

DEFAULT = Path(__file__).parent / "data" / "realtalk.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "commonsense"}
_CHAT = re.compile(r"Chat_(\d+)_[^/]*\.json$")


class Turn(TypedDict):
    id: str  # the dataset's dia_id, e.g. "D3:12"
    speaker: str
    text: str
    time: str  # ISO 8601, UTC assumed (the dataset gives local times without a zone)
    session: int


class Question(TypedDict):
    question: str
    evidence: list[str]
    category: str
    asked: NotRequired[str]  # when the question is asked (ISO 8601), where the set says
    before: NotRequired[str]  # search only what was said before this time, where the set says


class Conversation(TypedDict):
    name: str
    turns: list[Turn]
    questions: list[Question]


def _sources(source: Path) -> dict[str, bytes]:
    """name -> bytes of each Chat_*.json of a data folder or a git folder."""
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        listing = subprocess.run(
            ["git", "--git-dir", str(source), "ls-tree", "--name-only", "HEAD", "data/"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        return {
            Path(name).name: subprocess.run(
                ["git", "--git-dir", str(source), "show", f"HEAD:{name}"], check=True, capture_output=True
            ).stdout
            for name in listing
            if _CHAT.search(name)
        }
    return {p.name: p.read_bytes() for p in sorted(source.glob("Chat_*.json"))}


def _time(value: str) -> str:
    stamp = datetime.datetime.strptime(value.strip(), "%d.%m.%Y, %H:%M:%S")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def convert_one(name: str, raw: dict[str, Any]) -> Conversation:
    turns: list[Turn] = []
    seen: set[str] = set()
    for key in sorted((k for k in raw if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
        for t in raw[key]:
            text = " ".join(str(t.get("clean_text") or "").split())
            if not text or t["dia_id"] in seen:
                continue
            seen.add(t["dia_id"])
            turns.append(
                Turn(
                    id=t["dia_id"],
                    speaker=t["speaker"],
                    text=text,
                    time=_time(t["date_time"]),
                    session=int(key[8:]),
                )
            )
    questions = [
        Question(
            question=q["question"],
            evidence=[e for e in q.get("evidence", []) if e in seen],
            category=CATEGORIES.get(q.get("category"), str(q.get("category"))),
        )
        for q in raw["qa"]
    ]
    return Conversation(
        name=name.removesuffix(".json"), turns=turns, questions=[q for q in questions if q["evidence"]]
    )


def convert(source: Path) -> list[Conversation]:
    files = _sources(source)
    if not files:
        raise SystemExit(f"no Chat_*.json under {source}: give REALTALK's data/ folder or its git folder")
    ordered = sorted(files, key=lambda n: int(_CHAT.search(n).group(1)))  # type: ignore[union-attr]
    return [convert_one(name, json.loads(files[name])) for name in ordered]


def load_converted(path: Path, name: str, module: str) -> list[Conversation]:
    """The conversations a converter (`python -m MODULE SOURCE`) wrote to `path`."""
    if not path.is_file():
        raise SystemExit(
            f"{path} is missing: convert a local {name} checkout first (python -m {module} SOURCE)"
        )
    conversations: list[Conversation] = json.loads(path.read_text())["conversations"]
    return conversations


def convert_main(
    argv: list[str] | None,
    *,
    doc: str | None,
    source_help: str,
    default: Path,
    convert: Callable[[Path], list[Conversation]],
    source: str,
) -> int:
    """A converter's command line: read SOURCE, write the conversations as JSON to --out."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("source", type=Path, help=source_help)
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args(argv)
    conversations = convert(args.source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    body = {"source": source, "conversations": conversations}
    args.out.write_text(json.dumps(body, ensure_ascii=False, indent=0) + "\n")
    turns = sum(len(c["turns"]) for c in conversations)
    questions = sum(len(c["questions"]) for c in conversations)
    print(f"{args.out}: {len(conversations)} conversations, {turns} turns, {questions} questions")
    return 0


def load(path: Path = DEFAULT) -> list[Conversation]:
    return load_converted(path, "REALTALK", "bench.realtalk")


def main(argv: list[str] | None = None) -> int:
    return convert_main(
        argv,
        doc=__doc__,
        source_help="REALTALK's data/ folder or its git folder",
        default=DEFAULT,
        convert=convert,
        source="REALTALK (github.com/danny911kr/REALTALK), data/Chat_*.json",
    )


if __name__ == "__main__":
    sys.exit(main())
