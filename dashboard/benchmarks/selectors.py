"""Reads: commits, timelines, suites and their overview, as the pages draw them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.conf import settings
from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, Subquery, Window
from django.db.models.functions import DenseRank

from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    Measurement,
    Repository,
    Run,
    RunStatus,
    Series,
    Suite,
    main_order,
    main_order_key,
)
from dashboard.benchmarks.statistics import NoiseEstimate, commit_value, noise_estimate


def commit_value_of(values: Iterable[float]) -> float:
    """A commit's value on a series: the median of its runs (:func:`statistics.commit_value`, which also
    gives their spread: the rule of every page, compare and the detector)."""
    return commit_value(list(values)).value


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
    value: float  # the median of the commit's runs
    runs: int
    low: float | None = None  # the lowest and highest run, when there are several
    high: float | None = None


def timeline_point(
    *,
    sha: str,
    subject: str,
    pr_number: int | None,
    committed_at: datetime | None,
    position: int | None,
    samples: Sequence[float],
) -> TimelinePoint:
    """A commit's point on a timeline: the median of its runs, with their spread (one rule everywhere)."""
    value = commit_value(samples)
    repeated = value.runs > 1
    return TimelinePoint(
        commit_sha=sha,
        subject=subject,
        pr_number=pr_number,
        committed_at=committed_at,
        position=position,
        value=value.value,
        runs=value.runs,
        low=value.low if repeated else None,
        high=value.high if repeated else None,
    )


@dataclass(frozen=True)
class TimelineSeries:
    metric: str
    concurrency: int
    points: tuple[TimelinePoint, ...]


def repository_default_find() -> Repository | None:
    """The configured repository's row, or None while nothing has created it: a read never inserts it."""
    return Repository.objects.filter(full_name=settings.PERFWATCH_GITHUB_REPOSITORY).first()


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
    return measurement_rows(rows)


def measurement_rows(rows: Iterable[Measurement]) -> list[MeasurementRow]:
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


