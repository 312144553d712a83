"""The runs at a commit as the sheriff weighs them: their values in log space, slow runs set aside."""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterable, Sequence

from dashboard.benchmarks.models import (
    PENDING_RUN_STATUSES,
    Measurement,
    Run,
    RunStatus,
    Suite,
)

logger = logging.getLogger(__name__)

# No benchmark repeats better than this (log scale): a quieter estimate is an artefact of few points.
NOISE_FLOOR_LOG = 0.001
# A repeat further than this many noise scales from the median of its commit is a slow run, not data.
OUTLIER_SIGMAS = 4.0
UNFINISHED_OR_GOOD = (RunStatus.SUCCEEDED, *PENDING_RUN_STATUSES)


def log_values(values: Iterable[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0]


def kept_logs(logs: Sequence[float], sigma: float) -> list[float]:
    """A commit's runs in log space without those far off the others (slow runs), given the noise."""
    if len(logs) < 3:
        return list(logs)
    middle = statistics.median(logs)
    return [v for v in logs if abs(v - middle) <= OUTLIER_SIGMAS * sigma] or list(logs)


def robust_mean(logs: Sequence[float], sigma: float) -> float:
    return statistics.fmean(kept_logs(logs, sigma))


def end_values(*, series_id: int, commit_id: int) -> list[float]:
    return list(
        Measurement.objects.filter(
            series_id=series_id, commit_id=commit_id, run__status=RunStatus.SUCCEEDED
        ).values_list("value", flat=True)
    )


def end_runs(*, commit_id: int, suite: Suite, hardware_class: str) -> list[Run]:
    return list(
        Run.objects.filter(
            commit_id=commit_id, suite=suite, hardware_class=hardware_class, status__in=UNFINISHED_OR_GOOD
        )
    )
