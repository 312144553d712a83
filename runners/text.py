"""One line of text for a status field or a log: whitespace collapsed, cut at a limit.

It lives at the bottom layer (no Django) so the runner nodes and every app use the same rule.
"""

from __future__ import annotations


def one_line(text: object, *, limit: int) -> str:
    """`text` on one line, runs of whitespace collapsed to one space, at most `limit` characters."""
    return " ".join(str(text).split())[:limit]
