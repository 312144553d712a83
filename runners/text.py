"""Text rules shared by the runner nodes and every app: one line for a status field, and what PostgreSQL
text can hold.

It lives at the bottom layer (no Django) so the runner nodes and every app use the same rule.
"""

from __future__ import annotations

import re

# PostgreSQL text (and jsonb) cannot hold NUL, and a lone UTF-16 surrogate cannot be encoded as UTF-8.
_NOT_STORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def one_line(text: object, *, limit: int) -> str:
    """`text` on one line, runs of whitespace collapsed to one space, at most `limit` characters."""
    return " ".join(str(text).split())[:limit]


def storable_problem(text: str) -> str | None:
    """Why PostgreSQL cannot store `text` (a NUL character, a lone surrogate), or None when it can."""
    found = _NOT_STORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return f"holds a NUL character at position {found.start()}"
    return f"holds a lone surrogate (U+{ord(found.group()):04X}) at position {found.start()}"


def storable(text: str) -> str:
    """`text` with every character PostgreSQL cannot store replaced by U+FFFD: for evidence such as log
    tails, where a crashing process's binary output must not cost the run its results."""
    return _NOT_STORABLE.sub(REPLACEMENT, text)
