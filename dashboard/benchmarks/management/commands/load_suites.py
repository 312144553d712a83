from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.suites import suite_upsert
from runners.suites import SUITES_DIR, suites_load_each
from runners.text import one_line


class Command(BaseCommand):
    help = (
        "Load the suite descriptions (runners/suites/*.yaml) into the database: every valid file, then "
        "each invalid one named with its reason."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--directory", type=Path, default=SUITES_DIR)

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["directory"]
        if not directory.is_dir():
            raise CommandError(f"{directory}: no such directory")
        specs, problems = suites_load_each(directory=directory)
        for spec in specs:
            suite, created = suite_upsert(spec=spec)
            self.stdout.write(
                f"{'created' if created else 'updated'} suite {suite.name} ({suite.hardware_class})"
            )
        for problem in problems:
            self.stderr.write(f"not loaded: {one_line(str(problem), limit=500)}")
        if problems:
            raise CommandError(f"{len(problems)} suite file(s) not loaded; the {len(specs)} others were")
