from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.demo.verification import demo_groups_verify


class Command(BaseCommand):
    help = (
        "Embedded demo only: play the GPU node for the suspected groups, from the demo's model of each "
        "commit: the sheriff's verification runs, then the culprit search of every confirmed group, until "
        "nothing more is queued. One line per group."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--limit", type=int, default=None, help="how many suspected groups to play (default: all)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        states = demo_groups_verify(limit=options["limit"], progress=self.stdout.write)
        self.stdout.write(f"played {len(states)} groups")