def suite_metrics(*, suite: Suite, hardware_class: str) -> set[str]:
    """Every metric `suite` has series of on `hardware_class`."""
    return set(
        Series.objects.filter(suite=suite, hardware_class=hardware_class).values_list("metric", flat=True)
    )


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
    # The latest commit is the newest on main, not the one measured last: verification and bisection
    # re-run older commits long after newer ones.
    newest_on_main = (
        Run.objects.succeeded()
        .filter(suite_id=OuterRef("suite_id"), hardware_class=OuterRef("hardware_class"))
        .order_by(*main_order(prefix="commit__", newest_first=True), "-id")
        .values("id")[:1]
    )
    pair_list = list(
        Run.objects.succeeded()
        .values("suite_id", "hardware_class")
        .annotate(last_run_id=Subquery(newest_on_main), run_count=Count("id"))
        .order_by("suite_id", "hardware_class")
    )
    last_runs = {
        run.pk: run
        for run in Run.objects.filter(pk__in=[p["last_run_id"] for p in pair_list]).select_related(
            "commit__repository"
        )
    }
    # The latest commit's value is the median of all its succeeded runs, as on every other page.
    latest = Q(pk__in=[])
    for run in last_runs.values():
        latest |= Q(
            run__suite_id=run.suite_id, run__hardware_class=run.hardware_class, commit_id=run.commit_id
        )
    samples: dict[tuple[int, str], dict[tuple[str, int], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    rows = (
        Measurement.objects.filter(
            latest, run__status=RunStatus.SUCCEEDED, series__metric__in=HEADLINE_METRICS
        )
        .values_list("run__suite_id", "run__hardware_class", "series__metric", "series__concurrency", "value")
        .order_by()
    )
    for suite_id, hardware_class, metric, concurrency, value in rows:
        samples[(suite_id, hardware_class)][(metric, concurrency)].append(value)
    suites_by_id = {suite.pk: suite for suite in suites}
    overview = []
    for pair in pair_list:
        run = last_runs[pair["last_run_id"]]
        values = samples[(pair["suite_id"], pair["hardware_class"])]
        overview.append(
            SuiteOverview(
                suite=suites_by_id[pair["suite_id"]],
                hardware_class=pair["hardware_class"],
                latest_commit=run.commit,
                run_count=pair["run_count"],
                latest_values={key: commit_value_of(found) for key, found in values.items()},
            )
        )
    return overview


@dataclass(frozen=True)
class HardwareFacet:
    """What a suite's timeline can be filtered by on one hardware class."""

    hardware_class: str
    concurrencies: tuple[int, ...]
    run_count: int
    first_commit_at: datetime | None
    last_commit_at: datetime | None


def suite_facets(*, suite: Suite) -> list[HardwareFacet]:
    """Hardware classes with data for `suite`, their concurrency levels and commit date span. Two queries."""
    levels: dict[str, set[int]] = defaultdict(set)
    for hardware_class, concurrency in Series.objects.filter(suite=suite).values_list(
        "hardware_class", "concurrency"
    ):
        levels[hardware_class].add(concurrency)
    spans = {
        row["hardware_class"]: row
        for row in Run.objects.succeeded()
        .filter(suite=suite)
        .values("hardware_class")
        .annotate(
            run_count=Count("id"), first_at=Min("commit__committed_at"), last_at=Max("commit__committed_at")
        )
        .order_by("hardware_class")
    }
    return [
        HardwareFacet(
            hardware_class=hardware_class,
            concurrencies=tuple(sorted(levels[hardware_class])),
            run_count=spans[hardware_class]["run_count"] if hardware_class in spans else 0,
            first_commit_at=spans[hardware_class]["first_at"] if hardware_class in spans else None,
            last_commit_at=spans[hardware_class]["last_at"] if hardware_class in spans else None,
        )
        for hardware_class in sorted(levels)
    ]


@dataclass(frozen=True)
class TimelineSpan:
    """What a timeline shows under its filters: succeeded runs, the commits they measured, their dates."""

    run_count: int
    commit_count: int
    first_commit_at: datetime | None
    last_commit_at: datetime | None


def timeline_span(
    *, suite: Suite, hardware_class: str, date_from: date | None, date_to: date | None
) -> TimelineSpan:
    """Runs and commits of `suite` on `hardware_class` whose commit date lies in [date_from, date_to], as the
    charts filter them (the UTC day of the commit). One query."""
    runs = Run.objects.succeeded().for_suite(suite, hardware_class)
    if date_from:
        runs = runs.filter(commit__committed_at__date__gte=date_from)
    if date_to:
        runs = runs.filter(commit__committed_at__date__lte=date_to)
    row = runs.aggregate(
        run_count=Count("id"),
        commit_count=Count("commit", distinct=True),
        first_at=Min("commit__committed_at"),
        last_at=Max("commit__committed_at"),
    )
    return TimelineSpan(
        run_count=row["run_count"],
        commit_count=row["commit_count"],
        first_commit_at=row["first_at"],
        last_commit_at=row["last_at"],
    )


def suites_sparklines(
    *, metric: str = "output_throughput_tok_s", last: int = 300
) -> dict[tuple[int, str], TimelineSeries]:
    """Per (suite id, hardware class): `metric` at its highest concurrency over the last `last` benchmarked
    commits, oldest first, each the median of its runs. Two queries whatever the number of suites."""
    highest: dict[tuple[int, str], tuple[int, int]] = {}
    for series_id, suite_id, hardware_class, concurrency in Series.objects.filter(metric=metric).values_list(
        "id", "suite_id", "hardware_class", "concurrency"
    ):
        if (suite_id, hardware_class) not in highest or concurrency > highest[(suite_id, hardware_class)][1]:
            highest[(suite_id, hardware_class)] = (series_id, concurrency)
    rows = (
        Measurement.objects.filter(
            series_id__in=[series_id for series_id, _ in highest.values()], run__status=RunStatus.SUCCEEDED
        )
        .annotate(
            recency=Window(
                DenseRank(),
                partition_by=[F("series_id")],
                order_by=main_order(prefix="commit__", newest_first=True),
            )
        )
        .filter(recency__lte=last)
        .values_list(
            "series_id",
            "commit_id",
            "commit__sha",
            "commit__subject",
            "commit__pr_number",
            "commit__committed_at",
            "commit__position",
            "value",
        )
    )
    samples: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    details: dict[int, tuple[str, str, int | None, datetime | None, int | None]] = {}
    for series_id, commit_id, sha, subject, pr_number, committed_at, position, value in rows:
        samples[series_id][commit_id].append(value)
        details[commit_id] = (sha, subject, pr_number, committed_at, position)
    sparklines = {}
    for key, (series_id, concurrency) in highest.items():
        points = []
        for commit_id, values in samples[series_id].items():
            sha, subject, pr_number, committed_at, position = details[commit_id]
            point = timeline_point(
                sha=sha,
                subject=subject,
                pr_number=pr_number,
                committed_at=committed_at,
                position=position,
                samples=values,
            )
            points.append(
                (
                    main_order_key(
                        position=point.position, committed_at=point.committed_at, commit_id=commit_id
                    ),
                    point,
                )
            )
        points.sort(key=lambda item: item[0])
        sparklines[key] = TimelineSeries(
            metric=metric, concurrency=concurrency, points=tuple(point for _, point in points)
        )
    return sparklines


@dataclass(frozen=True)
class BenchmarkedCommit:
    commit: Commit
    runs_succeeded: int
    runs_failed: int
    last_finished_at: datetime | None


def commits_recently_benchmarked(*, limit: int = 12) -> list[BenchmarkedCommit]:
    """The newest commits on main with a finished run, newest first. Two queries: the commits, walked
    newest first until `limit` have a finished run (an index scan, not a sort of every run), then their
    run counts."""
    finished = (RunStatus.SUCCEEDED, RunStatus.FAILED)
    commits = list(
        Commit.objects.filter(Exists(Run.objects.filter(commit=OuterRef("pk"), status__in=finished)))
        .select_related("repository")
        .order_by(*main_order(newest_first=True))[:limit]
    )
    counts = {
        row["commit_id"]: row
        for row in Run.objects.filter(commit__in=commits, status__in=finished)
        .values("commit_id")
        .annotate(
            succeeded=Count("pk", filter=Q(status=RunStatus.SUCCEEDED)),
            failed=Count("pk", filter=Q(status=RunStatus.FAILED)),
            last_finished_at=Max("finished_at"),
        )
        .order_by()
    }
    return [
        BenchmarkedCommit(
            commit=commit,
            runs_succeeded=counts[commit.pk]["succeeded"],
            runs_failed=counts[commit.pk]["failed"],
            last_finished_at=counts[commit.pk]["last_finished_at"],
        )
        for commit in commits
    ]


def commit_neighbours(*, commit: Commit) -> tuple[Commit | None, Commit | None]:
    """The closest older and newer commits on main with a succeeded run; unknown without a position."""
    if commit.position is None:
        return None, None
    benchmarked = Commit.objects.filter(repository_id=commit.repository_id).filter(
        Exists(Run.objects.succeeded().filter(commit=OuterRef("pk")))
    )
    older = benchmarked.filter(position__lt=commit.position).order_by("-position").first()
    newer = benchmarked.filter(position__gt=commit.position).order_by("position").first()
    return older, newer


def suite_get(*, name: str) -> Suite | None:
    return Suite.objects.filter(name=name).first()


def suites_list() -> list[Suite]:
    return list(Suite.objects.order_by("-is_active", "name"))


def series_noise(
    *, suite_id: int, hardware_class: str, size: int | None = None
) -> dict[tuple[int, str], NoiseEstimate]:
    """Run-to-run noise of every series of a suite on a hardware class, keyed (concurrency, metric), from
    its latest `size` benchmarked commits (the detection window): from repeated runs of a commit where
    there are any, else from the commits' values (:func:`statistics.noise_estimate`). Two queries."""
    size = size or settings.PERFWATCH_DETECTION_WINDOW
    latest = (
        Run.objects.succeeded()
        .filter(suite_id=suite_id, hardware_class=hardware_class, commit__position__isnull=False)
        .values_list("commit_id", "commit__position")
        .distinct()
        .order_by("-commit__position")[:size]
    )
    position: dict[int, int] = {commit_id: order or 0 for commit_id, order in latest}
    runs: dict[tuple[int, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for concurrency, metric, commit_id, value in Measurement.objects.filter(
        series__suite_id=suite_id,
        series__hardware_class=hardware_class,
        run__status=RunStatus.SUCCEEDED,
        commit_id__in=list(position),
    ).values_list("series__concurrency", "series__metric", "commit_id", "value"):
        runs[(concurrency, metric)][commit_id].append(value)
    return {
        key: noise_estimate(
            runs_by_commit=[by_commit[cid] for cid in sorted(by_commit, key=position.__getitem__)]
        )
        for key, by_commit in runs.items()
    }
