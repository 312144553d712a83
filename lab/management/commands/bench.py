"""`python manage.py bench`: build the year-scale dataset once, then measure (see lab.bench)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from lab import bench


class Command(BaseCommand):
    help = (
        "Build the year-scale benchmark dataset (once per version) and measure pages, ingest and detection."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--build-only", action="store_true", help="Build the dataset and stop")

    def handle(self, *args: Any, **options: Any) -> None:
        facts = bench.dataset_build(say=lambda line: self.stdout.write(line))
        self.stdout.write(
            f"dataset v{bench.DATASET_VERSION}: {facts.commits} commits, {facts.runs} runs, "
            f"{facts.measurements} measurements ({'built now' if facts.built_now else 'reused'})"
        )
        if options["build_only"]:
            return
        bench.measure(say=lambda line: self.stdout.write(line))
