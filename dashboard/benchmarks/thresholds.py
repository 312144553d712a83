"""Reads: the minimum relative change and p-value that make a change matter, per suite and metric.

One rule for detection and for every page that judges a change (compare, the PR and commit tables): the
most specific DetectionSetting row, else the built-in MIN_RELATIVE_CHANGES.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from dashboard.benchmarks.models import (
    FALLBACK_MIN_RELATIVE_CHANGE,
    MIN_RELATIVE_CHANGES,
    DetectionSetting,
    Suite,
)

# The built-in minimum relative changes; a DetectionSetting row overrides them.
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
    return thresholds_for_suites(Suite.objects.filter(pk=suite_id)).get(suite_id, [])


def thresholds_for_suites(suites: Iterable[Suite]) -> dict[int, list[DetectionSetting]]:
    """:func:`thresholds_for_suite` of suites already read, in one query."""
    declared = {suite.pk: suite.benchmark_settings for suite in suites}
    if not declared:
        return {}
    rows = list(DetectionSetting.objects.filter(Q(suite_id__in=sorted(declared)) | Q(suite__isnull=True)))
    found: dict[int, list[DetectionSetting]] = {}
    for suite_id, benchmark_settings in declared.items():
        own = [row for row in rows if row.suite_id in (None, suite_id)]
        accuracy = (benchmark_settings or {}).get("accuracy")
        if accuracy and accuracy.get("tolerance"):
            # Unsaved, and after the rows: threshold_resolve keeps the first of equally specific settings.
            own.append(
                DetectionSetting(
                    suite_id=suite_id,
                    metric_prefix=f"accuracy_{accuracy['name']}",
                    min_relative_change=float(accuracy["tolerance"]),
                )
            )
        found[suite_id] = own
    return found
