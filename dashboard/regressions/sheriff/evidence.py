"""The runs at a commit as the sheriff weighs them: their values in log space, slow runs set aside."""

from __future__ import annotations

import itertools
import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db.models import QuerySet

from dashboard.benchmarks.models import (
    Measurement,
    RunKind,
    RunStatus,
    Series,
)
from dashboard.benchmarks.statistics import (
    MAX_NOISE_DEGREES,
    NoiseEstimate,
    change_estimate,
    commit_value_variance,
)
from dashboard.regressions.detect.windows import SeriesPoint, commit_window, many_series_points

logger = logging.getLogger(__name__)

# No benchmark repeats better than this (log scale): a quieter estimate is an artefact of few points.
NOISE_FLOOR_LOG = 0.001
# A group's evidence key for the commits its verdict's repeats were of ({"base": sha, "head": sha}).
TESTED = "tested"
# A repeat further than this many noise scales from the median of its commit is a slow run, not data.
OUTLIER_SIGMAS = 4.0
# Benchmarked commits around a commit that a series' noise is estimated from.
NOISE_POINTS = 61


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


def values_by_position(
    *, series_ids: Sequence[int], positions: Sequence[int], repository_id: int
) -> dict[tuple[int, int], list[float]]:
    """The values of the series' succeeded runs at the commits at `positions` of main, by (series,
    position), in one read."""
    found: dict[tuple[int, int], list[float]] = defaultdict(list)
    for series_id, position, value in (
        Measurement.objects.filter(
            series_id__in=list(series_ids),
            run__status=RunStatus.SUCCEEDED,
            commit__repository_id=repository_id,
            commit__position__in=list(positions),
        )
        .order_by("pk")
        .values_list("series_id", "commit__position", "value")
    ):
        if position is not None:
            found[(series_id, position)].append(value)
    return found


def fresh_measurements(
    *, series_ids: Sequence[int], commit_id: int, since: datetime
) -> QuerySet[Measurement]:
    """The measurements of the verification runs at a commit queued after `since` (a group's creation):
    runs made to test a change, never those that raised it."""
    return Measurement.objects.filter(
        series_id__in=list(series_ids),
        commit_id=commit_id,
        run__status=RunStatus.SUCCEEDED,
        run__kind=RunKind.VERIFICATION,
        run__queued_at__gte=since,
    )


def fresh_values(*, series_id: int, commit_id: int, since: datetime) -> list[float]:
    """One series' values of the fresh verification runs at a commit (see `fresh_measurements`)."""
    return list(
        fresh_measurements(series_ids=[series_id], commit_id=commit_id, since=since).values_list(
            "value", flat=True
        )
    )


def series_noise_log(*, series: Series, commit_id: int) -> float:
    """Run-to-run noise of a series in log space around `commit_id` (see `series_noise`)."""
    return series_noise(series=series, commit_id=commit_id)[0]


def series_noise(*, series: Series, commit_id: int) -> tuple[float, int]:
    """(noise, how many differences it was read from): the run-to-run noise of a series in log space,
    from the first differences around `commit_id`: their standard deviation once differences beyond
    `OUTLIER_SIGMAS` robust scales (a slow run far off, a step) are set aside, and never below their
    MAD. The MAD alone sees only the normal core: a slow mode a few percent off, on one run in twenty,
    is inside any two runs' spread but not in it, and the 95 % intervals built on it held the truth
    about 85 % of the time. Each difference is scaled by the run counts of its two commits: the medians
    of repeated commits (a group's verification repeats, a search's runs) differ less than single runs
    do, and read as they were, made one run's noise look two or three times smaller next to a searched
    range."""
    return series_noises(series=[series], commit_id=commit_id)[series.pk]


def series_noises(*, series: Sequence[Series], commit_id: int) -> dict[int, tuple[float, int]]:
    """`series_noise` of many series around one commit, by series id, from `noise_points`."""
    return {
        series_id: difference_noise_counted(
            log_values(point.value for point in points), runs=[point.runs for point in points]
        )
        for series_id, points in noise_points(series=series, commit_id=commit_id).items()
    }


def noise_points(*, series: Sequence[Series], commit_id: int) -> dict[int, list[SeriesPoint]]:
    """Each series' positive points over the `NOISE_POINTS` benchmarked commits of its suite and hardware
    class around `commit_id`, in main order, by series id: one commit window per suite and hardware class
    and one read of their values, where reading one series at a time read the same window once per
    series (a side test of a suite of 55 series read it 55 times, and twice over)."""
    by_pair: dict[tuple[int, str], list[int]] = defaultdict(list)
    for item in series:
        by_pair[(item.suite_id, item.hardware_class)].append(item.pk)
    points: dict[int, list[SeriesPoint]] = {}
    for (suite_id, hardware_class), series_ids in by_pair.items():
        window = commit_window(
            suite_id=suite_id, hardware_class=hardware_class, commit_id=commit_id, size=NOISE_POINTS
        )
        for series_id, found in many_series_points(series_ids=series_ids, commits=window.commits).items():
            points[series_id] = [point for point in found if point.value > 0]
    return points


