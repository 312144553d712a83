"""Reads: typed, N+1-safe queries for pages and the JSON API."""

from __future__ import annotations

import gzip
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce, DenseRank

from dashboard.benchmarks.models import (
    ACTIVE_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    HEADLINE_METRICS,
    Commit,
    Measurement,
    Run,
    Runner,
    RunQuerySet,
    RunStatus,
    Series,
    Suite,
)


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
    return _measurement_rows(rows)


def _measurement_rows(rows: Iterable[Measurement]) -> list[MeasurementRow]:
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
        # Level 0 holds the metrics of a run as a whole (capacity, accuracy): no level filters them out.
        measurements = measurements.filter(series__concurrency__in=(0, *concurrencies))
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


def _main_order_key(point: TimelinePoint, commit_id: int) -> tuple[bool, int, float, int]:
    # The order timeline_series uses: known positions first, then commit time, then arrival.
    return (
        point.position is None,
        point.position or 0,
        point.committed_at.timestamp() if point.committed_at else float("inf"),
        commit_id,
    )


def suites_sparklines(
    *, metric: str = "output_throughput_tok_s", last: int = 300
) -> dict[tuple[int, str], TimelineSeries]:
    """Per (suite id, hardware class): `metric` at its highest concurrency over the last `last` benchmarked
    commits, oldest first, repeats averaged. Two queries whatever the number of suites."""
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
                order_by=[
                    F("commit__position").desc(nulls_first=True),
                    F("commit__committed_at").desc(nulls_first=True),
                    F("commit_id").desc(),
                ],
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
            point = TimelinePoint(
                commit_sha=sha,
                subject=subject,
                pr_number=pr_number,
                committed_at=committed_at,
                position=position,
                value=sum(values) / len(values),
                runs=len(values),
            )
            points.append((_main_order_key(point, commit_id), point))
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
    """The newest commits on main with a finished run, newest first. One query."""
    commits = (
        Commit.objects.filter(runs__status__in=(RunStatus.SUCCEEDED, RunStatus.FAILED))
        .annotate(
            runs_succeeded=Count("runs", filter=Q(runs__status=RunStatus.SUCCEEDED)),
            runs_failed=Count("runs", filter=Q(runs__status=RunStatus.FAILED)),
            last_finished_at=Max("runs__finished_at"),
        )
        .select_related("repository")
        .order_by(F("position").desc(nulls_first=True), F("committed_at").desc(nulls_first=True), "-id")
    )[:limit]
    return [
        BenchmarkedCommit(
            commit=commit,
            runs_succeeded=commit.runs_succeeded,
            runs_failed=commit.runs_failed,
            last_finished_at=commit.last_finished_at,
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


def suites_list() -> list[Suite]:
    return list(Suite.objects.order_by("-is_active", "name"))


# Runs and runners: the queue, what is running, what failed, and which node holds what.

RUN_VIEWS: tuple[str, ...] = ("running", "queued", "failed", "succeeded", "cancelled")
_RUN_VIEW_STATUSES: dict[str, tuple[str, ...]] = {
    "running": tuple(ACTIVE_RUN_STATUSES),
    "queued": (RunStatus.QUEUED,),
    "failed": (RunStatus.FAILED,),
    "succeeded": (RunStatus.SUCCEEDED,),
    "cancelled": (RunStatus.CANCELLED,),
}


def _runs_matching(*, suite: str = "", hardware_class: str = "", runner: str = "") -> RunQuerySet:
    runs = Run.objects.all()
    if suite:
        runs = runs.filter(suite__name=suite)
    if hardware_class:
        runs = runs.filter(hardware_class=hardware_class)
    if runner:
        runs = runs.filter(runner__name=runner)
    return runs


def _queue_position() -> Subquery:
    """1 + the queued runs of the same hardware class queued before this one: where it waits in its
    runner queue (ordered by queue time, as the runners of a class take them)."""
    ahead = (
        Run.objects.filter(status=RunStatus.QUEUED, hardware_class=OuterRef("hardware_class"))
        .filter(
            Q(queued_at__lt=OuterRef("queued_at")) | Q(queued_at=OuterRef("queued_at"), pk__lt=OuterRef("pk"))
        )
        .order_by()
        .values("hardware_class")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Subquery(ahead, output_field=IntegerField())


def runs_list(*, view: str, suite: str = "", hardware_class: str = "", runner: str = "") -> RunQuerySet:
    """Runs in one of RUN_VIEWS, ready for a table: queued ones in queue order with `queue_position`,
    running ones oldest first, finished ones newest first. The raw report is left unread."""
    runs = (
        _runs_matching(suite=suite, hardware_class=hardware_class, runner=runner)
        .filter(status__in=_RUN_VIEW_STATUSES[view])
        .select_related("suite", "commit", "runner")
        .defer("report_gz", "telemetry", "logs", "server_metrics", "commands", "environment")
    )
    if view == "queued":
        return runs.annotate(queue_position=Coalesce(_queue_position(), 0) + 1).order_by("queued_at", "pk")
    if view == "running":
        return runs.order_by("started_at", "pk")
    return runs.order_by(F("finished_at").desc(nulls_last=True), "-pk")


def runs_counts(*, suite: str = "", hardware_class: str = "", runner: str = "") -> dict[str, int]:
    """How many runs each of RUN_VIEWS holds under these filters. One query."""
    return _runs_matching(suite=suite, hardware_class=hardware_class, runner=runner).aggregate(
        **{view: Count("pk", filter=Q(status__in=statuses)) for view, statuses in _RUN_VIEW_STATUSES.items()}
    )


@dataclass(frozen=True)
class RunFilterChoices:
    suites: tuple[str, ...]
    hardware_classes: tuple[str, ...]
    runners: tuple[str, ...]


def runs_filter_choices() -> RunFilterChoices:
    """What the runs page can be filtered by. Three queries."""
    return RunFilterChoices(
        suites=tuple(Suite.objects.order_by("name").values_list("name", flat=True)),
        hardware_classes=tuple(
            Run.objects.order_by("hardware_class").values_list("hardware_class", flat=True).distinct()
        ),
        runners=tuple(Runner.objects.order_by("name").values_list("name", flat=True)),
    )


def runs_live_signature(*, suite: str = "", hardware_class: str = "", runner: str = "") -> str:
    """A short digest that changes whenever a run under these filters is queued, changes stage or
    finishes: a page polls it and reloads when it moves. Two queries."""
    runs = _runs_matching(suite=suite, hardware_class=hardware_class, runner=runner)
    unfinished = list(runs.exclude(status__in=FINAL_RUN_STATUSES).order_by("pk").values_list("pk", "status"))
    finished = runs.filter(status__in=FINAL_RUN_STATUSES).aggregate(last=Max("pk"), count=Count("pk"))
    state = repr((unfinished, finished["last"], finished["count"]))
    return hashlib.sha1(state.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunDetail:
    run: Run
    has_report: bool
    has_telemetry: bool


def run_detail(*, run_id: int) -> RunDetail | None:
    """A run with its suite, commit and runner, and whether it holds a report and telemetry; the report
    and the telemetry samples themselves are left unread. One query."""
    row = (
        Run.objects.select_related("suite", "commit__repository", "runner")
        .defer("report_gz", "telemetry")
        .annotate(
            holds_report=ExpressionWrapper(Q(report_gz__isnull=False), output_field=BooleanField()),
            holds_telemetry=ExpressionWrapper(~Q(telemetry=[]), output_field=BooleanField()),
        )
        .filter(pk=run_id)
        .first()
    )
    if row is None:
        return None
    return RunDetail(run=row, has_report=row.holds_report, has_telemetry=row.holds_telemetry)


def run_queue_position(*, run: Run) -> int | None:
    """Where a queued run waits in its hardware class's queue; None when it is not queued."""
    if run.status != RunStatus.QUEUED:
        return None
    return (
        Run.objects.filter(pk=run.pk)
        .annotate(position=Coalesce(_queue_position(), 0) + 1)
        .values_list("position", flat=True)
        .first()
    )


def run_measurements(*, run: Run) -> list[MeasurementRow]:
    """The measurements one run stored, ordered like a commit's."""
    rows = (
        Measurement.objects.filter(run=run)
        .select_related("series__suite")
        .order_by("series__hardware_class", "series__concurrency", "series__metric")
    )
    return _measurement_rows(rows)


def run_report(*, run_id: int) -> bytes | None:
    """The raw guidellm report a run stored, decompressed; None when the run has none."""
    stored = Run.objects.filter(pk=run_id).values_list("report_gz", flat=True).first()
    return gzip.decompress(stored) if stored else None


def run_reproduce_script(*, run_id: int) -> str | None:
    """The bash script that reproduces run `run_id` from its recorded commands; None when it has none."""
    from runners.reproduce import reproduce_script

    run = Run.objects.select_related("suite", "commit").filter(pk=run_id).first()
    if run is None or not run.commands:
        return None
    title = f"PerfWatch run {run.pk}: suite {run.suite.name} at {run.commit.sha} ({run.status})"
    return reproduce_script(commands=run.commands, title=title)


def run_telemetry(*, run_id: int) -> list[dict[str, Any]] | None:
    """The GPU samples a run took (runners.telemetry.TelemetrySample as dicts); None for an unknown run."""
    return Run.objects.filter(pk=run_id).values_list("telemetry", flat=True).first()


def run_signature(*, run: Run) -> str:
    """What changes when a run moves on: its status, stage start and attempt, and each heartbeat, which
    brings the latest tail of the logs being written."""
    stage_started_at = run.stage_started_at.isoformat() if run.stage_started_at else ""
    heartbeat_at = run.heartbeat_at.isoformat() if run.heartbeat_at else ""
    return f"{run.status}:{run.attempt}:{stage_started_at}:{heartbeat_at}"


def run_live_signature(*, run_id: int) -> str | None:
    """run_signature of a run read afresh; None for an unknown run. One query."""
    run = Run.objects.only("status", "attempt", "stage_started_at", "heartbeat_at").filter(pk=run_id).first()
    return None if run is None else run_signature(run=run)


@dataclass(frozen=True)
class RunnerOverview:
    runner: Runner
    current_run: Run | None
    succeeded_recently: int
    failed_recently: int
    cancelled_recently: int
    total_runs: int


def runners_overview(*, since: datetime) -> list[RunnerOverview]:
    """Every runner with the run it holds now and its counts of runs finished since `since`. Two queries."""
    recent = Q(runs__finished_at__gte=since)
    runners = Runner.objects.annotate(
        succeeded_recently=Count("runs", filter=recent & Q(runs__status=RunStatus.SUCCEEDED)),
        failed_recently=Count("runs", filter=recent & Q(runs__status=RunStatus.FAILED)),
        cancelled_recently=Count("runs", filter=recent & Q(runs__status=RunStatus.CANCELLED)),
        total_runs=Count("runs"),
    ).order_by("hardware_class", "name")
    current: dict[int, Run] = {}
    for run in (
        Run.objects.filter(status__in=ACTIVE_RUN_STATUSES, runner__isnull=False)
        .select_related("suite", "commit")
        .defer("report_gz", "telemetry", "logs", "server_metrics", "commands", "environment")
        .order_by("started_at")
    ):
        if run.runner_id is not None:
            current.setdefault(run.runner_id, run)
    return [
        RunnerOverview(
            runner=runner,
            current_run=current.get(runner.pk),
            succeeded_recently=runner.succeeded_recently,
            failed_recently=runner.failed_recently,
            cancelled_recently=runner.cancelled_recently,
            total_runs=runner.total_runs,
        )
        for runner in runners
    ]
