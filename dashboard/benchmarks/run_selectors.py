"""Reads: the runs and runners pages: runs by view and filter, one run's detail, runner nodes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    Subquery,
)
from django.db.models.functions import Coalesce

from dashboard.benchmarks.models import (
    ACTIVE_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    FINITE_VALUE,
    Measurement,
    Run,
    Runner,
    RunQuerySet,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.report_storage import report_read_gzip
from dashboard.benchmarks.selectors import MeasurementRow, measurement_rows

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
        .defer("telemetry", "logs", "server_metrics", "commands", "environment")
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
        .defer("telemetry")
        .annotate(
            holds_telemetry=ExpressionWrapper(~Q(telemetry=[]), output_field=BooleanField()),
        )
        .filter(pk=run_id)
        .first()
    )
    if row is None:
        return None
    return RunDetail(run=row, has_report=bool(row.report_key), has_telemetry=row.holds_telemetry)


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
    return measurement_rows(rows)


def run_invalid_value_count(*, run: Run) -> int:
    """How many of the run's stored values are not numbers (stored before the API refused them): they
    are left out of its tables and charts, and its page says so."""
    return Measurement.stored.filter(run=run).exclude(FINITE_VALUE).count()


def run_report_gzip(*, run_id: int) -> bytes | None:
    """The gzip of the raw guidellm report a run stored, from the report storage; None when it has none."""
    key = Run.objects.filter(pk=run_id).values_list("report_key", flat=True).first()
    return report_read_gzip(key=key) if key else None


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
        .defer("telemetry", "logs", "server_metrics", "commands", "environment")
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


@dataclass(frozen=True)
class DisturbedRun:
    """A stored run measured on a busy node or a GPU another process used: its numbers may be the node's."""

    run_id: int
    commit_sha: str
    why: str


def runs_disturbed(*, suite_id: int, hardware_class: str, limit: int = 500) -> list[DisturbedRun]:
    """The newest succeeded runs of a suite on a hardware class whose node recorded it was disturbed."""
    rows = (
        Run.objects.filter(suite_id=suite_id, hardware_class=hardware_class, status=RunStatus.SUCCEEDED)
        .filter(Q(environment__node_busy=True) | Q(environment__gpu_shared=True))
        .order_by("-finished_at")
        .values_list(
            "pk",
            "commit__sha",
            "environment__node_busy",
            "environment__node_load_1m_before",
            "environment__gpu_shared",
        )[:limit]
    )
    found = []
    for run_id, sha, busy, load, shared in rows:
        reasons = []
        if busy is True:
            reasons.append(f"busy node (load {load:g})" if isinstance(load, int | float) else "busy node")
        if shared is True:
            reasons.append("GPU shared with another process")
        found.append(DisturbedRun(run_id=run_id, commit_sha=sha, why=", ".join(reasons)))
    return found
