from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lab.attribution_evaluation import (
    attribution_score,
    history_generate,
    joint_attribute,
    per_series_attribute,
    score_format,
)


class Command(BaseCommand):
    help = (
        "Attribute generated suite histories with known culprits (15 series, slow runs, unbenchmarked "
        "commits, close steps, reverts) jointly and series by series, and print how often each names a "
        "range holding the culprit, the narrowest one, a wrong one, and how many false changes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--histories", type=int, default=20, help="how many suite histories")
        parser.add_argument("--commits", type=int, default=600, help="commits per history")
        parser.add_argument("--seed", type=int, default=0, help="seed of the first history")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["histories"] < 1 or options["commits"] < 100:
            raise CommandError("--histories must be at least 1 and --commits at least 100")
        histories = [
            history_generate(seed=options["seed"] + offset, commits=options["commits"])
            for offset in range(options["histories"])
        ]
        for name, attribute in (("joint", joint_attribute), ("series alone", per_series_attribute)):
            score = attribution_score(histories=histories, attribute=attribute)
            self.stdout.write(score_format(name=name, score=score))
