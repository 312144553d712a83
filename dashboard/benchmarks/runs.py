"""Writes: a run's life: enqueue, claim, heartbeat, stages, completion, failure, requeue, cancel, retry.

The database is the source of truth; the broker only carries "please look at run N". Every state
change is a conditional UPDATE, so a message delivered twice, a runner that died, or a staff member's
cancel can never produce a second benchmark or a second set of measurements.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.models import (
    ACTIVE_RUN_STATUSES,
    Commit,
    Run,
    RunKind,
    Runner,
    RunStatus,
    Suite,
    run_priority,
)
from dashboard.benchmarks.report_storage import report_save
from runners.text import one_line

logger = logging.getLogger(__name__)


LOG_TAIL_CHARS = 20_000


class RunNotOwned(Exception):
    """The run is no longer this runner's to work on (cancelled, requeued, or finished elsewhere)."""


class RunActionRefused(Exception):
    """A staff action that does not apply to the run in its current state."""


def _dispatch(run: Run) -> None:
    """Record that the run's message is going out, and send it once the transaction commits; runners
    take it by the priority of its kind."""
    # The task may take as long as its suite's steps together, and a margin for storing.
    budget_s = int(sum(float(v) for v in run.suite.timeouts.values()) or 3 * 3600) + 600
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    dispatch.run_execute(
        run_id=run.pk,
        hardware_class=run.hardware_class,
        budget_s=budget_s,
        priority=run_priority(kind=run.kind, spare_time=run.spare_time),
    )


def run_enqueue(
    *,
    commit: Commit,
    suite: Suite,
    hardware_class: str | None = None,
    version: str = "",
    forced: bool = False,
    kind: str = RunKind.ROUTINE,
    spare_time: bool = False,
) -> Run:
    """Queue a benchmark of `suite` at `commit`; the message goes out once the transaction commits. A
    `spare_time` run is taken only when no new commit waits (`models.SPARE_TIME_PRIORITY`)."""
    run = Run.objects.create(
        kind=kind,
        spare_time=spare_time,
        queued_at=timezone.now(),
        commit=commit,
        suite=suite,
        hardware_class=hardware_class or suite.hardware_class,
        source=Run.Source.RUNNER,
        status=RunStatus.QUEUED,
        vllm_version_requested=version,
        forced=forced,
    )
    _dispatch(run)
    return run


def run_promote(*, run_id: int, kind: str) -> bool:
    """Give a still queued run a more urgent kind (a backfill run that bisection needs now) and send its
    message again at that priority; the copy left behind finds the run claimed. False if not queued."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("suite")
            .filter(pk=run_id, status=RunStatus.QUEUED)
            .first()
        )
        if run is None:
            return False
        run.kind = kind
        run.save(update_fields=["kind"])
        _dispatch(run)
    return True


def _lease_until() -> Any:
    return timezone.now() + timedelta(seconds=settings.PERFWATCH_RUN_LEASE_S)


def runner_register(*, name: str, hardware_class: str, environment: dict[str, Any]) -> Runner:
    runner, _ = Runner.objects.update_or_create(
        name=name,
        defaults={
            "hardware_class": hardware_class,
            "gpu_model": str(environment.get("gpu_model") or ""),
            "gpu_count": int(environment.get("gpu_count") or 0),
            "host": str(environment.get("host") or ""),
            "last_heartbeat_at": timezone.now(),
        },
    )
    return runner


def run_claim(*, run_id: int, runner: Runner) -> Run | None:
    """Take a queued run for `runner`; None when another delivery or runner already has it."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.INSTALLING,
        runner=runner,
        attempt=F("attempt") + 1,
        started_at=now,
        stage_started_at=now,
        heartbeat_at=now,
        lease_expires_at=_lease_until(),
        failure_reason="",
    )
    if not claimed:
        return None
    return Run.objects.select_related("suite", "commit", "runner").get(pk=run_id)


