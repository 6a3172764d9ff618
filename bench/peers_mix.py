"""The mixed workload of bench.peers: half Chinese, nested folders, appends, one- and two-word questions.

A seeded generator of ~300-byte notes (every other one Chinese, with Chinese punctuation and the
odd Latin word; the rest English) in folders 1 to 4 deep, and of the questions asked about them:
each note carries one rare item that 1 to 5 notes of its batch share, and the questions are those
items. A Chinese item is one word (two characters) or two words written together (four
characters, a phrase of three bigrams); an English item is a two-word phrase. The rare items'
characters and words never occur in the common text, so a question matches at most 5 notes of
its batch. A round writes `creates` new notes, appends to `appends` of them (a line in the note's
language, with the sha256 the writer read, as an agent passes it) and asks `queries` questions.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers import POLL, Samples, _settle, cpu_seconds

# Two disjoint sets of CJK unified ideographs: the common text's and the rare items'.
_COMMON_HAN = [chr(0x4E00 + k) for k in range(0x0000, 0x1000, 7)]  # 586 characters
_RARE_HAN = [chr(0x4E00 + k) for k in range(0x3000, 0x4000, 5)]  # 820 characters
_CONSONANTS = "bcdfghklmnprstvw"
_VOWELS = "aeiou"


def _syllables(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(n))


@dataclass
class Note:
    path: str
    text: str  # the file's content as created (and the server-memory observation)
    item: str  # the rare item it carries (a question that finds it)
    chinese: bool


@dataclass
class Batch:
    notes: list[Note]
    appends: list[tuple[Note, str, str]]  # (note, the appended line, sha256 of the note before it)
    queries: list[str]
    last_item: str  # the last note's item, in that note alone: "last write searchable"


@dataclass
class Mix:
    """The seeded generator: `batch(r, ...)` is the same for every server of one run."""

    seed: int = 37
    common_en: list[str] = field(default_factory=list)
    common_zh: list[str] = field(default_factory=list)
    _used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        words: set[str] = set()
        while len(words) < 1500:
            words.add(_syllables(rng, rng.randint(1, 4)))
        self.common_en = sorted(words)
        self.common_zh = sorted({rng.choice(_COMMON_HAN) + rng.choice(_COMMON_HAN) for _ in range(2000)})

    def _rare(self, rng: random.Random, chinese: bool, two: bool) -> str:
        while True:
            if chinese:
                n = 4 if two else 2
                item = "".join(rng.choice(_RARE_HAN) for _ in range(n))
            else:  # rare English words: five or six syllables, the common ones at most four
                item = f"{_syllables(rng, rng.randint(5, 6))} {_syllables(rng, rng.randint(5, 6))}"
            if item not in self._used:
                self._used.add(item)
                return item

    def _text(self, rng: random.Random, chinese: bool, size: int, item: str | None) -> str:
        parts: list[str] = []
        length = 0
        while length < size:
            if chinese:
                sentence = "".join(rng.choice(self.common_zh) for _ in range(rng.randint(3, 8)))
                if rng.random() < 0.15:  # the odd Latin word, as Chinese notes have
                    sentence += rng.choice(["API", "Git", "v2", "MCP", "2026年", "OK"])
                parts.append(sentence + rng.choice("，，，。"))
            else:
                parts.append(" ".join(rng.choice(self.common_en) for _ in range(rng.randint(6, 12))) + ".")
            length = len(("" if chinese else " ").join(parts).encode())
        if item is not None:
            k = rng.randrange(len(parts) + 1)
            parts.insert(k, item + ("，" if chinese else "."))
        return ("" if chinese else " ").join(parts)

    def batch(self, r: int, creates: int, appends: int, queries: int, prefix: str = "") -> Batch:
        """Round `r`'s notes (paths under `prefix`), appends to some of them and its questions."""
        rng = random.Random(self.seed * 1_000_003 + r)
        notes: list[Note] = []
        items: list[tuple[str, bool, list[int]]] = []  # (item, chinese, the notes holding it)
        owner: list[int] = []  # note index -> item index
        while len(owner) < creates - 1:
            chinese = len(items) % 2 == 0
            item = self._rare(rng, chinese, two=rng.random() < 0.5)
            share = min(rng.randint(1, 5), creates - 1 - len(owner))
            items.append((item, chinese, []))
            owner += [len(items) - 1] * share
        rng.shuffle(owner)
        last = self._rare(rng, True, two=True)
        items.append((last, True, []))
        owner.append(len(items) - 1)
        for i, which in enumerate(owner):
            item, chinese, holders = items[which]
            holders.append(i)
            depth = 1 + i % 4
            folders = [f"{'abcd'[level]}{rng.randrange(3)}" for level in range(depth)]
            path = f"{prefix}{'/'.join(folders)}/m{r}-{i:05d}.md"
            text = self._text(rng, chinese, 260 + rng.randrange(80), item) + "\n"
            notes.append(Note(path, text, item, chinese))
        added: list[tuple[Note, str, str]] = []
        for note in rng.sample(notes[:-1], min(appends, len(notes) - 1)):
            line = self._text(rng, note.chinese, 60 + rng.randrange(40), None) + "\n"
            added.append((note, line, hashlib.sha256(note.text.encode()).hexdigest()))
        zh = [item for item, chinese, _ in items[:-1] if chinese]
        en = [item for item, chinese, _ in items[:-1] if not chinese]
        asked = [rng.choice(zh if k % 2 == 0 else en) for k in range(queries)]
        return Batch(notes, added, asked, last)


