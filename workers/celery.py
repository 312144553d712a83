"""The Celery workers: control tasks on `default`, benchmark runs on `runner.<hardware_class>`.

The app and its queues are defined in dashboard/dispatch.py, the one module that sends; this adds what
only workers and beat need.

The database is the source of truth for a run; the broker only carries "please look at run N".
"""

from django.conf import settings

from dashboard import dispatch
from dashboard.dispatch import app

# Control tasks are idempotent, so they are acknowledged when done: a worker killed mid-task (kill -9,
# OOM) hands its message back at once, and one that vanished with its host is redelivered after the
# visibility timeout (CELERY_VISIBILITY_TIMEOUT_S, minutes). Benchmark runs opt out: they last hours,
# ack on receipt, and are made exactly-once by the run's database lease (see run_execute in tasks.py).
app.conf.task_acks_late = True
app.conf.task_reject_on_worker_lost = True
# A late-acked task running when the broker connection drops finishes its work; its message, which can
# no longer be acknowledged, comes back after the visibility timeout and finds the work done.
app.conf.worker_cancel_long_running_tasks_on_connection_loss = False
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True
# Redis keeps one list per priority step; a runner pops verification runs before bisection, bisection
# before new commits, new commits before backfill (benchmarks.models.RUN_KIND_PRIORITY).
app.conf.broker_transport_options = {
    "visibility_timeout": settings.CELERY_VISIBILITY_TIMEOUT_S,
    # Kombu's own look for expired messages comes every tenth tick of a 10 s timer, up to 100 s past the
    # timeout; a look every tenth of the timeout hands a message out again within 10% of it.
    "unacked_restore_interval": max(1, settings.CELERY_VISIBILITY_TIMEOUT_S // 10),
    "unacked_restore_throttle": 1,
    "priority_steps": [0, 3, 6, 9],
    "queue_order_strategy": "priority",
}
# Registered at once, so a process that sends (tests running tasks eagerly included) runs the real task.
app.autodiscover_tasks(["workers"], related_name="tasks", force=True)
app.autodiscover_tasks(["workers"], related_name="presence")
app.conf.beat_schedule = {
    "requeue-expired-runs": {"task": dispatch.RUNS_REQUEUE_EXPIRED, "schedule": 60.0},
    "schedule-new-commits": {"task": dispatch.RUNS_SCHEDULE, "schedule": 300.0},
}
app.conf.beat_schedule |= {
    # Webhooks make both prompt; the schedule catches what a missed delivery would lose.
    "sync-commits": {"task": dispatch.COMMITS_SYNC, "schedule": 600.0},
    "sync-tracking-issues": {"task": dispatch.TRACKING_ISSUES_SYNC, "schedule": 900.0},
}
app.conf.beat_schedule |= {
    # Ingests and completed runs enqueue detection themselves; these catch what a lost message would miss.
    "detect-recent-runs": {"task": dispatch.RECENT_RUNS_DETECT, "schedule": 900.0},
    "resend-pending-notifications": {"task": dispatch.NOTIFICATIONS_RESEND, "schedule": 600.0},
    "verify-suspected-groups": {"task": dispatch.VERDICTS_SWEEP, "schedule": 900.0},
}
