from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.services import IngestRejected, report_ingest


class Command(BaseCommand):
    help = "Store a guidellm JSON report as a run of SUITE at COMMIT on HARDWARE (once per report)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--commit", required=True, help="vLLM commit sha (7 to 40 hex characters)")
        parser.add_argument("--suite", required=True)
        parser.add_argument("--hardware", required=True, help="hardware class, e.g. b300")
        parser.add_argument("--runner", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
        try:
            outcome = report_ingest(
                raw=raw,
                commit_sha=options["commit"],
                suite_name=options["suite"],
                hardware_class=options["hardware"],
                runner_name=options["runner"],
            )
        except IngestRejected as error:
            raise CommandError(f"{path}: {error.reason}") from None
        run = outcome.run
        if not outcome.created:
            self.stdout.write(
                f"already stored as run {run.pk} ({run.suite.name} on {run.hardware_class} at "
                f"{run.commit.short_sha}): nothing new stored"
            )
            return
        levels = sorted(set(run.measurements.values_list("series__concurrency", flat=True)))
        self.stdout.write(
            f"stored run {run.pk}: {outcome.measurement_count} measurements for {run.suite.name} on "
            f"{run.hardware_class} at {run.commit.short_sha}, concurrency {', '.join(map(str, levels))}"
        )
