from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.demo.verification import demo_groups_verify


class Command(BaseCommand):
    help = (
        "Embedded demo only: re-run the base and head of a few suspected groups from the demo's model of "
        "each commit and judge them, as a runner node's verification runs would."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=4, help="how many groups to verify (default 4)")

    def handle(self, *args: Any, **options: Any) -> None:
        states = demo_groups_verify(limit=options["limit"])
        for group_id, state in states.items():
            self.stdout.write(f"group {group_id}: {state}")
        self.stdout.write(f"verified {len(states)} groups")