def setup(data: Path, mix: Mix, notes: int) -> tuple[str, list[str]]:
    """KB `bench` holding `notes` notes of the mix (batch -1, under `pre/`): the agent's token and the
    notes' texts (server-memory's preload)."""
    from kbserver.services import kbs
    from kbserver.services.access import agents
    from kbserver.services.access.auth import ADMIN
    from kbserver.wiring import open_services

    first = mix.batch(-1, notes, 0, 0, prefix="pre/")
    folder = data.parent / "corpus-mix"
    for note in first.notes:
        (folder / note.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / note.path).write_text(note.text)
    services = open_services(data)
    try:
        kbs.import_folder(services, ADMIN, "bench", folder, description="benchmark KB (mix)")
        _, token = agents.create(services, ADMIN, "bencher")
        agents.link(services, ADMIN, "bencher", "bench", "read_write")
    finally:
        services.close()
    return token, [note.text for note in first.notes]


async def mix_round(server: Any, batch: Batch, out: Samples) -> None:
    """One round of the mix on `server`: the creates and the lag after them, the appends, the questions."""
    t0, cpu0 = time.monotonic(), await _settle(server)
    for note in batch.notes:
        start = time.perf_counter()
        await server.create(note.path, note.text)
        out.write.append(time.perf_counter() - start)
    acked = time.perf_counter()
    polls = 0
    while not await server.search(batch.last_item):
        polls += 1
        if time.perf_counter() - acked > 300:
            raise SystemExit(f"{server.name}: the last write was not searchable after 300 s")
        await asyncio.sleep(POLL)
    out.lag.append(time.perf_counter() - acked)
    t1, cpu1 = time.monotonic(), await _settle(server)
    for note, line, sha in batch.appends:
        start = time.perf_counter()
        await server.append(note.path, line, sha)
        out.append.append(time.perf_counter() - start)
    t2, cpu2 = time.monotonic(), await _settle(server)
    for query in batch.queries:
        start = time.perf_counter()
        out.found.append(await server.search(query))
        out.search.append(time.perf_counter() - start)
    per_search = (cpu_seconds(server.pid) - cpu2) / len(batch.queries)
    out.search_cpu.append(per_search)
    creates = cpu1 - cpu0 - (polls + 1) * per_search
    out.write_cpu.append(max(0.0, creates - server.idle * (t1 - t0)) / len(batch.notes))
    out.write_cpu_total.append(max(0.0, creates) / len(batch.notes))
    out.append_cpu.append(max(0.0, cpu2 - cpu1 - server.idle * (t2 - t1)) / len(batch.appends))


MIX = Mix()
