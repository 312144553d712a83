from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.github.tracking import InvalidRepositoryName
from dashboard.github.tracking_issues import TrackingLabelInvalid, tracking_issue_add, tracking_label_parse


class Command(BaseCommand):
    help = "Configure a tracking issue, e.g. vllm-project/vllm#50587; it is synced on the next schedule."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("issue", help="OWNER/NAME#NUMBER")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            repo, number = tracking_label_parse(label=options["issue"])
            issue = tracking_issue_add(repo=repo, number=number)
        except (TrackingLabelInvalid, InvalidRepositoryName) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"tracking {issue.label}; run sync_tracking_issue {issue.label} to read it now")
