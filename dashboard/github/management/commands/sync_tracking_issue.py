from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.github.commits import github_client
from dashboard.github.models import TrackingIssue
from dashboard.github.selectors import tracking_issue_get
from dashboard.github.tracking_issues import (
    TrackingLabelInvalid,
    TrackingSyncOutcome,
    tracking_issue_sync,
    tracking_label_parse,
)


class Command(BaseCommand):
    help = (
        "Read tracking issues from GitHub (all active ones, or those named), parse their PRs and map each "
        "to its merge commit. With --offline, re-parse the stored bodies and map from synced commits only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("issues", nargs="*", help="OWNER/NAME#NUMBER (default: every active one)")
        parser.add_argument("--offline", action="store_true", help="do not call GitHub")

    def handle(self, *args: Any, **options: Any) -> None:
        chosen = []
        for label in options["issues"]:
            try:
                repo, number = tracking_label_parse(label=label)
            except TrackingLabelInvalid as error:
                raise CommandError(str(error)) from None
            issue = tracking_issue_get(repo=repo, number=number)
            if issue is None:
                raise CommandError(f"{label} is not configured: add it with add_tracking_issue")
            chosen.append(issue)
        if not options["issues"]:
            chosen = list(TrackingIssue.objects.active().select_related("repository").order_by("pk"))
        client = None if options["offline"] else github_client()
        failed = []
        for issue in chosen:
            outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client)
            self.stdout.write(self._describe(issue.label, outcome))
            if outcome.error:
                failed.append(issue.label)
        if failed:
            raise CommandError("GitHub could not be read for " + ", ".join(failed))

    @staticmethod
    def _describe(label: str, outcome: TrackingSyncOutcome) -> str:
        text = (
            f"{label}: {outcome.pulls} PRs listed, {outcome.pulls_merged} on main, "
            f"{outcome.pulls_fetched} asked of GitHub" + (", body changed" if outcome.body_changed else "")
        )
        if outcome.rate_limited_until:
            text += f"; rate limited until {outcome.rate_limited_until:%Y-%m-%d %H:%M:%S} UTC"
        if outcome.error:
            text += f"; error: {outcome.error}"
        return text