def run_refuse_unrunnable(*, run_id: int, reason: str) -> bool:
    """Fail a still queued run that cannot be run at all (its suite has no valid settings), so no runner
    claims it again; False when it was not queued."""
    return bool(
        Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.FAILED,
            finished_at=timezone.now(),
            lease_expires_at=None,
            failure_reason=one_line(reason, limit=500),
        )
    )


def runs_held(run_id: int, runner: Runner) -> Any:
    return Run.objects.filter(pk=run_id, runner=runner, status__in=ACTIVE_RUN_STATUSES)


def run_heartbeat(*, run_id: int, runner: Runner, logs: dict[str, str] | None = None) -> None:
    """Renew the lease and keep the latest tail of each step's log, so the run's page shows them while
    they are written; raise RunNotOwned when the run was cancelled or taken away."""
    now = timezone.now()
    Runner.objects.filter(pk=runner.pk).update(last_heartbeat_at=now)
    fields: dict[str, Any] = {"heartbeat_at": now, "lease_expires_at": _lease_until()}
    if logs:
        fields["logs"] = log_tails_kept(logs)
    if not runs_held(run_id, runner).update(**fields):
        raise RunNotOwned(f"run {run_id} is no longer held by {runner.name}")


def log_tails_kept(logs: dict[str, str]) -> dict[str, str]:
    return {str(name)[:50]: str(text)[-LOG_TAIL_CHARS:] for name, text in logs.items()}


def run_stage_enter(*, run_id: int, runner: Runner, stage: str) -> None:
    """Record the end of the current stage and the start of `stage`."""
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().first()
        if run is None:
            raise RunNotOwned(f"run {run_id} is no longer held by {runner.name}")
        now = timezone.now()
        run.status, run.stage_started_at, run.stage_durations = stage, now, stage_durations_closed(run, now)
        run.heartbeat_at, run.lease_expires_at = now, _lease_until()
        run.save(
            update_fields=[
                "status",
                "stage_started_at",
                "stage_durations",
                "heartbeat_at",
                "lease_expires_at",
            ]
        )


def attempt_close(run: Run, outcome: str, now: datetime) -> None:
    """Add the attempt the run is on to its history, with how it ended (one line)."""
    run.attempts = [
        *run.attempts,
        {
            "attempt": run.attempt,
            "runner": run.runner.name if run.runner else "",
            "outcome": one_line(outcome, limit=300),
            "finished_at": now.strftime("%Y-%m-%d %H:%M:%S"),  # UTC
        },
    ]


def stage_durations_closed(run: Run, now: datetime) -> dict[str, float]:
    """The run's stage durations with the stage it is in now closed at `now`."""
    durations = dict(run.stage_durations)
    if run.stage_started_at:
        durations[run.status] = round((now - run.stage_started_at).total_seconds(), 1)
    return durations


def run_fail(
    *,
    run_id: int,
    runner: Runner,
    reason: str,
    logs: dict[str, str] | None = None,
    environment: dict[str, Any] | None = None,
    commands: dict[str, str] | None = None,
    raw_report: bytes | None = None,
) -> None:
    """Mark a held run failed with a one-line reason, keeping whatever evidence it has: logs, the
    commands that ran, and the report guidellm wrote (the run that failed is the one to reproduce).
    Raise RunNotOwned when the run is not held by `runner`."""
    line = one_line(reason, limit=500) or "failed without a reason"
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().first()
        if run is None:
            raise RunNotOwned(f"run {run_id} is no longer held by {runner.name}")
        now = timezone.now()
        run.stage_durations, run.lease_expires_at = stage_durations_closed(run, now), None
        run.status, run.failure_reason, run.finished_at = RunStatus.FAILED, line, now
        attempt_close(run, f"failed: {line}", now)
        run.logs = log_tails_kept(logs or {}) or run.logs
        run.environment = environment or run.environment
        run.commands = commands or run.commands
        if raw_report:
            # Kept as evidence, not as results: no digest, so it never counts as a stored report.
            run.report_key = report_save(run_id=run.pk, raw=raw_report)
        run.save()


