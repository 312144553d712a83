from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.tokens.scopes import ScopeInvalid, TokenScope
from dashboard.tokens.services import TokenNameInvalid, token_create


class Command(BaseCommand):
    help = (
        "Create an API token NAME and print it (its last line is the token alone; it is stored hashed "
        "and never shown again). Scopes: ingest:* (default), ingest:SUITE[,SUITE...], "
        "runner:HARDWARE_CLASS/RUNNER_NAME."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--scope", default="ingest:*")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            issued = token_create(name=options["name"], scope=TokenScope.parse(options["scope"]))
        except (ScopeInvalid, TokenNameInvalid) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"created token {issued.token.name!r} with scope {issued.token.scope}:")
        self.stdout.write(issued.secret)
