from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.demo.github import DemoCommitsMissing, demo_github_load


class Command(BaseCommand):
    help = (
        "Add the demo's tracking issue vllm-project/vllm#50587 with its PRs mapped to the demo commits, "
        "and the v0.27.1 tag (after load_demo; idempotent)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            outcome = demo_github_load()
        except DemoCommitsMissing as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"demo tracking issue loaded: {outcome.pulls} PRs listed, {outcome.merged} merged on main"
        )
