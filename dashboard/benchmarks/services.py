"""Writes: a run's results through their one writer, whether a runner or the ingest API brought them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.capacity import accuracy_store, load_curve_store
from dashboard.benchmarks.models import Commit, Measurement, Repository, Run, Runner, RunStatus, Series, Suite
from dashboard.benchmarks.report_storage import report_save
from dashboard.benchmarks.runs import (
    RunNotOwned,
    attempt_close,
    log_tails_kept,
    runs_held,
    stage_durations_closed,
)
from runners.accuracy import AccuracyResult
from runners.guidellm_report import GuidellmReport, ReportInvalid, report_parse

_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Series are created on first sight; this many per suite is far beyond any real workload.
MAX_SERIES_PER_SUITE = 5000


class IngestRejected(Exception):
    """The input cannot be stored; `reason` is one line, nothing was written."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class IngestOutcome:
    run: Run
    created: bool
    measurement_count: int


def _name_check(*, value: str, what: str, max_chars: int = 100) -> str:
    value = value.strip().lower()
    if not _NAME.match(value) or len(value) > max_chars:
        raise IngestRejected(
            f"invalid {what} {value[:max_chars]!r}: "
            f"at most {max_chars} lowercase letters, digits, '.', '_' or '-'"
        )
    return value


def _series_cap_check(*, suite: Suite, hardware_class: str, report: GuidellmReport) -> None:
    existing = set(
        Series.objects.filter(suite=suite, hardware_class=hardware_class).values_list("concurrency", "metric")
    )
    new = {(level.concurrency, metric) for level in report.levels for metric in level.metrics} - existing
    total = Series.objects.filter(suite=suite).count() + len(new)
    if new and total > MAX_SERIES_PER_SUITE:
        raise IngestRejected(
            f"suite {suite.name!r} would hold {total} series, over the limit of {MAX_SERIES_PER_SUITE}"
        )


def repository_default() -> Repository:
    repository, _ = Repository.objects.get_or_create(full_name=settings.PERFWATCH_GITHUB_REPOSITORY)
    return repository


def commit_ensure(*, sha: str, repository: Repository | None = None) -> Commit:
    """The commit row for a sha, created with only its sha when nothing else is known yet."""
    sha = sha.strip().lower()
    if not _SHA.match(sha):
        raise IngestRejected(f"invalid commit sha {sha!r}: expected 7 to 40 hexadecimal characters")
    commit, _ = Commit.objects.get_or_create(repository=repository or repository_default(), sha=sha)
    return commit


def measurements_store(*, run: Run, report: GuidellmReport) -> int:
    """Store one measurement per (level, metric) of a validated report, its load curve and the capacity
    that curve gives under the suite's objectives; return how many measurements."""
    keys = [(level.concurrency, metric) for level in report.levels for metric in level.metrics]
    Series.objects.bulk_create(
        [
            Series(suite=run.suite, hardware_class=run.hardware_class, concurrency=concurrency, metric=metric)
            for concurrency, metric in keys
        ],
        ignore_conflicts=True,
    )
    series_by_key = {
        (series.concurrency, series.metric): series
        for series in Series.objects.filter(
            suite=run.suite, hardware_class=run.hardware_class, concurrency__in=report.concurrencies
        )
    }
    measurements = [
        Measurement(
            run=run, commit_id=run.commit_id, series=series_by_key[(level.concurrency, metric)], value=value
        )
        for level in report.levels
        for metric, value in level.metrics.items()
    ]
    Measurement.objects.bulk_create(measurements)
    return len(measurements) + load_curve_store(run=run, report=report)


def run_results_store(
    *, run: Run, report: GuidellmReport, raw_report: bytes | None, detect: bool = True
) -> int:
    """The one writer of a run's results: its raw report, digest and guidellm version (saved with the
    run) and its measurements; then, once the transaction commits, detection over its series.

    Call it in the transaction that makes the run succeeded. `detect=False` is for a loader that runs
    detection over the whole history afterwards. Returns the number of measurements stored.
    """
    run.report_key = report_save(run_id=run.pk, raw=raw_report) if raw_report is not None else ""
    run.report_sha256 = hashlib.sha256(raw_report).hexdigest() if raw_report is not None else ""
    run.guidellm_version = report.guidellm_version
    run.save()
    count = measurements_store(run=run, report=report)
    if detect:
        dispatch.run_stored(run_id=run.pk)
    return count