def run_requeue_after_timeout(
    *, run_id: int, runner: Runner, reason: str, retries_max: int | None = None
) -> bool:
    """Queue a held run again after a step timed out (or the node killed its server), while it has
    attempts left, and no more than `retries_max` retries for this kind of failure; False when none."""
    line = one_line(reason, limit=400)
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().select_related("suite").first()
        allowed = run.max_attempts if run is not None else 0
        if retries_max is not None:
            allowed = min(allowed, 1 + retries_max)
        if run is None or run.attempt >= allowed:
            return False
        run.status, run.failure_reason = (
            RunStatus.QUEUED,
            f"attempt {run.attempt} failed on the bench, retrying: {line}",
        )
        attempt_close(run, f"failed on the bench, queued again: {line}", timezone.now())
        # Back in the queue it has not started: the next claim starts it again (the attempt keeps its end).
        run.queued_at, run.started_at, run.lease_expires_at = timezone.now(), None, None
        run.stage_durations, run.stage_started_at = {}, None
        run.save()
        _dispatch(run)
    return True


def _leases_expired(*, now: datetime) -> Any:
    """Active runs whose lease ran out. A run in `storing` is one whose node holds its finished report:
    it is waited for (the node re-sends it when the dashboard answers) for PERFWATCH_REPORT_HOLD_S more."""
    held_since = now - timedelta(seconds=settings.PERFWATCH_REPORT_HOLD_S)
    return Run.objects.filter(status__in=ACTIVE_RUN_STATUSES, lease_expires_at__lt=now).exclude(
        status=RunStatus.STORING, lease_expires_at__gte=held_since
    )


# How many times a run waits for its commit's wheel before it gives up (with the wait, about two hours).
WHEEL_WAITS_MAX = 8


def run_requeue_waiting(*, run_id: int, runner: Runner, reason: str) -> bool:
    """Put a held run back in the queue for later, costing no attempt: the node found nothing to run yet
    (no wheel for the commit). Its message goes out again PERFWATCH_WHEEL_WAIT_S from now, through the
    resend of stale queued runs. False once it has waited WHEEL_WAITS_MAX times (then it fails)."""
    line = one_line(reason, limit=400)
    with transaction.atomic():
        run = runs_held(run_id, runner).select_for_update().first()
        if run is None:
            return False
        waits = sum(1 for entry in run.attempts if str(entry.get("outcome", "")).startswith("waiting:"))
        if waits >= WHEEL_WAITS_MAX:
            return False
        now = timezone.now()
        attempt_close(run, f"waiting: {line}", now)
        run.status, run.attempt = RunStatus.QUEUED, max(0, run.attempt - 1)
        run.failure_reason = f"waiting ({waits + 1} of {WHEEL_WAITS_MAX}): {line}"
        run.queued_at, run.started_at, run.lease_expires_at = now, None, None
        run.stage_durations, run.stage_started_at = {}, None
        # runs_redispatch_stale sends the message again once dispatched_at is that old.
        run.dispatched_at = now - timedelta(
            seconds=settings.PERFWATCH_QUEUED_REDISPATCH_S - settings.PERFWATCH_WHEEL_WAIT_S
        )
        run.save()
    return True


