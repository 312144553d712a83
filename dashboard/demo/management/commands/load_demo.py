from typing import Any

from django.core.management.base import BaseCommand

from dashboard.demo.history import DemoAlreadyLoaded, demo_load


class Command(BaseCommand):
    help = "Load the demo history: the Kimi K3 reference suite on B300 with PR-driven steps (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            outcome = demo_load()
        except DemoAlreadyLoaded as reason:
            self.stdout.write(f"{reason}: nothing to do")
            return
        self.stdout.write(
            f"demo loaded: {outcome.commits} commits, {outcome.runs} benchmarked runs, "
            f"{outcome.measurements} measurements"
        )
