"""Words a query may hold that say nothing about what is asked for (shared by every query surface).

Search (kbserver.index) stems these and drops them from a query unless nothing else is left; the
typed tool set's `query_index` and `recall_raw` do the same with the words as they are.
"""

from __future__ import annotations

__all__ = ["CJK_FUNCTION_CHARS", "COMMON_WORDS", "QUESTION_WORDS"]

# Words of questions that carry no topic ("what", "did", "my", 什么, the "s" of "Alice's").
QUESTION_WORDS: frozenset[str] = frozenset(
    """
what which who whom whose where when why how whats wheres whos hows
do does did doing done was were been being has had having am
i me my mine myself he him his she her hers they them their theirs our ours its
there here about any some all would should could might must shall so than then too very just
also ever please tell know remember recall anything something thing things
什么 怎么 怎样 为什 哪里 哪儿 哪个 哪些 谁 吗 呢 吧 啊 么 的 了 是 我 你 他 她 它
s t d m ll re ve
""".split()
)

# English words too common to say anything (the list Whoosh's index leaves out of every file).
COMMON_WORDS: frozenset[str] = frozenset(
    """
a an and are as at be by can for from have if in is it may not of on or tbd that the this to us
we when will with yet you your
""".split()
)

# Chinese function characters: a question's bigram holding one ("么车" of "什么车") keeps only its
# other character, so the topic word next to a question word is not lost.
CJK_FUNCTION_CHARS: frozenset[str] = frozenset("的了吗呢吧啊么什哪谁怎是我你您")
