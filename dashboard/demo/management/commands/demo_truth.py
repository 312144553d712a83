"""What the demo's generator did, as JSON: every change of every suite, level and metric."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from dashboard.demo.history import demo_truth


class Command(BaseCommand):
    help = (
        "Print the demo generator's steps as JSON: "
        '[{"sha", "pr", "suite", "hardware", "concurrency", "metric", "change_pct"}] '
        "(concurrency 0 is a value of the whole run, such as capacity)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps(demo_truth(), indent=1))
