"""Reads: typed, N+1-safe queries for pages and the JSON API."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Count, Max, Prefetch

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Measurement, Run, RunStatus, Series, Suite


@dataclass(frozen=True)
class MeasurementRow:
    suite: str
    hardware: str
    concurrency: int
    metric: str
    value: float
    run_id: int


@dataclass(frozen=True)
class TimelinePoint:
    commit_sha: str
    subject: str
    pr_number: int | None
    committed_at: datetime | None
    position: int | None
    value: float
    runs: int


@dataclass(frozen=True)
class TimelineSeries:
    metric: str
    concurrency: int
    points: tuple[TimelinePoint, ...]


def commit_get(*, sha: str) -> Commit | None:
    """A commit by full sha or unique prefix (7+ characters)."""
    sha = sha.lower()
    exact = Commit.objects.select_related("repository").filter(sha=sha).first()
    if exact is not None or len(sha) < 7:
        return exact
    candidates = list(Commit.objects.select_related("repository").filter(sha__startswith=sha)[:2])
    return candidates[0] if len(candidates) == 1 else None


def commit_measurements(*, commit: Commit) -> list[MeasurementRow]:
    """Every measurement of a commit's succeeded runs, ordered for reading."""
    rows = (
        Measurement.objects.filter(commit=commit, run__status=RunStatus.SUCCEEDED)
        .select_related("series__suite")
        .order_by(
            "series__suite__name", "series__hardware_class", "series__concurrency", "series__metric", "run_id"
        )
    )
    return [
        MeasurementRow(
            suite=row.series.suite.name,
            hardware=row.series.hardware_class,
            concurrency=row.series.concurrency,
            metric=row.series.metric,
            value=row.value,
            run_id=row.run_id,
        )
        for row in rows
    ]


def commit_runs(*, commit: Commit) -> list[Run]:
    return list(commit.runs.select_related("suite", "runner").order_by("-queued_at"))


def suite_hardware_classes(*, suite: Suite) -> list[str]:
    return sorted(set(Series.objects.filter(suite=suite).values_list("hardware_class", flat=True)))


def timeline_series(
    *,
    suite: Suite,
    hardware_class: str,
    metrics: tuple[str, ...] = HEADLINE_METRICS,
    date_from: date | None = None,
    date_to: date | None = None,
    concurrencies: tuple[int, ...] = (),
) -> list[TimelineSeries]:
    """Per (metric, concurrency): one point per benchmarked commit, repeats averaged, in main order."""
    measurements = Measurement.objects.filter(
        series__suite=suite,
        series__hardware_class=hardware_class,
        series__metric__in=metrics,
        run__status=RunStatus.SUCCEEDED,
    )
    if concurrencies:
        measurements = measurements.filter(series__concurrency__in=concurrencies)
    if date_from:
        measurements = measurements.filter(commit__committed_at__date__gte=date_from)
    if date_to:
        measurements = measurements.filter(commit__committed_at__date__lte=date_to)
    rows = measurements.values_list(
        "series__metric",
        "series__concurrency",
        "commit_id",
        "commit__sha",
        "commit__subject",
        "commit__pr_number",
        "commit__committed_at",
        "commit__position",
        "value",
    )
    values: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    commits: dict[int, tuple[str, str, int | None, datetime | None, int | None]] = {}
    for metric, concurrency, commit_id, sha, subject, pr_number, committed_at, position, value in rows:
        values[(metric, concurrency, commit_id)].append(value)
        commits[commit_id] = (sha, subject, pr_number, committed_at, position)

    def order(commit_id: int) -> tuple[int, int, float, int]:
        _, _, _, committed_at, position = commits[commit_id]
        return (
            0 if position is not None else 1,
            position or 0,
            committed_at.timestamp() if committed_at else float("inf"),
            commit_id,
        )

    ordered_commits = sorted(commits, key=order)
    keys = sorted(
        {(metric, concurrency) for metric, concurrency, _ in values},
        key=lambda k: (metrics.index(k[0]), k[1]),
    )
    result = []
    for metric, concurrency in keys:
        points = []
        for commit_id in ordered_commits:
            samples = values.get((metric, concurrency, commit_id))
            if not samples:
                continue
            sha, subject, pr_number, committed_at, position = commits[commit_id]
            points.append(
                TimelinePoint(
                    commit_sha=sha,
                    subject=subject,
                    pr_number=pr_number,
                    committed_at=committed_at,
                    position=position,
                    value=sum(samples) / len(samples),
                    runs=len(samples),
                )
            )
        result.append(TimelineSeries(metric=metric, concurrency=concurrency, points=tuple(points)))
    return result


@dataclass(frozen=True)
class SuiteOverview:
    suite: Suite
    hardware_class: str
    latest_commit: Commit | None
    run_count: int
    latest_values: dict[tuple[str, int], float]


def suites_overview() -> list[SuiteOverview]:
    """For each suite and hardware class with data: latest headline values. A fixed number of queries."""
    suites = list(Suite.objects.order_by("name"))
    pair_list = list(
        Run.objects.succeeded()
        .values("suite_id", "hardware_class")
        .annotate(last_run_id=Max("id"), run_count=Count("id"))
        .order_by("suite_id", "hardware_class")
    )
    last_runs = {
        run.pk: run
        for run in Run.objects.filter(pk__in=[p["last_run_id"] for p in pair_list])
        .select_related("commit__repository")
        .prefetch_related(
            Prefetch(
                "measurements",
                queryset=Measurement.objects.filter(series__metric__in=HEADLINE_METRICS).select_related(
                    "series"
                ),
            )
        )
    }
    suites_by_id = {suite.pk: suite for suite in suites}
    overview = []
    for pair in pair_list:
        run = last_runs[pair["last_run_id"]]
        overview.append(
            SuiteOverview(
                suite=suites_by_id[pair["suite_id"]],
                hardware_class=pair["hardware_class"],
                latest_commit=run.commit,
                run_count=pair["run_count"],
                latest_values={
                    (m.series.metric, m.series.concurrency): m.value for m in run.measurements.all()
                },
            )
        )
    return overview