def difference_noise(logs: Sequence[float], *, runs: Sequence[int] | None = None) -> float:
    """The run-to-run noise of one value per commit in log space, in commit order (see
    `series_noise_log`), each commit's value the median of `runs` runs (one each when None); 0 when
    there are too few."""
    return difference_noise_counted(logs, runs=runs)[0]


def difference_noise_counted(
    logs: Sequence[float], *, runs: Sequence[int] | None = None
) -> tuple[float, int]:
    """`difference_noise`, and how many differences it was read from: a new series' first few commits
    say little about its noise, and a test on it must say so."""
    diffs = [b - a for a, b in itertools.pairwise(logs)]
    if runs is not None:
        # A difference of two commits' medians has the variance of one run's difference times this.
        diffs = [
            d / math.sqrt((commit_value_variance(first) + commit_value_variance(second)) / 2)
            for d, (first, second) in zip(diffs, itertools.pairwise(runs), strict=True)
        ]
    if len(diffs) < 4:
        return 0.0, 0
    middle = statistics.median(diffs)
    robust = statistics.median(abs(d - middle) for d in diffs) / 0.6744897501960817
    kept = [d - middle for d in diffs if abs(d - middle) <= OUTLIER_SIGMAS * robust]
    spread = math.sqrt(statistics.fmean(d * d for d in kept)) if kept else 0.0
    return max(robust, spread) / math.sqrt(2), len(kept)


def _pooled_sigma(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    squares, freedom = 0.0, 0
    for logs in groups:
        if len(logs) >= 2:
            mean = statistics.fmean(logs)
            squares += sum((v - mean) ** 2 for v in logs)
            freedom += len(logs) - 1
    return (math.sqrt(squares / freedom) if freedom else 0.0), freedom


def large_enough(
    *, change_pct: float, low_pct: float, high_pct: float, direction: int, min_relative_change: float
) -> bool:
    """Whether a change measured as `change_pct` (95 % interval low to high) the way `direction` says may
    be as large as the minimum change: not shown smaller by one standard error. A step just past the
    minimum is measured below it on half its verdicts, and taking the estimate alone dismissed those."""
    standard_error = (high_pct - low_pct) / (2 * 1.96)
    return change_pct * direction + standard_error >= min_relative_change * 100


def change_verdict(
    *,
    base_values: Sequence[float],
    head_values: Sequence[float],
    series_sigma_log: float,
    direction: int,
    min_relative_change: float,
    alpha: float,
    noise_degrees: float = MAX_NOISE_DEGREES,
) -> tuple[float, float, float, float, bool, float, float, float]:
    """(change %, 95 % low, high, one-sided p, holds, sigma, base log level, head log level) of the runs
    at both ends; `direction` is the sign of the change detection saw. `noise_degrees`: how many
    differences the series' noise was read from (a few, early in a series' history, make its interval
    wider)."""
    base, head = log_values(base_values), log_values(head_values)
    if series_sigma_log > 0:
        base, head = kept_logs(base, series_sigma_log), kept_logs(head, series_sigma_log)
    pooled, freedom = _pooled_sigma([base, head])
    # The noise the slow runs are set aside with, and reported: a larger spread among the repeats wins.
    sigma = max(series_sigma_log, pooled if freedom >= 2 else 0.0, NOISE_FLOOR_LOG)
    base, head = kept_logs(base, sigma), kept_logs(head, sigma)
    estimate = change_estimate(
        before=[math.exp(v) for v in base],
        after=[math.exp(v) for v in head],
        # Pooled with the runs' own spread, each by its degrees of freedom: a noise read from a few
        # differences weighs as little as it says.
        noise=NoiseEstimate(
            sigma=max(series_sigma_log, NOISE_FLOOR_LOG),
            degrees_of_freedom=max(min(noise_degrees, MAX_NOISE_DEGREES), 1.0),
            source="differences",
            relative=True,
        ),
        min_relative_change=min_relative_change,
    )
    # The test is two-sided; detection already said which way, so half its p-value is the one-sided one.
    two_sided = estimate.p_value if estimate.p_value is not None else 1.0
    p_value = two_sided / 2 if estimate.change_pct * direction > 0 else 1 - two_sided / 2
    low = estimate.low_pct if estimate.low_pct is not None else estimate.change_pct
    high = estimate.high_pct if estimate.high_pct is not None else estimate.change_pct
    holds = p_value < alpha and large_enough(
        change_pct=estimate.change_pct,
        low_pct=low,
        high_pct=high,
        direction=direction,
        min_relative_change=min_relative_change,
    )
    base_level, head_level = statistics.fmean(base), statistics.fmean(head)
    return estimate.change_pct, low, high, p_value, holds, sigma, base_level, head_level