def report_ingest(
    *,
    raw: bytes,
    commit_sha: str,
    suite_name: str,
    hardware_class: str,
    runner_name: str | None = None,
    suite_create: bool = True,
) -> IngestOutcome:
    """Validate a guidellm report and store it as a succeeded run, at most once per content.

    Everything happens in one transaction: a report that fails validation stores nothing at all. An
    unknown suite is created only with `suite_create` (an operator's command, a token scoped
    `+new-suites`); otherwise it is refused.
    """
    if len(raw) > settings.PERFWATCH_MAX_REPORT_BYTES:
        raise IngestRejected(
            f"report is {len(raw)} bytes, over the limit of {settings.PERFWATCH_MAX_REPORT_BYTES}"
        )
    suite_name = _name_check(value=suite_name, what="suite name")
    hardware_class = _name_check(value=hardware_class, what="hardware class", max_chars=50)
    if runner_name is not None:
        runner_name = _name_check(value=runner_name, what="runner name")
    existing_suite = Suite.objects.filter(name=suite_name).first()
    if existing_suite is None and not suite_create:
        raise IngestRejected(
            f"unknown suite {suite_name!r}: an operator creates suites (manage.py load_suites), "
            "or a token scoped +new-suites"
        )
    try:
        report = report_parse(
            raw=raw,
            expected_concurrencies=existing_suite.concurrencies if existing_suite else (),
            max_error_rate=existing_suite.max_error_rate if existing_suite else 0.0,
        )
    except ReportInvalid as error:
        raise IngestRejected(f"invalid report: {error.reason}") from None
    digest = hashlib.sha256(raw).hexdigest()

    try:
        with transaction.atomic():
            commit = commit_ensure(sha=commit_sha)
            suite, _ = Suite.objects.get_or_create(
                name=suite_name, defaults={"hardware_class": hardware_class}
            )
            _series_cap_check(suite=suite, hardware_class=hardware_class, report=report)
            runner = None
            if runner_name:
                runner, _ = Runner.objects.get_or_create(
                    name=runner_name, defaults={"hardware_class": hardware_class}
                )
            duplicate = Run.objects.filter(
                commit=commit, suite=suite, hardware_class=hardware_class, report_sha256=digest
            ).first()
            if duplicate is not None:
                return IngestOutcome(run=duplicate, created=False, measurement_count=0)
            now = timezone.now()
            run = Run.objects.create(
                commit=commit,
                suite=suite,
                runner=runner,
                hardware_class=hardware_class,
                source=Run.Source.INGEST,
                status=RunStatus.SUCCEEDED,
                queued_at=now,
                started_at=now,
                finished_at=now,
                environment={"labels": dict(report.labels)} if report.labels else {},
            )
            count = run_results_store(run=run, report=report, raw_report=raw)
    except IntegrityError:
        # A concurrent ingest of the same report won the race: that run is the one.
        winner = Run.objects.get(
            commit__sha=commit_sha.strip().lower(),
            suite__name=suite_name,
            hardware_class=hardware_class,
            report_sha256=digest,
        )
        return IngestOutcome(run=winner, created=False, measurement_count=0)
    return IngestOutcome(run=run, created=True, measurement_count=count)


@dataclass(frozen=True)
class RunResult:
    """What a runner hands back when a benchmark completed."""

    raw_report: bytes
    report: GuidellmReport
    environment: dict[str, Any]
    vllm_version: str
    telemetry: list[dict[str, Any]]
    server_metrics: dict[str, Any]
    commands: dict[str, str]
    logs: dict[str, str]
    accuracy: AccuracyResult | None = None


def run_complete(
    *,
    run_id: int,
    runner: Runner,
    result: RunResult,
    attempt: int | None = None,
    kept_s: float | None = None,
) -> Run:
    """Store the results of a held run exactly once and mark it succeeded.

    A report of `attempt` that arrives after its run was queued again (the lease ran out while the node
    could not reach the dashboard), before any runner claimed it anew, is stored too: that attempt
    finished, and running it again would only measure it twice. `kept_s` (given for a report the node
    kept because its first upload failed) is how long it waited; the run's history says so.
    """
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().select_related("suite", "commit").first()
        late = False
        if run is None and attempt is not None:
            run = (
                Run.objects.select_for_update()
                .select_related("suite", "commit")
                .filter(pk=run_id, status=RunStatus.QUEUED, runner=runner, attempt=attempt)
                .first()
            )
            late = run is not None
        if run is None:
            raise RunNotOwned(f"run {run_id} is no longer held by {runner.name}; its results are discarded")
        now = timezone.now()
        run.status, run.finished_at, run.stage_durations = (
            RunStatus.SUCCEEDED,
            now,
            stage_durations_closed(run, now) if not late else run.stage_durations,
        )
        run.lease_expires_at = None
        run.failure_reason = ""
        run.environment = result.environment
        run.vllm_version = result.vllm_version[:100]
        run.telemetry = result.telemetry
        run.server_metrics = result.server_metrics
        run.commands = result.commands
        run.logs = log_tails_kept(result.logs)
        attempt_close(run, _delivery_outcome(runner=runner, late=late, kept_s=kept_s), now)
        run_results_store(run=run, report=result.report, raw_report=result.raw_report)
        if result.accuracy is not None:
            accuracy_store(run=run, accuracy=result.accuracy)
    return run


def _delivery_outcome(*, runner: Runner, late: bool, kept_s: float | None) -> str:
    if late:
        return (
            f"succeeded: the report {runner.name} kept while the dashboard was unreachable arrived "
            f"{kept_s or 0:.0f} s after the benchmark, after the run was queued again; stored, not run again"
        )
    if kept_s is not None:
        return (
            f"succeeded: the report was kept on {runner.name} for {kept_s:.0f} s while the dashboard was "
            "unreachable, then delivered"
        )
    return "succeeded"
