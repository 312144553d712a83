from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lab.evaluation import detector_evaluate, labelled_series_generate, report_format


class Command(BaseCommand):
    help = (
        "Run the change-point detector over generated series with known steps and print precision, "
        "recall and F1 (±2 commits), false alarms on step-free series, detection delay and speed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", type=int, default=1000, help="how many series to generate")
        parser.add_argument("--seed", type=int, default=0, help="seed of the generated set")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["series"] < 1:
            raise CommandError("--series must be at least 1")
        series = labelled_series_generate(count=options["series"], seed=options["seed"])
        self.stdout.write(report_format(report=detector_evaluate(series=series)))
