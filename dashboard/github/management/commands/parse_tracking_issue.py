from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.github.tracking import InvalidRepositoryName, tracking_issue_parse


class Command(BaseCommand):
    help = (
        "Print the PRs a tracking-issue body names as JSON, in order of appearance, each once: "
        '[{"repo": "vllm-project/vllm", "number": 50383, "checked": true}, ...]'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--body-file", required=True, help="the issue's Markdown body; - reads stdin")
        parser.add_argument(
            "--repo", required=True, help="OWNER/NAME the issue lives in (bare #N refers to it)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        body_file: str = options["body_file"]
        try:
            body = sys.stdin.read() if body_file == "-" else Path(body_file).read_text(encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot read {body_file}: {error.strerror}") from None
        except UnicodeDecodeError:
            raise CommandError(f"cannot read {body_file}: not UTF-8 text") from None
        try:
            references = tracking_issue_parse(body=body, repo=options["repo"])
        except InvalidRepositoryName as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps([dataclasses.asdict(reference) for reference in references]))
