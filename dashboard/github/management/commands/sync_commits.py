from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.github.commits import CommitSyncFailed, commits_sync


class Command(BaseCommand):
    help = (
        "Sync main's history (parents, authors, subjects, PR numbers, reverts, change classes, tags) from "
        "the git mirror or GitHub's REST API. Incremental and idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--source", choices=("mirror", "api"), default=None, help="default: PERFWATCH_COMMIT_SOURCE"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            outcome = commits_sync(source=options["source"])
        except CommitSyncFailed as error:
            raise CommandError(f"commit sync failed: {error}") from None
        if outcome.not_modified:
            self.stdout.write(f"{outcome.source}: nothing new on main (GitHub answered 304)")
            return
        if not outcome.tip_sha:
            self.stdout.write(f"{outcome.source}: another sync is running; nothing done")
            return
        self.stdout.write(
            f"{outcome.source}: main at {outcome.tip_sha[:12]}, {outcome.commits_new} new of "
            f"{outcome.commits_seen} commits read, {outcome.tags} tags"
        )
