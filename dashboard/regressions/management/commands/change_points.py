from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.regressions.detect.detector import ChangePoint, change_point_kind, change_points_detect


class Command(BaseCommand):
    help = (
        "Print the change points of the `value` column of a CSV file (one row per benchmarked commit, in "
        "order) as JSON; `index` is the first row after the change."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--csv", required=True, type=Path, dest="csv_path")
        parser.add_argument(
            "--higher-is-better",
            action="store_true",
            help="the metric improves upwards (throughput); adds a regression/improvement kind",
        )
        parser.add_argument(
            "--min-change-pct", type=float, default=2.0, help="smallest change reported, in percent"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        values = _values_read(path=options["csv_path"])
        changes = change_points_detect(values=values, min_relative_change=options["min_change_pct"] / 100.0)
        higher_is_better: bool = options["higher_is_better"]
        rows = [_change_row(change=change, higher_is_better=higher_is_better) for change in changes]
        self.stdout.write(json.dumps({"change_points": rows}))


def _values_read(*, path: Path) -> list[float]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or "value" not in reader.fieldnames:
                raise CommandError(f"{path}: no `value` column in the header")
            return [_value_parse(text=row["value"], path=path, line=reader.line_num) for row in reader]
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise CommandError(f"{path}: not a readable CSV file ({error})") from None


def _value_parse(*, text: str | None, path: Path, line: int) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise CommandError(f"{path}, line {line}: value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise CommandError(f"{path}, line {line}: value {text!r} is not finite; leave such rows out")
    return value


def _change_row(*, change: ChangePoint, higher_is_better: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "index": change.index,
        "before": _value_round(value=change.before),
        "after": _value_round(value=change.after),
        "change_pct": round(change.change_pct, 1),
        "p_value": float(f"{change.p_value:.2g}"),
    }
    if higher_is_better:
        row["kind"] = change_point_kind(change=change, higher_is_better=True)
    return row


def _value_round(*, value: float) -> float:
    # Three significant decimals for small values (seconds), one for large ones (tokens per second).
    magnitude = abs(value)
    return round(value, 1 if magnitude >= 100 else 2 if magnitude >= 10 else 3)
