"""The change of a suite's alerted series taken together: one test of a group's fresh repeats on every
series that moved, where each series alone may fall short.

A change rarely moves one series: a slower kernel moves throughput and ITL at every level, a scheduler
change the TTFT of all three levels. Each series' own test (`verdicts`) splits the group's error rate
among its alerts, so three series that each moved about 4 % at p = 0.02-0.07 were dismissed, although
together they say clearly that something changed. Here each run of the suite is reduced to one number, the
sum of its alerted series' log values, each oriented the way its alert moved and weighted by the inverse
of its noise; the repeats at the head are compared with those at the base on that number.

The noise of that sum is not the series' noises added as if independent: a slow run is slow everywhere,
so the metrics of one run share part of their noise. It is measured the way one series' noise is, from
the first differences of the same sum over the suite's recent benchmarked commits (`difference_noise`),
and a larger spread among the repeats themselves wins. Only fresh repeats are tested, as for one series.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scipy import special

from dashboard.benchmarks.models import Series
from dashboard.benchmarks.statistics import MAX_NOISE_DEGREES
from dashboard.regressions.sheriff.evidence import (
    NOISE_FLOOR_LOG,
    OUTLIER_SIGMAS,
    difference_noise_counted,
    fresh_measurements,
    noise_points,
)


@dataclass(frozen=True)
class JointSeries:
    """One alerted series of the suite: which way its alert moved (+1 up, -1 down) and its noise."""

    series: Series
    direction: int
    sigma_log: float


@dataclass(frozen=True)
class JointVerdict:
    """What the repeats at both ends say about the change of a suite's alerted series taken together."""

    suite: str
    hardware: str
    series: int  # how many series were combined
    base_runs: int
    head_runs: int
    shift: float  # the change of the combined value, in units of one run's combined noise
    p_value: float  # one-sided, in the alerts' direction
    holds: bool


def combined_value(logs: Mapping[int, float], weights: Mapping[int, float]) -> float | None:
    """One run's combined value: the weighted sum of its log values; None unless it has every series."""
    if any(series_id not in logs for series_id in weights):
        return None
    return sum(weight * logs[series_id] for series_id, weight in weights.items())


def combined_noise(
    *, series: Sequence[Series], weights: Mapping[int, float], commit_id: int
) -> tuple[float, int]:
    """The run-to-run noise of the combined value, from its first differences over the benchmarked
    commits around `commit_id` at which every series was measured, and how many differences it was read
    from."""
    by_commit: dict[int, dict[int, float]] = defaultdict(dict)
    order: dict[int, int] = {}
    runs: dict[int, int] = {}
    for series_id, points in noise_points(series=series, commit_id=commit_id).items():
        for point in points:
            by_commit[point.commit_id][series_id] = math.log(point.value)
            order[point.commit_id] = point.position if point.position is not None else 0
            runs[point.commit_id] = point.runs
    combined = [
        (value, runs[commit])
        for commit in sorted(by_commit, key=lambda commit: order[commit])
        if (value := combined_value(by_commit[commit], weights)) is not None
    ]
    return difference_noise_counted([value for value, _ in combined], runs=[count for _, count in combined])


def _kept(values: Sequence[float], sigma: float) -> list[float]:
    """An end's combined values without a slow run far off the others (three runs or more)."""
    if len(values) < 3 or sigma <= 0:
        return list(values)
    middle = statistics.median(values)
    return [v for v in values if abs(v - middle) <= OUTLIER_SIGMAS * sigma] or list(values)


def joint_test(
    *,
    base: Sequence[float],
    head: Sequence[float],
    history_sigma: float,
    floor: float,
    history_degrees: float = MAX_NOISE_DEGREES,
) -> tuple[float, float]:
    """(shift in noise units, one-sided p) of the head's combined values over the base's: a t-test on
    the history's noise (read from `history_degrees` differences), or on the repeats' own pooled spread
    where that is larger."""
    sigma = max(history_sigma, floor)
    base, head = _kept(base, sigma), _kept(head, sigma)
    squares = sum((v - statistics.fmean(end)) ** 2 for end in (base, head) for v in end)
    freedom = len(base) + len(head) - 2
    degrees = max(history_degrees, 1.0)
    if freedom >= 2 and math.sqrt(squares / freedom) > sigma:
        sigma, degrees = math.sqrt(squares / freedom), freedom
    shift = (statistics.fmean(head) - statistics.fmean(base)) / sigma
    t = shift / math.sqrt(1 / len(base) + 1 / len(head))
    # Student's upper tail: a new series' few commits say little about its noise.
    return shift, float(special.stdtr(degrees, -t))


def fresh_runs(*, series_ids: Sequence[int], commit_id: int, since: datetime) -> dict[int, dict[int, float]]:
    """The log values of the verification runs at a commit queued since `since`, by run and series."""
    runs: dict[int, dict[int, float]] = defaultdict(dict)
    for run_id, series_id, value in fresh_measurements(
        series_ids=series_ids, commit_id=commit_id, since=since
    ).values_list("run_id", "series_id", "value"):
        if value > 0:
            runs[run_id][series_id] = math.log(value)
    return runs


def joint_verdict(
    *,
    members: Sequence[JointSeries],
    base_commit_id: int,
    head_commit_id: int,
    since: datetime,
    alpha: float,
    large_enough: bool,
) -> JointVerdict | None:
    """The joint test of a suite's alerted series (two or more) on the fresh repeats at both ends; None
    when there are too few series or repeats. `large_enough`: whether one of the series moved at least
    its metric's minimum change on these repeats (a change too small to matter is not confirmed jointly
    either)."""
    if len(members) < 2:
        return None
    weights = {
        member.series.pk: member.direction / max(member.sigma_log, NOISE_FLOOR_LOG) for member in members
    }
    ids = list(weights)
    ends = []
    for commit_id in (base_commit_id, head_commit_id):
        runs = fresh_runs(series_ids=ids, commit_id=commit_id, since=since)
        ends.append([v for logs in runs.values() if (v := combined_value(logs, weights)) is not None])
    base, head = ends
    if not base or not head:
        return None
    history, degrees = combined_noise(
        series=[m.series for m in members], weights=weights, commit_id=head_commit_id
    )
    # A floor of one series' noise (weighted by 1 / its noise, one series alone has a noise of 1): a short
    # or quiet history never makes the combination look quieter than that.
    shift, p_value = joint_test(
        base=base, head=head, history_sigma=history, floor=1.0, history_degrees=degrees
    )
    first = members[0].series
    return JointVerdict(
        suite=first.suite.name,
        hardware=first.hardware_class,
        series=len(members),
        base_runs=len(base),
        head_runs=len(head),
        shift=round(shift, 3),
        p_value=p_value,
        holds=p_value < alpha and large_enough,
    )
