"""The one door to the broker: the apps send tasks by their stable names once the transaction commits.

Apps import this module and never `workers` (the layering contract in pyproject.toml says so): queue
names, time limits and retry policies live here, task bodies in workers/tasks.py, which registers each
task under the name below. The broker only carries "please look at row N"; the database decides.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from celery import Celery
from django.db import transaction
from kombu import Queue

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

DEFAULT_QUEUE = "default"

app = Celery("perfwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
if app.conf.task_serializer == "auth":
    # Signed messages (settings: PERFWATCH_SIGNING_*): every task this process sends is signed with its
    # key; a message not signed by a trusted certificate is refused by the worker, never run.
    app.setup_security(allowed_serializers={"json"}, digest="sha256")
app.conf.task_default_queue = DEFAULT_QUEUE
app.conf.task_queues = (Queue(DEFAULT_QUEUE),)

# The stable names: a message in flight survives a rename of the Python function behind it.
RUN_EXECUTE = "perfwatch.run_execute"
RUNS_REQUEUE_EXPIRED = "perfwatch.runs_requeue_expired"
RUNS_SCHEDULE = "perfwatch.runs_schedule"
COMMITS_SYNC = "perfwatch.github_commits_sync"
TRACKING_ISSUES_SYNC = "perfwatch.github_tracking_issues_sync"
TRACKING_ISSUE_SYNC = "perfwatch.github_tracking_issue_sync"
PULL_REQUEST_RECORD = "perfwatch.github_pull_request_record"
RUN_DETECT = "perfwatch.run_detect"
RECENT_RUNS_DETECT = "perfwatch.detect_recent"
NOTIFICATION_SEND = "perfwatch.notification_send"
NOTIFICATIONS_RESEND = "perfwatch.notifications_resend"
VERDICTS_SWEEP = "perfwatch.verdicts_sweep"

# A send that may fail without failing the write that asked for it: the sweeps catch up.
_TOLERANT = {"retry": True, "retry_policy": {"max_retries": 2}}


def runner_queue(hardware_class: str) -> str:
    """The queue a runner node of `hardware_class` consumes."""
    return f"runner.{hardware_class}"


def _send(name: str, args: Sequence[Any], options: dict[str, Any], *, tolerant: bool) -> None:
    # A signature runs the registered task where it is known (a worker; eager settings apply) and
    # sends the bare name otherwise (the web process), so no app module needs the task's code.
    try:
        app.signature(name, args=tuple(args)).apply_async(**options)
    except Exception as error:
        if not tolerant:
            raise
        logger.warning("could not send %s%s (%s): the periodic sweep will catch up", name, tuple(args), error)


def _after_commit(name: str, *args: Any, tolerant: bool = False, **options: Any) -> str:
    if tolerant:
        options = {**_TOLERANT, **options}
    transaction.on_commit(partial(_send, name, args, options, tolerant=tolerant))
    return name


def run_execute(*, run_id: int, hardware_class: str, budget_s: int, priority: int = 6) -> str:
    """Ask a runner node of the run's hardware class to benchmark it, within `budget_s` seconds; a lower
    `priority` (0-9) is taken first."""
    return _after_commit(
        RUN_EXECUTE,
        run_id,
        queue=runner_queue(hardware_class),
        priority=priority,
        soft_time_limit=budget_s,
        time_limit=budget_s + 120,
    )


def run_stored(*, run_id: int) -> str:
    """A run's results were stored: look for changes in its series once the transaction commits.

    The stored run never fails because the broker is away (the embedded demo has none): the periodic
    detection of recent runs picks it up.
    """
    return _after_commit(RUN_DETECT, run_id, tolerant=True)


def notification_send(*, notification_id: int) -> str:
    """Send one notification; if the broker is away the row stays pending for the resend sweep."""
    return _after_commit(NOTIFICATION_SEND, notification_id, tolerant=True)


def commits_sync() -> str:
    return _after_commit(COMMITS_SYNC)


def tracking_issue_sync(*, tracking_issue_id: int) -> str:
    return _after_commit(TRACKING_ISSUE_SYNC, tracking_issue_id)


def pull_request_record(*, repo: str, pull: dict[str, Any]) -> str:
    return _after_commit(PULL_REQUEST_RECORD, repo, pull)
