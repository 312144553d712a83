from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.regressions.sheriff.settle import history_settle


class Command(BaseCommand):
    help = (
        "Look for changes over the whole stored history of every series (or one suite / hardware class) and "
        "raise alerts; safe to run again. New runs are analysed on their own after ingest."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", default=None)
        parser.add_argument("--hardware", default=None, dest="hardware_class")
        parser.add_argument(
            "--notify",
            action="store_true",
            help="also notify about new regression groups (off by default: a backfill announces the past)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = history_settle(
            suite_name=options["suite"], hardware_class=options["hardware_class"], notify=options["notify"]
        )
        self.stdout.write(
            f"analysed {outcome.series_analysed} series: {outcome.alerts_created} new alerts "
            f"in {len(outcome.group_ids)} groups"
        )
