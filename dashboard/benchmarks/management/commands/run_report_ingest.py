from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.benchmarks.bodies import CompleteBody
from dashboard.benchmarks.models import Runner
from dashboard.benchmarks.runner_api import ReportRefused, complete_store
from dashboard.benchmarks.runs import RunNotOwned
from dashboard.edges import BodyInvalid, body_parse
from runners.delivery import kept_report_read


class Command(BaseCommand):
    help = (
        "Store the finished report a runner node kept (FILE from its $PERFWATCH_WORK_DIR/kept-reports/) "
        "as that run's result, exactly as if the node had delivered it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        try:
            kept = kept_report_read(path)
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise CommandError(f"{path} is not a report kept by a runner node: {error}") from None
        runner = Runner.objects.filter(name=kept.runner).first()
        if runner is None:
            raise CommandError(f"{path}: no runner named {kept.runner!r} on this dashboard")
        try:
            body = body_parse(CompleteBody, kept.upload_body(resent=True))
            run = complete_store(run_id=kept.run_id, runner=runner, body=body)
        except (BodyInvalid, ReportRefused) as error:
            raise CommandError(f"{path}: {error}") from None
        except RunNotOwned:
            raise CommandError(
                f"{path}: run {kept.run_id} is not waiting for attempt {kept.attempt} of {kept.runner} "
                "(finished, cancelled, or claimed again since): nothing stored"
            ) from None
        self.stdout.write(
            f"stored run {run.pk} (attempt {kept.attempt} on {kept.runner}): "
            f"{run.measurements.count()} measurements; {json.dumps(run.attempts[-1]['outcome'])}"
        )
