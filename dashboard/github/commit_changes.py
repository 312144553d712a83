"""Reads: what one commit changed on each suite and hardware class it ran on, against the benchmarked
commit before it there (the commit page)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Max

from dashboard.benchmarks.comparison import ScopeStatistics
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    DetectionSetting,
    Measurement,
    Run,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.selectors import scopes_condition, series_noises
from dashboard.benchmarks.statistics import change_could_matter
from dashboard.benchmarks.thresholds import threshold_resolve, thresholds_for_suites
from dashboard.github.impact import MetricChange, metric_change


@dataclass(frozen=True)
class CommitChanges:
    """A commit's headline changes on one suite and hardware class against the benchmarked commit before
    it there, each with its uncertainty; keyed (concurrency, metric)."""

    suite: str
    hardware_class: str
    previous: Commit
    changes: dict[tuple[int, str], MetricChange]


def commit_changes(
    *, commit: Commit, only: tuple[int, str] | None = None, could_matter_only: bool = False
) -> list[CommitChanges]:
    """What the commit changed on every suite and hardware class it was benchmarked on (or on `only`).
    With `could_matter_only`, only on those where some change is as large as its metric's minimum (the
    only ones that can be significant): the noise is then read for those alone. Seven queries however
    many suites ran it."""
    if commit.position is None:
        return []
    runs = Run.objects.succeeded().filter(commit=commit)
    if only is not None:
        runs = runs.filter(suite_id=only[0], hardware_class=only[1])
    scopes = sorted(set(runs.values_list("suite_id", "hardware_class")))
    if not scopes:
        return []
    # The benchmarked commit before this one, per suite and hardware class: the highest position below.
    previous_positions = {
        (suite_id, hardware_class): position
        for suite_id, hardware_class, position in Run.objects.succeeded()
        .filter(
            scopes_condition(scopes),
            commit__repository_id=commit.repository_id,
            commit__position__lt=commit.position,
        )
        .values_list("suite_id", "hardware_class")
        .annotate(position=Max("commit__position"))
        .values_list("suite_id", "hardware_class", "position")
        .order_by()
        if (suite_id, hardware_class) in scopes
    }
    previous_commits = {
        previous.position: previous
        for previous in Commit.objects.filter(
            repository_id=commit.repository_id, position__in=set(previous_positions.values())
        )
    }
    compared = [scope for scope in scopes if scope in previous_positions]
    suites = Suite.objects.in_bulk([suite_id for suite_id, _ in compared])
    samples: dict[tuple[int, int, str], dict[tuple[int, str], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for commit_id, suite_id, hardware_class, concurrency, metric, value in Measurement.objects.filter(
        scopes_condition(compared, prefix="series__"),
        commit_id__in=[commit.pk, *(previous.pk for previous in previous_commits.values())],
        run__status=RunStatus.SUCCEEDED,
        series__metric__in=HEADLINE_METRICS,
    ).values_list(
        "commit_id",
        "series__suite_id",
        "series__hardware_class",
        "series__concurrency",
        "series__metric",
        "value",
    ):
        samples[(commit_id, suite_id, hardware_class)][(concurrency, metric)].append(value)
    detection_settings = thresholds_for_suites(suites.values())
    if could_matter_only:
        previous_ids = {scope: previous_commits[previous_positions[scope]].pk for scope in compared}
        compared = [
            (suite_id, hardware_class)
            for suite_id, hardware_class in compared
            if _could_matter(
                before=samples[(previous_ids[(suite_id, hardware_class)], suite_id, hardware_class)],
                after=samples[(commit.pk, suite_id, hardware_class)],
                suite_id=suite_id,
                settings=detection_settings[suite_id],
            )
        ]
    noises = series_noises(scopes=compared, metrics=HEADLINE_METRICS)
    found = []
    for suite_id, hardware_class in compared:
        previous = previous_commits[previous_positions[(suite_id, hardware_class)]]
        before = samples[(previous.pk, suite_id, hardware_class)]
        after = samples[(commit.pk, suite_id, hardware_class)]
        statistics = ScopeStatistics(
            noise=noises.get((suite_id, hardware_class), {}),
            suite_id=suite_id,
            settings=tuple(detection_settings[suite_id]),
        )
        found.append(
            CommitChanges(
                suite=suites[suite_id].name,
                hardware_class=hardware_class,
                previous=previous,
                changes={
                    key: metric_change(
                        metric=key[1],
                        estimate=statistics.change(
                            concurrency=key[0], metric=key[1], before=before[key], after=after[key]
                        ),
                    )
                    for key in before.keys() & after.keys()
                },
            )
        )
    return found


def _could_matter(
    *,
    before: dict[tuple[int, str], list[float]],
    after: dict[tuple[int, str], list[float]],
    suite_id: int,
    settings: Sequence[DetectionSetting],
) -> bool:
    """Whether any metric moved by at least its minimum change, by the suite's own detection settings."""
    return any(
        change_could_matter(
            before=before[key],
            after=after[key],
            min_relative_change=threshold_resolve(
                metric=key[1], suite_id=suite_id, rows=settings
            ).min_relative_change,
        )
        for key in before.keys() & after.keys()
    )
