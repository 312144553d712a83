from __future__ import annotations

import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from lab.aims import DEFAULT_SEEDS, aims_table
from lab.explain import explained_lines
from lab.simulation import simulation_run, simulation_seeds_run
from lab.worlds import WorldInvalid, world_load

DEFAULT_WORLD = "lab.worlds:vllm_world"


class Command(BaseCommand):
    help = (
        "Simulate days of vLLM's main in a world (the project's own unless --world names another), "
        "through the real scheduler, detection, verification and culprit search, and score the verdicts "
        "strictly: exact culprits, false notified groups, hours from merge to culprit over every step "
        "(unfinished ones infinite), GPU-hours per culprit and the coverage of the 95 %% intervals shown. "
        "Runs in a throwaway database (in memory for SQLite), never in the configured one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--days", type=int, default=14, help="days of commits (one more to settle)")
        parser.add_argument("--suites", type=int, default=3, help="suites sharing the nodes, 1 to 3")
        parser.add_argument(
            "--world",
            default=DEFAULT_WORLD,
            help="MODULE:CALLABLE: CALLABLE(seed, days, suites) returns a world (see lab/worlds.py)",
        )
        parser.add_argument(
            "--steps",
            action="store_true",
            help="list every true step and what became of it, the false groups, and every shown 95 %% "
            "interval that missed the truth of its range",
        )
        parser.add_argument(
            "--explain",
            action="store_true",
            help="with the steps, what the loop did around each step of at least twice the noise that was "
            "not named exactly: the groups near it with their verdicts and the noise each test used (beside "
            "the world's own), and the runs at each commit around it",
        )
        parser.add_argument(
            "--seeds",
            help="comma-separated seeds (or 'aims' for " + ",".join(map(str, DEFAULT_SEEDS)) + "): each "
            "simulated in its own process, then one table of their scores against the aims",
        )
        parser.add_argument("--jobs", type=int, default=2, help="with --seeds: seeds simulated at once")
        parser.add_argument(
            "--json",
            action="store_true",
            help="print the scores as one JSON object on the last line (null: infinite or nothing to count)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["suites"] <= 3:
            raise CommandError("--suites must be 1, 2 or 3")
        if not 1 <= options["days"] <= 60:
            raise CommandError("--days must be between 1 and 60")
        try:
            factory = world_load(spec=options["world"])
        except WorldInvalid as error:
            raise CommandError(str(error)) from error
        if options["seeds"]:
            if options["explain"]:
                raise CommandError("--explain explains one seed's steps: give --seed, not --seeds")
            self._seeds(options)
            return
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
                world_factory=factory,
                world_name=options["world"],
                progress=lambda line: self.stdout.write(line),
                explain=options["explain"],
            )
        finally:
            creation.destroy_test_db(original, verbosity=0)
        if options["steps"] or options["explain"]:
            for line in explained_lines(scores=report.scores, explained=report.explained):
                self.stdout.write(line)
            for group in report.scores.false_groups:
                series = ", ".join(
                    f"{s.suite} c={s.concurrency} {s.metric} {'up' if s.direction > 0 else 'down'}"
                    for s in group.series
                )
                self.stdout.write(f"false group #{group.group_id} ({group.base}, {group.head}]: {series}")
            for missed in report.scores.missed_intervals:
                self.stdout.write(missed.line())
        self.stdout.write(report.text())
        if options["json"]:
            self.stdout.write(report.json_line())

    def _seeds(self, options: dict[str, Any]) -> None:
        text = options["seeds"].strip()
        try:
            seeds = sorted(set(DEFAULT_SEEDS if text == "aims" else (int(part) for part in text.split(","))))
        except ValueError as error:
            raise CommandError(f"--seeds: comma-separated integers or 'aims', not {text!r}") from error
        if not 1 <= options["jobs"] <= 16:
            raise CommandError("--jobs must be between 1 and 16")
        self.stdout.write(f"simulating seeds {', '.join(map(str, seeds))}, {options['jobs']} at a time ...")
        scores, failed = simulation_seeds_run(
            seeds=seeds,
            days=options["days"],
            suites=options["suites"],
            world_name=options["world"],
            jobs=options["jobs"],
            progress=lambda line: self.stdout.write(line),
        )
        if not scores:
            raise CommandError("no seed gave scores: " + "; ".join(failed))
        self.stdout.write(aims_table(scores, failed=failed))
        if options["json"]:
            self.stdout.write(
                json.dumps({str(seed): scores[seed] for seed in sorted(scores)}, allow_nan=False)
            )
