"""Random corpora and queries for search, and a plain reference model of which files match.

The model knows only the documented query rules (docs/architecture.md, "Search queries"): a query's unquoted
words are ORed with question words dropped unless nothing else is left (a Chinese bigram with a
function character such as 么 keeps its other character); quoted phrases must
occur; -word and NOT word exclude; OR, AND and operator characters change nothing. It shares the
analyzer (tokens, stems, bigrams: tested on their own) and the question-word list with the index,
and nothing else: no Whoosh, no query objects.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import strategies as st

from kbserver.index.analysis import is_cjk, terms
from kbserver.index.query import CJK_FUNCTION_CHARS, QUERY_STOP_WORDS

EN = (
    "coffee tea morning meeting deploy river black green python garden running runs sister "
    "birthday doctor monday budget travel paris camera guitar bread what did my the who"
).split()
ZH = "咖啡 美式 绿茶 会议 周一 提交 信息 花园 生日 医生 旅行 什么 茶 我 吗".split()
FOLDERS = ("", "notes/", "notes/deep/", "work/", "日记/", "a/")
JUNK = ("(", ")", "*", ":", "?", "!", "\\", "&&", "||", "~", "^", "[", "]", ",", ".", "-", "+", "'")
# Punctuation a person glues to a word: "coffee?", "Alice's", "cof*", "title:garden", "咖啡？".
GLUE_AFTER = ("?", "!", ",", ".", "'s", ":", "*", "~", "^2", ")", "...", "？", "，", "。", "!?", "/")
GLUE_BEFORE = ("(", "title:", "tags:", "path:", "*", "~", "“", "¿")
# Whole questions as people type them (no operators: their words are ORed), English, Chinese, mixed.
QUESTIONS = (
    "What did my sister say about coffee?",
    "When is the doctor's appointment, on Monday?",
    "Did I deploy the python budget on monday??",
    "what's the river like in Paris...",
    "Who is the sister with the camera?",
    "我的咖啡是什么？",
    "周一的会议在哪里？",
    "什么 绿茶?",
    "Which 咖啡 did we drink at the meeting?",
    "python的花园 garden",
    "The Who",
    "what did my",
)
PREFIXES = (None, "", "notes", "notes/", "notes/deep/", "work/", "日记/", "日", "a", "zzz/", "no")


def make_corpus(rng: random.Random, kind: str) -> dict[str, str]:
    """1-12 short notes (kind: en, zh or mixed) in nested folders; never front matter."""
    vocab = {"en": EN, "zh": ZH, "mixed": EN + ZH}[kind]
    docs: dict[str, str] = {}
    for i in range(rng.randint(1, 12)):
        words = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        sep = "" if kind == "zh" and rng.random() < 0.5 else " "
        docs[f"{rng.choice(FOLDERS)}n{i}.md"] = sep.join(words) + "\n"
    return docs


@dataclass(frozen=True)
class Item:
    kind: str  # word, phrase, open (unclosed phrase, last), neg, not, or, and, junk, glued, question
    text: str


def render(items: list[Item]) -> str:
    parts = []
    for it in items:
        parts.append(
            {
                "phrase": f'"{it.text}"',
                "open": f'"{it.text}',
                "neg": f"-{it.text}",
                "not": f"NOT {it.text}",
                "or": "OR",
                "and": "AND",
            }.get(it.kind, it.text)
        )
    return " ".join(parts)


_KINDS = ("word", "word", "word", "phrase", "neg", "not", "or", "and", "junk", "glued", "question")


@st.composite
def queries(draw: st.DrawFn, docs: dict[str, str]) -> list[Item]:
    """Words, phrases and junk drawn from the corpus (and from outside it)."""
    words = [w for text in docs.values() for w in text.split()] or ["coffee"]
    pool = [*sorted(set(words)), "zebra", "量子", "xylophone"]

    def phrase() -> str:
        text = draw(st.sampled_from(list(docs.values()))).split()
        start = draw(st.integers(0, max(0, len(text) - 1)))
        return " ".join(text[start : start + draw(st.integers(1, 3))])

    items: list[Item] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(_KINDS))
        if kind == "glued":
            word = draw(st.sampled_from(pool))
            before = draw(st.sampled_from(("", *GLUE_BEFORE)))
            after = draw(st.sampled_from(("", *GLUE_AFTER)))
            items.append(Item("glued", before + word + after))
        elif kind == "question":
            items.append(Item("question", draw(st.sampled_from(QUESTIONS))))
        elif kind == "junk":
            items.append(Item("junk", draw(st.sampled_from(JUNK))))
        elif kind in ("or", "and"):
            items.append(Item(kind, ""))
        elif kind == "phrase":
            items.append(Item("phrase", phrase()))
        else:
            items.append(Item(kind, draw(st.sampled_from(pool))))
    if draw(st.booleans()) and draw(st.booleans()):
        items.append(Item("open", phrase()))
    return items


def _has_phrase(doc_fields: list[list[str]], chars: set[str], tokens: tuple[str, ...]) -> bool:
    if len(tokens) == 1 and is_cjk(tokens[0]) and len(tokens[0]) == 1:
        return tokens[0] in chars
    n = len(tokens)
    return any(tuple(f[i : i + n]) == tokens for f in doc_fields for i in range(len(f) - n + 1))


@dataclass(frozen=True)
class Expected:
    paths: frozenset[str]
    tiers: dict[str, int]  # path -> every-word match (1) + phrase match (1)


def expected(docs: dict[str, str], items: list[Item], prefix: str | None) -> Expected:
    """The files the documented rules say match, under `prefix`, with their rank tiers."""
    unquoted: list[str] = []
    phrases: list[tuple[str, ...]] = []
    negated: list[tuple[str, ...]] = []
    for it in items:
        tokens = tuple(terms(it.text)) if it.text else ()
        if not tokens:
            continue
        if it.kind in ("word", "glued", "question"):
            unquoted.extend(tokens)
        elif it.kind in ("phrase", "open"):
            phrases.append(tokens)
        elif it.kind in ("neg", "not"):
            negated.append(tokens)
    kept: list[str] = []
    for t in unquoted:  # question words go; a Chinese bigram with a function character keeps the other
        if t in QUERY_STOP_WORDS:
            continue
        if len(t) == 2 and is_cjk(t) and (t[0] in CJK_FUNCTION_CHARS or t[1] in CJK_FUNCTION_CHARS):
            kept.extend(c for c in t if c not in CJK_FUNCTION_CHARS)
        else:
            kept.append(t)
    kept = kept or unquoted
    words = tuple(dict.fromkeys(kept))
    if not words and not phrases:
        return Expected(frozenset(), {})
    found: dict[str, int] = {}
    for path, text in docs.items():
        if prefix and not path.startswith(prefix):
            continue
        fields = [terms(path), terms(text)]
        chars = {c for c in path + text if is_cjk(c)}
        has = [_has_phrase(fields, chars, (w,)) for w in words]
        if not (any(has) or any(_has_phrase(fields, chars, p) for p in phrases)):
            continue
        if not all(_has_phrase(fields, chars, p) for p in phrases):
            continue
        if any(_has_phrase(fields, chars, n) for n in negated):
            continue
        tier = 0
        if len(words) > 1 and all(has):
            tier = 1 + _has_phrase(fields, chars, words)
        found[path] = tier
    return Expected(frozenset(found), found)
