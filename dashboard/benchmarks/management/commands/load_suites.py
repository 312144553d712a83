from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.suites import suite_upsert
from runners.errors import SuiteInvalid
from runners.suites import SUITES_DIR, suites_load


class Command(BaseCommand):
    help = "Load the suite descriptions (runners/suites/*.yaml) into the database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--directory", type=Path, default=SUITES_DIR)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            specs = suites_load(directory=options["directory"])
        except SuiteInvalid as error:
            raise CommandError(str(error)) from None
        for spec in specs:
            suite, created = suite_upsert(spec=spec)
            self.stdout.write(
                f"{'created' if created else 'updated'} suite {suite.name} ({suite.hardware_class})"
            )
