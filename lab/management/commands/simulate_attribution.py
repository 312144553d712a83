from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from lab.simulation import simulation_run


class Command(BaseCommand):
    help = (
        "Simulate days of vLLM's main on one node shared by 1-3 suites, through the real scheduler, "
        "detection, "
        "verification and bisection, and print how many injected steps were attributed to their exact "
        "commit, false groups, hours from merge to confirmed culprit and GPU-hours per culprit. Runs in a "
        "throwaway database (in memory for SQLite), never in the configured one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--days", type=int, default=14, help="days of commits (one more to settle)")
        parser.add_argument("--suites", type=int, default=3, help="suites sharing the node, 1 to 3")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["suites"] <= 3:
            raise CommandError("--suites must be 1, 2 or 3")
        if not 1 <= options["days"] <= 60:
            raise CommandError("--days must be between 1 and 60")
        self.stdout.write("creating a throwaway database ...")
        # Each queued run and narrowed range is logged at INFO: thousands of lines here.
        logging.getLogger("dashboard").setLevel(logging.WARNING)
        creation = connection.creation
        original = connection.settings_dict["NAME"]
        creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            report = simulation_run(
                seed=options["seed"],
                days=options["days"],
                suites=options["suites"],
                progress=lambda line: self.stdout.write(line),
            )
        finally:
            creation.destroy_test_db(original, verbosity=0)
        self.stdout.write(report.text())
