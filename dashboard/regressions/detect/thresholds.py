"""Reads: the minimum relative change and p-value that make a change an alert, per metric."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from dashboard.benchmarks.models import FALLBACK_MIN_RELATIVE_CHANGE, MIN_RELATIVE_CHANGES, Suite
from dashboard.regressions.models import DetectionSetting

# The built-in minimum relative changes (benchmarks.models: pages judge changes by them too); a
# DetectionSetting row overrides them for detection.
DEFAULT_THRESHOLDS = MIN_RELATIVE_CHANGES


DEFAULT_P_THRESHOLD = 1e-4


@dataclass(frozen=True)
class Threshold:
    min_relative_change: float
    p_threshold: float
    enabled: bool


def threshold_resolve(*, metric: str, suite_id: int, rows: Iterable[DetectionSetting]) -> Threshold:
    """The setting that applies to `metric` in suite `suite_id`: the most specific row, else the default."""
    matching = [
        row
        for row in rows
        if (row.suite_id is None or row.suite_id == suite_id) and metric.startswith(row.metric_prefix)
    ]
    if matching:
        row = max(matching, key=lambda r: (r.suite_id is not None, len(r.metric_prefix)))
        return Threshold(row.min_relative_change, row.p_threshold, row.enabled)
    for prefix, change in DEFAULT_THRESHOLDS:
        if metric.startswith(prefix):
            return Threshold(change or 0.0, DEFAULT_P_THRESHOLD, change is not None)
    return Threshold(FALLBACK_MIN_RELATIVE_CHANGE, DEFAULT_P_THRESHOLD, True)


def thresholds_for_suite(suite_id: int) -> list[DetectionSetting]:
    """The detection settings of a suite: its rows and the every-suite rows, then what the suite file
    declares (an accuracy task's tolerance), which a row of the same prefix overrides."""
    rows = list(DetectionSetting.objects.filter(Q(suite_id=suite_id) | Q(suite__isnull=True)))
    settings = Suite.objects.filter(pk=suite_id).values_list("benchmark_settings", flat=True).first()
    accuracy = (settings or {}).get("accuracy")
    if accuracy and accuracy.get("tolerance"):
        # Unsaved, and after the rows: threshold_resolve keeps the first of equally specific settings.
        rows.append(
            DetectionSetting(
                suite_id=suite_id,
                metric_prefix=f"accuracy_{accuracy['name']}",
                min_relative_change=float(accuracy["tolerance"]),
            )
        )
    return rows
