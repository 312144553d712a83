from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.compare import compare_markdown
from dashboard.benchmarks.comparison import ComparisonInvalid, comparison_get, metric_columns


class Command(BaseCommand):
    help = (
        "Compare two commits or tags of one suite per concurrency: old → new and the change in %, for every "
        "headline metric both sides have."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("base", help="commit sha (or unique prefix) or tag")
        parser.add_argument("head", help="commit sha (or unique prefix) or tag")
        parser.add_argument("--suite", required=True)
        parser.add_argument("--hardware", default=None, help="hardware class (default: the suite's)")
        parser.add_argument("--format", choices=("json", "markdown"), default="markdown")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            comparison = comparison_get(
                base_ref=options["base"],
                head_ref=options["head"],
                suite_name=options["suite"],
                hardware_class=options["hardware"],
            )
        except ComparisonInvalid as error:
            raise CommandError(str(error)) from None
        if options["format"] == "markdown":
            self.stdout.write(
                f"{comparison.suite.name} on {comparison.hardware_class}: "
                f"{comparison.base.short_sha} → {comparison.head.short_sha}\n\n"
                + compare_markdown(rows=comparison.rows, columns=metric_columns()),
                ending="",
            )
            return
        document = {
            "base": comparison.base.sha,
            "head": comparison.head.sha,
            "suite": comparison.suite.name,
            "hardware": comparison.hardware_class,
            "rows": [
                {
                    "concurrency": row.concurrency,
                    "metric": row.metric,
                    "base": row.base,
                    "head": row.head,
                    "change_pct": row.change_pct,
                }
                for row in comparison.rows
            ],
        }
        self.stdout.write(json.dumps(document, indent=2))
