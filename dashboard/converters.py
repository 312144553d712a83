"""URL converters shared by every app."""

from __future__ import annotations


class RowId:
    """A row id or number in a path: at most 18 digits, so it always fits PostgreSQL's bigint.

    Django's `int` takes any length, and 2**63 in a URL became a database error (500) instead of a 404.
    """

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)
