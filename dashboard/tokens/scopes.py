"""What an API token may do, as a value: parsed from and printed as one scope string.

`ingest:*` or `ingest:SUITE[,SUITE...]`: store reports of those suites (on any hardware, naming no runner).
Only suites an operator made (manage.py load_suites, the admin) are known; `+new-suites` at the end
(`ingest:*+new-suites`) also lets the token create a suite by naming it (a suite with no install settings,
which is never scheduled).
`runner:HARDWARE_CLASS/RUNNER_NAME`: act as that one runner node: its claims, heartbeats and uploads, and
reports of any suite on its hardware class naming no runner or itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
ALL_SUITES = "*"
NEW_SUITES = "+new-suites"


class TokenKind(StrEnum):
    INGEST = "ingest"
    RUNNER = "runner"


class ScopeInvalid(ValueError):
    """A scope string that does not parse; the message is one line."""


class TokenForbidden(Exception):
    """A valid token asked for something outside its scope: answered 403 with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _name(value: str, *, what: str) -> str:
    value = value.strip().lower()
    if not _NAME.match(value):
        raise ScopeInvalid(f"invalid {what} {value!r}: use lowercase letters, digits, '.', '_' or '-'")
    return value


def _normalised(value: str | None) -> str:
    return (value or "").strip().lower()


@dataclass(frozen=True)
class TokenScope:
    kind: TokenKind
    suites: tuple[str, ...] = ()  # ingest: suite names, or (ALL_SUITES,)
    hardware_class: str = ""  # runner
    runner_name: str = ""  # runner
    may_create_suites: bool = False  # ingest, with +new-suites

    @classmethod
    def parse(cls, text: str) -> TokenScope:
        kind_text, _, rest = text.strip().partition(":")
        if kind_text == TokenKind.INGEST:
            create = rest.endswith(NEW_SUITES)
            rest = rest.removesuffix(NEW_SUITES)
            if rest in ("", ALL_SUITES):
                return cls(kind=TokenKind.INGEST, suites=(ALL_SUITES,), may_create_suites=create)
            suites = sorted({_name(part, what="suite name") for part in rest.split(",") if part.strip()})
            if not suites:
                raise ScopeInvalid("an ingest scope names suites: ingest:SUITE[,SUITE...] or ingest:*")
            return cls(kind=TokenKind.INGEST, suites=tuple(suites), may_create_suites=create)
        if kind_text == TokenKind.RUNNER:
            hardware_class, slash, runner_name = rest.partition("/")
            if not slash:
                raise ScopeInvalid(
                    "a runner scope is runner:HARDWARE_CLASS/RUNNER_NAME, e.g. runner:b300/b300-node-1"
                )
            return cls(
                kind=TokenKind.RUNNER,
                hardware_class=_name(hardware_class, what="hardware class"),
                runner_name=_name(runner_name, what="runner name"),
            )
        raise ScopeInvalid(
            f"unknown scope {text!r}: use ingest:SUITES, ingest:* or runner:HARDWARE_CLASS/RUNNER"
        )

    def __str__(self) -> str:
        if self.kind == TokenKind.INGEST:
            return f"ingest:{','.join(self.suites)}{NEW_SUITES if self.may_create_suites else ''}"
        return f"runner:{self.hardware_class}/{self.runner_name}"

    def require_runner(self, *, runner_name: str, hardware_class: str | None = None) -> None:
        """Only the runner this token belongs to (and, when given, its hardware class) may act."""
        if self.kind != TokenKind.RUNNER:
            raise TokenForbidden("this token belongs to no runner; use the runner's own token")
        if _normalised(runner_name) != self.runner_name:
            raise TokenForbidden(f"this token belongs to runner {self.runner_name!r}, not {runner_name!r}")
        if hardware_class is not None and _normalised(hardware_class) != self.hardware_class:
            raise TokenForbidden(
                f"runner {self.runner_name!r} serves hardware class {self.hardware_class!r}, "
                f"not {hardware_class!r}"
            )

    def require_report(self, *, suite_name: str, hardware_class: str, runner_name: str | None) -> str | None:
        """Check a report's suite, hardware and runner against the scope; return the runner to record."""
        if self.kind == TokenKind.RUNNER:
            self.require_runner(runner_name=runner_name or self.runner_name, hardware_class=hardware_class)
            return self.runner_name
        if _normalised(runner_name):
            raise TokenForbidden(
                f"an ingest token belongs to no runner: the report may not name {runner_name!r}"
            )
        if ALL_SUITES not in self.suites and _normalised(suite_name) not in self.suites:
            raise TokenForbidden(f"this token may not store reports of suite {suite_name!r}")
        return None