def runs_requeue_expired() -> list[int]:
    """Requeue runs whose runner stopped renewing its lease; fail them after their last attempt. A run
    whose node holds its finished report is not queued again while the report may still come."""
    now = timezone.now()
    requeued: list[int] = []
    expired = _leases_expired(now=now)
    for run_id in expired.values_list("pk", flat=True):
        with transaction.atomic():
            run = _leases_expired(now=now).select_for_update(skip_locked=True).filter(pk=run_id).first()
            if run is None:
                continue
            lost = f"runner {run.runner.name if run.runner else '?'} stopped answering during {run.status}"
            if run.status == RunStatus.STORING:
                lost = (
                    f"runner {run.runner.name if run.runner else '?'} held a finished report but did not "
                    f"deliver it within {settings.PERFWATCH_REPORT_HOLD_S} s"
                )
            if run.attempt >= run.max_attempts:
                run.status, run.finished_at = RunStatus.FAILED, now
                run.failure_reason = f"{lost}; gave up after {run.attempt} attempts"
                run.lease_expires_at = None
                attempt_close(run, f"lost: {lost}; no attempt left", now)
                run.save(
                    update_fields=["status", "finished_at", "failure_reason", "lease_expires_at", "attempts"]
                )
                continue
            attempt_close(run, f"lost: {lost}; queued again", now)
            run.status, run.failure_reason, run.lease_expires_at = RunStatus.QUEUED, f"requeued: {lost}", None
            run.stage_durations, run.stage_started_at, run.queued_at, run.started_at = {}, None, now, None
            run.save(
                update_fields=[
                    "status",
                    "failure_reason",
                    "lease_expires_at",
                    "stage_durations",
                    "stage_started_at",
                    "queued_at",
                    "started_at",
                    "attempts",
                ]
            )
            _dispatch(run)
            requeued.append(run.pk)
    return requeued


# The one statement of which runs a staff member may cancel or retry; the run page asks the same.
CANCELLABLE_STATUSES = (RunStatus.QUEUED, *ACTIVE_RUN_STATUSES)
RETRYABLE_STATUSES = (RunStatus.FAILED, RunStatus.CANCELLED)


def run_cancellable(*, run: Run) -> bool:
    return run.status in CANCELLABLE_STATUSES


def run_retryable(*, run: Run) -> bool:
    return run.status in RETRYABLE_STATUSES and run.source == Run.Source.RUNNER


def run_cancel(*, run_id: int, user: AbstractBaseUser | AnonymousUser) -> Run:
    """Cancel a queued or running run; a runner holding it stops at its next step."""
    now = timezone.now()
    updated = Run.objects.filter(status__in=CANCELLABLE_STATUSES, pk=run_id).update(
        status=RunStatus.CANCELLED,
        finished_at=now,
        lease_expires_at=None,
        failure_reason=f"cancelled by {user}",
    )
    if not updated:
        raise RunActionRefused("only a queued or running run can be cancelled")
    return Run.objects.get(pk=run_id)


def run_retry(*, run_id: int, user: AbstractBaseUser | AnonymousUser) -> Run:
    """Queue a failed or cancelled runner run again, with a fresh set of attempts."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status not in RETRYABLE_STATUSES:
            raise RunActionRefused("only a failed or cancelled run can be retried")
        if run.source != Run.Source.RUNNER:
            raise RunActionRefused("an ingested report has nothing to run again")
        run.status, run.failure_reason, run.attempt = RunStatus.QUEUED, f"retried by {user}", 0
        run.queued_at = timezone.now()
        run.started_at = run.finished_at = run.lease_expires_at = run.stage_started_at = None
        run.stage_durations, run.logs = {}, {}
        run.save()
        _dispatch(run)
    return run


def runs_redispatch_stale() -> list[int]:
    """Send the message again for runs queued long ago: the broker may have lost it (a restart without
    persistence, a flushed queue). A copy that was not lost is harmless, as a run is claimed once."""
    stale_before = timezone.now() - timedelta(seconds=settings.PERFWATCH_QUEUED_REDISPATCH_S)
    runs = Run.objects.filter(status=RunStatus.QUEUED, dispatched_at__lt=stale_before).select_related("suite")
    redispatched = []
    with transaction.atomic():
        for run in runs.select_for_update(skip_locked=True):
            _dispatch(run)
            redispatched.append(run.pk)
    return redispatched
