"""The words memory_search's hybrid mode reads: the question's, without the search box's operators.

An agent's question or a pasted message quotes to cite ("this 'custom solution' you gave me"), and a
"quoted phrase" the search box requires left out the memories that hold those words apart. Keyword
mode keeps the operators. `PLAIN_WORDS` lets the bench compare with the operators kept
(`python -m bench.recall_public --modes "hybrid;hybrid@plain=0"`).
"""

from __future__ import annotations

import re

__all__ = ["plain"]

PLAIN_WORDS = True  # hybrid reads the question's words without the search box's operators

_OPERATOR = re.compile(r'"|(?<!\S)[-+](?=\w)')


def plain(search: str) -> str:
    """`search` with the search box's operators taken out ("quoted phrase" required, -word left out):
    a hybrid search reads a question or a message, whose quotes cite rather than require."""
    return _OPERATOR.sub(" ", search) if PLAIN_WORDS else search
