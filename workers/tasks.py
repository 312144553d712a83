"""Thin tasks: ids in, call a service, nothing else."""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from dashboard import dispatch

if TYPE_CHECKING:
    from runners.api_client import RunnerApi

logger = logging.getLogger(__name__)

# A broker or database that is restarting: worth waiting for. Retries wait 5, 10, 20 … 300 s, about
# 15 minutes in all, so a task outlasts a restart; every wait stays below the broker's visibility timeout.
TRANSIENT_ERRORS = (ConnectionError, OperationalError, InterfaceError)


class RetryPolicy(TypedDict):
    autoretry_for: tuple[type[BaseException], ...]
    retry_backoff: int
    retry_backoff_max: int
    retry_jitter: bool
    max_retries: int


RETRY_POLICY: RetryPolicy = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": 5,
    "retry_backoff_max": 300,
    "retry_jitter": False,
    "max_retries": 8,
}


def runner_api() -> RunnerApi:
    """This node's client of the runner API, from its settings."""
    from runners.api_client import RunnerApi

    return RunnerApi(base_url=settings.PERFWATCH_API_URL, token=settings.PERFWATCH_RUNNER_TOKEN)


@shared_task(name=dispatch.RUN_EXECUTE, acks_late=False, ignore_result=True)
def run_execute(run_id: int) -> str | None:
    """Benchmark one run on this node, through the runner API (a runner node has no database access).
    Acknowledged on receipt: a redelivery finds the run claimed."""
    from pathlib import Path

    from runners.node import node_run_execute

    return node_run_execute(
        api=runner_api(),
        run_id=run_id,
        runner_name=settings.PERFWATCH_RUNNER_NAME,
        work_root=Path(settings.PERFWATCH_WORK_DIR),
    )


@shared_task(
    name=dispatch.RUNS_REQUEUE_EXPIRED,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
    **RETRY_POLICY,
)
def runs_requeue_expired() -> list[int]:
    """Requeue runs whose runner died, and resend messages the broker may have lost."""
    from dashboard.benchmarks.runs import runs_redispatch_stale
    from dashboard.benchmarks.runs import runs_requeue_expired as requeue

    return requeue() + runs_redispatch_stale()


@shared_task(
    name=dispatch.RUNS_SCHEDULE,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=120,
    time_limit=150,
    **RETRY_POLICY,
)
def runs_schedule() -> list[int]:
    from dashboard.benchmarks.scheduling import runs_schedule_all

    return [run.pk for run in runs_schedule_all()]


# Periodic sweeps that may run longer than the broker's visibility timeout are acknowledged on receipt
# (a late ack would have the broker hand them out again mid-run); beat sends the next one anyway.
@shared_task(
    name=dispatch.COMMITS_SYNC,
    acks_late=False,
    ignore_result=True,
    # A first fetch of the mirror may take the whole fetch timeout; storing follows it.
    soft_time_limit=900,
    time_limit=960,
    **RETRY_POLICY,
)
def github_commits_sync() -> int:
    """Sync main's history (mirror or REST, as configured), backing off while it is unreachable; return
    how many commits were new."""
    from dashboard.github.commits import commits_sync_scheduled

    outcome = commits_sync_scheduled()
    return outcome.commits_new if outcome else 0


@shared_task(
    name=dispatch.TRACKING_ISSUES_SYNC,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=300,
    time_limit=330,
)
def github_tracking_issues_sync() -> list[int]:
    """Re-read every active tracking issue; failures are recorded on each issue's page."""
    from dashboard.github.commits import github_client
    from dashboard.github.tracking_issues import tracking_issues_sync

    return [outcome.tracking_issue_id for outcome in tracking_issues_sync(client=github_client())]


@shared_task(
    name=dispatch.TRACKING_ISSUE_SYNC,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=120,
    time_limit=150,
)
def github_tracking_issue_sync(tracking_issue_id: int) -> int:
    """Re-read one tracking issue (a webhook said it changed); return how many PRs it lists."""
    from dashboard.github.commits import github_client
    from dashboard.github.tracking_issues import tracking_issue_sync

    return tracking_issue_sync(tracking_issue_id=tracking_issue_id, client=github_client()).pulls


@shared_task(
    name=dispatch.PULL_REQUEST_RECORD,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
)
def github_pull_request_record(repo: str, pull: dict[str, object]) -> int | None:
    """Store a listed PR's state from a pull_request webhook (its REST-shaped `pull_request` object)."""
    from dashboard.github.pulls import pull_request_record
    from dashboard.github.webhook import pull_info_from_payload

    recorded = pull_request_record(repo=repo, info=pull_info_from_payload(pull=pull))
    return recorded.pk if recorded else None


@shared_task(
    name=dispatch.RUN_DETECT,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=120,
    time_limit=150,
    **RETRY_POLICY,
)
def run_detect(run_id: int) -> int:
    """Look for changes in every series run `run_id` touched, verify and judge the groups it concerns;
    idempotent, so a redelivery is harmless."""
    from dashboard.regressions.sheriff.settle import run_settle

    return run_settle(run_id=run_id).alerts_created


@shared_task(
    name=dispatch.RECENT_RUNS_DETECT,
    acks_late=False,
    ignore_result=True,
    soft_time_limit=600,
    time_limit=660,
    **RETRY_POLICY,
)
def detect_recent() -> int:
    """Catch up on runs whose detection message was lost: trailing windows of recently run series."""
    from dashboard.regressions.sheriff.settle import runs_settle_recent

    return runs_settle_recent(since=timezone.now() - timedelta(hours=1)).alerts_created


@shared_task(
    name=dispatch.VERDICTS_SWEEP,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=300,
    time_limit=330,
    **RETRY_POLICY,
)
def verdicts_sweep() -> list[int]:
    """Queue the repeats suspected groups still lack (a budget refilled) and judge those that are complete."""
    from dashboard.regressions.sheriff.settle import groups_verify_pending

    return [run.pk for run in groups_verify_pending()]


# Acknowledged late: a worker killed mid-send hands the message back, and the row's `sending` mark keeps
# the redelivery from sending it twice.
@shared_task(
    bind=True,
    name=dispatch.NOTIFICATION_SEND,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
    max_retries=8,
)
def notification_send(self: Task, notification_id: int) -> str | None:
    """Send one alert-group notification; a failure is recorded on its row, then retried with backoff."""
    from dashboard.regressions.notifications import NotificationFailed, NotificationInFlight
    from dashboard.regressions.notifications import notification_send as send

    try:
        notification = send(notification_id=notification_id)
    except NotificationInFlight as busy:
        raise self.retry(exc=busy, countdown=busy.retry_in_s + 1) from None
    except NotificationFailed as error:
        # 30 s, 1 min, 2 min … at most 5 min (below the broker's visibility timeout), jittered so a mail
        # server coming back is not stampeded.
        countdown = min(300, 30 * 2**self.request.retries) * random.uniform(0.5, 1.0)
        raise self.retry(exc=error, countdown=countdown) from None
    return notification.status if notification else None


@shared_task(
    name=dispatch.NOTIFICATIONS_RESEND,
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
    **RETRY_POLICY,
)
def notifications_resend() -> list[int]:
    from dashboard.regressions.notifications import notifications_pending_resend

    return notifications_pending_resend()
